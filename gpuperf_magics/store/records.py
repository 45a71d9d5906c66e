"""SQL for run records: the statements, the content-derived run uid, inserting and parsing.

Statements use ``?`` placeholders on both backends (the PostgreSQL connection translates them).
"""

from __future__ import annotations

import getpass
import hashlib
import socket
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any, NamedTuple

from gpuperf_magics.store.connection import chunked
from gpuperf_magics.store.encoding import fingerprint, from_json, sql_value, to_json

#: Columns of the runs table written from a record, in INSERT order (``run_uid``,
#: ``recorded_host`` and ``recorded_user`` follow them).
RUN_COLUMNS = (
    "created_at", "network", "batch_size", "iterations", "time_s", "status", "source", "gpu",
    "gpu_count", "device", "hardware_id", "it_median_s", "it_p90_s", "it_mean_s", "it_std_s",
    "samples_per_s", "warmup_iterations", "recorded_iterations", "error", "arch", "hyper",
    "quality", "tags", "features", "notes", "peak_memory_gb",
)
#: Columns added after schema version 2. They enter a run's uid only when set, so that a run
#: without them (every run recorded before) keeps the uid it had: a table imported again, or a
#: run synced from a store of the older schema, is still recognised.
LATER_COLUMNS = ("peak_memory_gb",)
WRITTEN_COLUMNS = (*RUN_COLUMNS, "run_uid", "recorded_host", "recorded_user")
#: JSON columns of the runs table and the value an empty one stands for.
JSON_COLUMNS: dict[str, Any] = {
    "arch": {}, "hyper": {}, "quality": {}, "tags": {}, "features": {}, "notes": [],
}
INSERT_RUN = (
    f"INSERT INTO runs ({', '.join(WRITTEN_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(WRITTEN_COLUMNS))})"
)
ITERATION_FIELDS = ("idx", "duration_s", "samples", "warmup", "skipped_step", "micro_batches",
                    "phases")
SELECT_ITERATIONS = (
    f"SELECT {', '.join(ITERATION_FIELDS)} FROM iterations WHERE run_id = ? ORDER BY idx"
)


class IterationRow(NamedTuple):
    """One row of the ``iterations`` table: ``run_id`` then :data:`ITERATION_FIELDS`.

    ``phases`` is the stored JSON text as read, or the dict it holds (None when the iteration
    was not split into phases) once parsed.
    """

    run_id: int
    idx: int
    duration_s: float
    samples: int | None
    warmup: bool
    skipped_step: bool
    micro_batches: int | None
    phases: Any


class Inserted(NamedTuple):
    """What :func:`insert_runs` did with one record: its id, and whether it is new."""

    run_id: int
    new: bool


class Recorder(NamedTuple):
    """Who records runs in this process: the machine, and the login name on it."""

    host: str
    user: str


#: Columns of ``SELECT ... FROM runs AS r``: the frame's name -> SQL expression (the id is
#: ``run_id`` in a frame, every written column keeps its name).
RUN_SELECT = {"run_id": "r.id", **{n: f"r.{n}" for n in WRITTEN_COLUMNS}}


def select_runs(names: Iterable[str] = RUN_SELECT) -> str:
    """``SELECT`` of some runs columns (with the hardware JSON when ``hardware`` is asked)."""
    parts = [f"{RUN_SELECT[n]} AS {n}" for n in names if n != "hardware"]
    if "hardware" in names:
        parts.append("h.info AS hardware")
        return (f"SELECT {', '.join(parts)} FROM runs AS r "
                "LEFT JOIN hardware AS h ON h.id = r.hardware_id")
    return f"SELECT {', '.join(parts)} FROM runs AS r"


def bump_revision(conn: Any) -> None:
    if conn.dialect.name == "sqlite":
        conn.execute("UPDATE meta SET value = value + 1 WHERE key = 'revision'")
    else:
        conn.execute("UPDATE meta SET value = (CAST(value AS BIGINT) + 1)::text "
                     "WHERE key = 'revision'")


@lru_cache(maxsize=1)
def recorder() -> Recorder:
    """Host and user that record runs in this process: who to ask about a run later."""
    try:
        user = getpass.getuser()
    except Exception:  # no login name (a container without a passwd entry)
        import os

        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return Recorder(socket.gethostname(), user)


