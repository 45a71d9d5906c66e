"""Opening the SQLite file: its SQLAlchemy engine, schema checks and migrations, error messages.

Connections are opened per operation and always closed (SQLAlchemy's ``NullPool``), so a
:class:`~gpuperf_magics.store.Store` works the same from several threads, after ``fork`` and
from several processes at once. The driver connection is made here, not by SQLAlchemy, so that
the SQLite plumbing stays ours: autocommit mode with ``BEGIN IMMEDIATE`` sent explicitly (the
write lock taken up front, no deadlock between two readers upgrading), the busy timeout, and
immutable opening of a file in a read-only location.
"""

from __future__ import annotations

import os
import sqlite3
from functools import lru_cache
from pathlib import Path
from typing import Any

from gpuperf_magics.store import schema
from gpuperf_magics.store.errors import ANOTHER_STORE, StoreError, StoreVersionError


def create_private(path: Path) -> None:
    """Create the store file readable by its owner only, unless it exists.

    SQLite gives its ``-wal`` and ``-shm`` files the permissions of the database file, so the
    whole store stays private. A zero-byte file is an empty store (migrated on open).
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def open_connection(path: Path, *, immutable: bool = False) -> sqlite3.Connection:
    """A driver connection in autocommit mode: transactions are opened explicitly.

    Parameters
    ----------
    path : Path
        The store file (created by SQLite when missing; its folder must exist).
    immutable : bool
        Open read-only without locking, for a store in a read-only location: SQLite cannot
        read a WAL file there otherwise (it needs to create the ``-shm`` file).
    """
    target: str | Path = path.as_uri() + "?mode=ro&immutable=1" if immutable else path
    # isolation_level=None: the sqlite3 module then issues no implicit BEGIN, so BEGIN IMMEDIATE
    # is ours to send; the busy timeout is set per operation (PRAGMA busy_timeout).
    conn = sqlite3.connect(target, timeout=0.0, isolation_level=None, uri=immutable,
                           check_same_thread=False)
    try:
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn


@lru_cache(maxsize=64)
def engine(path: Path, immutable: bool = False) -> Any:
    """The SQLAlchemy engine of a store file (one per file and mode in a process: it keeps
    the compiled statements; it holds no connection between operations)."""
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    return sa.create_engine("sqlite://", creator=lambda: open_connection(path,
                            immutable=immutable), poolclass=NullPool)


def set_busy_timeout(conn: Any, timeout: float) -> None:
    """How long SQLite's busy handler waits for another writer's lock on ``conn`` (seconds).

    Sent on the driver connection itself: a pragma of the connection, outside any transaction
    and any statement SQLAlchemy needs to know of (and one SQLAlchemy execution less on every
    operation of the store).
    """
    conn.connection.driver_connection.execute(
        f"PRAGMA busy_timeout = {int(max(timeout, 0.0) * 1000)}")


def is_busy(exc: BaseException) -> bool:
    """The error is another connection holding a lock: retrying may succeed."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and (
        "database is locked" in text or "database table is locked" in text or "busy" in text
    )


def is_read_only(exc: BaseException) -> bool:
    """The file or its folder cannot be written (SQLite's "readonly database")."""
    return isinstance(exc, sqlite3.OperationalError) and "readonly database" in str(exc).lower()


def _inspect(conn: Any) -> tuple[int, int, set[str]]:
    """(application_id, user_version, table names) read in one consistent snapshot."""
    app_id = conn.exec_driver_sql("PRAGMA application_id").scalar()
    version = conn.exec_driver_sql("PRAGMA user_version").scalar()
    tables = set(conn.exec_driver_sql(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
    ).scalars())
    return int(app_id), int(version), tables


def _damaged(path: Path, what: str) -> StoreError:
    return StoreError(
        f"the store {path} is damaged: {what}. Nothing was changed. Restore it from a backup "
        f"or a synced copy (gpuperf sync), or move it aside (rename it to {path.name}.broken) "
        f"and a new store will be created there; or {ANOTHER_STORE}.",
        path=str(path),
    )


def _check(path: Path, app_id: int, version: int, tables: set[str],
           revision: bool | None = None) -> None:
    latest = schema.LATEST_VERSION
    if version < 0:
        raise _damaged(path, f"its schema version is {version}, which no store has")
    if app_id == schema.APPLICATION_ID and version == 0 and tables:
        raise _damaged(path, "its schema version was reset to 0 although it holds tables "
                       f"({', '.join(sorted(tables))})")
    if app_id not in (0, schema.APPLICATION_ID) or (app_id == 0 and tables and version == 0):
        raise StoreError(
            f"{path} is an SQLite database of another program, not a gpuperf_magics store; "
            f"it was left untouched; {ANOTHER_STORE}.",
            path=str(path),
        )
    if version > latest:
        raise StoreVersionError(
            f"the store {path} was written by a newer gpuperf-magics (schema version "
            f"{version}; this version reads up to {latest}). Upgrade the package: "
            f"pip install -U gpuperf-magics (or {ANOTHER_STORE}).",
            path=str(path),
        )
    if version:
        missing = [t for t in schema.REQUIRED_TABLES if t not in tables]
        if missing:
            raise _damaged(path, f"table{'s' if len(missing) > 1 else ''} "
                           f"{', '.join(missing)} {'are' if len(missing) > 1 else 'is'} missing")
        if revision is False:
            raise _damaged(path, "the revision row of its meta table is missing")


