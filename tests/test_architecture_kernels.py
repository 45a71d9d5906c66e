"""Tests for gpuperf_magics.architecture.kernels: the GPU kernels of a forward and backward pass,
counted in the FLOPs trace (views free, cuDNN's split operators, fused dropout, recurrent
layers as their cuDNN calls)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from assertions import describe_quietly
from torch import nn

from gpuperf_magics.architecture.kernels import (
    OP_KERNELS,
    RNN_LAYER_KERNELS,
    KernelCounter,
    iteration_kernels,
)


def kernels(model: nn.Module, *inputs: torch.Tensor, **options: Any) -> int:
    arch = describe_quietly(model, inputs, **options)
    assert arch.kernels is not None, arch.errors
    return arch.kernels


class Reshaping(nn.Module):
    """A linear layer between views: transpose, view and flatten launch nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.transpose(0, 1).transpose(0, 1).view(len(x), 8)).flatten(1)


class Tagger(nn.Module):
    def __init__(self, layers: int, bidirectional: bool = False) -> None:
        super().__init__()
        self.rnn = nn.LSTM(8, 16, num_layers=layers, batch_first=True,
                           bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.rnn(x)[0][:, -1])


def test_a_linear_layer_by_hand() -> None:
    # forward: addmm, the traced output's sum; backward: its seed (ones_like), the weight's mm
    # and the bias's sum (the input needs no gradient). Views (t, expand) launch nothing.
    assert kernels(nn.Linear(32, 64), torch.randn(4, 32)) == 5


def test_views_launch_nothing_and_the_batch_does_not_matter() -> None:
    base = kernels(nn.Linear(8, 8), torch.randn(4, 8))
    assert kernels(Reshaping(), torch.randn(4, 8)) == base
    assert kernels(nn.Linear(8, 8), torch.randn(512, 8)) == base


def test_a_convolution_counts_as_cudnn_launches_it() -> None:
    conv = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten())
    # convolution; the sum; its seed; the weight and bias gradients (one convolution_backward).
    assert kernels(conv, torch.randn(2, 3, 8, 8)) == (
        OP_KERNELS["convolution"] + 1 + 1 + OP_KERNELS["convolution_backward"])


def test_dropout_is_one_kernel_each_way() -> None:
    plain = kernels(nn.Sequential(nn.Linear(8, 8)), torch.randn(4, 8))
    dropped = kernels(nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5)), torch.randn(4, 8))
    assert dropped - plain == 2  # the fused dropout, and its backward's multiply


@pytest.mark.parametrize(("layers", "bidirectional"), [(1, False), (2, False), (2, True)])
def test_a_recurrent_layer_counts_its_cudnn_calls_whatever_the_sequence(
        layers: int, bidirectional: bool) -> None:
    model = Tagger(layers, bidirectional)
    short = kernels(model, torch.randn(2, 3, 8))
    long = kernels(model, torch.randn(2, 40, 8))
    assert short == long  # not unrolled over time steps
    units = layers * (2 if bidirectional else 1)
    assert RNN_LAYER_KERNELS * units < short < RNN_LAYER_KERNELS * units + 20
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


def test_the_counter_counts_an_operator_and_skips_a_view() -> None:
    x = torch.randn(4, 4, device="meta")
    with KernelCounter() as counter:
        y = (x + 1).t().contiguous()
        torch.empty_like(y)
    assert counter.kernels == 2  # add; contiguous's copy (t and empty_like launch nothing)


def test_iteration_kernels_drops_the_recurrent_backward_in_proportion() -> None:
    # 10 kernels and 90 recurrent operators forward; 200 counted after the backward: of its
    # 190, the share of the non-recurrent forward (10 of 100) stays.
    assert iteration_kernels(10, 90, 200, 1) == 10 + 19 + RNN_LAYER_KERNELS
    assert iteration_kernels(10, 0, 30, 0) == 30


def test_the_parameter_tensors_are_counted() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    model[0].bias.requires_grad_(False)
    arch = describe_quietly(model, (torch.randn(4, 8),))
    assert arch.param_tensors == 3
    assert arch.as_features()["arch_param_tensors"] == 3
