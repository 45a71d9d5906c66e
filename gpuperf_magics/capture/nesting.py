"""One profiled block at a time: an inner ``profile_training`` is ignored, with a word.

The hooks that find iterations are the process's (torch's global optimizer and module hooks),
so a ``profile_training`` block inside another one (a script's ``with`` in a function called
from a ``%%profile_training`` cell, or two nested cells) would count each step in both and
save it twice. The inner block is *ignored*, not refused: refusing would raise inside the
outer block and end the very training it profiles, while ignoring loses nothing (the outer
run holds every step, once). The inner ``Run`` stays empty and says why in a note, and a
:class:`NestedProfileWarning` points at the inner ``with`` line.
"""

from __future__ import annotations

import warnings
from typing import Any

from gpuperf_magics.run import Run

__all__ = ["NOTE", "NestedProfileWarning", "enter", "hold", "leave"]

#: The note of an ignored inner block's run (and its warning's text).
NOTE = ("not profiled on its own: this block runs inside another profile_training block (or "
        "%%profile_training cell), whose run counts these iterations once; nothing was stored "
        "for this one. Profile one level only")

#: The block profiling now, if any.
_ACTIVE: list[Any] = []


class NestedProfileWarning(UserWarning):
    """A ``profile_training`` block (or ``%%profile_training`` cell) inside another one: the
    inner one is not profiled (see :mod:`gpuperf_magics.capture.nesting`)."""


def enter(session: Any, run: Run) -> bool:
    """Whether ``session`` may profile (no other block is profiling); if not, ``run`` gets
    the note and the warning points at the ``with`` line (warn ← enter ← __enter__ ←
    the user's code)."""
    if not any(s is not session for s in _ACTIVE):
        return True
    run.notes.append(NOTE)
    warnings.warn(NestedProfileWarning(NOTE), stacklevel=3)
    return False


def hold(session: Any) -> None:
    """``session`` has started profiling: blocks from now on are inner ones."""
    _ACTIVE.append(session)


def leave(session: Any) -> None:
    """``session`` stopped profiling (twice is fine)."""
    _ACTIVE[:] = [s for s in _ACTIVE if s is not session]
