"""Unwrapping ``torch.compile`` wrappers and (Distributed)DataParallel to the module that runs."""

from __future__ import annotations

from typing import NamedTuple, cast

from torch import nn
from torch.nn.parallel import DataParallel, DistributedDataParallel

#: Wrappers peeled off at most. Real ones nest a few levels (DDP around a compiled model); a
#: wrapper that wraps itself must not hang the capture.
MAX_DEPTH = 16


class Unwrapped(NamedTuple):
    """What :func:`unwrap` found inside the wrappers.

    Attributes
    ----------
    module : nn.Module
        The user's network: the module whose code runs.
    compiled : bool
        A ``torch.compile`` wrapper was on the way.
    """

    module: nn.Module
    compiled: bool


def is_compiled(module: nn.Module) -> bool:
    """Whether ``module`` is a ``torch.compile`` wrapper.

    Recognised by the module it keeps in ``_orig_mod`` rather than by its class, so that
    checking a model never imports dynamo (about a second).
    """
    return isinstance(getattr(module, "_orig_mod", None), nn.Module)


def unwrap(model: nn.Module) -> Unwrapped:
    """The user's network inside ``torch.compile``, DataParallel and DistributedDataParallel
    wrappers, and whether it was compiled.

    A compile wrapper is recognised by :func:`is_compiled`, which never imports dynamo.
    """
    compiled = False
    for _ in range(MAX_DEPTH):
        if is_compiled(model):
            compiled = True
            model = cast(nn.Module, model._orig_mod)
        elif isinstance(model, (DataParallel, DistributedDataParallel)):
            model = model.module
        else:
            break
    return Unwrapped(model, compiled)

