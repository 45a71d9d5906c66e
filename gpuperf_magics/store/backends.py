"""Running one unit of work in one transaction, on an SQLite file or a PostgreSQL server.

Both backends hand ``work(conn)`` a connection with the same small API (``execute`` and
``executemany`` with ``?`` placeholders, ``dialect``), retry while another writer holds a lock
(for at most the store's timeout), check the schema once per :class:`~gpuperf_magics.store.Store`
and translate every driver error into a :class:`~gpuperf_magics.store.StoreError`.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpuperf_magics.store.connection import (
    create_private,
    ensure_schema,
    is_busy,
    is_read_only,
    open_connection,
    translate,
)
from gpuperf_magics.store.errors import ANOTHER_STORE, StoreError
from gpuperf_magics.store.location import Location
from gpuperf_magics.store.paths import STORE_FILENAME, user_data_dir

T = TypeVar("T")


class SqliteBackend:
    """An SQLite file: WAL journal, ``BEGIN IMMEDIATE`` writes, the busy handler's timeout."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.ready = False  # schema checked (and migrated) by this Store

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
            return missing()
        deadline = time.monotonic() + timeout
        delay = 0.005
        schema_retry = True
        immutable = False
        while True:
            try:
                return self._attempt(work, write=write, snapshot=snapshot, deadline=deadline,
                                     immutable=immutable)
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

    def _attempt(self, work: Callable[[Any], T], *, write: bool, snapshot: bool,
                 deadline: float, immutable: bool = False) -> T:
        path = self.path
        if write:
            if not path.parent.exists():
                path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if path.parent == user_data_dir():
                # The default folder holds every run of the user: theirs alone.
                with contextlib.suppress(OSError):
                    path.parent.chmod(0o700)
            create_private(path)
        # The busy handler waits at most what is left of this Store's timeout (a lock held
        # longer than that is an error, not a hang).
        conn = open_connection(path, max(deadline - time.monotonic(), 0.0), immutable=immutable)
        try:
            if immutable:
                ensure_schema(conn, path, read_only=True)
            elif not self.ready:
                ensure_schema(conn, path)
                self.ready = True
            if write or snapshot:
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                result = work(conn)
                if conn.in_transaction:
                    conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    # The original error says more than a failed rollback would.
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
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

        psycopg = pg._driver()
        location = self.location
        deadline = time.monotonic() + timeout
        delay = 0.01
        while True:
            try:
                conn = pg.connect(location, max(deadline - time.monotonic(), 0.0))
            except Exception as exc:
                raise pg.translate(exc, location, action, timeout) from None
            try:
                if not self.ready:
                    pg.ensure_schema(conn, location)
                    self.ready = True
                if write:
                    conn.execute("BEGIN")
                    wait_ms = max(int((deadline - time.monotonic()) * 1000), 1)
                    conn.execute(f"SET LOCAL lock_timeout = {wait_ms}")
                elif snapshot:
                    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                result = work(conn)
                if conn.in_transaction:
                    conn.execute("COMMIT")
                return result
            except psycopg.Error as exc:
                _rollback(conn)
                kind = pg.kind_of(exc)
                if kind == "retry" and time.monotonic() < deadline:
                    time.sleep(delay * random.uniform(0.5, 1.5))
                    delay = min(delay * 2, 0.25)
                    continue
                if kind == "damaged":
                    self.ready = False
                raise pg.translate(exc, location, action, timeout) from None
            except BaseException:
                _rollback(conn)
                raise
            finally:
                with contextlib.suppress(Exception):
                    conn.close()


def _rollback(conn: Any) -> None:
    with contextlib.suppress(Exception):
        if conn.in_transaction:
            conn.execute("ROLLBACK")
