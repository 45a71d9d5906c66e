"""The store's SQL schema and its migrations.

The schema version is SQLite's ``PRAGMA user_version``; ``PRAGMA application_id`` marks the file
as a gpuperf_magics store so that another program's database is never modified. Each release
that changes the schema appends one :class:`Migration` to :data:`MIGRATIONS`; never edit a step
that has been released, because files in the wild have already run it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "Migration",
    "latest_version",
    "migrate",
]

#: ``PRAGMA application_id`` of store files: the bytes "gpmg".
APPLICATION_ID = int.from_bytes(b"gpmg", "big")


@dataclass(frozen=True)
class Migration:
    """One step of the schema: brings a file from ``version - 1`` to ``version``.

    Attributes
    ----------
    version : int
        The schema version after the step.
    description : str
        What the step changes, for humans reading the history.
    apply : callable
        ``apply(conn)`` runs inside the caller's write transaction; it must not commit
        (so no ``executescript``, which commits first).
    """

    version: int
    description: str
    apply: Callable[[sqlite3.Connection], None]


def _statements(*sql: str) -> Callable[[sqlite3.Connection], None]:
    def apply(conn: sqlite3.Connection) -> None:
        for statement in sql:
            conn.execute(statement)

    return apply


def _v1_meta(conn: sqlite3.Connection) -> None:
    from gpuperf_magics import __version__

    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    conn.executemany(
        "INSERT INTO meta (key, value) VALUES (?, ?)",
        [("revision", 0), ("created_at", now), ("created_by", f"gpuperf-magics {__version__}")],
    )


def _v1(conn: sqlite3.Connection) -> None:
    _statements(
        # `value` has no declared type, so the revision counter stays an INTEGER.
        "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value)",
        """CREATE TABLE hardware (
            id INTEGER PRIMARY KEY,
            fingerprint TEXT NOT NULL UNIQUE,
            gpu_name TEXT,
            cpu_model TEXT,
            info TEXT NOT NULL
        )""",
        # AUTOINCREMENT: ids of deleted runs are never handed out again, because notebooks and
        # reports cite run ids.
        """CREATE TABLE runs (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at TEXT NOT NULL,
            network TEXT NOT NULL,
            batch_size INTEGER,
            iterations INTEGER NOT NULL,
            time_s REAL NOT NULL,
            status TEXT NOT NULL,
            source TEXT NOT NULL,
            gpu TEXT,
            gpu_count INTEGER NOT NULL DEFAULT 0,
            device TEXT,
            hardware_id INTEGER REFERENCES hardware (id),
            it_median_s REAL,
            it_p90_s REAL,
            it_mean_s REAL,
            it_std_s REAL,
            samples_per_s REAL,
            warmup_iterations INTEGER,
            recorded_iterations INTEGER,
            error TEXT,
            arch TEXT NOT NULL DEFAULT '{}',
            hyper TEXT NOT NULL DEFAULT '{}',
            quality TEXT NOT NULL DEFAULT '{}',
            tags TEXT NOT NULL DEFAULT '{}',
            features TEXT NOT NULL DEFAULT '{}',
            notes TEXT NOT NULL DEFAULT '[]'
        )""",
        "CREATE INDEX runs_network ON runs (network)",
        "CREATE INDEX runs_created_at ON runs (created_at)",
        "CREATE INDEX runs_hardware_id ON runs (hardware_id)",
        """CREATE TABLE iterations (
            run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
            idx INTEGER NOT NULL,
            duration_s REAL NOT NULL,
            samples INTEGER,
            warmup INTEGER NOT NULL DEFAULT 0,
            skipped_step INTEGER NOT NULL DEFAULT 0,
            micro_batches INTEGER,
            phases TEXT,
            PRIMARY KEY (run_id, idx)
        ) WITHOUT ROWID""",
    )(conn)
    _v1_meta(conn)


#: Every schema step since the first release, in order; ``MIGRATIONS[i].version == i + 1``.
MIGRATIONS: list[Migration] = [
    Migration(1, "meta, hardware, runs and iterations tables", _v1),
]


def latest_version() -> int:
    """The schema version this release writes (the last migration's)."""
    return MIGRATIONS[-1].version if MIGRATIONS else 0


def migrate(conn: sqlite3.Connection, current: int) -> int:
    """Run the steps after ``current`` inside the open write transaction.

    Parameters
    ----------
    conn : sqlite3.Connection
        A connection holding a ``BEGIN IMMEDIATE`` transaction; the caller commits.
    current : int
        The file's ``user_version``.

    Returns
    -------
    int
        The version the file has once the caller commits.
    """
    version = current
    for step in MIGRATIONS:
        if step.version <= current:
            continue
        step.apply(conn)
        version = step.version
        # PRAGMA takes no parameters; the value is an int from our own table.
        conn.execute(f"PRAGMA user_version = {int(version)}")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    return version
