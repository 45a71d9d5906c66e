"""``profile_training``: a run's status, warm-up, notes and configuration, and a run that is
never lost (issue 10: failures after or around the timings). Real training on tiny CPU
models, real SQLite stores."""

from __future__ import annotations

import io

import pytest
import torch
from assertions import assert_no_hooks_left
from tiny_models import mlp_one_hidden_layer as mlp
from tiny_models import train
from torch import nn
from tqdm import tqdm

import gpuperf_magics as gm
from gpuperf_magics.capture.session import auto_warmup


def test_exception_at_iteration_k_keeps_partial_run():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    session = gm.profile_training(save=False)
    with pytest.raises(ValueError, match="boom"), session as run:
        for i in range(10):
            if i == 7:
                raise ValueError("boom")
            train(model, opt, steps=1)
    assert run.status == "failed"
    assert run.error == "ValueError: boom"
    assert len(run.iterations) == 7
    assert "[failed]" in run.summary_line()
    assert_no_hooks_left(model)


def test_keyboard_interrupt_is_interrupted_status():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.raises(KeyboardInterrupt), gm.profile_training(save=False) as run:
        train(model, opt, steps=4)
        raise KeyboardInterrupt
    assert run.status == "interrupted"
    assert len(run.iterations) == 4
    assert_no_hooks_left(model)


def test_no_iteration_says_why_and_stores_nothing(tmp_path):
    store = tmp_path / "s.sqlite"
    with gm.profile_training(store=store) as run:
        x = torch.ones(3) * 2
    assert x.sum() == 6
    assert run.iterations == []
    assert run.run_id is None
    assert "no training iteration detected" in run.summary_line()
    assert not store.exists() or gm.Store(store).runs().empty


def test_invalid_arguments_are_clear():
    with pytest.raises(ValueError, match="warmup"):
        gm.profile_training(warmup=-1)
    with pytest.raises(ValueError, match="epochs"):
        gm.profile_training(epochs=0)
    for total, message in [(0, "finite number > 0"), (2.5, "whole number"),
                           (True, "whole number")]:
        with pytest.raises(ValueError, match=f"total_iterations must be a {message}"):
            gm.profile_training(total_iterations=total)
    assert gm.profile_training(total_iterations=40.0).run.hyper["total_iterations"] == 40


def test_auto_warmup():
    assert auto_warmup([]) == 0
    assert auto_warmup([1.0]) == 1
    assert auto_warmup([5.0, 1.0, 1.0, 1.0, 1.0, 1.0]) == 1
    assert auto_warmup([9.0, 4.0, 3.0] + [1.0] * 12) == 3
    assert auto_warmup([9.0] * 3 + [1.0] * 7) == 2  # at most a fifth of the run


