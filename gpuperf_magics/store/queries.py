"""Reading runs back: the filters of :meth:`Store.runs` as one SQLAlchemy Core query, and what
is left for the built frame (filters on JSON groups and features, the chosen columns); the
reads of :meth:`Store.runs`, :meth:`Store.iterations` and :meth:`Store.get_run` as units of
work on an open connection, and their rows as a frame.

Filters on the runs table's own columns, on ``tags`` and on ``since`` run in SQL; a filter on a
hardware, architecture, hyper-parameter or feature column is applied to the rows those select.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import sqlalchemy as sa

from gpuperf_magics.columns import KINDS, group_of
from gpuperf_magics.store.arguments import as_list, since_text
from gpuperf_magics.store.encoding import from_json, sql_value
from gpuperf_magics.store.errors import CorruptRow, RunNotFoundError
from gpuperf_magics.store.records import (
    RUN_SELECT,
    SELECT_ITERATIONS,
    driver_rows,
    select_runs,
    tag_value,
)
from gpuperf_magics.store.rows import ITERATION_FIELDS, IterationRow, chunked, parse_run
from gpuperf_magics.store.tables import iterations, runs

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

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
    statement : sqlalchemy.Select
        The statement, its values bound.
    names : list of str
        The columns the statement selects (an absent store answers with these and no rows).
    groups : list of str
        The JSON groups it reads.
    later : dict
        Equality filters on columns outside the runs table, for :func:`filter_frame`.
    """

    statement: Any
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
    """The statement that selects the runs :meth:`Store.runs` asks for, on a ``kind`` store
    (``"sqlite"`` or ``"postgresql"``: they read a tag out of the JSON differently)."""
    clauses: list[Any] = []
    for name, value in (("network", network), ("status", status), ("gpu", gpu),
                        ("source", source)):
        if value is not None:
            clauses.append(_where(name, as_list(name, value)))
    if since is not None:
        clauses.append(runs.c.created_at >= since_text(since))
    later: dict[str, Any] = {}
    for name, value in (where or {}).items():
        if name in FLAT:
            listed = list(value) if isinstance(value, (list, tuple, set, frozenset)) \
                else [value]
            clauses.append(_where(name, listed))
        else:
            later[name] = value
    for key, value in {str(k): str(v) for k, v in (tags or {}).items()}.items():
        clauses.append(tag_value(kind, key) == value)

    groups = groups_needed(columns, later)
    flat = ["run_id", *sorted(c for c in FLAT if c != "run_id")] if columns is None \
        else ["run_id", *[c for c in columns if c in FLAT and c != "run_id"]]
    names = [*flat, *(g for g in groups if g in RUN_SELECT)]
    if "hardware" in groups:
        names.append("hardware")
    statement = select_runs(names).where(*clauses).order_by(runs.c.id)
    return RunsQuery(statement, names, groups, later)


def _where(name: str, values: list[Any]) -> Any:
    """``name`` is one of ``values`` (None: the cell is empty); nothing matches an empty list."""
    column = RUN_SELECT[name]
    present = [sql_value(v) for v in values if v is not None]
    parts = []
    if present:
        parts.append(column.in_(present))
    if len(present) < len(values):
        parts.append(column.is_(None))
    return sa.or_(*parts) if parts else sa.false()


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
# they cannot read raises ``errors.CorruptRow``, which the store reports as a damaged store.


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
    result = conn.execute(query.statement)
    return RunRows(list(result.keys()), result.all())


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


#: Statements of every read of iterations, built once (their ``ids`` bound per call).
_IDS_IN = sa.select(runs.c.id).where(runs.c.id.in_(sa.bindparam("ids", expanding=True)))
ITERATIONS_IN = (
    sa.select(iterations.c.run_id, *(iterations.c[n] for n in ITERATION_FIELDS))
    .where(iterations.c.run_id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(iterations.c.run_id, iterations.c.idx)
)


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
        # The driver's cursor: plain tuples, not SQLAlchemy rows (records.driver_rows).
        found.update(int(i) for (i,) in driver_rows(conn, _IDS_IN, {"ids": chunk}))
        rows.extend(driver_rows(conn, ITERATIONS_IN, {"ids": chunk}))
    absent = [i for i in run_ids if i not in found]
    if absent:
        raise RunNotFoundError(absent[0], shown)
    make = IterationRow._make
    # Most iterations have no phases (NULL): only the others are parsed.
    return [make(row) if row[-1] is None else make((*row[:-1], phases(row[0], row[-1])))
            for row in rows]


def phases(run_id: Any, text: Any) -> Any:
    """An iteration's stored phases (JSON text) as a dict, None when it has none.

    Raises
    ------
    CorruptRow
        The text is not a JSON object.
    """
    try:
        value = from_json(text, None)
    except ValueError:
        value = ""
    if value is not None and not isinstance(value, dict):
        raise CorruptRow(f"run {run_id}: an iteration's phases hold {str(text)[:60]!r}, "
                         "not a JSON object")
    return value


#: One run with its hardware, built once (a select of every column costs more to build than
#: to run).
_SELECT_RUN = select_runs([*RUN_SELECT, "hardware"]).where(runs.c.id == sa.bindparam("run_id"))


def read_run(conn: Any, run_id: int, shown: str) -> StoredRun:
    """The run ``run_id`` of the store ``shown``, with its iteration rows.

    Raises
    ------
    RunNotFoundError
        The run is not in the store.
    CorruptRow
        A JSON cell of the run does not parse.
    """
    result = conn.execute(_SELECT_RUN, {"run_id": run_id})
    row = result.first()
    if row is None:
        raise RunNotFoundError(run_id, shown)
    try:
        record = parse_run(list(result.keys()), row)
    except ValueError as exc:
        raise CorruptRow(str(exc)) from None
    its = [IterationRow(run_id, *row)
           for row in conn.execute(SELECT_ITERATIONS, {"run_id": run_id}).all()]
    return StoredRun(record, its)
