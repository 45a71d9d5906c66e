"""SQL for run records, as SQLAlchemy Core statements on :mod:`~gpuperf_magics.store.tables`:
inserting runs with their hardware and iterations, the runs query, the store's revision.

The values written (and a run's uid) come from :mod:`~gpuperf_magics.store.rows`; the two
dialects differ only where SQL does: ``INSERT ... ON CONFLICT`` is each dialect's own
construct, and PostgreSQL takes bulk rows through ``COPY`` (one stream, not a round trip per
row).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

import sqlalchemy as sa

from gpuperf_magics.store import tables
from gpuperf_magics.store.encoding import fingerprint, from_json, sql_value, to_json
from gpuperf_magics.store.rows import (
    _HW,
    ITERATION_FIELDS,
    WRITTEN_COLUMNS,
    UidCounter,
    chunked,
    json_text,
    recorder,
    run_row,
)
from gpuperf_magics.store.tables import hardware, meta, runs

__all__ = [
    "RUN_SELECT", "SELECT_ITERATIONS", "SELECT_REVISION", "SELECT_TOKEN", "Inserted",
    "bump_revision", "driver_rows", "hardware_id", "insert_runs", "insert_stored", "select_runs",
    "tag_value",
]

#: Rows above which PostgreSQL gets them by COPY rather than one INSERT each.
COPY_ABOVE = 50


class Inserted(NamedTuple):
    """What :func:`insert_runs` did with one record: its id, and whether it is new."""

    run_id: int
    new: bool


#: Columns of ``SELECT ... FROM runs``: the frame's name -> column (the id is ``run_id`` in a
#: frame, every written column keeps its name).
RUN_SELECT: dict[str, Any] = {"run_id": runs.c.id, **{n: runs.c[n] for n in WRITTEN_COLUMNS}}
SELECT_ITERATIONS = (
    sa.select(*(tables.iterations.c[n] for n in ITERATION_FIELDS))
    .where(tables.iterations.c.run_id == sa.bindparam("run_id"))
    .order_by(tables.iterations.c.idx)
)


#: The store's revision, and its creation time with it (:meth:`Store.token`).
SELECT_REVISION = sa.select(meta.c.value).where(meta.c.key == "revision")
SELECT_TOKEN = sa.select(meta.c.key, meta.c.value).where(
    meta.c.key.in_(("created_at", "revision")))


def select_runs(names: Iterable[str] = RUN_SELECT) -> sa.Select[Any]:
    """``SELECT`` of some runs columns (with the hardware JSON when ``hardware`` is asked)."""
    names = list(names)
    parts = [RUN_SELECT[n].label(n) for n in names if n != "hardware"]
    if "hardware" in names:
        parts.append(hardware.c.info.label("hardware"))
        return sa.select(*parts).select_from(
            runs.outerjoin(hardware, hardware.c.id == runs.c.hardware_id))
    return sa.select(*parts).select_from(runs)


def tag_value(kind: str, key: str) -> Any:
    """The text of tag ``key`` of a run, read out of its JSON by the database."""
    if kind == "sqlite":
        path = '$."' + key.replace('"', '\\"') + '"'
        return sa.func.json_extract(runs.c.tags, path)
    return sa.func.json_extract_path_text(sa.cast(runs.c.tags, sa.JSON), key)


def bump_revision(conn: Any) -> None:
    """One more write: the revision readers compare with the one their cache saw."""
    if conn.dialect.name == "sqlite":
        value: Any = meta.c.value + 1  # an INTEGER in a file
    else:
        value = sa.cast(sa.cast(meta.c.value, sa.BigInteger) + 1, sa.Text)
    conn.execute(sa.update(meta).where(meta.c.key == "revision").values(value=value))


def _insert(dialect: str, table: sa.Table) -> Any:
    """The dialect's own ``INSERT`` (it has ``on_conflict_do_nothing``)."""
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(table)
    from sqlalchemy.dialects import postgresql

    return postgresql.insert(table)


