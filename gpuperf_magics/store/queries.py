"""Reading runs back: the filters of :meth:`Store.runs` as one SQL query, and what is left for
the built frame (filters on JSON groups and features, the chosen columns).

Filters on the runs table's own columns, on ``tags`` and on ``since`` run in SQL; a filter on a
hardware, architecture, hyper-parameter or feature column is applied to the rows those select.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, NamedTuple

from gpuperf_magics.columns import KINDS, group_of
from gpuperf_magics.store.encoding import format_timestamp, parse_timestamp, sql_value
from gpuperf_magics.store.records import RUN_SELECT, select_runs

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
    import numpy as np

    from gpuperf_magics.store.frame import _spread

    unknown = [c for c in columns if c not in frame.columns and c not in KINDS]
    if unknown and not frame.empty:
        raise ValueError(
            f"runs() has no column {', '.join(map(repr, unknown))}. Columns: "
            f"{', '.join(map(str, frame.columns))}"
        )
    for name in columns:
        if name not in frame.columns:
            frame[name] = _spread(name, [], np.full(len(frame), -1), KINDS.get(name))
    out = frame[columns]
    out.attrs = {"feature_columns": [c for c in frame.attrs.get("feature_columns", [])
                                     if c in columns]}
    return out
