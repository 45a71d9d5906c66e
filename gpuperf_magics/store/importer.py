"""Checking and mapping a table measured elsewhere into run records, before anything is written.

Every problem of every row is collected first and reported in one
:class:`~gpuperf_magics.store.errors.ImportValidationError`, so a user fixes a file in one pass
and a half-valid file never half-lands in the store.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from pandas.api import types as ptypes

from gpuperf_magics._checks import is_missing, plain
from gpuperf_magics.columns import COLUMNS, KINDS, STATUSES, group_of
from gpuperf_magics.store.encoding import format_timestamp, now_utc, parse_timestamp
from gpuperf_magics.store.errors import ImportValidationError

__all__ = [
    "COMMAND_LINE",
    "PYTHON",
    "RowLocator",
    "Spelling",
    "prepare_records",
    "source_name",
    "spelled",
    "text_columns",
]

#: Columns a table must have after the mapping (``network`` may come from the argument).
REQUIRED = ("time_s", "batch_size")
_MAX_ROWS_SHOWN = 8
#: Shortest time a row may give (seconds).
MIN_SECONDS = 1e-9
_UID = re.compile(r"[0-9a-f]{32}")
#: Hardware figures that must be > 0 when given (the predictor divides by them); the base
#: column ``batch_size`` is checked on its own, as a whole number >= 1.
POSITIVE = frozenset(c.name for c in COLUMNS if c.positive and c.group != "base")
#: Hardware figures that let a row name a GPU the catalog lacks (what predictions need).
_GPU_FIGURES = ("gpu_fp32_tflops", "gpu_bandwidth_gbs")


@dataclass(frozen=True)
class Spelling:
    """How messages name the options of an import: a message tells its reader what to type,
    so a user of ``gpuperf import --map`` is not told to pass ``mapping={...}``.

    Attributes
    ----------
    mapping : str
        The option as a whole (``"mapping"``, ``"--map"``).
    map_to : str
        How to map a column to the canonical name ``{name}``.
    drop : str
        How to drop a column.
    network, gpu : str
        How to give every row's network or GPU.
    """

    mapping: str
    map_to: str
    drop: str
    network: str
    gpu: str


#: Messages for :meth:`Store.import_table` (the default).
PYTHON = Spelling("mapping", "mapping={{'<column>': '{name}'}}", "map it to None",
                  "network=...", "the gpu argument")
#: Messages for ``gpuperf import``.
COMMAND_LINE = Spelling("--map", "--map COLUMN={name}", "--map COLUMN= with nothing after =",
                        "--network NAME", "--gpu")
_SPELLING: ContextVar[Spelling] = ContextVar("import_spelling", default=PYTHON)


@contextlib.contextmanager
def spelled(spelling: Spelling) -> Iterator[None]:
    """Word the import errors raised inside the block for ``spelling``'s interface."""
    token = _SPELLING.set(spelling)
    try:
        yield
    finally:
        _SPELLING.reset(token)


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
class _Problems:
    locator: RowLocator
    lines: list[str] = field(default_factory=list)

    def add(self, column: str, what: str, positions: list[int] | None = None,
            example: Any = None, hint: str = "") -> None:
        where = f" at {self.locator.describe(positions)}" if positions else ""
        shown = f" (e.g. {example!r})" if example is not None else ""
        self.lines.append(f"column {column}: {what}{where}{shown}{hint}")


def text_columns(header: list[str], mapping: Mapping[str, str | None] | None) -> list[str]:
    """File columns to read as text: those mapped to canonical text columns, and ``tags``.

    CSV readers guess types; a driver "535.10" or CUDA "12.0" must stay a string.
    """
    mapping = dict(mapping or {})
    out = []
    for name in header:
        target = mapping.get(name, name)
        if target is not None and KINDS.get(target) in ("str", "dict"):
            out.append(name)
    return out


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


def _seconds(column: pd.Series) -> pd.Series:
    """A duration column (Timedelta, datetime.timedelta) in seconds; others unchanged."""
    if ptypes.is_timedelta64_dtype(column):
        return column.dt.total_seconds()
    if column.dtype == object and any(hasattr(v, "total_seconds") for v in column.tolist()):
        return column.map(lambda v: v.total_seconds() if hasattr(v, "total_seconds") else v)
    return column


def _blank_to_missing(column: pd.Series) -> pd.Series:
    if ptypes.is_numeric_dtype(column) or ptypes.is_bool_dtype(column):
        return column
    return column.map(lambda v: None if isinstance(v, str) and not v.strip() else v)


_TRUE = {"true", "1", "yes", "y", "t"}
_FALSE = {"false", "0", "no", "n", "f"}