@lru_cache(maxsize=4)
def _statements(dialect: str) -> tuple[Any, Any]:
    """(insert a hardware row unless known, insert one run unless its uid is known and give
    its id): built once per dialect, their values bound per call."""
    hardware_row = _insert(dialect, hardware).on_conflict_do_nothing(index_elements=["fingerprint"])
    one_run = (_insert(dialect, runs).on_conflict_do_nothing(index_elements=["run_uid"])
               .returning(runs.c.id))
    return hardware_row, one_run


def hardware_id(conn: Any, info: dict[str, Any] | str | None) -> int | None:
    """Id of the hardware row equal to ``info`` (a dict or its JSON), inserted when new."""
    if not info:
        return None
    text = info if isinstance(info, str) else to_json(info)
    parsed = from_json(text, {}) if isinstance(info, str) else info
    if not parsed:
        return None
    key = fingerprint(parsed)
    conn.execute(_statements(conn.dialect.name)[0], {
        "fingerprint": key, "gpu_name": sql_value(parsed.get("gpu_name")),
        "cpu_model": sql_value(parsed.get("cpu_model")), "info": text,
    })
    return int(conn.execute(sa.select(hardware.c.id).where(hardware.c.fingerprint == key))
               .scalar_one())


def insert_runs(
    conn: Any,
    records: Sequence[dict[str, Any]],
    iterations: Sequence[Sequence[Sequence[Any]]] | None = None,
    *,
    uids: Sequence[str | None] | None = None,
    who: Sequence[tuple[str | None, str | None]] | None = None,
) -> list[Inserted]:
    """Insert run records with their iterations; ``Inserted(run_id, new)`` per record.

    A record whose ``run_uid`` is already in the store is not inserted again: its existing id
    comes back with ``new=False`` (a second sync, or two machines syncing one run).

    Parameters
    ----------
    records : sequence of dict
        ``Run.to_record()`` shape plus ``notes``; ``hardware`` a dict or its JSON text.
    iterations : sequence, optional
        Per record, its iteration rows (``ITERATION_FIELDS`` values as stored).
    uids : sequence, optional
        Known uids (copied from another store); computed from the content when None.
    who : sequence of (host, user), optional
        Who recorded each run; this process's host and user by default.
    """
    iterations = iterations if iterations is not None else [()] * len(records)
    host, user = recorder()
    rows, texts = [], []
    counter = UidCounter()
    memo: dict[Any, str] = {}
    for pos, record in enumerate(records):
        info = record.get("hardware")
        text = None if not info else info if isinstance(info, str) else (
            json_text(info, {}, memo))
        row = run_row(record, memo)
        uid = uids[pos] if uids is not None and uids[pos] else counter.of_row(
            row, text or None, iterations[pos])
        by = who[pos] if who is not None else (host, user)
        rows.append([*row, uid, *by])
        texts.append(text)
    return insert_stored(conn, rows, texts, iterations)


def insert_stored(conn: Any, rows: list[list[Any]], hardware: Sequence[str | None],
                  iterations: Sequence[Sequence[Sequence[Any]]]) -> list[Inserted]:
    """Insert runs whose values are as a store holds them; ``Inserted(run_id, new)`` each.

    What a sync copies: rows read from another store are stored values already (its JSON
    text, its uid), so they go in as they are; :func:`insert_runs` turns records into such
    rows first (normalising every value of 20,000 copied runs was a third of a sync).

    Parameters
    ----------
    rows : list of list
        :data:`~gpuperf_magics.store.rows.WRITTEN_COLUMNS` values; the ``hardware_id`` slot
        is set here, in place, to the destination's id of ``hardware``.
    hardware : sequence of str or None
        Each row's hardware JSON text.
    iterations : sequence
        Per row, its iteration rows (``ITERATION_FIELDS`` values as stored).
    """
    hardware_ids: dict[str | None, int | None] = {}
    for row, text in zip(rows, hardware, strict=True):
        if text not in hardware_ids:
            hardware_ids[text] = hardware_id(conn, text)
        row[_HW] = hardware_ids[text]
    out = _insert_rows(conn, rows)
    its = [
        (run_id, *it)
        for (run_id, new), run_its in zip(out, iterations, strict=True) if new
        for it in run_its
    ]
    if its:
        _insert_many(conn, tables.iterations, ("run_id", *ITERATION_FIELDS), its)
    return out


