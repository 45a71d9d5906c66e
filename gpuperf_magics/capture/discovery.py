"""Which module is the model: the training calls seen before the first optimizer step, and
the choice among them once an optimizer steps (or once one module was called often enough).

The recorder's global hooks note each outermost training call as a :class:`Candidate`; at the
first step :func:`choose_model` picks the module that owns most of the stepping optimizer's
parameters. Nothing here is on the per-iteration path: discovery ends at the first step.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from torch import nn

#: Top-level calls of one module seen before any optimizer step, after which it is adopted
#: as the model even though nothing stepped yet (manual SGD loops, custom optimizers).
ADOPT_AFTER_CALLS = 8


@dataclass(slots=True)
class Candidate:
    """A module seen as the outermost training call before the first optimizer step."""

    module: nn.Module
    calls: int
    example: tuple[tuple[Any, ...], dict[str, Any]]  # the inputs of a call: (args, kwargs)
    autocast: bool
    from_eval: bool  # the example came from an eval() call


def choose_model(optimizer: Any, candidates: Iterable[Candidate],
                 current: nn.Module | None) -> nn.Module | None:
    """The candidate owning most of ``optimizer``'s parameters; without one, and while no
    model is known (``current``), the candidate called most; else None."""
    candidates = list(candidates)
    owned = {id(p) for g in optimizer.param_groups for p in g["params"]}
    best, best_overlap = None, 0
    for seen in candidates:
        overlap = sum(1 for p in seen.module.parameters() if id(p) in owned)
        if overlap > best_overlap:
            best, best_overlap = seen.module, overlap
    if best is None and current is None and candidates:
        best = max(candidates, key=lambda c: c.calls).module
    return best
