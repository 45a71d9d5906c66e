"""Which module is the model: the optimizer that steps first names it, and an eval() call
before training does not describe the run."""

from __future__ import annotations

import torch
from assertions import assert_no_hooks_left
from tiny_models import mlp_one_hidden_layer as mlp
from torch import nn

import gpuperf_magics as gm


def test_two_optimizers_primary_is_first_to_step():
    gen, disc = mlp(), nn.Sequential(nn.Linear(10, 1))
    opt_d = torch.optim.Adam(disc.parameters(), lr=1e-3)
    opt_g = torch.optim.Adam(gen.parameters(), lr=1e-3)
    with gm.profile_training(save=False) as run:
        for _ in range(8):
            fake = gen(torch.randn(4, 32))
            opt_d.zero_grad()
            disc(fake.detach()).mean().backward()
            opt_d.step()
            opt_g.zero_grad()
            (-disc(fake).mean()).backward()
            opt_g.step()
    assert len(run.iterations) == 8
    assert run.hyper["other_optimizer_steps"] == "Adam×8"
    # The model is the discriminator (its optimizer stepped first); it sees two passes of 4
    # samples per iteration, which the run reports as 2 micro-batches of 4.
    assert run.hyper["micro_batch_size"] == 4 and run.hyper["micro_batches"] == 2
    assert_no_hooks_left(gen, disc)


def test_an_eval_call_before_training_does_not_describe_the_run():
    """Validation before the loop (another input, no autocast) must not stand for training."""
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        model.eval()
        model(torch.randn(64, 32))  # gradients on, eval mode: a validation pass
        model.train()
        for _ in range(4):
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(torch.randn(16, 32)).float().sum()
            loss.backward()
            opt.step()
    assert run.batch_size == 16
    assert run.architecture["arch_amp"] is True
    assert not any("eval() mode" in note for note in run.notes)


def test_the_model_owns_most_of_the_stepping_optimizers_parameters():
    from gpuperf_magics.capture.discovery import Candidate, choose_model

    gen, disc = mlp(), nn.Linear(10, 1)
    seen = [Candidate(gen, 5, ((), {}), False, False), Candidate(disc, 1, ((), {}), False, False)]
    assert choose_model(torch.optim.SGD(disc.parameters(), lr=0.1), seen, None) is disc
    # No candidate owns a parameter: the one called most, but only while no model is known.
    elsewhere = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1)
    assert choose_model(elsewhere, seen, None) is gen
    assert choose_model(elsewhere, seen, disc) is None
    assert choose_model(elsewhere, [], None) is None
