"""Copying runs between two stores (SQLite or PostgreSQL, either way), recognised by run_uid.

Sync only adds: a run the destination already holds (same ``run_uid``) is left as it is, and
nothing is ever deleted or overwritten in either store. Each batch is one write transaction in
the destination, so an interrupted sync leaves whole runs and the next one continues.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from gpuperf_magics.store.rows import ITERATION_FIELDS, WRITTEN_COLUMNS, chunked

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.store.reader import StoreReader


@dataclass(frozen=True)
class SyncResult:
    """What :meth:`Store.sync_to` did.

    Attributes
    ----------
    copied : int
        Runs added to the destination.
    already : int
        Runs the destination had already (same ``run_uid``): left as they were.
    source, destination : str
        The two stores (passwords masked).
    """

    copied: int
    already: int
    source: str
    destination: str

    def __str__(self) -> str:
        return (f"synced {self.source} -> {self.destination}: {self.copied} run(s) copied, "
                f"{self.already} already there (sync adds runs; it never deletes or "
                "overwrites)")


@lru_cache(maxsize=2)
def _statements(array: bool = False) -> tuple[Any, Any]:
    """(the runs to copy with their hardware JSON, their iterations): an expanding ``ids``
    each, or with ``array`` one PostgreSQL array parameter (``= ANY(:ids)``: psycopg
    re-rendered an expanding ``IN`` of 900 ids on every call, about a fifth of a sync from a
    server), built once (SQLAlchemy is imported by the first sync, not with this module).

    A run comes back as its id, its :data:`~gpuperf_magics.store.rows.WRITTEN_COLUMNS`
    values (in the order the destination writes them; its ``hardware_id`` is the source's,
    replaced there) and its hardware JSON: the row is written as it is read.
    """
    import sqlalchemy as sa

    from gpuperf_magics.store.tables import hardware, iterations, runs

    if array:
        from sqlalchemy.dialects.postgresql import ARRAY

        wanted: Any = sa.bindparam("ids", type_=ARRAY(sa.BigInteger))
        run_ok, its_ok = runs.c.id == sa.any_(wanted), iterations.c.run_id == sa.any_(wanted)
    else:
        ids: Any = sa.bindparam("ids", expanding=True)
        run_ok, its_ok = runs.c.id.in_(ids), iterations.c.run_id.in_(ids)
    columns = [runs.c.id, *(runs.c[n] for n in WRITTEN_COLUMNS), hardware.c.info]
    runs_in = (sa.select(*columns)
               .select_from(runs.outerjoin(hardware, hardware.c.id == runs.c.hardware_id))
               .where(run_ok).order_by(runs.c.id))
    iterations_in = (sa.select(iterations.c.run_id, *(iterations.c[n] for n in ITERATION_FIELDS))
                     .where(its_ok).order_by(iterations.c.run_id, iterations.c.idx))
    return runs_in, iterations_in


@lru_cache(maxsize=1)
def _select_uids() -> Any:
    import sqlalchemy as sa

    from gpuperf_magics.store.tables import runs

    return sa.select(runs.c.id, runs.c.run_uid).order_by(runs.c.id)


def _uids(conn: Any) -> list[tuple[int, str]]:
    from gpuperf_magics.store.records import driver_rows

    return [(int(i), str(u)) for i, u in driver_rows(conn, _select_uids())]


def sync(source: StoreReader, destination: StoreReader, *,
         progress: Callable[[int, int], None] | None = None, batch: int = 2000) -> SyncResult:
    """Copy the runs ``destination`` lacks from ``source``; see :meth:`Store.sync_to`."""
    if (destination._location.url, destination._location.path) == (
            source._location.url, source._location.path):
        raise ValueError(f"cannot sync {source._shown} into itself")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    mine: list[tuple[int, str]] = source._execute(
        _uids, write=False, action="list runs to sync", missing=list)
    known: list[tuple[int, str]] = destination._execute(
        _uids, write=False, action="list runs to sync", missing=list)
    theirs = {uid for _, uid in known}
    todo = [run_id for run_id, uid in mine if uid not in theirs]
    total, done, copied = len(todo), 0, 0
    if progress is not None:
        progress(0, total)
    for start in range(0, total, batch):
        chunk = todo[start:start + batch]
        rows, hardware, iterations = _read(source, chunk)

        def write(conn: Any, rows: Any = rows, hardware: Any = hardware,
                  iterations: Any = iterations) -> int:
            from gpuperf_magics.store.records import bump_revision, insert_stored

            out = insert_stored(conn, rows, hardware, iterations)
            added = sum(1 for _, inserted in out if inserted)
            if added:
                bump_revision(conn)
            return added

        copied += destination._execute(write, write=True, action="copy runs")
        done += len(chunk)
        if progress is not None:
            progress(done, total)
    return SyncResult(copied, len(mine) - copied, source._shown, destination._shown)


def _read(source: StoreReader, ids: list[int]
          ) -> tuple[list[list[Any]], list[str | None], list[list[Any]]]:
    """Runs as stored (JSON text kept byte for byte, so their uids stay true): their
    ``WRITTEN_COLUMNS`` values, hardware JSON and iteration rows, as
    :func:`~gpuperf_magics.store.records.insert_stored` takes them."""

    def work(conn: Any) -> tuple[list[Any], list[Any]]:
        from gpuperf_magics.store.records import driver_rows

        array = conn.dialect.name == "postgresql"  # one query with an array parameter
        runs_in, iterations_in = _statements(array)
        found: list[Any] = []
        its: list[Any] = []
        for chunk in ([ids] if array else chunked(ids)):
            found += driver_rows(conn, runs_in, {"ids": chunk})
            its += driver_rows(conn, iterations_in, {"ids": chunk})
        return found, its

    runs, its = source._execute(work, write=False, action="read runs to sync")
    by_run: dict[int, list[Any]] = {}
    for row in its:
        by_run.setdefault(int(row[0]), []).append(row[1:])  # as insert_stored takes them
    rows = [list(row[1:-1]) for row in runs]
    hardware = [row[-1] for row in runs]
    iterations = [by_run.get(int(row[0]), []) for row in runs]
    return rows, hardware, iterations
