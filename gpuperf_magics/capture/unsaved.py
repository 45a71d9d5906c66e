"""Runs measured but not saved: where they are kept, and how a script is told.

A run whose store write failed (a folder, an unwritable or locked file, a read-only role, a
Ctrl-C during the write) must not be lost with no word: it stays in :data:`UNSAVED` for the
life of the process (:func:`unsaved_runs`), its note says why, and a script, which has no cell
line to show the note, gets an :class:`UnsavedRunWarning`. :func:`check_store` is the read the
magic and ``profile_training`` make before the training, so that most such stores are said
before anything is measured.
"""

from __future__ import annotations

import warnings
from typing import Any

from gpuperf_magics.run import Run

__all__ = ["UNSAVED", "UnsavedRunWarning", "check_store", "forget", "keep", "unsaved_runs",
           "warn_unsaved"]

#: Runs measured but not saved (store unwritable): kept for the life of the process.
UNSAVED: list[Run] = []


class UnsavedRunWarning(UserWarning):
    """A profiled run could not be written to its store; it is kept in memory.

    A script has no cell line to show the run's note: this warning says where the run is
    (:func:`unsaved_runs`) and how to save it (``run.save(...)``) before the process ends and
    the run with it. ``%%profile_training`` shows the note on its line instead.
    """


def check_store(store: Any) -> None:
    """Check ``store`` as ``%%profile_training`` does before its cell trains.

    A folder, a corrupt or foreign file, a newer store or an unreachable server raises
    :class:`~gpuperf_magics.store.StoreError` (a ``ValueError`` for a malformed location)
    before the training, not after it; so does a store file that cannot be written (a
    read-only file or folder, a path under a regular file). A missing file is fine: the
    first save creates it.
    """
    from pathlib import Path

    from gpuperf_magics.store import Store, StoreError
    from gpuperf_magics.store.errors import ANOTHER_STORE
    from gpuperf_magics.store.paths import write_problem

    opened = Store(store)
    opened.revision()
    if opened.kind != "sqlite":
        return  # a server's rights show only on a write: a failed save is kept and warned
    problem = write_problem(Path(opened.path))
    if problem:
        raise StoreError(f"the run could not be saved to the store {opened.path}: {problem}. "
                         f"Make it writable, or {ANOTHER_STORE}.", path=str(opened.path))


def unsaved_runs() -> list[Run]:
    """Runs whose store write failed in this process; save them with ``run.save(path)``."""
    return [r for r in UNSAVED if r.run_id is None]


def keep(run: Run) -> None:
    """Keep ``run`` until it is saved (once: a run is kept by identity)."""
    if not any(r is run for r in UNSAVED):
        UNSAVED.append(run)


def forget(run: Run) -> None:
    """``run`` is saved (or another process saves it): no longer kept here."""
    UNSAVED[:] = [r for r in UNSAVED if r is not run]


def warn_unsaved(run: Run, store: Any, why: str) -> None:
    """Say in a script that the run is not saved, why, where it is kept and how to save it
    (the warning points at the user's ``with`` line: warn ← _save ← _finish ← stop ←
    __exit__)."""
    where = str(getattr(store, "path", store)) if store is not None else "the default store"
    warnings.warn(UnsavedRunWarning(
        f"the run of {run.network!r} was not saved to {where}: {why} It is kept in memory in "
        "this process only: gpuperf_magics.capture.unsaved_runs() lists it; fix the store and "
        "call run.save(), or run.save('other.sqlite')."
    ), stacklevel=6)
