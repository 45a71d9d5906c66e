"""Tests for gpuperf_magics.architecture.figures: parameter and layer counts, channels-last."""

from __future__ import annotations

import warnings

import torch
from assertions import describe_quietly
from tiny_models import ResNet18
from torch import nn


def test_single_linear_layer() -> None:
    arch = describe_quietly(nn.Linear(32, 64), torch.randn(5, 32))  # a bare tensor is args
    assert arch.flops_fwd == 2 * 32 * 64
    assert arch.layers_linear == 1
    assert arch.module_depth == 0


def test_resnet18_channels_last() -> None:
    model = ResNet18(num_classes=10).to(memory_format=torch.channels_last)
    x = torch.randn(2, 3, 32, 32).to(memory_format=torch.channels_last)
    assert describe_quietly(model, (x,)).channels_last is True
    # Channels-last weights make the convolutions run channels-last whatever the input.
    assert describe_quietly(model, (torch.randn(2, 3, 32, 32),)).channels_last is True
    assert describe_quietly(ResNet18(10), (x,)).channels_last is True


def test_out_proj_is_counted_once_as_part_of_attention() -> None:
    arch = describe_quietly(nn.MultiheadAttention(16, 2), (torch.randn(5, 3, 16),) * 3)
    assert arch.layers_attention == 1
    assert arch.layers_linear == 0
    assert arch.layers_total == 1
    assert arch.depth is not None and arch.depth >= 3


def test_layer_buckets() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Lazy modules are a new feature" at construction
        lazy = nn.LazyLinear(4)
    model = nn.Sequential(
        nn.ConvTranspose2d(3, 3, 2),
        lazy,
        nn.GroupNorm(1, 3),
        nn.RMSNorm(4),
        nn.GRUCell(4, 4),
        nn.EmbeddingBag(10, 4),
        nn.GELU(),
        nn.AvgPool1d(2),
        nn.AlphaDropout(),
        nn.Identity(),
        nn.Unflatten(1, (2, 2)),
    )
    arch = describe_quietly(model)  # not callable as a whole: only the static figures
    assert (arch.layers_conv, arch.layers_linear, arch.layers_norm) == (1, 1, 2)
    assert (arch.layers_recurrent, arch.layers_embedding, arch.layers_activation) == (1, 1, 1)
    assert (arch.layers_pool, arch.layers_dropout, arch.layers_other) == (1, 1, 1)
    assert arch.layers_total == 10  # Identity is not a layer
    assert arch.params is None  # LazyLinear not materialised yet
    assert any(e.startswith("params") for e in arch.errors)


def test_tied_weights_count_once() -> None:
    class TiedLm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(100, 16)
            self.head = nn.Linear(16, 100, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(self.embed(ids))

    for method in ("meta", "fake", "real"):
        arch = describe_quietly(TiedLm(), (torch.randint(0, 100, (2, 6)),), methods=method)
        assert arch.params == 100 * 16
        assert arch.flops_fwd == 6 * 2 * 16 * 100, method
        assert arch.depth == 2