class _Table:
    """One imported frame after the mapping, with typed access to its columns."""

    def __init__(self, frame: pd.DataFrame, labels: dict[str, str], problems: _Problems):
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
        column = _seconds(self.frame[name])
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
        column = _seconds(self.frame[name])
        if ptypes.is_numeric_dtype(column) or ptypes.is_bool_dtype(column):
            return True
        present = column.dropna()
        return bool(len(present)) and bool(pd.to_numeric(present, errors="coerce").notna().all())


def _apply_mapping(
    frame: pd.DataFrame, mapping: Mapping[str, str | None] | None, what: str
) -> tuple[pd.DataFrame, dict[str, str]]:
    """Rename (and drop) columns; errors about the mapping itself are raised at once."""
    frame = frame.rename(columns=str)
    columns = list(frame.columns)
    mapping = dict(mapping or {})
    errors = []
    duplicated = sorted({c for c in columns if columns.count(c) > 1})
    if duplicated:
        errors.append(f"the table has several columns named {', '.join(map(repr, duplicated))}")
    unknown = [k for k in mapping if k not in columns]
    spelling = _SPELLING.get()
    if unknown:
        errors.append(
            f"{spelling.mapping} names {', '.join(map(repr, unknown))}, not a column of the "
            f"table (columns: {', '.join(map(repr, columns))})"
        )
    bad_targets = [k for k, v in mapping.items() if v is not None and not isinstance(v, str)]
    if bad_targets:
        errors.append(f"mapping values must be column names or None: {bad_targets!r}")
    sources: dict[str, list[str]] = {}
    for column in columns:
        target = mapping.get(column, column)
        if isinstance(target, str):
            sources.setdefault(target, []).append(column)
    for target, names in sources.items():
        if len(names) > 1:
            errors.append(
                f"columns {', '.join(map(repr, names))} would all become {target!r}; "
                f"drop all but one ({spelling.drop})"
            )
    if errors:
        raise ImportValidationError(
            f"cannot import {what}: " + "; ".join(errors) + ". Nothing was written.", errors
        )
    keep = [c for c in columns if isinstance(mapping.get(c, c), str)]
    renamed = frame[keep].rename(columns={c: mapping.get(c, c) for c in keep})
    labels = {mapping.get(c, c): c for c in keep}
    for name in renamed.columns:
        renamed[name] = _blank_to_missing(renamed[name])
    return renamed, labels


