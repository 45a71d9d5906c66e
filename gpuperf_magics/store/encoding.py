"""How run values become SQLite values and JSON text, and back."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import date, datetime, timezone
from typing import Any

from gpuperf_magics._checks import plain


def _json_default(value: Any) -> Any:
    value = plain(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    # Anything else (a torch.dtype, a Path ...) is kept as its text rather than failing a save.
    return str(value)


def to_json(value: Any) -> str:
    """Canonical JSON text (sorted keys), tolerant of numpy scalars and odd objects."""
    return json.dumps(value, sort_keys=True, default=_json_default, separators=(",", ":"))


def from_json(text: str | None, empty: Any) -> Any:
    """Parse JSON text from a column; ``empty`` for NULL."""
    if text is None:
        return empty
    return json.loads(text)


def fingerprint(hardware: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a hardware dict: equal dicts share one row."""
    return hashlib.sha256(to_json(hardware).encode()).hexdigest()


def sql_value(value: Any) -> Any:
    """A value SQLite can bind: numpy scalars unwrapped, bools as 0/1, NaN as NULL."""
    value = plain(value)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def now_utc() -> str:
    """The current time as the store writes timestamps."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def parse_timestamp(value: Any, *, naive: str = "utc") -> datetime:
    """A timezone-aware UTC datetime from an ISO-8601 string, datetime or date.

    Parameters
    ----------
    value : str, datetime or date
        ``Z`` suffixes are accepted (Python 3.10's ``fromisoformat`` refuses them).
    naive : {"utc", "local"}
        How to read values without a timezone: stored timestamps are UTC by contract; a
        ``since=`` typed by a user means local time.

    Raises
    ------
    ValueError
        When the value is not a date or time.
    """
    value = plain(value)
    if hasattr(value, "to_pydatetime"):  # pandas.Timestamp
        value = value.to_pydatetime()
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        moment = datetime.fromisoformat(text)
    else:
        raise ValueError(f"not a date or time: {value!r}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc) if naive == "utc" else moment.astimezone()
    return moment.astimezone(timezone.utc)


def format_timestamp(moment: datetime) -> str:
    """Fixed-width ISO-8601 UTC text, so that SQL string comparison orders by time."""
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")