def hardware_id(conn: Any, hardware: dict[str, Any] | str | None) -> int | None:
    """Id of the hardware row equal to ``hardware`` (a dict or its JSON), inserted when new."""
    if not hardware:
        return None
    info = hardware if isinstance(hardware, str) else to_json(hardware)
    parsed = from_json(info, {}) if isinstance(hardware, str) else hardware
    if not parsed:
        return None
    key = fingerprint(parsed)
    conn.execute(
        "INSERT INTO hardware (fingerprint, gpu_name, cpu_model, info) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (fingerprint) DO NOTHING",
        (key, sql_value(parsed.get("gpu_name")), sql_value(parsed.get("cpu_model")), info),
    )
    return int(conn.execute("SELECT id FROM hardware WHERE fingerprint = ?", (key,)).fetchone()[0])


def content_uid(row: Sequence[Any], hardware_info: str | None,
                iterations: Sequence[Sequence[Any]], occurrence: int = 0) -> str:
    """The stable id of a run: a hash of what is stored about it, the same in every store.

    Parameters
    ----------
    row : sequence
        What :func:`uid_content` makes of a run's stored values.
    hardware_info : str or None
        The hardware JSON.
    iterations : sequence of sequences
        ``ITERATION_FIELDS`` values as stored.
    occurrence : int
        0 for the first run of this content; k for its k-th identical repeat in one import
        (repeats of one configuration in a table are separate measurements).
    """
    payload: list[Any] = [list(row), hardware_info, [list(it) for it in iterations]]
    if occurrence:
        payload.append(occurrence)
    return hashlib.sha256(to_json(payload).encode()).hexdigest()[:32]


_EMPTY_JSON = {"{}": "{}", "[]": "[]"}


def _json_text(value: Any, empty: Any, memo: dict[Any, str]) -> str:
    if isinstance(value, str):
        # JSON already (a row copied from another store): kept byte for byte, so that its
        # uid stays the same.
        return value
    if not value:
        return "[]" if isinstance(empty, list) else "{}"
    try:
        # Rows of one import or sync share most of their dicts: encode each once.
        key = (type(value), tuple(value.items()) if isinstance(value, dict) else tuple(value))
        hash(key)
    except TypeError:
        return to_json(value)
    text = memo.get(key)
    if text is None:
        text = memo[key] = to_json(value)
    return text


def run_row(record: dict[str, Any], memo: dict[Any, str] | None = None) -> list[Any]:
    """The stored values of a record (``Run.to_record()`` shape plus ``notes``), hardware_id
    left as None for the caller to fill."""
    memo = {} if memo is None else memo
    row: list[Any] = []
    for name in RUN_COLUMNS:
        value = record.get(name)
        if name in JSON_COLUMNS:
            row.append(_json_text(value, JSON_COLUMNS[name], memo))
        else:
            row.append(None if name == "hardware_id" else sql_value(value))
    return row


_HW = RUN_COLUMNS.index("hardware_id")
#: The columns a run's uid is computed from (``hardware_id`` is local to a store).
UID_COLUMNS = tuple(n for n in RUN_COLUMNS if n != "hardware_id" and n not in LATER_COLUMNS)


def uid_content(values: dict[str, Any]) -> list[Any]:
    """What a run's uid hashes: the :data:`UID_COLUMNS` values, then ``[name, value]`` of each
    of :data:`LATER_COLUMNS` that is set."""
    content = [values[n] for n in UID_COLUMNS]
    content += [[n, values[n]] for n in LATER_COLUMNS if values.get(n) is not None]
    return content


