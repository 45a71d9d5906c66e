"""The class patches of a profiled block: DataLoader passes and what an epoch visits, AMP
steps the GradScaler skipped."""

from __future__ import annotations

import pytest
import torch
from assertions import assert_no_hooks_left
from tiny_models import mlp_one_hidden_layer as mlp
from torch import nn

import gpuperf_magics as gm


class SmallCNN(nn.Module):
    """Two convolutions with batch norm and a linear head, for 3-channel images."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def test_cnn_with_dataloader_and_scheduler_records_epochs():
    model = SmallCNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    data = torch.utils.data.TensorDataset(torch.randn(40, 3, 16, 16), torch.randint(0, 10, (40,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(name="cnn", save=False, warmup=2) as run:
        for _epoch in range(2):
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
            sched.step()
    assert len(run.iterations) == 10
    assert run.warmup_iterations == 2
    assert run.network == "cnn"
    assert run.hyper["epochs_seen"] == 2
    assert run.hyper["dataset_size"] == 40
    assert run.hyper["iterations_per_epoch"] == 5
    assert run.hyper["lr_last"] < run.hyper["lr"]
    assert run.architecture["arch_layers_conv"] == 2
    assert run.architecture["arch_flops_fwd"] > 0
    assert_no_hooks_left(model)


def test_amp_gradscaler_skipped_step_is_noted():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for i in range(6):
            x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
            if i == 3:
                loss = loss * float("inf")
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    assert len(run.iterations) == 6
    assert [it.skipped_step for it in run.iterations].count(True) == 1
    assert run.iterations[3].skipped_step
    assert run.hyper["skipped_steps"] == 1
    assert any("skipped by AMP" in n for n in run.notes)
    assert run.architecture["arch_amp"] is True
    assert_no_hooks_left(model)


@pytest.mark.parametrize("kind, samples, steps, drop", [
    ("subset", 100, 10, False),  # a sampler over part of the dataset: its length counts
    ("drop_last", 640, 6, True),  # 640 samples, batch 100: the partial 7th batch is dropped
])
def test_an_epoch_is_what_the_loader_visits(kind, samples, steps, drop, tmp_path):
    from torch.utils.data import DataLoader, SubsetRandomSampler, TensorDataset

    from gpuperf_magics.prediction import predict

    data = TensorDataset(torch.randn(640, 32), torch.randint(0, 10, (640,)))
    if kind == "subset":
        loader = DataLoader(data, batch_size=10, sampler=SubsetRandomSampler(range(100)))
    else:
        loader = DataLoader(data, batch_size=100, drop_last=True)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    path = tmp_path / "runs.sqlite"
    with gm.profile_training(name="m", store=path) as run:
        for _ in range(2):
            for x, y in loader:
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
    assert run.hyper["dataset_size"] == samples and run.hyper["drop_last"] is drop
    assert run.hyper["iterations_per_epoch"] == steps and len(run.iterations) == 2 * steps
    batch = loader.batch_size
    frame = predict.predict_time(path, batch_sizes=[batch], epochs=1).frame
    assert int(frame["iterations"].iloc[0]) == steps


def test_the_compile_hook_warning_filter_leaves_with_its_undo():
    import warnings

    from gpuperf_magics.capture.patches import quiet_compile_hook_warning

    before = list(warnings.filters)
    undo = quiet_compile_hook_warning()
    assert len(warnings.filters) == len(before) + 1
    undo()
    undo()  # a second undo (a recorder closed twice) changes nothing
    assert warnings.filters == before