def _insert_rows(conn: Any, rows: list[list[Any]]) -> list[Inserted]:
    """The runs rows (``WRITTEN_COLUMNS`` values) inserted, those already there left out."""
    if len(rows) == 1:
        # RETURNING gives the id without a second query (SQLite >= 3.35, PostgreSQL).
        found = conn.execute(_statements(conn.dialect.name)[1],
                             dict(zip(WRITTEN_COLUMNS, rows[0], strict=True))).first()
        return [Inserted(int(found[0]), True) if found
                else Inserted(_id_of_uid(conn, rows[0][-3]), False)]
    # Runs already there are left out first; a run another process inserts meanwhile makes
    # the batch fail on the unique uid and the caller's retry skips it then.
    existing = _ids_of_uids(conn, [r[-3] for r in rows])
    fresh = [r for r in rows if r[-3] not in existing]
    if fresh:
        _insert_many(conn, runs, WRITTEN_COLUMNS, fresh)
    ids = {**existing, **_ids_of_uids(conn, [r[-3] for r in fresh])}
    return [Inserted(ids[r[-3]], r[-3] not in existing) for r in rows]


def _insert_many(conn: Any, table: sa.Table, columns: Sequence[str], rows: list[Any]) -> None:
    """Many rows at once: COPY on PostgreSQL, one ``executemany`` on SQLite (and for a few
    rows on PostgreSQL)."""
    if conn.dialect.name == "postgresql":
        if len(rows) > COPY_ABOVE:
            cursor = conn.connection.driver_connection.cursor()
            with cursor.copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            conn.execute(sa.insert(table), [dict(zip(columns, row, strict=True))
                                            for row in rows])
        return
    sql, order = _bulk_insert(conn.dialect, table, tuple(columns))
    pick = operator.itemgetter(*order)
    conn.exec_driver_sql(sql, [pick(row) for row in rows])


@lru_cache(maxsize=16)
def _bulk_insert(dialect: Any, table: sa.Table, columns: tuple[str, ...]
                 ) -> tuple[str, list[int]]:
    """The dialect's ``INSERT`` of ``columns`` compiled once, and where each of its positional
    parameters is in a row: rows then go to the driver's ``executemany`` as tuples (SQLAlchemy
    turning 100,000 rows into parameter dicts doubled the time of a large import)."""
    compiled = sa.insert(table).compile(dialect=dialect, column_keys=list(columns))
    names = compiled.positiontup
    assert names is not None, "a positional paramstyle (SQLite's qmark)"
    return str(compiled), [columns.index(name) for name in names]


def driver_rows(conn: Any, statement: Any, params: dict[str, Any] | None = None
                ) -> list[tuple[Any, ...]]:
    """The rows of a statement, fetched by the driver's own cursor as plain tuples.

    For the reads that return many rows (every run's uid in a sync, the runs and iterations a
    sync copies, the iterations a fit reads): SQLAlchemy's ``Row`` objects and its per-call
    execution made those reads 1.3-1.9x slower than the hand-written store's. The statement
    is still SQLAlchemy's, compiled once per dialect and list length (:func:`_expanded`). The
    values come back as the driver gives them, so it suits only columns without result
    processing (the store's integers, floats and text).

    Parameters
    ----------
    conn : sqlalchemy.Connection
        In the unit of work's transaction (the cursor is the same connection's).
    statement : sqlalchemy.Select
        A statement built once (a module constant): its compiled form is cached by identity.
    params : dict, optional
        Values of its bound parameters; a list for an expanding ``IN`` parameter.
    """
    params = params or {}
    compiled = _compiled(conn, statement)
    shape = tuple(sorted((k, len(v) if compiled.binds[k].expanding else None)
                         for k, v in params.items()))
    sql, slots, positional = _expanded(conn, statement, shape)
    cursor = conn.connection.driver_connection.cursor()
    try:
        if not slots:
            cursor.execute(sql)
        elif positional:
            cursor.execute(sql, [_value(params, slot) for slot in slots])
        else:
            cursor.execute(sql, {name: _value(params, slot) for name, slot in slots})
        return list(cursor.fetchall())
    finally:
        cursor.close()