def prepare_records(
    frame: pd.DataFrame,
    mapping: Mapping[str, str | None] | None,
    *,
    network: str | None,
    gpu: str | None,
    source: str,
    tags: Mapping[str, str] | None,
    locator: RowLocator,
    what: str,
) -> list[dict[str, Any]]:
    """Validate an imported table and turn each row into a run record.

    Parameters
    ----------
    frame : pandas.DataFrame
        The table as read.
    mapping : mapping, optional
        Table column → canonical name (None drops the column).
    network, gpu : str, optional
        Values for rows whose column is missing or empty.
    source : str
        ``source`` of rows without their own.
    tags : mapping, optional
        Tags added to every row.
    locator : RowLocator
        How rows are named in messages.
    what : str
        The table's name in messages (file name or "the DataFrame").

    Returns
    -------
    list of dict
        Records in ``Run.to_record()`` shape, in table order.

    Raises
    ------
    ImportValidationError
        Listing every problem found; no record is returned then. A ``gpu`` name the hardware
        catalog cannot resolve is a problem unless its row fills ``gpu_fp32_tflops`` and
        ``gpu_bandwidth_gbs`` (what a prediction would otherwise take from the catalog).
    """
    problems = _Problems(locator)
    mapped, labels = _apply_mapping(frame, mapping, what)
    table = _Table(mapped, labels, problems)
    n = table.n

    missing = [name for name in REQUIRED if not table.has(name)]
    if not table.has("network") and not network:
        missing.append("network")
    spelling = _SPELLING.get()
    for name in missing:
        hint = f" or pass {spelling.network}" if name == "network" else ""
        problems.add(f"'{name}'", f"missing: map a column to it with "
                     f"{spelling.map_to.format(name=name)}{hint} (columns: "
                     f"{', '.join(map(repr, frame.columns))})")

    def column(name: str, default: Any = None) -> list[Any]:
        return table.typed(name, KINDS.get(name)) if table.has(name) else [default] * n

    status = column("status")
    status = [None if s is None else s.lower() for s in status]
    if table.has("status"):
        table.check("status", status, lambda v, _: v in STATUSES,
                    f"not one of {', '.join(STATUSES)}")
    status = [s if s in STATUSES else "ok" for s in status]

    def ok_row(pos: int) -> bool:
        return status[pos] == "ok"

    time_s = column("time_s")
    if table.has("time_s"):
        table.require("time_s")
        table.check("time_s", time_s, lambda v, p: v > 0 if ok_row(p) else v >= 0,
                    "not a positive number of seconds")
        # Below a nanosecond is no measured time (and makes the throughput infinite).
        table.check("time_s", time_s, lambda v, p: v <= 0 or v >= MIN_SECONDS,
                    f"below {MIN_SECONDS:g} s, not a measured time")
    batch = column("batch_size")
    if table.has("batch_size"):
        table.check("batch_size", batch, lambda v, _: v >= 1, "not a positive whole number")
    iterations = column("iterations", 1)
    if table.has("iterations"):
        table.require("iterations")
        table.check("iterations", iterations, lambda v, p: v >= 1 if ok_row(p) else v >= 0,
                    "not a positive whole number")
        iterations = [1 if v is None else v for v in iterations]

    networks = column("network")
    if table.has("network") and not network:
        table.require("network")
    networks = [v or network for v in networks]
    gpus = [v or gpu for v in column("gpu")]
    gpu_count = column("gpu_count")
    if table.has("gpu_count"):
        table.check("gpu_count", gpu_count, lambda v, _: v >= 0, "not a count (>= 0)")
    gpu_count = [
        c if c is not None else (1 if g else 0) for c, g in zip(gpu_count, gpus, strict=True)
    ]
    sources = [v or source for v in column("source")]

    created_at: list[str] = [now_utc()] * n
    if table.has("created_at"):
        bad = []
        for pos, value in enumerate(table.texts("created_at")):
            if value is None:
                continue
            try:
                created_at[pos] = format_timestamp(parse_timestamp(value))
            except ValueError:
                bad.append(pos)
        if bad:
            problems.add(table.label("created_at"), "not an ISO-8601 date/time", bad,
                         table.values("created_at")[bad[0]])

    flat = {
        name: column(name)
        for name in ("device", "error", "it_median_s", "it_p90_s", "it_mean_s", "it_std_s",
                     "samples_per_s", "warmup_iterations", "recorded_iterations", "run_uid",
                     "recorded_host", "recorded_user", "peak_memory_gb")
    }
    for name in ("warmup_iterations", "recorded_iterations"):
        if table.has(name):
            table.check(name, flat[name], lambda v, _: v >= 0, "not a count (>= 0)")
    for name in ("it_median_s", "it_p90_s", "it_mean_s", "it_std_s", "samples_per_s",
                 "peak_memory_gb"):
        if table.has(name):
            table.check(name, flat[name], lambda v, _: v >= 0, "not a number >= 0")
    if table.has("run_uid"):
        table.check("run_uid", flat["run_uid"], lambda v, _: bool(_UID.fullmatch(v)),
                    "not a run uid (32 hexadecimal digits, as Store.export writes)")

    nested: dict[str, dict[str, list[Any]]] = {
        "hardware": {}, "arch": {}, "hyper": {}, "quality": {}, "features": {}, "tags": {},
    }
    json_tags: list[dict[str, str]] = [{} for _ in range(n)]
    for name in mapped.columns:
        group = group_of(name)
        if group in ("base", "ignore"):
            continue
        if group == "tags":
            json_tags = _json_tags(table, name)
        elif group == "other":
            if mapped[name].isna().all():
                continue  # an empty column says nothing
            guess = "float" if table.is_numeric(name) else "str"
            values = (table.numbers(name, canonical=False) if guess == "float"
                      else table.texts(name))
            nested["features" if guess == "float" else "tags"][name] = values
        else:
            kind = KINDS.get(name)
            values = table.typed(name, kind)
            if kind in ("int", "float"):
                # Counts, sizes, rates and spec-sheet figures are never negative; a GPU's
                # peak or bandwidth of 0 would divide predictions by zero.
                if name in POSITIVE:
                    table.check(name, values, lambda v, _: v > 0, "not a positive number")
                else:
                    table.check(name, values, lambda v, _: v >= 0, "not a number >= 0")
            nested[group][name] = values

    _check_gpus(table, gpus, nested["hardware"])

    _raise_problems(problems, what, locator)

    records = []
    for pos in range(n):
        record: dict[str, Any] = {
            "network": networks[pos],
            "batch_size": None if batch[pos] is None else int(batch[pos]),
            "iterations": int(iterations[pos]),
            "time_s": float(time_s[pos]),
            "status": status[pos],
            "source": sources[pos],
            "created_at": created_at[pos],
            "gpu": gpus[pos],
            "gpu_count": int(gpu_count[pos]),
        }
        record.update({name: values[pos] for name, values in flat.items()})
        for name in ("warmup_iterations", "recorded_iterations"):
            if record[name] is not None:
                record[name] = int(record[name])
        _derive(record)
        for name in ("it_mean_s", "samples_per_s"):
            value = record[name]
            if value is not None and not math.isfinite(value):
                problems.add(table.label("time_s"), f"gives an infinite {name}", [pos])
        for group, columns in nested.items():
            record[group] = {k: v[pos] for k, v in columns.items() if v[pos] is not None}
        extra = {str(k): str(v) for k, v in (tags or {}).items()}
        record["tags"] = {**json_tags[pos], **record["tags"], **extra}
        record["notes"] = []
        records.append(record)
    _raise_problems(problems, what, locator)
    return records


