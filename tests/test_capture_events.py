"""The event log read after the cell: micro-batches, closures, phases, and eval() calls
standing for training calls only when the model never trained."""

from __future__ import annotations

import pytest
import torch
from tiny_models import mlp_one_hidden_layer as mlp
from tiny_models import train
from torch import nn

import gpuperf_magics as gm


def test_gradient_accumulation_counts_micro_batches():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for _ in range(6):
            for _micro in range(4):
                x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))
                (loss_fn(model(x), y) / 4).backward()
            opt.step()
            opt.zero_grad()
    assert len(run.iterations) == 6
    assert run.batch_size == 32
    assert run.hyper["micro_batches"] == 4
    assert run.hyper["micro_batch_size"] == 8
    assert "(4×8)" in run.summary_line()


def test_lbfgs_closure_forwards_are_not_extra_samples():
    model = mlp()
    opt = torch.optim.LBFGS(model.parameters(), max_iter=3)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for _ in range(4):
            x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))

            def closure(x=x, y=y):
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                return loss

            opt.step(closure)
    assert len(run.iterations) == 4
    assert run.batch_size == 16


def test_phases_split_each_iteration():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False, phases=True) as run:
        train(model, opt, steps=8)
    for it in run.iterations[1:]:
        assert set(it.phases) == {"data", "forward", "loss", "backward", "other", "optimizer"}
        assert all(v >= 0 for v in it.phases.values())
        assert sum(it.phases.values()) == pytest.approx(it.duration_s, rel=1e-6, abs=1e-9)
        assert it.phases["forward"] > 0 and it.phases["backward"] > 0
    assert set(run.phase_medians()) >= {"forward", "backward", "optimizer"}


def test_a_model_left_in_eval_mode_still_gives_batch_and_architecture():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model.eval()  # a validation pass before, and no model.train() after it
    with gm.profile_training(save=False) as run:
        for _ in range(6):
            opt.zero_grad()
            model(torch.randn(16, 32)).sum().backward()
            opt.step()
    assert len(run.iterations) == 6 and run.batch_size == 16
    assert run.architecture.get("arch_params") == 2762
    assert any("eval() mode" in note for note in run.notes)


def test_eval_calls_with_gradients_do_not_count_when_the_model_trains():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        for _ in range(6):
            model.train()
            opt.zero_grad()
            model(torch.randn(16, 32)).sum().backward()
            opt.step()
            model.eval()
            model(torch.randn(64, 32))  # validation without no_grad
    assert len(run.iterations) == 6 and run.batch_size == 16
    assert run.hyper.get("micro_batches") == 1
    assert not any("eval() mode" in note for note in run.notes)


def test_phases_of_a_model_left_in_eval_mode():
    model = mlp()
    model.eval()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False, phases=True) as run:
        train(model, opt, steps=8)
    medians = run.phase_medians()
    assert medians["forward"] > 0 and medians["backward"] > 0
