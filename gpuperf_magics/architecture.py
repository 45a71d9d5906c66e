"""Architecture features of a PyTorch model: size, layer counts, depth and FLOPs per sample.

:func:`describe` looks at a model once, off the timed path, and returns an
:class:`Architecture` whose :meth:`Architecture.as_features` gives the ``arch_*`` columns of the
canonical table. FLOPs come from :class:`torch.utils.flop_counter.FlopCounterMode`, which counts
matrix-multiply, convolution and attention ops (1 multiply-add = 2 FLOPs) and ignores
element-wise work such as activations and normalisation.

The FLOP count tries three ways to run the model's forward and backward pass, cheapest first:

``meta``
    parameters, buffers and inputs replaced by shape-only tensors on the ``meta`` device
    (no memory, no arithmetic; the full batch costs the same as one sample);
``fake``
    ``FakeTensorMode``: like meta, but also tolerates tensors the forward creates itself;
``real``
    a real run of a deep copy on the model's device, on the first two rows of the batch,
    with the fused mkldnn/cudnn RNN kernels and (on CPU) fused attention switched off so that
    every matrix multiply is visible to the counter.

Meta and fake fail on data-dependent code (``.item()``, boolean masks, ``nonzero``); the real
run handles those. None of the three touches the user's model: its parameters, buffers,
gradients, hooks, training/eval flags and the random number generators are as before.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import random
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeGuard, cast

import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.modules import (
    activation,
    batchnorm,
    conv,
    dropout,
    instancenorm,
    normalization,
    pooling,
)
from torch.nn.parallel import DataParallel, DistributedDataParallel
from torch.utils.flop_counter import FlopCounterMode

__all__ = ["FEATURE_KEYS", "METHODS", "Architecture", "clear_cache", "describe"]

#: The keys of :meth:`Architecture.as_features`, in order.
FEATURE_KEYS: tuple[str, ...] = (
    "arch_params",
    "arch_trainable_params",
    "arch_layers_conv",
    "arch_layers_linear",
    "arch_layers_norm",
    "arch_layers_attention",
    "arch_layers_recurrent",
    "arch_layers_embedding",
    "arch_layers_activation",
    "arch_layers_pool",
    "arch_layers_dropout",
    "arch_layers_other",
    "arch_layers_total",
    "arch_module_depth",
    "arch_depth",
    "arch_flops_fwd",
    "arch_flops_fwd_bwd",
    "arch_flops_method",
    "arch_input_shape",
    "arch_dtype",
    "arch_amp",
    "arch_channels_last",
    "arch_compiled",
    "arch_class",
)

#: Ways to count FLOPs, in the order :func:`describe` tries them by default.
METHODS: tuple[str, ...] = ("meta", "fake", "real")


def _public_modules(module: Any, exclude: tuple[type, ...] = ()) -> tuple[type[nn.Module], ...]:
    """The ``nn.Module`` classes a ``torch.nn.modules`` submodule exports."""
    classes = (getattr(module, name) for name in module.__all__)
    return tuple(
        c
        for c in classes
        if isinstance(c, type) and issubclass(c, nn.Module) and not issubclass(c, exclude)
    )


# Layer buckets, checked in this order with isinstance, so subclasses (LazyLinear,
# NonDynamicallyQuantizableLinear, QAT convs, user subclasses) land in their parent's bucket.
# MultiheadAttention is one attention layer; its out_proj child (a Linear subclass) is part of
# it and is not counted again as a linear layer.
_BUCKETS: tuple[tuple[str, tuple[type[nn.Module], ...]], ...] = (
    ("attention", (nn.MultiheadAttention,)),
    ("conv", _public_modules(conv)),
    ("linear", (nn.Linear, nn.Bilinear)),
    (
        "norm",
        _public_modules(batchnorm) + _public_modules(instancenorm) + _public_modules(normalization),
    ),
    ("recurrent", (nn.RNNBase, nn.RNNCellBase)),
    ("embedding", (nn.Embedding, nn.EmbeddingBag)),
    ("activation", _public_modules(activation, exclude=(nn.MultiheadAttention,))),
    ("pool", _public_modules(pooling)),
    ("dropout", _public_modules(dropout)),
)
_LAYER_KINDS: tuple[str, ...] = (*(kind for kind, _ in _BUCKETS), "other")

# Modules counted as one layer although they have children.
_UNITS: tuple[type[nn.Module], ...] = (nn.MultiheadAttention,)

# Backward nodes that count one step of weighted depth: the matrix-multiply-like ops that make
# up the sequential chain of a network. Names are matched without the trailing
# ``Backward<n>``. Scaled-dot-product attention is two dependent matmuls (QK^T, then AV);
# counting it as 2 gives the same depth as the unfused math path, which shows two Bmm nodes.
_DEPTH_WEIGHTS: dict[str, int] = {
    "Convolution": 1,
    "Addmm": 1,
    "Mm": 1,
    "Bmm": 1,
    "Baddbmm": 1,
    "Addbmm": 1,
    "Linear": 1,
    "Embedding": 1,
    "EmbeddingBag": 1,
    "_EmbeddingBag": 1,
    "ScaledDotProductAttention": 2,
    "ScaledDotProductFlashAttention": 2,
    "ScaledDotProductFlashAttentionForCpu": 2,
    "ScaledDotProductEfficientAttention": 2,
    "ScaledDotProductCudnnAttention": 2,
    "FlashAttention": 2,
    "EfficientAttention": 2,
}


@dataclasses.dataclass(frozen=True)
class Architecture:
    """What :func:`describe` found out about a model.

    Every figure is ``None`` when it could not be determined; :attr:`errors` says why.

    Attributes
    ----------
    class_name : str
        Class name of the model after unwrapping ``torch.compile`` and (Distributed)DataParallel.
    params, trainable_params : int or None
        Number of parameter elements (shared parameters once), all and ``requires_grad`` ones.
    layers_conv, layers_linear, layers_norm, layers_attention, layers_recurrent,
    layers_embedding, layers_activation, layers_pool, layers_dropout, layers_other : int or None
        Leaf modules by kind (module instances, not calls: a ReLU used twice counts once).
        ``nn.MultiheadAttention`` is one attention layer, its ``out_proj`` is not counted as
        linear; ``nn.Identity`` is not counted; any other leaf module is ``other``.
    layers_total : int or None
        Sum of the layer counts.
    module_depth : int or None
        Nesting depth of the module tree (0: the model is a single layer).
    depth : int or None
        Weighted depth: the most convolution / matrix-multiply / embedding ops on one path of the
        autograd graph (ResNet-18: 18, VGG-11: 11). Only paths that lead to trainable parameters
        (or inputs that require grad) exist in that graph.
    flops_fwd, flops_fwd_bwd : float or None
        FLOPs per sample of the forward pass, and of forward plus backward to the trainable
        parameters. ``flops_fwd_bwd`` is ``None`` when nothing can be differentiated.
    flops_method : str or None
        ``"meta"``, ``"fake"`` or ``"real"``: how the FLOPs were counted.
    input_shape : str or None
        Shape of the first input tensor without its batch dimension, e.g. ``"3x32x32"``
        (``"scalar"`` for a 1-D input).
    dtype : str or None
        Dtype of the first floating-point parameter, e.g. ``"float32"``.
    amp : bool or None
        Automatic mixed precision was on (as given, or autocast enabled when describe ran).
    channels_last : bool or None
        The first 4-D input or the first 2-D convolution's weight is channels-last (either
        makes the convolutions run channels-last).
    compiled : bool
        The model was a ``torch.compile`` wrapper (or the caller said so).
    batch_size : int or None
        The batch the per-sample figures were divided by.
    errors : tuple of str
        Why a figure is missing or why a cheaper FLOP method was skipped, one line each.
    elapsed_s : float
        Seconds describe took to compute this (not counting later cache hits).
    """

    class_name: str
    params: int | None = None
    trainable_params: int | None = None
    layers_conv: int | None = None
    layers_linear: int | None = None
    layers_norm: int | None = None
    layers_attention: int | None = None
    layers_recurrent: int | None = None
    layers_embedding: int | None = None
    layers_activation: int | None = None
    layers_pool: int | None = None
    layers_dropout: int | None = None
    layers_other: int | None = None
    layers_total: int | None = None
    module_depth: int | None = None
    depth: int | None = None
    flops_fwd: float | None = None
    flops_fwd_bwd: float | None = None
    flops_method: str | None = None
    input_shape: str | None = None
    dtype: str | None = None
    amp: bool | None = None
    channels_last: bool | None = None
    compiled: bool = False
    batch_size: int | None = None
    errors: tuple[str, ...] = ()
    elapsed_s: float = dataclasses.field(default=0.0, compare=False)

    def as_features(self) -> dict[str, Any]:
        """The ``arch_*`` columns of the canonical table.

        Returns
        -------
        dict
            Exactly the keys in :data:`FEATURE_KEYS`; ``None`` where unknown.
        """
        values = {key: getattr(self, key.removeprefix("arch_")) for key in FEATURE_KEYS[:-1]}
        values["arch_class"] = self.class_name
        return values


_CacheKey = tuple[Any, ...]
_CACHE: weakref.WeakKeyDictionary[nn.Module, dict[_CacheKey, Architecture]] = (
    weakref.WeakKeyDictionary()
)


def clear_cache() -> None:
    """Forget every :func:`describe` result computed so far in this process."""
    _CACHE.clear()


def describe(
    model: nn.Module,
    example_args: Any = (),
    example_kwargs: Mapping[str, Any] | None = None,
    *,
    batch_size: int | None = None,
    amp: bool | None = None,
    compiled: bool | None = None,
    methods: str | Sequence[str] = METHODS,
) -> Architecture:
    """Describe a model's architecture: parameters, layers, depth, FLOPs per sample.

    The result is cached per model object, input shapes and parameter layout, so calling this
    again after every profiled cell is cheap. The model is never changed. Failures of single
    figures (exotic layers, data-dependent control flow) leave those figures ``None`` and are
    explained in :attr:`Architecture.errors`; nothing is printed or warned.

    Parameters
    ----------
    model : torch.nn.Module
        The model as the training loop calls it; ``torch.compile`` wrappers, ``DataParallel``
        and ``DistributedDataParallel`` are unwrapped (nothing is copied).
    example_args : tuple, optional
        Positional arguments of one training forward call: tensors, or tuples/lists/dicts of
        them. A single tensor is taken as the only positional argument.
    example_kwargs : mapping, optional
        Keyword arguments of that call (``model(src=x)``).
    batch_size : int, optional
        Samples in that call. Default: dim 0 of the first input tensor.
    amp : bool, optional
        Whether training ran under autocast. Default: whether autocast is enabled now.
    compiled : bool, optional
        Whether the model is compiled. Default: ``model`` is a ``torch.compile`` wrapper.
    methods : str or sequence of str, optional
        FLOP counting methods to try in order, from :data:`METHODS`. Leave out ``"real"`` to
        never run the model for real (e.g. a large model on a nearly full GPU).

    Returns
    -------
    Architecture
        The figures; :meth:`Architecture.as_features` gives the ``arch_*`` columns.

    Raises
    ------
    TypeError
        If ``model`` is not a ``torch.nn.Module``.
    ValueError
        If ``methods`` names an unknown method, or ``batch_size`` is not positive.

    Examples
    --------
    >>> import torch
    >>> arch = describe(torch.nn.Linear(32, 64), (torch.randn(8, 32),))
    >>> arch.flops_fwd, arch.params
    (4096.0, 2112)
    """
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"describe() needs a torch.nn.Module, got {type(model).__name__}; pass the model "
            "object the training loop calls."
        )
    order = (methods,) if isinstance(methods, str) else tuple(methods)
    unknown = [m for m in order if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown FLOP method(s) {unknown}; choose from {list(METHODS)}.")
    if batch_size is not None and batch_size <= 0:
        raise ValueError(f"batch_size must be a positive number of samples, got {batch_size}.")
    args = example_args if isinstance(example_args, tuple) else (example_args,)
    kwargs = dict(example_kwargs or {})
    if amp is None:
        amp = _autocast_enabled()

    key = _cache_key(model, args, kwargs, batch_size, amp, compiled, order)
    cached = _cached(model, key)
    if cached is not None:
        return cached

    start = time.perf_counter()
    result = _describe(model, args, kwargs, batch_size, amp, compiled, order)
    result = dataclasses.replace(result, elapsed_s=time.perf_counter() - start)
    if key is not None:
        with contextlib.suppress(TypeError):  # a model class that made itself unhashable
            _CACHE.setdefault(model, {})[key] = result
    return result


def _cached(model: nn.Module, key: _CacheKey | None) -> Architecture | None:
    if key is None:
        return None
    try:
        return _CACHE.get(model, {}).get(key)
    except TypeError:
        return None


def _describe(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    batch_size: int | None,
    amp: bool,
    compiled: bool | None,
    methods: tuple[str, ...],
) -> Architecture:
    errors: list[str] = []
    inner, was_compiled = _unwrap(model)
    tensors = _tensor_leaves((args, kwargs))
    first = tensors[0] if tensors else None
    if batch_size is None and first is not None and first.dim() >= 1:
        batch_size = int(first.shape[0])
    fields: dict[str, Any] = {
        "class_name": type(inner).__name__,
        "compiled": was_compiled if compiled is None else bool(compiled),
        "amp": amp,
        "batch_size": batch_size,
    }

    for name, compute in (
        ("params", lambda: _count_params(inner)),
        ("layers", lambda: _count_layers(inner)),
        ("input_shape", lambda: {"input_shape": _input_shape(first)}),
        ("dtype", lambda: {"dtype": _param_dtype(inner)}),
        ("channels_last", lambda: {"channels_last": _channels_last(inner, tensors)}),
    ):
        try:
            fields.update(compute())
        except Exception as exc:  # an exotic model loses one figure, never the whole row
            errors.append(_error_line(name, exc))

    fields.update(_count_flops(inner, args, kwargs, batch_size, methods, errors))
    return Architecture(**fields, errors=tuple(errors))


def _error_line(what: str, exc: BaseException) -> str:
    text = str(exc).strip()
    line = f"{what}: {type(exc).__name__}"
    if text:
        line += ": " + text.splitlines()[0]
    return line if len(line) <= 300 else line[:297] + "..."


# --- unwrapping, cache key, small figures ------------------------------------------------------


def _unwrap(model: nn.Module) -> tuple[nn.Module, bool]:
    """The module whose code runs, and whether a ``torch.compile`` wrapper was on the way."""
    optimized = _optimized_module_class()
    was_compiled = False
    for _ in range(100):  # wrappers nest a few levels at most; a cycle must not hang
        if optimized is not None and isinstance(model, optimized):
            was_compiled = True
            model = cast(nn.Module, model._orig_mod)
        elif isinstance(model, (DataParallel, DistributedDataParallel)):
            model = model.module
        else:
            break
    return model, was_compiled


def _optimized_module_class() -> type[nn.Module] | None:
    """``torch.compile``'s wrapper class, or None when dynamo was never imported.

    Without dynamo nothing can be compiled, and importing it here would cost about a second.
    """
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return getattr(eval_frame, "OptimizedModule", None)


def _cache_key(
    model: nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    batch_size: int | None,
    amp: bool,
    compiled: bool | None,
    methods: tuple[str, ...],
) -> _CacheKey | None:
    """Same model object, inputs and parameter layout → same answer; None: do not cache."""
    try:
        leaves, spec = pytree.tree_flatten((args, kwargs))
        inputs = tuple(_leaf_signature(leaf) for leaf in leaves)
        # Parameter layout catches a replaced head, .half(), freezing, a move to another device.
        layout = tuple(
            (name, tuple(p.shape), p.dtype, p.device, p.requires_grad)
            for name, p in model.named_parameters()
        )
        return (
            str(spec),
            inputs,
            layout,
            model.training,
            batch_size,
            amp,
            compiled,
            methods,
        )
    except Exception:  # unhashable or lazy parameters: compute every time
        return None


def _leaf_signature(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return ("tensor", tuple(leaf.shape), leaf.dtype, leaf.device, leaf.requires_grad)
    if leaf is None or isinstance(leaf, (bool, int, float, str)):
        return leaf
    return type(leaf).__qualname__


def _autocast_enabled() -> bool:
    """Whether autocast is on for any device type torch knows here."""
    for device_type in ("cuda", "cpu", "xpu", "mps"):
        with contextlib.suppress(Exception):
            if torch.is_autocast_enabled(device_type):
                return True
    return False


def _tensor_leaves(tree: Any) -> list[torch.Tensor]:
    return [leaf for leaf in pytree.tree_leaves(tree) if isinstance(leaf, torch.Tensor)]


def _count_params(model: nn.Module) -> dict[str, int]:
    total = trainable = 0
    for p in model.parameters():  # shared (tied) parameters are yielded once
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
    return {"params": total, "trainable_params": trainable}


def _count_layers(model: nn.Module) -> dict[str, int]:
    optimized = _optimized_module_class()
    counts = dict.fromkeys(_LAYER_KINDS, 0)
    deepest = 0
    seen: set[int] = set()
    stack: list[tuple[nn.Module, int]] = [(model, 0)]
    while stack:  # iterative: very deep module trees must not hit the recursion limit
        module, level = stack.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        if optimized is not None and isinstance(module, optimized):
            # A compiled submodule is not a level of its own.
            stack.append((cast(nn.Module, module._orig_mod), level))
            continue
        deepest = max(deepest, level)
        children = [] if isinstance(module, _UNITS) else list(module.children())
        if children:
            stack.extend((child, level + 1) for child in children)
            continue
        if type(module) is nn.Identity:  # a placeholder (removed head), not a layer
            continue
        counts[_layer_kind(module)] += 1
    figures = {f"layers_{kind}": n for kind, n in counts.items()}
    figures["layers_total"] = sum(counts.values())
    figures["module_depth"] = deepest
    return figures


def _layer_kind(module: nn.Module) -> str:
    for kind, classes in _BUCKETS:
        if isinstance(module, classes):
            return kind
    return "other"


def _input_shape(first: torch.Tensor | None) -> str | None:
    if first is None or first.dim() == 0:
        return None
    per_sample = tuple(first.shape[1:])
    return "x".join(str(n) for n in per_sample) if per_sample else "scalar"


def _param_dtype(model: nn.Module) -> str | None:
    for p in model.parameters():
        if p.is_floating_point():
            return str(p.dtype).removeprefix("torch.")
    return None


def _channels_last(model: nn.Module, tensors: list[torch.Tensor]) -> bool:
    # Convolutions run channels-last when either their input or their weight is, so look at
    # the first 4-D input and the first 4-D convolution weight.
    candidates = [t for t in tensors if t.dim() == 4][:1]
    for m in model.modules():
        if isinstance(m, _CONV_2D) and m.weight.dim() == 4:
            candidates.append(m.weight)
            break
    # A tensor with 1x1 spatial size or one channel is both contiguous and channels-last.
    return any(
        t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()
        for t in candidates
    )


_CONV_2D = (nn.Conv2d, nn.ConvTranspose2d)


# --- FLOPs and weighted depth ----------------------------------------------------------------


@dataclasses.dataclass
class _Trace:
    flops_fwd: int
    flops_fwd_bwd: int | None
    depth: int | None
    rows: int | None  # batch rows the trace ran on (None: the batch was not sliced)


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
    with torch.compiler.set_stance("force_eager"):
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
    except Exception:
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
    with sdpa_kernel(SDPBackend.MATH):
        yield


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
    with FlopCounterMode(display=False) as counter:
        out = torch.func.functional_call(model, state, args, kwargs)
        fwd = counter.get_total_flops()
        scalar = _differentiable_scalar(out)
        if scalar is None:
            return _Trace(fwd, None, None, rows)
        depth = _weighted_depth(scalar.grad_fn)
        if not trainable:
            return _Trace(fwd, None, depth, rows)
        # Gradients for the trainable parameters only: what a training step computes.
        torch.autograd.grad(scalar, trainable, allow_unused=True)
        return _Trace(fwd, counter.get_total_flops(), depth, rows)


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


def _weighted_depth(root: Any) -> int | None:
    """Longest path through an autograd graph, counting matmul/convolution-like nodes.

    Parameters
    ----------
    root : torch.autograd.graph.Node or None
        ``tensor.grad_fn`` of an output.

    Returns
    -------
    int or None
        The most weighted nodes on one path from ``root`` to a leaf; None if ``root`` is None.
    """
    if root is None:
        return None
    # Memoised post-order DFS with an explicit stack: graphs of long sequences or very deep
    # networks have tens of thousands of nodes on one path.
    best: dict[Any, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if node in best:
            continue
        children = [child for child, _ in node.next_functions if child is not None]
        if not expanded:
            stack.append((node, True))
            stack.extend((child, False) for child in children if child not in best)
            continue
        below = max((best[child] for child in children), default=0)
        best[node] = _node_weight(node) + below
    return best[root]


def _node_weight(node: Any) -> int:
    name = node.name()
    head, marker, _ = name.rpartition("Backward")
    if not marker:
        return 0
    return _DEPTH_WEIGHTS.get(head, 0)