def _uid_of(row: list[Any], hardware: str | None, iterations: Sequence[Sequence[Any]],
            seen: dict[str, int]) -> str:
    content = uid_content(dict(zip(RUN_COLUMNS, row, strict=True)))
    base = content_uid(content, hardware, iterations)
    count = seen.get(base, 0)
    seen[base] = count + 1
    return base if not count else content_uid(content, hardware, iterations, count)


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
    rows = []
    seen: dict[str, int] = {}
    memo: dict[Any, str] = {}
    hardware_ids: dict[str | None, int | None] = {}
    for pos, record in enumerate(records):
        hardware = record.get("hardware")
        info = None if not hardware else hardware if isinstance(hardware, str) else (
            _json_text(hardware, {}, memo))
        row = run_row(record, memo)
        uid = uids[pos] if uids is not None and uids[pos] else _uid_of(
            row, info or None, iterations[pos], seen)
        if info not in hardware_ids:
            hardware_ids[info] = hardware_id(conn, info)
        row[_HW] = hardware_ids[info]
        by = who[pos] if who is not None else (host, user)
        rows.append([*row, uid, *by])
    if len(rows) == 1:
        # RETURNING gives the id without a second query (SQLite >= 3.35, PostgreSQL).
        found = conn.execute(INSERT_RUN + " ON CONFLICT (run_uid) DO NOTHING RETURNING id",
                             rows[0]).fetchone()
        out = [Inserted(int(found[0]), True) if found
               else Inserted(_id_of_uid(conn, rows[0][-3]), False)]
    else:
        # Runs already there are left out first; a run another process inserts meanwhile
        # makes the batch fail on the unique uid and the caller's retry skips it then.
        existing = _ids_of_uids(conn, [r[-3] for r in rows])
        fresh = [r for r in rows if r[-3] not in existing]
        if fresh:
            _insert_many(conn, "runs", WRITTEN_COLUMNS, fresh)
        ids = {**existing, **_ids_of_uids(conn, [r[-3] for r in fresh])}
        out = [Inserted(ids[r[-3]], r[-3] not in existing) for r in rows]
    its = [
        (run_id, *it)
        for (run_id, new), run_its in zip(out, iterations, strict=True) if new
        for it in run_its
    ]
    if its:
        _insert_many(conn, "iterations", ("run_id", *ITERATION_FIELDS), its)
    return out


def _insert_many(conn: Any, table: str, columns: Sequence[str], rows: list[Any]) -> None:
    """Many rows at once: COPY on PostgreSQL (one stream, not a round trip per row)."""
    copy = getattr(conn, "copy_rows", None)
    if copy is not None and len(rows) > 50:
        copy(table, columns, rows)
        return
    marks = ", ".join("?" * len(columns))
    conn.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)


def _id_of_uid(conn: Any, uid: str) -> int:
    return int(conn.execute("SELECT id FROM runs WHERE run_uid = ?", (uid,)).fetchone()[0])


def _ids_of_uids(conn: Any, uids: list[str]) -> dict[str, int]:
    if conn.dialect.name == "postgresql":  # one query with an array parameter
        return {u: int(i) for u, i in conn.execute(
            "SELECT run_uid, id FROM runs WHERE run_uid = ANY(?)", (list(uids),))}
    out: dict[str, int] = {}
    for chunk in chunked(uids):
        marks = ", ".join("?" * len(chunk))
        out.update({u: int(i) for u, i in conn.execute(
            f"SELECT run_uid, id FROM runs WHERE run_uid IN ({marks})", chunk)})
    return out


def backfill_uids(conn: Any) -> None:
    """Give every run of an older store its content uid (schema step 2: the columns of later
    steps do not exist yet, and are unset in such runs anyway)."""
    names = list(UID_COLUMNS)
    cursor = conn.execute(
        f"SELECT r.id, {', '.join('r.' + n for n in names)}, h.info FROM runs AS r "
        "LEFT JOIN hardware AS h ON h.id = r.hardware_id ORDER BY r.id"
    )
    runs = cursor.fetchall()
    its: dict[int, list[tuple[Any, ...]]] = {}
    for run_id, *values in conn.execute(
        f"SELECT run_id, {', '.join(ITERATION_FIELDS)} FROM iterations ORDER BY run_id, idx"
    ):
        its.setdefault(int(run_id), []).append(tuple(values))
    seen: dict[str, int] = {}
    updates = []
    for run_id, *values in runs:
        content, info = values[:-1], values[-1]
        base = content_uid(content, info, its.get(int(run_id), []))
        count = seen.get(base, 0)
        seen[base] = count + 1
        uid = base if not count else content_uid(content, info, its.get(int(run_id), []), count)
        updates.append((uid, run_id))
    if updates:
        conn.executemany("UPDATE runs SET run_uid = ? WHERE id = ?", updates)


def parse_run(names: list[str], row: Sequence[Any]) -> dict[str, Any]:
    """A row of :func:`select_runs` as a run record with parsed JSON.

    Raises
    ------
    ValueError
        A JSON cell that does not parse (a tampered store), naming the run and the column.
    """
    record = dict(zip(names, row, strict=True))
    for name, empty in (*JSON_COLUMNS.items(), ("hardware", {})):
        if name not in record:
            continue
        try:
            value = from_json(record[name], empty)
        except ValueError:
            value = None
        if not isinstance(value, type(empty)):
            raise ValueError(
                f"run {record.get('run_id')}: column {name} holds {str(record[name])[:60]!r}, "
                f"not a JSON {type(empty).__name__}"
            )
        record[name] = value
    return record