def ensure_schema(conn: Any, path: Path, *, read_only: bool = False) -> int:
    """Check that the file is a store this version can use; create or migrate it if needed.

    An empty (new or zero-byte) file is brought to the latest schema; a file of another
    program or of a newer gpuperf-magics raises :class:`StoreError` without being modified.
    Safe when several processes open a new store at the same moment: the migration runs in a
    ``BEGIN IMMEDIATE`` transaction and re-reads the version once it holds the lock. Alembic
    is imported only when the schema is behind. Returns the version the file had (0 for a
    new store), before any migration.
    """
    conn.exec_driver_sql("BEGIN")
    try:
        app_id, version, tables = _inspect(conn)
        revision = None
        if "meta" in tables:
            revision = conn.exec_driver_sql(
                "SELECT 1 FROM meta WHERE key = 'revision'").first() is not None
    finally:
        conn.rollback()
    _check(path, app_id, version, tables, revision)
    if read_only:
        if version < schema.LATEST_VERSION:
            raise StoreError(
                f"the store {path} has an older schema (version {version}) and is in a "
                "read-only location, so it cannot be upgraded. Open it once where it can be "
                f"written (or copy it), or {ANOTHER_STORE}.",
                path=str(path),
            )
        return version
    found = version
    if version < schema.LATEST_VERSION:
        conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            app_id, version, tables = _inspect(conn)
            _check(path, app_id, version, tables)
            found = version  # another process may have migrated it meanwhile
            if version < schema.LATEST_VERSION:
                _upgrade(conn, path, version)
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
    mode = conn.exec_driver_sql("PRAGMA journal_mode").scalar()
    if str(mode).lower() != "wal":
        # WAL lets readers work while one process writes. It is a property of the file, so
        # this runs once per file; a filesystem without shared memory keeps its own mode.
        conn.exec_driver_sql("PRAGMA journal_mode = WAL")
    conn.commit()
    return found


def _upgrade(conn: Any, path: Path, version: int) -> None:
    """Migrate from ``version``; a step that finds its columns or tables already there means
    the version was tampered with (``PRAGMA user_version = 1`` on a newer file): damaged, and
    the caller's rollback leaves the file as it was."""
    from gpuperf_magics.store import migrations

    try:
        migrations.upgrade(conn, version)
    except Exception as exc:
        detail = str(getattr(exc, "orig", None) or exc).split("\n")[0]
        if "duplicate column" in detail.lower() or "already exists" in detail.lower():
            raise _damaged(path, f"its schema version says {version}, but its tables already "
                           f"hold what a later version adds ({detail})") from None
        raise


_DAMAGED = ("not a database", "malformed", "disk image", "file is encrypted", "corrupt")
_READONLY = ("readonly", "read-only", "unable to open", "permission", "access")


def translate(exc: BaseException, path: Path, action: str, timeout: float) -> StoreError:
    """A :class:`StoreError` that says what failed and what to do, for a sqlite3/OS error.

    Parameters
    ----------
    exc : BaseException
        The ``sqlite3.Error`` or ``OSError`` raised (SQLAlchemy's wrapper already taken off).
    path : Path
        The store file.
    action : str
        What was being done, e.g. ``"save the run"``.
    timeout : float
        The store's lock timeout, quoted when the file stayed locked.
    """
    if isinstance(exc, StoreError):
        return exc
    detail = str(exc) or type(exc).__name__
    text = detail.lower()
    if isinstance(exc, (sqlite3.ProgrammingError, sqlite3.InterfaceError, sqlite3.IntegrityError)):
        # Not the file's fault: say so, but still as a StoreError so callers keep the run.
        message = (
            f"could not {action} in the store {path}: internal error of gpuperf_magics "
            f"({type(exc).__name__}: {detail}); please report it. The file itself is fine."
        )
    elif is_busy(exc):
        message = (
            f"could not {action}: the store {path} stayed locked by another process for "
            f"{timeout:g} s ({detail}). Retry when the other notebook or script has finished "
            f"writing, raise Store(..., timeout=...), or {ANOTHER_STORE}."
        )
    elif isinstance(exc, sqlite3.DatabaseError) and any(word in text for word in _DAMAGED):
        message = (
            f"could not {action}: {path} is not a readable gpuperf_magics store ({detail}). "
            f"Move the file aside (e.g. rename it to {path.name}.broken) and a new store will be "
            f"created there, or {ANOTHER_STORE}."
        )
    elif "no such table" in text or "no such column" in text:
        return _damaged(path, f"{detail} (while trying to {action})")
    elif "full" in text:
        message = (
            f"could not {action}: no space left for the store {path} ({detail}). Free disk "
            f"space or {ANOTHER_STORE}."
        )
    elif isinstance(exc, OSError) or any(word in text for word in _READONLY):
        message = (
            f"could not {action}: the store {path} cannot be opened or written ({detail}). "
            f"Check that its folder exists and is writable, or {ANOTHER_STORE}."
        )
    else:
        message = (
            f"could not {action} in the store {path}: {detail}. Retry, or {ANOTHER_STORE}."
        )
    return StoreError(message, path=str(path), cause=exc)
