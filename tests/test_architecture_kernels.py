"""Tests for gpuperf_magics.architecture.kernels: the GPU kernels of a forward and backward pass,
counted in the FLOPs trace (views free, cuDNN's split operators, fused dropout, recurrent
layers as their cuDNN calls)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
from assertions import describe_quietly
from torch import nn

from gpuperf_magics.architecture.kernels import (
    OP_KERNELS,
    RNN_CELL_KERNELS,
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
    # forward: addmm; backward: the seed (ones_like), the weight's mm and the bias's sum (the
    # input needs no gradient). Views (t, expand) launch nothing; the sum the trace builds to
    # differentiate is its own, not the model's.
    assert kernels(nn.Linear(32, 64), torch.randn(4, 32)) == 4


class Tuple(nn.Module):
    """Three outputs: the trace sums them into one scalar, which the model does not launch."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.fc(x)
        return y, y, y


class Attribute(nn.Module):
    """A tensor kept as a plain attribute: the meta trace fails and the fake one runs."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.offset = torch.randn(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + self.offset


class Item(nn.Module):
    """Data-dependent control flow: only the real trace follows it."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * 2 if x.sum().item() > -1e9 else self.fc(x)


def test_the_scaffolding_of_the_trace_is_not_counted() -> None:
    # The three sums the trace adds up to differentiate are not counted; the two additions
    # that join the three gradients of the one output in the backward are.
    x = torch.randn(4, 8)
    assert kernels(Tuple(), x) == kernels(nn.Linear(8, 8), x) + 2


@pytest.mark.parametrize("model", [nn.Linear(8, 8), Attribute()], ids=["linear", "attribute"])
def test_meta_fake_and_real_traces_count_alike(model: nn.Module) -> None:
    """prim operators (a fake tensor's device lookups) and the real run's allocations launch
    nothing: every method gives the meta count."""
    x = torch.randn(4, 8)
    counts = {m: describe_quietly(model, (x,), methods=m).kernels for m in ("fake", "real")}
    if not isinstance(model, Attribute):
        counts["meta"] = describe_quietly(model, (x,), methods="meta").kernels
    expected = kernels(nn.Linear(8, 8), x) + (1 if isinstance(model, Attribute) else 0)
    assert set(counts.values()) == {expected}, counts
    arch = describe_quietly(Item(), (x,))
    assert arch.flops_method == "real"
    # The sum .item() reads, the multiply and its gradient; the copy to the host is no kernel.
    assert arch.kernels == kernels(nn.Linear(8, 8), x) + 3


def test_views_launch_nothing_and_the_batch_does_not_matter() -> None:
    base = kernels(nn.Linear(8, 8), torch.randn(4, 8))
    assert kernels(Reshaping(), torch.randn(4, 8)) == base
    assert kernels(nn.Linear(8, 8), torch.randn(512, 8)) == base


def test_a_convolution_counts_as_cudnn_launches_it() -> None:
    conv = nn.Sequential(nn.Conv2d(3, 8, 3), nn.Flatten())
    # convolution; the seed; the weight and bias gradients (one convolution_backward).
    assert kernels(conv, torch.randn(2, 3, 8, 8)) == (
        OP_KERNELS["convolution"] + 1 + OP_KERNELS["convolution_backward"])


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


class Unused(nn.Module):
    """Holds an LSTM it never calls."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(8, 8, num_layers=4, bidirectional=True)
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class Decoder(nn.Module):
    """Calls a one-step GRU per time step, and a cell per time step."""

    def __init__(self, steps: int) -> None:
        super().__init__()
        self.steps = steps
        self.rnn = nn.GRU(8, 8, batch_first=True)
        self.cell = nn.GRUCell(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = None
        c = torch.zeros(len(x), 8)
        for _ in range(self.steps):
            out, h = self.rnn(x[:, :1], h)
            c = self.cell(x[:, 0], c)
        return out[:, -1] + c


def test_recurrent_layers_count_per_call_not_per_module() -> None:
    x = torch.randn(2, 8)
    assert kernels(Unused(), x) == kernels(nn.Linear(8, 8), x)
    seq = torch.randn(2, 3, 8)
    one, four = kernels(Decoder(1), seq), kernels(Decoder(4), seq)
    # Three more calls of each: their cuDNN kernels, and a few of the loop's own.
    assert 0 <= four - one - 3 * (RNN_LAYER_KERNELS + RNN_CELL_KERNELS) <= 3


class Raising(nn.Module):
    """Its forward catches an error raised inside the recurrent layer."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(8, 8, batch_first=True)
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with contextlib.suppress(RuntimeError):
            self.rnn(x[:, :, :3])  # the wrong width: the LSTM raises
        return self.fc(x[:, -1])


def test_an_error_inside_a_recurrent_layer_leaves_the_count_and_the_model_clean() -> None:
    model = Raising()
    got = kernels(model, torch.randn(2, 3, 8))
    # The failed call counts its cuDNN kernels (it was entered); the linear layer after it is
    # counted as an ordinary layer, not set apart as recurrent (left open, the count would be
    # the LSTM's alone).
    assert got > RNN_LAYER_KERNELS
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
    assert iteration_kernels(10, 90, 200, RNN_LAYER_KERNELS) == 10 + 19 + RNN_LAYER_KERNELS
    assert iteration_kernels(10, 0, 30, 0) == 30


def test_the_parameter_tensors_are_counted() -> None:
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    model[0].bias.requires_grad_(False)
    arch = describe_quietly(model, (torch.randn(4, 8),))
    assert arch.param_tensors == 3
    assert arch.as_features()["arch_param_tensors"] == 3
