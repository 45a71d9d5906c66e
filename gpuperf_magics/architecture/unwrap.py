"""Unwrapping ``torch.compile`` wrappers and (Distributed)DataParallel to the module that runs."""

from __future__ import annotations

import sys
from typing import NamedTuple

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


def unwrap(model: nn.Module) -> Unwrapped:
    """The user's network inside ``torch.compile``, DataParallel and DistributedDataParallel
    wrappers, and whether it was compiled.

    A compile wrapper is recognised by the module it keeps in ``_orig_mod`` rather than by
    its class, so that checking a model never imports dynamo (about a second).
    """
    compiled = False
    for _ in range(MAX_DEPTH):
        inner = getattr(model, "_orig_mod", None)
        if isinstance(inner, nn.Module):
            compiled = True
            model = inner
        elif isinstance(model, (DataParallel, DistributedDataParallel)):
            model = model.module
        else:
            break
    return Unwrapped(model, compiled)


def _optimized_module_class() -> type[nn.Module] | None:
    """``torch.compile``'s wrapper class, or None when dynamo was never imported.

    Without dynamo nothing can be compiled, and importing it here would cost about a second.
    """
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    return getattr(eval_frame, "OptimizedModule", None)
