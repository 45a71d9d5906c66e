"""The batch of a call: the first input with a batch dimension, positional or keyword."""

from __future__ import annotations

import torch
from tiny_models import KwargsModel, mlp_one_hidden_layer
from torch import nn

import gpuperf_magics as gm


class Tempered(nn.Module):
    """A model whose first input is a scalar, not the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.body = mlp_one_hidden_layer()

    def forward(self, temperature: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) / temperature


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
