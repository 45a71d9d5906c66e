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
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from gpuperf_magics._checks import is_missing
from gpuperf_magics.columns import COLUMNS, KINDS, STATUSES, group_of
from gpuperf_magics.store.cells import (
    Problems,
    RowLocator,
    Table,
    blank_to_missing,
)
from gpuperf_magics.store.encoding import format_timestamp, now_utc, parse_timestamp
from gpuperf_magics.store.errors import ImportValidationError

#: Columns a table must have after the mapping (``network`` may come from the argument).
REQUIRED = ("time_s", "batch_size")
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
        renamed[name] = blank_to_missing(renamed[name])
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
    problems = Problems(locator)
    mapped, labels = _apply_mapping(frame, mapping, what)
    table = Table(mapped, labels, problems)
    _check_required(table, frame, network)
    base = _base_fields(table, network=network, gpu=gpu, source=source)
    flat = _flat_stats(table)
    nested, json_tags = _nested_groups(table)
    _check_gpus(table, base["gpu"], nested["hardware"])
    _raise_problems(problems, what, locator)
    extra = {str(k): str(v) for k, v in (tags or {}).items()}
    records = [_record(table, pos, base, flat, nested, json_tags[pos], extra)
               for pos in range(table.n)]
    _raise_problems(problems, what, locator)
    return records


def _column(table: Table, name: str, default: Any = None) -> list[Any]:
    """A canonical column's typed values; ``default`` in every row when the table lacks it."""
    return table.typed(name, KINDS.get(name)) if table.has(name) else [default] * table.n


def _check_required(table: Table, frame: pd.DataFrame, network: str | None) -> None:
    """A problem per column the table must have (``network`` unless given as an argument)."""
    missing = [name for name in REQUIRED if not table.has(name)]
    if not table.has("network") and not network:
        missing.append("network")
    spelling = _SPELLING.get()
    for name in missing:
        hint = f" or pass {spelling.network}" if name == "network" else ""
        table.problems.add(f"'{name}'", f"missing: map a column to it with "
                           f"{spelling.map_to.format(name=name)}{hint} (columns: "
                           f"{', '.join(map(repr, frame.columns))})")


def _base_fields(table: Table, *, network: str | None, gpu: str | None,
                 source: str) -> dict[str, list[Any]]:
    """The run's own columns, checked, with the arguments' values where a row has none."""
    status = [None if s is None else s.lower() for s in _column(table, "status")]
    if table.has("status"):
        table.check("status", status, lambda v, _: v in STATUSES,
                    f"not one of {', '.join(STATUSES)}")
    status = [s if s in STATUSES else "ok" for s in status]

    def ok_row(pos: int) -> bool:
        return status[pos] == "ok"

    time_s = _column(table, "time_s")
    if table.has("time_s"):
        table.require("time_s")
        table.check("time_s", time_s, lambda v, p: v > 0 if ok_row(p) else v >= 0,
                    "not a positive number of seconds")
        # Below a nanosecond is no measured time (and makes the throughput infinite).
        table.check("time_s", time_s, lambda v, p: v <= 0 or v >= MIN_SECONDS,
                    f"below {MIN_SECONDS:g} s, not a measured time")
    batch = _column(table, "batch_size")
    if table.has("batch_size"):
        table.check("batch_size", batch, lambda v, _: v >= 1, "not a positive whole number")
    iterations = _column(table, "iterations", 1)
    if table.has("iterations"):
        table.require("iterations")
        table.check("iterations", iterations, lambda v, p: v >= 1 if ok_row(p) else v >= 0,
                    "not a positive whole number")
        iterations = [1 if v is None else v for v in iterations]

    networks = _column(table, "network")
    if table.has("network") and not network:
        table.require("network")
    gpus = [v or gpu for v in _column(table, "gpu")]
    gpu_count = _column(table, "gpu_count")
    if table.has("gpu_count"):
        table.check("gpu_count", gpu_count, lambda v, _: v >= 0, "not a count (>= 0)")
    return {
        "network": [v or network for v in networks],
        "batch_size": batch,
        "iterations": iterations,
        "time_s": time_s,
        "status": status,
        "source": [v or source for v in _column(table, "source")],
        "created_at": _created_at(table),
        "gpu": gpus,
        "gpu_count": [c if c is not None else (1 if g else 0)
                      for c, g in zip(gpu_count, gpus, strict=True)],
    }


