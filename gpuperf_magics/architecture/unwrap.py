"""Unwrapping ``torch.compile`` wrappers and (Distributed)DataParallel to the module that runs."""

from __future__ import annotations

import sys
from typing import cast

from torch import nn
from torch.nn.parallel import DataParallel, DistributedDataParallel


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
