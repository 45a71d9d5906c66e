"""The batch of a call: the first input with a batch dimension, positional or keyword."""

from __future__ import annotations

import torch
from tiny_models import KwargsModel, Tempered

import gpuperf_magics as gm


def test_kwargs_only_forward_reads_batch():
    model = KwargsModel()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        for _ in range(10):
            opt.zero_grad()
            model(inputs=torch.randn(12, 32)).sum().backward()
            opt.step()
    assert len(run.iterations) == 10
    assert run.batch_size == 12
    assert run.network == "KwargsModel-330"


def test_a_leading_scalar_argument_is_not_the_batch():
    model = Tempered()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        for _ in range(5):
            opt.zero_grad()
            model(torch.tensor(2.0), torch.randn(12, 32)).sum().backward()
            opt.step()
    assert run.batch_size == 12 and len(run.iterations) == 5


def test_a_leading_scalar_with_keyword_inputs_keeps_the_batch():
    model = Tempered()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False) as run:
        for _ in range(6):
            opt.zero_grad()
            model(torch.tensor(2.0), x=torch.randn(16, 32)).sum().backward()
            opt.step()
    assert run.batch_size == 16
    assert all(it.samples == 16 for it in run.iterations)
