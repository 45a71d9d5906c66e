"""Tests for gpuperf_magics.architecture.unwrap: ``torch.compile`` and DataParallel wrappers."""

from __future__ import annotations

import torch
from assertions import describe_quietly
from tiny_models import SMALL_CNN_FWD, small_cnn
from tiny_models import mlp_two_hidden_layers as mlp
from torch import nn


def test_compiled_model_is_unwrapped_without_compiling() -> None:
    model = mlp()
    compiled = torch.compile(model, backend="eager")
    from torch._dynamo.utils import counters

    graphs = counters["stats"]["unique_graphs"]
    arch = describe_quietly(compiled, (torch.randn(4, 32),))
    assert counters["stats"]["unique_graphs"] == graphs
    assert arch.compiled is True
    assert arch.class_name == "Sequential"
    assert arch.params == 6922
    assert arch.flops_fwd == 13_568
    assert describe_quietly(model, (torch.randn(4, 32),)).compiled is False
    assert describe_quietly(model, (torch.randn(4, 32),), compiled=True).compiled is True


def test_data_parallel_is_unwrapped() -> None:
    inner = small_cnn()
    arch = describe_quietly(nn.DataParallel(inner), (torch.randn(2, 3, 16, 16),))
    assert arch.class_name == "Sequential"
    assert arch.params == sum(p.numel() for p in inner.parameters())
    assert arch.flops_fwd == SMALL_CNN_FWD


# ------------------------------------------------------------------------------ unwrap
def test_unwrap_peels_compile_and_data_parallel_wrappers() -> None:
    from gpuperf_magics.architecture.unwrap import Unwrapped, unwrap

    inner = mlp()
    assert unwrap(inner) == Unwrapped(inner, False)
    assert unwrap(nn.DataParallel(inner)) == (inner, False)
    compiled = torch.compile(inner, backend="eager")
    module, was_compiled = unwrap(nn.DataParallel(compiled))
    assert module is inner and was_compiled
    assert unwrap(compiled).module is inner


def test_unwrap_stops_on_a_wrapper_that_wraps_itself() -> None:
    from gpuperf_magics.architecture.unwrap import MAX_DEPTH, unwrap

    class Loop(nn.Module):
        pass

    loop = Loop()
    loop._orig_mod = loop  # a compile-like wrapper around itself
    assert unwrap(loop) == (loop, True)
    chain: nn.Module = mlp()
    for _ in range(MAX_DEPTH + 3):
        chain = nn.DataParallel(chain)
    assert isinstance(unwrap(chain).module, nn.DataParallel)  # gave up, did not hang


def test_unwrap_does_not_import_dynamo() -> None:
    import subprocess
    import sys

    code = ("import sys; from torch import nn\n"
            "from gpuperf_magics.architecture.unwrap import is_compiled, unwrap\n"
            "unwrap(nn.DataParallel(nn.Linear(2, 2))); is_compiled(nn.Linear(2, 2))\n"
            "assert 'torch._dynamo' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_is_compiled_tells_a_compile_wrapper() -> None:
    from gpuperf_magics.architecture.unwrap import is_compiled

    inner = mlp()
    assert is_compiled(torch.compile(inner, backend="eager"))
    assert not is_compiled(inner)
    assert not is_compiled(nn.DataParallel(inner))  # unwrap peels it, but it compiles nothing