def _created_at(table: Table) -> list[str]:
    """Each row's creation time as the store writes it; now for rows without one."""
    created_at: list[str] = [now_utc()] * table.n
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
            table.problems.add(table.label("created_at"), "not an ISO-8601 date/time", bad,
                               table.values("created_at")[bad[0]])
    return created_at


def _flat_stats(table: Table) -> dict[str, list[Any]]:
    """The summary and provenance columns of the runs table, checked."""
    flat = {
        name: _column(table, name)
        for name in ("device", "error", "it_median_s", "it_p90_s", "it_mean_s", "it_std_s",
                     "samples_per_s", "warmup_iterations", "recorded_iterations", "run_uid",
                     "recorded_host", "recorded_user", "peak_memory_gb", "stopped_by")
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
    return flat


def _nested_groups(table: Table) -> tuple[dict[str, dict[str, list[Any]]],
                                          list[dict[str, str]]]:
    """The columns of each JSON group (features and tags guessed from their values), and
    each row's tags from a ``tags`` column of JSON objects."""
    nested: dict[str, dict[str, list[Any]]] = {
        "hardware": {}, "arch": {}, "hyper": {}, "quality": {}, "features": {}, "tags": {},
    }
    json_tags: list[dict[str, str]] = [{} for _ in range(table.n)]
    for name in table.frame.columns:
        group = group_of(name)
        if group in ("base", "ignore"):
            continue
        if group == "tags":
            json_tags = _json_tags(table, name)
        elif group == "other":
            if table.frame[name].isna().all():
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
    return nested, json_tags


def _record(table: Table, pos: int, base: dict[str, list[Any]], flat: dict[str, list[Any]],
            nested: dict[str, dict[str, list[Any]]], json_tags: dict[str, str],
            extra: dict[str, str]) -> dict[str, Any]:
    """Row ``pos`` as a run record. Its tags: those of a ``tags`` column of JSON, under the
    row's text columns, under the ``extra`` tags of the whole import."""
    batch = base["batch_size"][pos]
    record: dict[str, Any] = {
        "network": base["network"][pos],
        "batch_size": None if batch is None else int(batch),
        "iterations": int(base["iterations"][pos]),
        "time_s": float(base["time_s"][pos]),
        "status": base["status"][pos],
        "source": base["source"][pos],
        "created_at": base["created_at"][pos],
        "gpu": base["gpu"][pos],
        "gpu_count": int(base["gpu_count"][pos]),
    }
    record.update({name: values[pos] for name, values in flat.items()})
    for name in ("warmup_iterations", "recorded_iterations"):
        if record[name] is not None:
            record[name] = int(record[name])
    _derive(record)
    for name in ("it_mean_s", "samples_per_s"):
        value = record[name]
        if value is not None and not math.isfinite(value):
            table.problems.add(table.label("time_s"), f"gives an infinite {name}", [pos])
    for group, columns in nested.items():
        record[group] = {k: v[pos] for k, v in columns.items() if v[pos] is not None}
    record["tags"] = {**json_tags, **record["tags"], **extra}
    record["notes"] = []
    return record


def _raise_problems(problems: Problems, what: str, locator: RowLocator) -> None:
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


def _check_gpus(table: Table, gpus: list[Any], hardware: Mapping[str, list[Any]]) -> None:
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


def _json_tags(table: Table, name: str) -> list[dict[str, str]]:
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
