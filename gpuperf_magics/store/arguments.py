"""What the store's methods take, checked and normalised before any store is opened: run ids,
column lists, ``since=`` bounds, filter values (no SQL, no pandas)."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta, timezone
from typing import Any

from gpuperf_magics.store.encoding import format_timestamp, parse_timestamp


def column_list(columns: Sequence[str] | str | None) -> list[str] | None:
    """``columns=`` of :meth:`Store.runs` as a list of names (one name alone is a list of one)."""
    if columns is None:
        return None
    listed = [columns] if isinstance(columns, str) else list(columns)
    if not listed or not all(isinstance(c, str) for c in listed):
        raise ValueError(f"columns= takes a list of column names, not {listed!r}")
    return listed


def as_list(name: str, value: Any) -> list[Any]:
    """``value`` as a list: one value alone is a list of one."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        return [value]
    values = list(value)
    if any(isinstance(v, (list, tuple, set, dict)) for v in values):
        raise TypeError(f"{name}= takes a value or a list of values, not {value!r}")
    return values


def since_text(value: Any) -> str:
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
