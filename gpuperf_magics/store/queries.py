"""Reading runs back: the filters of :meth:`Store.runs` as one SQL query, and what is left for
the built frame (filters on JSON groups and features, the chosen columns); the reads of
:meth:`Store.runs`, :meth:`Store.iterations` and :meth:`Store.get_run` as units of work on an
open connection, and their rows as a frame or a :class:`~gpuperf_magics.run.Run`.

Filters on the runs table's own columns, on ``tags`` and on ``since`` run in SQL; a filter on a
hardware, architecture, hyper-parameter or feature column is applied to the rows those select.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, NamedTuple

from gpuperf_magics.columns import KINDS, group_of
from gpuperf_magics.store.connection import chunked
from gpuperf_magics.store.encoding import format_timestamp, from_json, parse_timestamp, sql_value
from gpuperf_magics.store.errors import RunNotFoundError
from gpuperf_magics.store.records import (
    ITERATION_FIELDS,
    RUN_SELECT,
    SELECT_ITERATIONS,
    IterationRow,
    parse_run,
    select_runs,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from gpuperf_magics.run import Run

#: Columns of ``runs()`` read straight from the runs table (filtered in SQL).
FLAT = frozenset(n for n in RUN_SELECT if n not in (
    "hardware_id", "arch", "hyper", "quality", "tags", "features", "notes"))
#: Registry groups stored in a JSON column of the same name (``hardware`` via its table).
_GROUP_COLUMNS = ("hardware", "arch", "hyper", "quality", "tags")
#: Every JSON group a runs frame can hold, in the order the frame reads them.
_EVERY_GROUP = ("hardware", "arch", "hyper", "quality", "tags", "features")


class RunsQuery(NamedTuple):
    """One ``runs()`` call as SQL, and the filters left for the frame.

    Attributes
    ----------
    sql, params : str, list
        The statement and its bound values.
    names : list of str
        The columns the statement selects (an absent store answers with these and no rows).
    groups : list of str
        The JSON groups it reads.
    later : dict
        Equality filters on columns outside the runs table, for :func:`filter_frame`.
    """

    sql: str
    params: list[Any]
    names: list[str]
    groups: list[str]
    later: dict[str, Any]


def runs_query(
    kind: str,
    *,
    network: Any = None,
    status: Any = None,
    gpu: Any = None,
    source: Any = None,
    tags: Mapping[str, str] | None = None,
    since: Any = None,
    columns: list[str] | None = None,
    where: Mapping[str, Any] | None = None,
) -> RunsQuery:
    """The SQL that selects the runs :meth:`Store.runs` asks for, on a ``kind`` store
    (``"sqlite"`` or ``"postgresql"``: they read a tag out of the JSON differently)."""
    clauses: list[str] = []
    params: list[Any] = []
    for name, value in (("network", network), ("status", status), ("gpu", gpu),
                        ("source", source)):
        if value is not None:
            _where(clauses, params, name, _as_list(name, value))
    if since is not None:
        clauses.append("r.created_at >= ?")
        params.append(_since(since))
    later: dict[str, Any] = {}
    for name, value in (where or {}).items():
        if name in FLAT:
            listed = list(value) if isinstance(value, (list, tuple, set, frozenset)) \
                else [value]
            _where(clauses, params, name, listed)
        else:
            later[name] = value
    tag_clause = ("json_extract(r.tags, ?) = ?" if kind == "sqlite"
                  else "(CAST(r.tags AS jsonb) ->> ?) = ?")
    for key, value in {str(k): str(v) for k, v in (tags or {}).items()}.items():
        clauses.append(tag_clause)
        path = '$."' + key.replace('"', '\\"') + '"'
        params.extend([path if kind == "sqlite" else key, value])

    groups = groups_needed(columns, later)
    flat = ["run_id", *sorted(c for c in FLAT if c != "run_id")] if columns is None \
        else ["run_id", *[c for c in columns if c in FLAT and c != "run_id"]]
    names = [*flat, *(g for g in groups if g in RUN_SELECT)]
    if "hardware" in groups:
        names.append("hardware")
    sql = select_runs(names) + (" WHERE " + " AND ".join(clauses) if clauses else "") \
        + " ORDER BY r.id"
    return RunsQuery(sql, params, names, groups, later)


def column_list(columns: Sequence[str] | str | None) -> list[str] | None:
    """``columns=`` of :meth:`Store.runs` as a list of names (one name alone is a list of one)."""
    if columns is None:
        return None
    listed = [columns] if isinstance(columns, str) else list(columns)
    if not listed or not all(isinstance(c, str) for c in listed):
        raise ValueError(f"columns= takes a list of column names, not {listed!r}")
    return listed


def _as_list(name: str, value: Any) -> list[Any]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return [value]
    values = list(value)
    if any(isinstance(v, (list, tuple, set, dict)) for v in values):
        raise TypeError(f"{name}= takes a value or a list of values, not {value!r}")
    return values


def _since(value: Any) -> str:
    """Lower bound for ``created_at`` from a datetime, date, ISO string or timedelta."""
    if isinstance(value, timedelta):
        return format_timestamp(datetime.now(timezone.utc) - value)
    if not isinstance(value, (datetime, date, str)) and not hasattr(value, "to_pydatetime"):
        raise TypeError(f"since= takes a datetime, date, ISO-8601 string or timedelta, not "
                        f"{type(value).__name__}")
    try:
        return format_timestamp(parse_timestamp(value, naive="local"))
    except ValueError:
        raise ValueError(f"since={value!r} is not an ISO-8601 date or time, e.g. "
                         "'2024-05-01' or '2024-05-01T14:30'") from None


def run_ids(run_id: Any) -> list[int]:
    """One run id or several as a list of ints; TypeError for anything else."""
    values = run_id if isinstance(run_id, Iterable) and not isinstance(run_id, str) else [run_id]
    try:
        return [operator.index(v) for v in values]
    except TypeError:
        raise TypeError(f"run ids are integers (column run_id of Store.runs()), not "
                        f"{run_id!r}") from None


def _where(clauses: list[str], params: list[Any], name: str, values: list[Any]) -> None:
    column = RUN_SELECT[name]
    present = [sql_value(v) for v in values if v is not None]
    parts = []
    if present:
        parts.append(f"{column} IN ({', '.join('?' * len(present))})")
        params.extend(present)
    if len(present) < len(values):
        parts.append(f"{column} IS NULL")
    clauses.append("(" + " OR ".join(parts) + ")" if parts else "1 = 0")


def groups_needed(columns: Sequence[str] | None, later: Mapping[str, Any]) -> list[str]:
    """The JSON groups to read for these columns and filters (all of them when unsure)."""
    if columns is None:
        return list(_EVERY_GROUP)
    needed = set()
    for name in [*columns, *later]:
        if name in FLAT:
            continue
        group = group_of(name)
        if group in _GROUP_COLUMNS:
            needed.add(group)
        else:  # a feature, an extra key of a group, or a prefixed collision
            return list(_EVERY_GROUP)
    return [g for g in _EVERY_GROUP if g in needed]


def filter_frame(frame: pd.DataFrame, later: Mapping[str, Any]) -> pd.DataFrame:
    """The rows of ``frame`` equal to every filter in ``later`` (a list: any of its values)."""
    import pandas as pd

    if not later:
        return frame
    keep = pd.Series(True, index=frame.index)
    for name, value in later.items():
        if name not in frame.columns:
            if frame.empty:
                return frame
            raise ValueError(
                f"runs() cannot filter on {name!r}: no such column. Columns: "
                f"{', '.join(map(str, frame.columns))}"
            )
        column = frame[name]
        if value is None:
            match = column.isna()
        elif isinstance(value, (list, tuple, set, frozenset)):
            match = column.isin(list(value))
        else:
            match = column == value
        keep &= match.fillna(False).astype(bool)
    return frame[keep.to_numpy()].reset_index(drop=True)


def select_columns(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``frame[columns]``; a canonical column no run filled comes back empty and typed."""
    from gpuperf_magics.store.frame import empty_column

    unknown = [c for c in columns if c not in frame.columns and c not in KINDS]
    if unknown and not frame.empty:
        raise ValueError(
            f"runs() has no column {', '.join(map(repr, unknown))}. Columns: "
            f"{', '.join(map(str, frame.columns))}"
        )
    for name in columns:
        if name not in frame.columns:
            frame[name] = empty_column(name, len(frame))
    out = frame[columns]
    out.attrs = {"feature_columns": [c for c in frame.attrs.get("feature_columns", [])
                                     if c in columns]}
    return out


