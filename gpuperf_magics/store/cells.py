"""Reading the cells of an imported table: typed columns, and the problems found in them.

A :class:`Table` reads one column at a time as numbers, whole numbers, booleans, text or the
kind a canonical column holds, and writes what it cannot read into :class:`Problems`, which
name the rows the way the user sees them (:class:`RowLocator`: file lines, rows or index
labels), so that one message lists everything wrong with a table.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pandas.api import types as ptypes

from gpuperf_magics._checks import is_missing, plain

#: Rows a message names before it says "and N more".
_MAX_ROWS_SHOWN = 8


@dataclass(frozen=True)
class RowLocator:
    """How rows are named in messages: file lines for CSV, 1-based rows, or index labels.

    Attributes
    ----------
    noun, plural : str
        ``"line"``/``"lines"``, ``"row"``/``"rows"`` or ``"index"``/``"index labels"``.
    label : callable
        Row position (0-based) → its label.
    note : str
        Explains the numbering at the end of the message.
    """

    noun: str
    plural: str
    label: Callable[[int], str]
    note: str = ""

    @classmethod
    def for_source(cls, source: Any, frame: pd.DataFrame, fmt: str | None) -> RowLocator:
        """Locator for a frame read from a file of format ``fmt`` (None: given as a frame)."""
        if fmt in ("csv", "tsv"):
            return cls("line", "lines", lambda pos: str(pos + 2),
                       "Line numbers are those of the file: the header is line 1.")
        if fmt is not None:
            return cls("row", "rows", lambda pos: str(pos + 1),
                       "Rows are numbered from 1 (the first data row).")
        index = frame.index
        return cls("index", "index labels", lambda pos: repr(plain(index[pos])),
                   "Rows are named by the DataFrame's index labels (df.loc).")

    def describe(self, positions: list[int]) -> str:
        shown = [self.label(p) for p in positions[:_MAX_ROWS_SHOWN]]
        more = len(positions) - len(shown)
        text = f"{self.noun if len(positions) == 1 else self.plural} {', '.join(shown)}"
        return text + (f" and {more} more" if more else "")


@dataclass
class Problems:
    locator: RowLocator
    lines: list[str] = field(default_factory=list)

    def add(self, column: str, what: str, positions: list[int] | None = None,
            example: Any = None, hint: str = "") -> None:
        where = f" at {self.locator.describe(positions)}" if positions else ""
        shown = f" (e.g. {example!r})" if example is not None else ""
        self.lines.append(f"column {column}: {what}{where}{shown}{hint}")


_INT64 = 2**63


def _number(value: Any) -> float | None:
    """A cell as a float, or None when it is not a number."""
    if isinstance(value, (int, float)):
        try:
            number = float(value)
        except OverflowError:  # an int beyond any float: still a number, too large
            return math.inf
    elif isinstance(value, str) and "_" not in value:  # float() would read "1_000"
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return None if math.isnan(number) else number


def seconds(column: pd.Series) -> pd.Series:
    """A duration column (Timedelta, datetime.timedelta) in seconds; others unchanged."""
    if ptypes.is_timedelta64_dtype(column):
        return column.dt.total_seconds()
    if column.dtype == object and any(hasattr(v, "total_seconds") for v in column.tolist()):
        return column.map(lambda v: v.total_seconds() if hasattr(v, "total_seconds") else v)
    return column


def blank_to_missing(column: pd.Series) -> pd.Series:
    if ptypes.is_numeric_dtype(column) or ptypes.is_bool_dtype(column):
        return column
    return column.map(lambda v: None if isinstance(v, str) and not v.strip() else v)


_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


class Table:
    """One imported frame after the mapping, with typed access to its columns."""

    def __init__(self, frame: pd.DataFrame, labels: dict[str, str], problems: Problems):
        self.frame = frame
        self.labels = labels  # canonical name -> original file column
        self.problems = problems
        self.n = len(frame)

    def has(self, name: str) -> bool:
        return name in self.frame.columns

    def label(self, name: str) -> str:
        original = self.labels.get(name, name)
        return f"'{name}'" + (f" (file column '{original}')" if original != name else "")

    def values(self, name: str) -> list[Any]:
        return [plain(v) for v in self.frame[name].tolist()]

    def numbers(self, name: str, *, integer: bool = False,
                canonical: bool = True) -> list[float | None]:
        """Floats (None where empty); text, true/false, infinities, fractions (if integer) and
        integers beyond 64 bits reported. Durations (Timedelta) are read as seconds."""
        column = seconds(self.frame[name])
        raws = column.tolist()
        if ptypes.is_bool_dtype(column) and not canonical:
            # A yes/no column of the user's own (pretrained, augmented) is a 0/1 feature.
            raws = [None if is_missing(v, blank_text=False) else float(v) for v in raws]
        out: list[float | None] = []
        text, flags, infinite, fraction, huge = [], [], [], [], []
        for pos, raw in enumerate(raws):
            raw = plain(raw)
            if is_missing(raw, blank_text=False):
                out.append(None)
                continue
            if isinstance(raw, bool):
                # True is not 1 second nor a batch of 1.
                flags.append(pos)
                out.append(None)
                continue
            num = _number(raw)
            if num is None:
                text.append(pos)
            elif integer and isinstance(raw, int) and not -_INT64 <= raw < _INT64:
                huge.append(pos)
            elif math.isinf(num):
                infinite.append(pos)
            elif integer and num != round(num):
                fraction.append(pos)
            elif integer and not -_INT64 <= num < _INT64:
                huge.append(pos)
            else:
                out.append(float(num))
                continue
            out.append(None)
        shown = self.frame[name].tolist()
        for positions, what in ((text, "text where a number is expected"),
                                (flags, "true/false where a number is expected"),
                                (infinite, "not a finite number"),
                                (fraction, "not a whole number"),
                                (huge, "beyond the range of a 64-bit integer")):
            if positions:
                self.problems.add(self.label(name), what, positions, shown[positions[0]])
        return out

    def require(self, name: str) -> None:
        """Report empty cells of a column that needs a value in every row."""
        raw = self.frame[name].tolist()
        empty = [p for p in range(self.n) if is_missing(raw[p], blank_text=False)]
        if empty:
            self.problems.add(self.label(name), "empty cell where a value is required", empty)

    def check(self, name: str, values: list[Any], ok: Callable[[Any, int], bool],
              what: str) -> None:
        bad = [p for p, v in enumerate(values) if v is not None and not ok(v, p)]
        if bad:
            self.problems.add(self.label(name), what, bad, self.frame[name].tolist()[bad[0]])

    def texts(self, name: str) -> list[str | None]:
        return [None if is_missing(v, blank_text=False) else str(v).strip()
                for v in self.values(name)]

    def bools(self, name: str) -> list[bool | None]:
        out: list[bool | None] = []
        bad = []
        for pos, value in enumerate(self.values(name)):
            if is_missing(value, blank_text=False):
                out.append(None)
            elif isinstance(value, bool):
                out.append(value)
            elif isinstance(value, (int, float)) and value in (0, 1):
                out.append(bool(value))
            elif isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                out.append(value.strip().lower() in _TRUE)
            else:
                bad.append(pos)
                out.append(None)
        if bad:
            self.problems.add(self.label(name), "not true/false", bad, self.values(name)[bad[0]])
        return out

    def typed(self, name: str, kind: str | None) -> list[Any]:
        """Values of a column by canonical kind; ``None`` kind: numbers if all are numbers."""
        if kind == "int":
            return [None if v is None else int(v) for v in self.numbers(name, integer=True)]
        if kind == "float":
            return self.numbers(name)
        if kind == "bool":
            return self.bools(name)
        if kind == "str":
            return self.texts(name)
        if self.is_numeric(name):
            return self.numbers(name, canonical=False)
        return self.texts(name)

    def is_numeric(self, name: str) -> bool:
        column = seconds(self.frame[name])
        if ptypes.is_numeric_dtype(column) or ptypes.is_bool_dtype(column):
            return True
        present = column.dropna()
        return bool(len(present)) and bool(pd.to_numeric(present, errors="coerce").notna().all())