def _raise_problems(problems: _Problems, what: str, locator: RowLocator) -> None:
    if not problems.lines:
        return
    count = len(problems.lines)
    message = (
        f"cannot import {what}: {count} problem{'s' if count > 1 else ''}; nothing was "
        "written.\n  - " + "\n  - ".join(problems.lines)
        + f"\nFix the table or the mapping "
        f"({_SPELLING.get().map_to.format(name='<canonical name>')}) and "
        f"import again. {locator.note}"
    )
    raise ImportValidationError(message, list(problems.lines))


def _check_gpus(table: _Table, gpus: list[Any], hardware: Mapping[str, list[Any]]) -> None:
    """Report GPU names the catalog cannot resolve, unless the row gives the figures itself.

    Predictions need each GPU's FP32 peak and memory bandwidth: from the catalog by name, or
    from the row's own ``gpu_fp32_tflops`` and ``gpu_bandwidth_gbs``. A name that gives
    neither would be stored and only fail later, far from the file that caused it.
    """
    from gpuperf_magics.hardware.catalog import UnknownGPUError, lookup

    figures = [hardware.get(name, [None] * table.n) for name in _GPU_FIGURES]
    unresolved: dict[str, tuple[UnknownGPUError, list[int]]] = {}
    for pos, name in enumerate(gpus):
        if not isinstance(name, str) or not name.strip():
            continue
        if all(values[pos] is not None for values in figures):
            continue
        if name in unresolved:
            unresolved[name][1].append(pos)
            continue
        try:
            lookup(name)
        except UnknownGPUError as exc:
            unresolved[name] = (exc, [pos])
    for name, (error, positions) in unresolved.items():
        label = (table.label("gpu") if table.has("gpu")
                 else f"'gpu' ({_SPELLING.get().gpu})")
        what = error.reason.split(";")[0] if error.reason else f"unknown GPU {name!r}"
        close = (f"; close matches: {', '.join(error.candidates)}" if error.candidates
                 else "; no close match among gpuperf_magics.gpus()")
        table.problems.add(
            label, what, positions,
            hint=f"{close}; a GPU the catalog lacks needs the columns "
            f"{' and '.join(_GPU_FIGURES)} filled in its rows (or "
            "gpuperf_magics.hardware.catalog.add_gpus)",
        )


def _derive(record: dict[str, Any]) -> None:
    """Statistics an imported row implies: mean seconds per iteration and throughput."""
    time_s, iterations, batch = record["time_s"], record["iterations"], record["batch_size"]
    if record["it_mean_s"] is None and iterations:
        record["it_mean_s"] = time_s / iterations
    if record["samples_per_s"] is None and batch and time_s > 0:
        record["samples_per_s"] = batch * iterations / time_s


def _json_tags(table: _Table, name: str) -> list[dict[str, str]]:
    """A ``tags`` column as written by ``Store.export``: one JSON object per cell."""
    out: list[dict[str, str]] = []
    bad = []
    for pos, value in enumerate(table.values(name)):
        if is_missing(value, blank_text=False):
            out.append({})
            continue
        if isinstance(value, dict):
            parsed: Any = value
        else:
            try:
                parsed = json.loads(str(value))
            except ValueError:
                parsed = None
        if not isinstance(parsed, dict):
            bad.append(pos)
            out.append({})
        else:
            out.append({str(k): str(v) for k, v in parsed.items()
                        if not is_missing(v, blank_text=False)})
    if bad:
        table.problems.add(table.label(name), 'not a JSON object such as {"key": "value"}', bad,
                           table.values(name)[bad[0]])
    return out


def source_name(source: Any) -> tuple[Path | None, str]:
    """(path or None, name used in messages and in the default ``source``)."""
    if isinstance(source, pd.DataFrame):
        return None, "the DataFrame"
    path = Path(source).expanduser()
    return path, path.name
