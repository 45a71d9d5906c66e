"""FLOPs per sample: the meta, fake and real runs under ``FlopCounterMode``, and the context
managers that keep those runs from touching the user's model, generators and warnings."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import logging
import random
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeGuard

import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from gpuperf_magics.architecture.depth import _weighted_depth
from gpuperf_magics.architecture.figures import _tensor_leaves
from gpuperf_magics.architecture.kernels import KernelCounter, iteration_kernels
from gpuperf_magics.architecture.result import _error_line

_log = logging.getLogger(__name__)


@dataclasses.dataclass
class _Trace:
    flops_fwd: int
    flops_fwd_bwd: int | None
    depth: int | None
    rows: int | None  # batch rows the trace ran on (None: the batch was not sliced)
    kernels: int | None = None  # GPU kernels of the forward and backward (.kernels)
    param_tensors: int | None = None  # trainable parameter tensors (the optimizer's lists)


def _count_flops(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    batch_size: int | None,
    methods: tuple[str, ...],
    errors: list[str],
) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for method in methods:
        if method != "meta" and _distributed_peers():
            # Collectives inside the forward (SyncBatchNorm, tensor parallelism) would wait
            # for the other ranks, which do not run this trace: a hang, not an error.
            errors.append(f"flops[{method}]: skipped in a multi-process distributed job")
            continue
        try:
            with _quiet_and_isolated(model):
                trace = _TRACERS[method](model, args, kwargs, batch_size)
        except Exception as exc:
            errors.append(_error_line(f"flops[{method}]", exc))
            continue
        figures["flops_method"] = method
        figures["depth"] = trace.depth
        figures["kernels"] = trace.kernels
        figures["param_tensors"] = trace.param_tensors
        rows = trace.rows if trace.rows is not None else batch_size
        if rows:
            figures["flops_fwd"] = trace.flops_fwd / rows
            if trace.flops_fwd_bwd is not None:
                figures["flops_fwd_bwd"] = trace.flops_fwd_bwd / rows
        else:
            errors.append("flops: batch size unknown (no input tensor); pass batch_size=")
        if trace.flops_fwd_bwd is None:
            errors.append(
                "flops_fwd_bwd: nothing to differentiate (no trainable parameter, or no "
                "floating-point output with a gradient)"
            )
        return figures
    return figures


def _distributed_peers() -> bool:
    """Whether this process is one rank of several in an initialised process group."""
    dist = torch.distributed
    return bool(dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1)


@contextlib.contextmanager
def _quiet_and_isolated(model: nn.Module) -> Iterator[None]:
    """Run traced code without user-visible side effects.

    Tracing runs the user's forward a second time: its warnings would be duplicates, and
    describe may be called under ``no_grad``/``inference_mode``. Training/eval flags and every
    random generator are restored, so the next real iteration draws the same dropout masks.
    """
    modes = [(m, m.training) for m in model.modules()]
    py_state = random.getstate()
    numpy_random = getattr(sys.modules.get("numpy"), "random", None)
    np_state = numpy_random.get_state() if numpy_random is not None else None
    devices = _accelerator_devices(model)
    try:
        with (
            warnings.catch_warnings(),
            torch.random.fork_rng(devices=devices),
            torch.inference_mode(False),
            torch.enable_grad(),
            _eager_compiled_submodules(),
        ):
            warnings.simplefilter("ignore")
            yield
    finally:
        random.setstate(py_state)
        if numpy_random is not None:
            numpy_random.set_state(np_state)
        for module, training in modes:
            module.training = training


def _accelerator_devices(model: nn.Module) -> list[int]:
    """CUDA devices whose generator the real run might advance (only if CUDA is initialised)."""
    if not torch.cuda.is_initialized():
        return []
    return sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})


@contextlib.contextmanager
def _eager_compiled_submodules() -> Iterator[None]:
    # A torch.compile'd submodule inside the model would otherwise be compiled for meta/fake
    # tensors (slow, and a recompile for the user). Only if dynamo is loaded at all.
    if "torch._dynamo" not in sys.modules:
        yield
        return
    set_stance = getattr(torch.compiler, "set_stance", None)
    if set_stance is not None:
        with set_stance("force_eager"):
            yield
        return
    import importlib

    dynamo = importlib.import_module("torch._dynamo")
    with dynamo.config.patch(disable=True):  # torch < 2.6
        yield


def _trace_meta(
    model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], batch_size: int | None
) -> _Trace:
    def to_meta(t: torch.Tensor) -> torch.Tensor:
        return _like(torch.empty_like(t, device="meta"), t)

    state = _state(model, to_meta)
    meta_args, meta_kwargs = pytree.tree_map_only(torch.Tensor, to_meta, (args, kwargs))
    return _run(model, state, meta_args, meta_kwargs, rows=None)


def _trace_fake(
    model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], batch_size: int | None
) -> _Trace:
    from torch._subclasses.fake_tensor import FakeTensorMode  # only when meta failed

    # allow_non_fake_inputs: tensors the forward keeps as plain attributes become fake too.
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)

    def to_fake(t: torch.Tensor) -> torch.Tensor:
        # An inference-mode tensor would stay one as a fake tensor, unusable by autograd.
        source = t.detach().clone() if t.is_inference() else t.detach()
        return _like(fake_mode.from_tensor(source), t)

    state = _state(model, to_fake)
    fake_args, fake_kwargs = pytree.tree_map_only(torch.Tensor, to_fake, (args, kwargs))
    with fake_mode, _countable_attention(state):
        return _run(model, state, fake_args, fake_kwargs, rows=None)


# Rows the real fallback runs: 2, not 1, because training-mode BatchNorm rejects a batch with
# one value per channel; FLOPs of ordinary layers are linear in the batch, so the per-sample
# figure is the same.
_REAL_ROWS = 2


def _trace_real(
    model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], batch_size: int | None
) -> _Trace:
    tensors = _tensor_leaves((args, kwargs))
    full = int(tensors[0].shape[0]) if tensors and tensors[0].dim() >= 1 else None
    rows = min(full, _REAL_ROWS) if full is not None and full == batch_size else None

    def to_real(t: torch.Tensor) -> torch.Tensor:
        if rows is not None and t.dim() >= 1 and t.shape[0] == full:
            t = t[:rows]
        # A copy: the forward may work in place on its inputs.
        return _like(t.detach().clone(), t)

    state = _state(model, lambda t: _like(t.detach().clone(), t))
    real_args, real_kwargs = pytree.tree_map_only(torch.Tensor, to_real, (args, kwargs))
    shell = _shell_copy(model)
    # mkldnn and cudnn run a whole RNN as one opaque kernel that FlopCounterMode cannot see;
    # without them RNNs decompose into counted matrix multiplies, as on meta.
    saved = (torch.backends.mkldnn.enabled, torch.backends.cudnn.enabled)
    # Plain attribute assignment, not mkldnn.flags(), which warns about oneDNN TF32 here.
    torch.backends.mkldnn.enabled = False  # type: ignore[assignment]
    torch.backends.cudnn.enabled = False
    try:
        with _countable_attention(state):
            return _run(shell, state, real_args, real_kwargs, rows=rows)
    finally:
        torch.backends.mkldnn.enabled, torch.backends.cudnn.enabled = saved


def _shell_copy(model: nn.Module) -> nn.Module:
    """A deep copy of the module tree whose parameters and buffers are meta placeholders.

    The forward may change Python attributes (counters, caches); it does so on the copy. The
    real values are supplied through ``functional_call``, so nothing big is copied (and
    ``.grad`` never is). If the model cannot be deep-copied, the original is used: its tensors
    are still swapped out for the duration of the call.
    """
    memo: dict[int, Any] = {}
    for p in model.parameters():
        memo[id(p)] = nn.Parameter(torch.empty_like(p, device="meta"), p.requires_grad)
    for b in model.buffers():
        memo[id(b)] = torch.empty_like(b, device="meta")
    try:
        return copy.deepcopy(model, memo)
    except Exception:  # a module that cannot be copied is traced in place, under no_grad
        _log.debug("deepcopy of %s failed; tracing the model itself", type(model).__name__,
                   exc_info=True)
        return model


@contextlib.contextmanager
def _countable_attention(state: dict[str, torch.Tensor]) -> Iterator[None]:
    """On CPU, compute scaled-dot-product attention with the unfused math kernel.

    FlopCounterMode has no formula for the fused CPU kernel and would count attention as 0;
    the math kernel shows its two batched matmuls, as the meta device always does. On GPUs the
    fused kernels are counted, and the math kernel could need much more memory, so keep them.
    """
    if any(t.device.type != "cpu" for t in state.values()):
        yield
        return
    with _math_attention():
        yield


def _math_attention() -> contextlib.AbstractContextManager[Any]:
    """``sdpa_kernel(SDPBackend.MATH)`` (torch >= 2.3), else the older switch of the same."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:  # torch < 2.3
        return torch.backends.cuda.sdp_kernel(
            enable_flash=False, enable_math=True, enable_mem_efficient=False)
    return sdpa_kernel(SDPBackend.MATH)


