"""What torch says about a model, its optimizer and a call: the recorder's small questions.

Several are asked on the timed path (:func:`output_grad_fn`, :func:`autocast_on`), so each is
a few attribute reads; none keeps a reference to what it looked at.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch import nn

from gpuperf_magics.capture.batch import first_tensor

_Tensor = torch.Tensor


def output_grad_fn(output: Any) -> Any:
    """grad_fn of the first differentiable tensor of a forward's output (tensor/tuple/dict/obj)."""
    if isinstance(output, _Tensor):
        return output.grad_fn
    if isinstance(output, dict):
        items: Any = output.values()
    elif isinstance(output, (list, tuple)):
        items = output
    else:
        items = (getattr(output, k, None) for k in ("loss", "logits", "last_hidden_state"))
    for item in items:
        if isinstance(item, _Tensor) and item.grad_fn is not None:
            return item.grad_fn
    return None


def global_forward_hook(module_mod: Any, hook: Callable[..., None]) -> Any:
    """Register ``hook(module, args, kwargs, output)`` as a global always-called forward hook.

    Global hooks take ``with_kwargs`` from torch 2.6 on; before, the hook sees ``(module, args,
    output)`` and the keyword arguments of the call are not visible (the per-model hooks
    installed at adoption see them on every torch >= 2.0). A forward that raised gives the hook
    no output, which ``hook`` receives as ``(module, args, output)`` either way.
    """
    register = module_mod.register_module_forward_hook
    if _takes(register, "with_kwargs"):
        return register(hook, with_kwargs=True, always_call=True)

    def without_kwargs(module: nn.Module, args: Any, output: Any) -> None:
        if output is None:  # the forward raised (or returned nothing)
            hook(module, args, output)
        else:
            hook(module, args, {}, output)

    return register(without_kwargs, always_call=True)


def _takes(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` has a parameter ``name``: read from its code object, which costs
    microseconds where ``inspect.signature`` costs milliseconds (it reads the annotations)."""
    code = getattr(function, "__code__", None)
    if code is None:  # a builtin or a wrapped callable
        return name in inspect.signature(function).parameters
    return name in code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]


def remove_global_hooks(handles: Iterable[Any]) -> None:
    """Remove global module hooks registered by :func:`global_forward_hook` (or torch's
    ``register_module_forward_pre_hook``), leaving no trace in torch's tables."""
    from torch.nn.modules import module as module_mod

    for h in handles:
        h.remove()
        # torch's handle forgets this dict (2.13): a stale id would keep every module
        # off its fast path and make torch.compile'd modules warn for the process's life.
        getattr(module_mod, "_global_forward_hooks_with_kwargs", {}).pop(h.id, None)


def dynamo_disabled(fn: Callable[..., None]) -> Callable[..., None]:
    disable = getattr(getattr(torch, "compiler", None), "disable", None)
    return disable(fn) if disable is not None else fn


def device_of(module: nn.Module | None, args: Any = None) -> torch.device | None:
    if module is not None:
        for p in module.parameters():
            return p.device
    t = first_tensor(args) if args is not None else None
    return t.device if t is not None else None


def lr_of(opt: Any) -> float | None:
    try:
        lr = opt.param_groups[0].get("lr")
        return float(lr) if lr is not None else None
    except (AttributeError, IndexError, TypeError, ValueError):
        return None


def opt_device(opt: Any) -> torch.device | None:
    for g in opt.param_groups:
        for p in g["params"]:
            return p.device
    return None


def autocast_on() -> bool:
    try:
        return bool(torch.is_autocast_enabled("cuda") or torch.is_autocast_enabled("cpu"))
    except TypeError:  # torch < 2.4: no device argument
        return bool(torch.is_autocast_enabled() or torch.is_autocast_cpu_enabled())