def test_the_running_configuration_is_known_after_the_first_step():
    """What the live line asks the store's model with, read while the loop runs."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    session = gm.profile_training(save=False)
    seen = []
    with session as run:
        for _ in range(40):  # past the steps whose model calls are watched
            seen.append(session.configuration())
            for _ in range(4):  # accumulation: 4 micro-batches of 8 per step
                loss_fn(model(torch.randn(8, 32)), torch.randint(0, 10, (8,))).backward()
            opt.step()
            opt.zero_grad()
    assert seen[0] is None  # no complete step yet
    assert set(seen[2:]) == {("Sequential-2.76K", 32, None, 0)}
    assert run.network == "Sequential-2.76K" and run.batch_size == 32
    named = gm.profile_training("mine", save=False)
    with named:
        train(model, opt, steps=3)
        assert named.configuration() == ("mine", 16, None, 0)


def test_accumulation_counts_epochs_in_optimizer_steps():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    data = torch.utils.data.TensorDataset(torch.randn(128, 32), torch.randint(0, 10, (128,)))
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    with gm.profile_training(save=False, epochs=10) as run:
        for i, (x, y) in enumerate(loader):
            loss_fn(model(x), y).backward()
            if i % 4 == 3:
                opt.step()
                opt.zero_grad()
    assert len(run.iterations) == 4 and run.batch_size == 32
    assert run.hyper["iterations_per_epoch"] == 4  # 16 micro-batches = 4 optimizer steps
    assert run.hyper["total_iterations"] == 40


def test_a_single_iteration_says_its_time_includes_warm_up():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        opt.zero_grad()
        model(torch.randn(16, 32)).sum().backward()
        opt.step()
    assert len(run.iterations) == 1
    assert any("only 1 iteration" in note for note in run.notes)


class MetaShy(nn.Module):
    """Trains normally; a Ctrl-C lands while its FLOPs are counted on meta tensors (the
    moment the issue's trials hit with a second Ctrl-C after the loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "meta":
            raise KeyboardInterrupt
        return self.body(x)


def test_ctrl_c_during_post_processing_still_stores_the_run(tmp_path):
    store = tmp_path / "runs.sqlite"
    model = MetaShy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.raises(KeyboardInterrupt), gm.profile_training(store=store) as run:
        train(model, opt, steps=8)
    assert run.run_id is not None
    assert run.network == "MetaShy-2.76K"  # named before the slow part began
    stored = gm.Store(store).runs()
    assert list(stored["iterations"] + stored["warmup_iterations"]) == [8]
    assert any("post-processing stopped by KeyboardInterrupt" in n for n in run.notes)
    assert run not in gm.capture.unsaved_runs()
    assert_no_hooks_left(model)


def test_ctrl_c_during_post_processing_in_a_cell_shows_and_keeps_the_run(ip, capsys,
                                                                        _isolated_store):
    ip.user_ns.update(MetaShy=MetaShy, train=train, torch=torch)
    ip.run_cell("m = MetaShy(); o = torch.optim.SGD(m.parameters(), lr=0.01)")
    result = ip.run_cell("%%profile_training -v late_run\ntrain(m, o, steps=6)\n")
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "profile_training: MetaShy-2.76K · 6 it" in out
    run = ip.user_ns["late_run"]
    assert run.run_id is not None
    assert len(gm.Store(_isolated_store).runs()) == 1


class Unprintable:
    """A tag value whose text cannot be made: the store's JSON encoder fails on it."""

    def __str__(self) -> str:
        raise RuntimeError("no text for this value")


def test_any_exception_while_saving_keeps_the_run_in_memory(tmp_path):
    store = tmp_path / "runs.sqlite"
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.warns(gm.capture.UnsavedRunWarning, match="no text for this value"), \
            gm.profile_training(store=store, tags={"owner": Unprintable()}) as run:
        train(model, opt, steps=5)
    assert run.run_id is None and len(run.iterations) == 5
    assert run in gm.capture.unsaved_runs()
    assert any(n.startswith("not saved: RuntimeError") for n in run.notes)
    run.tags["owner"] = "me"
    run.save()
    assert run.run_id is not None and run not in gm.capture.unsaved_runs()
    assert gm.Store(store).get_run(run.run_id).tags == {"owner": "me"}


def test_tags_with_keys_of_mixed_types_are_stored(tmp_path):
    store = tmp_path / "runs.sqlite"
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(store=store, tags={1: "one", "lr": "0.01"}) as run:
        train(model, opt, steps=4)
        run.tags[2.5] = "added inside the block"
    assert run.run_id is not None
    assert gm.Store(store).get_run(run.run_id).tags == {
        "1": "one", "lr": "0.01", "2.5": "added inside the block"}


def test_profile_training_owns_the_live_line(tmp_path, monkeypatch):
    """A script gets the line with ``live=``: the magic only passes it on."""
    from gpuperf_magics.capture import progress

    made, texts = [], []

    class Bar(tqdm):  # a real tqdm bar, drawn into memory
        def set_description_str(self, desc=None, refresh=True):
            texts.append(desc)
            super().set_description_str(desc, refresh)

    def bars(**keywords):
        made.append(Bar(file=io.StringIO(), **keywords))
        return made[-1]

    monkeypatch.setattr(progress, "_tqdm", bars)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.001)
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gm.profile_training("lin", tmp_path / "runs.sqlite", total_iterations=40,
                             live=True):
        for _ in range(40):
            opt.zero_grad()
            model(torch.randn(8, 4)).sum().backward()
            opt.step()
    assert len(made) == 1 and texts[-1].startswith("40/40 it")
    # A prior from the prediction layer leads it: the store now has a model of 'lin'.
    prior = gm.live_prior(tmp_path / "runs.sqlite", "lin")
    with gm.profile_training("lin", tmp_path / "runs.sqlite", total_iterations=40,
                             live=prior):
        for _ in range(40):
            opt.zero_grad()
            model(torch.randn(8, 4)).sum().backward()
            opt.step()
    assert prior.model_per_step is not None and prior.model_per_step > 0
    assert len(made) == 2
    made.clear()
    with gm.profile_training("lin", tmp_path / "runs.sqlite", total_iterations=40):
        model(torch.randn(8, 4)).sum().backward()
        opt.step()
    assert made == []  # live=False, the default: no line