_TRACERS: dict[
    str, Callable[[nn.Module, tuple[Any, ...], dict[str, Any], int | None], _Trace]
] = {"meta": _trace_meta, "fake": _trace_fake, "real": _trace_real}


def _like(new: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
    """``new`` as a leaf that requires grad exactly where ``old`` did."""
    if old.requires_grad and (new.is_floating_point() or new.is_complex()):
        return new.requires_grad_(True)
    return new


def _state(
    model: nn.Module, convert: Callable[[torch.Tensor], torch.Tensor]
) -> dict[str, torch.Tensor]:
    """Converted parameters and buffers by name, for ``torch.func.functional_call``."""
    state = {name: convert(p) for name, p in model.named_parameters()}
    state.update((name, convert(b)) for name, b in model.named_buffers())
    return state


def _run(
    model: nn.Module,
    state: dict[str, torch.Tensor],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    rows: int | None,
) -> _Trace:
    params = dict(model.named_parameters())
    trainable = [state[name] for name, p in params.items() if p.requires_grad]
    kernels = KernelCounter()
    with FlopCounterMode(display=False) as counter, kernels, kernels.recurrent_layers(model):
        out = torch.func.functional_call(model, state, args, kwargs)
        fwd = counter.get_total_flops()
        fwd_kernels, fwd_rnn_ops = kernels.kernels, kernels.recurrent_ops
        with kernels.paused():  # the scalar is the trace's, not the model's (the loss is apart)
            scalar = _differentiable_scalar(out)
        if scalar is None:
            return _Trace(fwd, None, None, rows)
        depth = _weighted_depth(scalar.grad_fn)
        if not trainable:
            return _Trace(fwd, None, depth, rows)
        # Gradients for the trainable parameters only: what a training step computes.
        torch.autograd.grad(scalar, trainable, allow_unused=True)
        total = iteration_kernels(fwd_kernels, fwd_rnn_ops, kernels.kernels,
                                  kernels.recurrent_kernels)
        return _Trace(fwd, counter.get_total_flops(), depth, rows, total, len(trainable))


def _differentiable_scalar(out: Any) -> torch.Tensor | None:
    """The scalar a training step would differentiate, or None.

    A model that returns its own loss (``out.loss``) is differentiated through it; else through
    ``logits``; else through the sum of every floating-point output that has a graph.
    """
    for name in ("loss", "logits"):
        value = out.get(name) if isinstance(out, Mapping) else getattr(out, name, None)
        if _has_graph(value):
            return value.float().sum()
    outputs = [leaf for leaf in pytree.tree_leaves(out) if _has_graph(leaf)]
    if not outputs:
        return None
    return sum((t.float().sum() for t in outputs[1:]), outputs[0].float().sum())


def _has_graph(value: Any) -> TypeGuard[torch.Tensor]:
    return (
        isinstance(value, torch.Tensor) and value.is_floating_point() and value.grad_fn is not None
    )