class _Slot(NamedTuple):
    """Where a driver parameter's value is: ``params[name]``, or its ``item``-th item."""

    name: str
    item: int | None


def _value(params: dict[str, Any], slot: _Slot) -> Any:
    value = params[slot.name]
    return value if slot.item is None else value[slot.item]


#: Compiled statements of :func:`driver_rows`, by (dialect, paramstyle, statement).
_COMPILED: dict[tuple[str, str, Any], Any] = {}


def _compiled(conn: Any, statement: Any) -> Any:
    """``statement`` compiled for the dialect of ``conn``, once: every engine of one driver
    compiles a store's ``SELECT`` the same, so the dialect's name and paramstyle are the key
    (the statements are module constants, so the cache stays small)."""
    key = (conn.dialect.name, conn.dialect.paramstyle, statement)
    found = _COMPILED.get(key)
    if found is None:
        found = _COMPILED[key] = statement.compile(dialect=conn.dialect)
    return found


#: What :func:`_expanded` made, by (dialect, paramstyle, statement, parameter shape).
_EXPANDED: dict[tuple[Any, ...], tuple[str, list[Any], bool]] = {}


def _expanded(conn: Any, statement: Any, shape: tuple[tuple[str, int | None], ...]
              ) -> tuple[str, list[Any], bool]:
    """``statement`` compiled for the dialect of ``conn`` and lists of these lengths: its SQL,
    where each driver parameter's value comes from, and whether they are positional.

    Compiled once per key: every engine of one driver compiles a store's ``SELECT`` the same,
    and a chunked read has two list lengths at most (the chunk's and the last one's), so the
    cache stays small. SQLAlchemy expands the ``IN`` list here, on placeholders that say where
    each value is; a call then only picks its values (expanding 900 ids per call cost more
    than the query on SQLite).
    """
    key = (conn.dialect.name, conn.dialect.paramstyle, statement, shape)
    found = _EXPANDED.get(key)
    if found is None:
        compiled = _compiled(conn, statement)
        marks = {name: _Slot(name, None) if size is None else
                 [_Slot(name, i) for i in range(size)] for name, size in shape}
        if not marks:
            found = (compiled.string, [], True)
        else:
            state = compiled.construct_expanded_state(marks)
            if compiled.positional:
                found = (state.statement, list(state.positional_parameters), True)
            else:
                # The expanded names (the list's own name stays in the mapping too).
                found = (state.statement, [(k, v) for k, v in state.parameters.items()
                                           if isinstance(v, _Slot)], False)
        if len(_EXPANDED) > 256:
            _EXPANDED.clear()
        _EXPANDED[key] = found
    return found


def _id_of_uid(conn: Any, uid: str) -> int:
    return int(conn.execute(sa.select(runs.c.id).where(runs.c.run_uid == uid)).scalar_one())


#: Ids of runs by uid: an expanding ``IN`` on SQLite, one array parameter on PostgreSQL.
_UIDS_IN = sa.select(runs.c.run_uid, runs.c.id).where(
    runs.c.run_uid.in_(sa.bindparam("uids", expanding=True)))


@lru_cache(maxsize=1)
def _uids_any() -> Any:
    from sqlalchemy.dialects.postgresql import ARRAY

    wanted = sa.bindparam("uids", type_=ARRAY(sa.Text))
    return sa.select(runs.c.run_uid, runs.c.id).where(runs.c.run_uid == sa.any_(wanted))


def _ids_of_uids(conn: Any, uids: list[str]) -> dict[str, int]:
    if conn.dialect.name == "postgresql":  # one query with an array parameter
        return {u: int(i) for u, i in driver_rows(conn, _uids_any(), {"uids": list(uids)})}
    out: dict[str, int] = {}
    for chunk in chunked(uids):
        out.update({u: int(i) for u, i in driver_rows(conn, _UIDS_IN, {"uids": chunk})})
    return out