# ---------------------------------------------------------------------- reading
# The units of work below run inside the store's read transaction (``Store._execute``); a row
# they cannot read raises ``frame.CorruptRow``, which the store reports as a damaged store.


class RunRows(NamedTuple):
    """What the statement of a :class:`RunsQuery` gave: its column names and its rows."""

    names: list[str]
    rows: list[tuple[Any, ...]]


class StoredRun(NamedTuple):
    """One run as :func:`read_run` read it: its record (JSON parsed) and its iteration rows."""

    record: dict[str, Any]
    iterations: list[IterationRow]


def read_runs(conn: Any, query: RunsQuery) -> RunRows:
    """Run the statement of ``query`` on ``conn``."""
    cursor = conn.execute(query.sql, query.params)
    return RunRows([d[0] for d in cursor.description], cursor.fetchall())


def runs_frame(query: RunsQuery, got: RunRows, columns: list[str] | None) -> pd.DataFrame:
    """The frame :meth:`Store.runs` returns, from the rows its ``query`` gave.

    Raises
    ------
    CorruptRow
        A cell the frame cannot read (a tampered store).
    ValueError
        A filter or a column names no column of the frame.
    """
    from gpuperf_magics.store.frame import build_runs_frame

    data = list(zip(*got.rows, strict=True)) if got.rows else [()] * len(got.names)
    by_name = {name: list(values) for name, values in zip(got.names, data, strict=True)}
    nested = {g: by_name.pop(g) for g in (*query.groups, "hardware") if g in by_name}
    frame = filter_frame(build_runs_frame(by_name, nested), query.later)
    return frame if columns is None else select_columns(frame, columns)


