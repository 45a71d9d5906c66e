"""Capture of training iterations: hooks, clocks, and the ``profile_training`` session."""

from __future__ import annotations

from gpuperf_magics.capture.nesting import NestedProfileWarning
from gpuperf_magics.capture.session import ProfileSession, profile_training
from gpuperf_magics.capture.unsaved import (
    UnsavedRunWarning,
    check_store,
    unsaved_runs,
)

__all__ = [
    "NestedProfileWarning", "ProfileSession", "UnsavedRunWarning", "check_store",
    "profile_training", "unsaved_runs",
]
