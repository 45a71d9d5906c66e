"""Running one unit of work in one transaction, on an SQLite file or a PostgreSQL server.

Both backends hand ``work(conn)`` an SQLAlchemy connection (``conn.dialect.name`` says which
database it is), retry while another writer holds a lock (for at most the store's timeout),
check the schema once per :class:`~gpuperf_magics.store.Store` and translate every driver
error into a :class:`~gpuperf_magics.store.StoreError`. SQLAlchemy is imported by the first
unit of work, not before.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpuperf_magics.store.connection import (
    create_private,
    engine,
    ensure_schema,
    is_busy,
    is_read_only,
    set_busy_timeout,
    translate,
)
from gpuperf_magics.store.errors import ANOTHER_STORE, StoreError
from gpuperf_magics.store.location import Location
from gpuperf_magics.store.paths import STORE_FILENAME, user_data_dir

log = logging.getLogger(__name__)
T = TypeVar("T")


def _driver_error(exc: BaseException) -> BaseException:
    """The driver's exception inside SQLAlchemy's wrapper (``exc`` itself when unwrapped)."""
    orig = getattr(exc, "orig", None)
    return orig if isinstance(orig, BaseException) else exc


class SqliteBackend:
    """An SQLite file: WAL journal, ``BEGIN IMMEDIATE`` writes, the busy handler's timeout."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ready = False  # schema checked (and migrated) by this Store
        self.found_version = 0  # the schema version the last check found (before migrating)

    def exists(self) -> bool:
        return self.path.exists()

    def run(self, work: Callable[[Any], T], *, write: bool, action: str, timeout: float,
            missing: Callable[[], T] | None = None, snapshot: bool = True) -> T:
        path = self.path
        if path.is_dir():
            raise StoreError(
                f"could not {action}: {path} is a folder, not a store file. Give a file "
                f"path such as {path / STORE_FILENAME}, or {ANOTHER_STORE}.",
                path=str(path),
            )
        if not write and missing is not None and not path.exists():
            return missing()  # reading creates nothing
        import sqlalchemy as sa  # after that: a read of a missing store never imports it

        deadline = time.monotonic() + timeout
        delay = 0.01
        immutable = False
        schema_retry = True
        while True:
            try:
                try:
                    return self._attempt(work, write=write, snapshot=snapshot,
                                         deadline=deadline, immutable=immutable)
                except sa.exc.DBAPIError as wrapped:
                    raise _driver_error(wrapped) from None
            except sqlite3.OperationalError as exc:
                if not write and not immutable and is_read_only(exc):
                    # A store on a read-only share or folder: read it as an immutable file.
                    immutable = True
                    continue
                if is_busy(exc) and time.monotonic() < deadline:
                    # Jitter, so that processes that collided do not collide again.
                    pause = min(delay, max(deadline - time.monotonic(), 0.0))
                    time.sleep(pause * random.uniform(0.5, 1.5))
                    delay = min(delay * 2, 0.25)
                    continue
                if "no such table" in str(exc) and schema_retry:
                    # The file was replaced since this Store checked it: check again.
                    schema_retry = False
                    self.ready = False
                    continue
                raise translate(exc, path, action, timeout) from None
            except (sqlite3.Error, OSError) as exc:
                raise translate(exc, path, action, timeout) from None

    def _prepare(self) -> None:
        """The folder and the private file of a store about to be written."""
        path = self.path
        if not path.parent.exists():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.parent == user_data_dir():
            # The default folder holds every run of the user: theirs alone.
            try:
                path.parent.chmod(0o700)
            except OSError as exc:
                log.debug("could not make %s private: %s", path.parent, exc)
        create_private(path)

    def _attempt(self, work: Callable[[Any], T], *, write: bool, snapshot: bool,
                 deadline: float, immutable: bool = False) -> T:
        path = self.path
        if write:
            self._prepare()
        conn = engine(path, immutable).connect()
        try:
            # The busy handler waits at most what is left of this Store's timeout (a lock held
            # longer than that is an error, not a hang).
            set_busy_timeout(conn, deadline - time.monotonic())
            if immutable:
                ensure_schema(conn, path, read_only=True)
            elif not self.ready:
                self.found_version = ensure_schema(conn, path)
                self.ready = True
            if write or snapshot:
                conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = work(conn)
                conn.commit()
            except BaseException:
                _rollback(conn)  # the original error says more than a failed rollback would
                raise
            return result
        finally:
            conn.close()


class PostgresBackend:
    """A PostgreSQL database: a connection per call, ``lock_timeout`` from the store's timeout,
    transactions retried on serialization failures, deadlocks and uid races."""

    def __init__(self, location: Location) -> None:
        self.location = location
        self.ready = False

    def exists(self) -> bool:
        return True

    def run(self, work: Callable[[Any], T], *, write: bool, action: str, timeout: float,
            missing: Callable[[], T] | None = None, snapshot: bool = True) -> T:
        from gpuperf_magics.store import postgres as pg

        errors = pg.driver_errors()
        location = self.location
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            try:
                conn = pg.connect(location, max(deadline - time.monotonic(), 0.0))
            except errors as exc:
                raise pg.translate(exc, location, action, timeout) from None
            try:
                return self._attempt(conn, work, write=write, snapshot=snapshot,
                                     deadline=deadline)
            except errors as exc:
                kind = pg.kind_of(exc)
                if kind == "retry" and time.monotonic() < deadline:
                    time.sleep(delay * random.uniform(0.5, 1.5))
                    delay = min(delay * 2, 0.25)
                    continue
                if kind == "damaged":
                    self.ready = False
                raise pg.translate(exc, location, action, timeout) from None
            finally:
                _close(conn)

    def _attempt(self, conn: Any, work: Callable[[Any], T], *, write: bool, snapshot: bool,
                 deadline: float) -> T:
        from gpuperf_magics.store import postgres as pg

        try:
            if not self.ready:
                pg.ensure_schema(conn, self.location)
                conn.rollback()  # the check's transaction; the work gets a fresh one
                self.ready = True
            if write:
                wait_ms = max(int((deadline - time.monotonic()) * 1000), 1)
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = {wait_ms}")
            elif snapshot:
                conn.exec_driver_sql(
                    "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            result = work(conn)
            conn.commit()
            return result
        except BaseException:
            _rollback(conn)
            raise


def _rollback(conn: Any) -> None:
    """Roll back after a failure; a connection the server dropped (or a file that went away)
    cannot, and is closed next."""
    try:
        conn.rollback()
    except Exception as exc:  # the connection is gone: nothing is left to roll back
        log.debug("rollback after a failure failed too: %s", exc)


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception as exc:  # a connection the server dropped: closed already
        log.debug("closing a server connection failed: %s", exc)
