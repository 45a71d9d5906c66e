"""The entry points :func:`describe` and :func:`clear_cache`: argument checks, the per-model
cache and its key, and the assembly of an :class:`Architecture` from the single figures."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch import nn

from gpuperf_magics.architecture.figures import (
    _channels_last,
    _count_layers,
    _count_params,
    _input_shape,
    _param_dtype,
    _tensor_leaves,
)
from gpuperf_magics.architecture.result import METHODS, Architecture, _error_line
from gpuperf_magics.architecture.tracing import _count_flops
from gpuperf_magics.architecture.unwrap import unwrap

_log = logging.getLogger(__name__)

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
    inner, was_compiled = unwrap(model)
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
        _log.debug("no cache key for %s; figures are computed every time",
                   type(model).__name__, exc_info=True)
        return None


def _leaf_signature(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return ("tensor", tuple(leaf.shape), leaf.dtype, leaf.device, leaf.requires_grad)
    if leaf is None or isinstance(leaf, (bool, int, float, str)):
        return leaf
    return type(leaf).__qualname__


def _autocast_enabled() -> bool:
    """Whether autocast is on for any device type torch knows here."""
    try:
        torch.is_autocast_enabled("cpu")
    except TypeError:  # torch < 2.4: no device argument
        return bool(torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled())
    for device_type in ("cuda", "cpu", "xpu", "mps"):
        with contextlib.suppress(Exception):
            if torch.is_autocast_enabled(device_type):
                return True
    return False