def read_iterations(conn: Any, run_ids: list[int], shown: str) -> list[IterationRow]:
    """The iteration rows of the runs ``run_ids`` of the store ``shown``, by run and index.

    Raises
    ------
    RunNotFoundError
        For the first id that is not in the store.
    """
    wanted = sorted(set(run_ids))
    found: set[int] = set()
    rows: list[tuple[Any, ...]] = []
    for chunk in chunked(wanted):
        marks = ", ".join("?" * len(chunk))
        found.update(int(i) for (i,) in conn.execute(
            f"SELECT id FROM runs WHERE id IN ({marks})", chunk))
        rows.extend(conn.execute(
            f"SELECT run_id, {', '.join(ITERATION_FIELDS)} FROM iterations "
            f"WHERE run_id IN ({marks}) ORDER BY run_id, idx", chunk))
    absent = [i for i in run_ids if i not in found]
    if absent:
        raise RunNotFoundError(absent[0], shown)
    return [row._replace(phases=phases(row.run_id, row.phases))
            for row in map(IterationRow._make, rows)]


def phases(run_id: Any, text: Any) -> Any:
    """An iteration's stored phases (JSON text) as a dict, None when it has none.

    Raises
    ------
    CorruptRow
        The text is not a JSON object.
    """
    from gpuperf_magics.store.frame import CorruptRow

    try:
        value = from_json(text, None)
    except ValueError:
        value = ""
    if value is not None and not isinstance(value, dict):
        raise CorruptRow(f"run {run_id}: an iteration's phases hold {str(text)[:60]!r}, "
                         "not a JSON object")
    return value


def read_run(conn: Any, run_id: int, shown: str) -> StoredRun:
    """The run ``run_id`` of the store ``shown``, with its iteration rows.

    Raises
    ------
    RunNotFoundError
        The run is not in the store.
    CorruptRow
        A JSON cell of the run does not parse.
    """
    from gpuperf_magics.store.frame import CorruptRow

    cursor = conn.execute(select_runs([*RUN_SELECT, "hardware"]) + " WHERE r.id = ?", (run_id,))
    row = cursor.fetchone()
    if row is None:
        raise RunNotFoundError(run_id, shown)
    try:
        record = parse_run([d[0] for d in cursor.description], row)
    except ValueError as exc:
        raise CorruptRow(str(exc)) from None
    its = [IterationRow(run_id, *row) for row in conn.execute(SELECT_ITERATIONS, (run_id,))]
    return StoredRun(record, its)


def as_run(stored: StoredRun, store_path: str) -> Run:
    """The :class:`~gpuperf_magics.run.Run` a stored run was, iterations included.

    Raises
    ------
    CorruptRow, TypeError, ValueError
        A value the run cannot hold (a tampered store).
    """
    from gpuperf_magics.run import IterationRecord, Run

    record = stored.record
    return Run(
        network=record["network"],
        status=record["status"],
        iterations=[
            IterationRecord(
                index=it.idx,
                duration_s=float(it.duration_s),
                samples=it.samples,
                warmup=bool(it.warmup),
                phases=phases(it.run_id, it.phases),
                skipped_step=bool(it.skipped_step),
                micro_batches=it.micro_batches,
            )
            for it in stored.iterations
        ],
        batch_size=record["batch_size"],
        device=record["device"] or ("cuda" if record["gpu"] else "cpu"),
        gpu=record["gpu"],
        gpu_count=record["gpu_count"],
        hardware=record["hardware"],
        architecture=record["arch"],
        hyper=record["hyper"],
        quality=record["quality"],
        tags=record["tags"],
        features=record["features"],
        notes=record["notes"],
        error=record["error"],
        peak_memory_gb=record["peak_memory_gb"],
        created_at=record["created_at"],
        source=record["source"],
        run_id=record["run_id"],
        store_path=store_path,
    )
