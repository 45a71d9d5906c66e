"""Exceptions of the store: any failure of the SQLite file or the server is a StoreError."""

from __future__ import annotations

from typing import Any, Literal

from gpuperf_magics.store.paths import ENV_VAR

__all__ = [
    "ANOTHER_STORE",
    "CorruptRow",
    "ImportValidationError",
    "RunNotFoundError",
    "StoreError",
    "StoreNotFoundError",
    "StoreVersionError",
]

#: How to point the package at another store; appended to messages that ask for one.
ANOTHER_STORE = (
    "use another store: Store(PATH_OR_URL), --store PATH_OR_URL, %config GpuPerf.store = "
    "PATH_OR_URL, or the GPUPERF_STORE environment variable"
)


#: Where a store's path came from, for :class:`StoreNotFoundError`.
StoreOrigin = Literal["given", "env", "default"]


class StoreError(RuntimeError):
    """The store file cannot be opened, read or written (damaged, locked, read-only, ...).

    Attributes
    ----------
    path : str or None
        The store file concerned.
    run : Run or None
        The :class:`~gpuperf_magics.run.Run` that could not be saved (``save_run``), so a
        caller can keep it in memory. Typed loosely on purpose: an error of the store need
        not know the record types that are stored.
    cause : Exception or None
        The underlying ``sqlite3``/``psycopg``/``OSError`` exception, kept for debugging; it
        is not chained so that notebooks show one clear line instead of a driver traceback.
    kind : str
        For a server store: ``unreachable``, ``denied`` (a read-only role), ``locked``,
        ``damaged``, ``retry`` or ``other``; empty otherwise.
    fallback : str or None
        Where ``save_run`` kept a copy of the run when the server went away.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        run: Any = None,
        cause: BaseException | None = None,
    ) -> None:
        super().__init__(message)
        self.path = path
        self.run = run
        self.cause = cause
        self.kind = ""
        self.fallback: str | None = None


class StoreNotFoundError(StoreError):
    """A store file that a reading command was pointed at does not exist.

    ``Store(path)`` reads a missing file as an empty store (it is created by the first
    write); ``Store(path, must_exist=True)`` raises this instead, so that a mistyped path is
    named as such rather than answered with "no runs".

    The message tells how to name another store (and, for the default store, how to put the
    first runs into it) in the words of the interface the path came through (``Store(path)``);
    the command line and the magics say it their way with :meth:`reworded`.

    Attributes
    ----------
    origin : str
        Where the path came from: ``"given"`` (by the caller), ``"env"`` (``$GPUPERF_STORE``)
        or ``"default"`` (the per-user store).
    """

    def __init__(self, message: str, *, path: str | None = None,
                 origin: StoreOrigin = "given") -> None:
        super().__init__(message, path=path)
        self.origin: StoreOrigin = origin

    @classmethod
    def for_path(cls, path: str, origin: StoreOrigin = "given",
                 how: str = "Store(path)") -> StoreNotFoundError:
        """The error for the missing store ``path``; ``how`` names another store in the
        caller's interface (e.g. ``"--store PATH"``), and so says in whose words to tell how
        the default store gets its first runs."""
        if origin == "default":
            note = " (the default store)"
            hint = f"nothing has been profiled or imported into it yet: {_first_runs(how)}; or"
        else:
            note = f" (from ${ENV_VAR})" if origin == "env" else ""
            hint = "check the path (a store is created by the first run saved to it), or"
        return cls(f"no store at {path}{note}: the file does not exist; {hint} name another "
                   f"store with {how}.", path=path, origin=origin)

    def reworded(self, how: str) -> StoreNotFoundError:
        """This error, naming another store with ``how`` (how the caller's interface takes a
        store) instead of ``Store(path)``."""
        return self.for_path(self.path or "", self.origin, how)


def _first_runs(how: str) -> str:
    """How the interface that names a store with ``how`` puts the first runs into one."""
    if "%config" in how:  # a magic
        return "profile a cell with %%profile_training"
    if how.startswith("Store("):  # Python
        return ("profile training with gm.profile_training or import a table with "
                "Store.import_table")
    return "import a table with gpuperf import"  # the command line


class StoreVersionError(StoreError):
    """The file was written by a newer gpuperf-magics, with a schema this version cannot read."""


class RunNotFoundError(KeyError):
    """No run with the given id in the store."""

    def __init__(self, run_id: Any, path: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id
        self.path = path

    def __str__(self) -> str:
        return (
            f"no run with id {self.run_id!r} in the store {self.path}; "
            "Store.runs() lists the ids (column run_id)"
        )


class ImportValidationError(ValueError):
    """An imported table has invalid cells; nothing of it was written.

    Attributes
    ----------
    problems : list of str
        One line per problem: the column, what is wrong and the rows concerned.
    """

    def __init__(self, message: str, problems: list[str]) -> None:
        super().__init__(message)
        self.problems = problems


class CorruptRow(ValueError):
    """A stored value that cannot be what its column holds (a tampered or damaged store);
    the store reports it as a :class:`StoreError` naming the run."""
