"""pandas frames of stored runs: the canonical runs table and per-iteration tables.

Built column by column: each JSON column is parsed once per distinct text (runs of one network
and machine share their architecture, hardware and hyper-parameters), and every value column is
typed once per distinct value, then spread to the rows with one ``take``. 100,000 runs become a
frame in about a second instead of a dict per row.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from gpuperf_magics.columns import BASE_COLUMNS, KINDS, NOT_NULL_INT, group_of, names
from gpuperf_magics.store.errors import CorruptRow

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.store.rows import IterationRow

__all__ = ["ITERATION_COLUMNS", "build_runs_frame", "empty_column", "iterations_frame"]

ITERATION_COLUMNS = (
    "run_id", "index", "duration_s", "samples", "warmup", "skipped_step", "micro_batches",
)

#: The default string dtype of the installed pandas ("str" in pandas 3, object before).
_STR_DTYPE = pd.Series(["x"]).dtype

#: JSON groups in the order their columns appear; ``hardware`` is the hardware table's JSON.
NESTED = ("hardware", "arch", "hyper", "quality")
_CANONICAL_BY_GROUP = {group: names(group=group) for group in NESTED}


def _typed(name: str, values: Sequence[Any], kind: str | None) -> Any:
    """An array of ``values`` with the dtype ``kind`` calls for; None when they do not fit."""
    try:
        if kind == "float":
            if any(isinstance(v, (str, bytes, bool, dict, list)) for v in values):
                return None
            return np.array(values, dtype="float64")
        if kind == "int":
            if any(isinstance(v, (str, bytes, bool, dict, list)) or
                   (isinstance(v, float) and v != int(v)) for v in values if v is not None):
                return None
            if name in NOT_NULL_INT and all(v is not None for v in values):
                return np.array(values, dtype="int64")
            return pd.array([None if v is None else int(v) for v in values], dtype="Int64")
        if kind == "bool":
            if any(v not in (None, True, False, 0, 1) or isinstance(v, float) for v in values):
                return None
            return pd.array([None if v is None else bool(v) for v in values], dtype="boolean")
        if kind == "str":
            if any(v is not None and not isinstance(v, str) for v in values):
                return None
            return pd.array(list(values), dtype=_STR_DTYPE)
    except (TypeError, ValueError, OverflowError):
        return None
    return None


def _inferred(values: Sequence[Any]) -> Any:
    """Values of another type than the contract says are shown as stored, not dropped."""
    series = pd.Series(list(values), dtype=object)
    return series.infer_objects().array if len(series) else series.array


def _spread(name: str, uniques: list[Any], codes: np.ndarray, kind: str | None) -> Any:
    """Column values from per-distinct values and each row's code (-1: missing)."""
    typed = _typed(name, [*uniques, None], kind)
    if typed is None:
        typed = _inferred([*uniques, None])
    index = np.where(codes < 0, len(uniques), codes)
    return typed.take(index) if hasattr(typed, "take") else np.asarray(typed)[index]


def _base_column(name: str, values: list[Any], run_ids: Sequence[Any]) -> Any:
    kind = KINDS.get(name, "str")
    typed = _typed(name, values, kind)
    if typed is not None:
        return typed
    if name in ("time_s", "iterations", "batch_size", "gpu_count", "network", "status"):
        # Columns the predictor relies on: a wrong type there is damage, not an extra key.
        for run_id, value in zip(run_ids, values, strict=True):
            if value is not None and _typed(name, [value], kind) is None:
                raise CorruptRow(f"run {run_id}: column {name} holds {value!r}, not a {kind}")
    return _inferred(values)


def _parse(texts: Sequence[Any], column: str, empty: type, run_ids: Sequence[Any]
           ) -> tuple[np.ndarray, list[Any]]:
    """Codes per row and the parsed distinct JSON values of one column."""
    codes, uniques = pd.factorize(pd.Series(texts, dtype=object), use_na_sentinel=True)
    parsed: list[Any] = []
    for text in uniques:
        try:
            value = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            value = None
        if not isinstance(value, empty):
            row = int(np.flatnonzero(codes == len(parsed))[0])
            raise CorruptRow(f"run {run_ids[row]}: column {column} holds {str(text)[:60]!r}, "
                             f"not a JSON {empty.__name__}")
        parsed.append(value)
    return np.asarray(codes), parsed


def empty_column(name: str, length: int) -> Any:
    """``length`` missing values of column ``name``, typed as the registry says."""
    return _spread(name, [], np.full(length, -1), KINDS.get(name))


def build_runs_frame(base: dict[str, list[Any]], nested: dict[str, list[Any]]) -> pd.DataFrame:
    """The canonical runs table from column lists read from the store.

    Parameters
    ----------
    base : dict
        Flat columns (``run_id`` among them) → values as stored.
    nested : dict
        JSON columns (``hardware``, ``arch``, ``hyper``, ``quality``, ``tags``, ``features``)
        → JSON texts as stored; groups not read may be missing.

    Raises
    ------
    CorruptRow
        A JSON cell that does not parse, or text in a numeric column the predictor needs.

    Notes
    -----
    A nested key that would shadow another column (a feature named ``batch_size``, a hyper
    key named ``gpu_name``) is kept under ``<group>_<key>`` instead of overwriting it.
    """
    run_ids = base.get("run_id") or [None] * len(next(iter(base.values()), []))
    data: dict[str, Any] = {}
    groups: dict[str, str] = {}
    for name in BASE_COLUMNS:
        if name in base:
            data[name] = _base_column(name, base[name], run_ids)
            groups[name] = "base"
    for name, values in base.items():
        if name not in data:
            data[name] = _base_column(name, values, run_ids)
            groups[name] = "base"
    n = len(run_ids)
    for group in (*NESTED, "tags", "features"):
        if group not in nested:
            continue
        codes, parsed = _parse(nested[group], group, dict, run_ids)
        if group == "tags":
            data["tags"] = pd.Series(
                [dict(parsed[c]) if c >= 0 else {} for c in codes], dtype=object).array
            groups["tags"] = "tags"
            continue
        keys: dict[str, None] = {}
        for value in parsed:
            keys.update(dict.fromkeys(value))
        for key in keys:
            if group == "features":
                name = f"feature_{key}" if key in groups or key in KINDS else key
                kind: str | None = "float"
            else:
                name = key
                if name in groups or (name in KINDS and group_of(name) != group):
                    name = f"{group}_{key}"
                kind = KINDS.get(name)
            data[name] = _spread(name, [p.get(key) for p in parsed], codes, kind)
            groups[name] = group
    columns = _column_order(groups, nested)
    for name in columns:
        if name not in data:
            data[name] = empty_column(name, n) if KINDS.get(name) != "dict" else (
                pd.Series([{}] * n, dtype=object).array)
    frame = pd.DataFrame({c: data[c] for c in columns}, columns=columns)
    frame.index = pd.RangeIndex(n)
    # Which columns are user features (imported numeric columns, Run.features): the
    # predictor uses them, and nothing else of the extra hyper/quality keys.
    frame.attrs["feature_columns"] = [c for c in columns if groups.get(c) == "features"]
    return frame


def _column_order(groups: dict[str, str], nested: dict[str, Any]) -> list[str]:
    """Canonical columns first, then extra keys of each group (sorted), features last."""
    order = [c for c in BASE_COLUMNS]
    order += sorted(c for c, g in groups.items() if g == "base" and c not in BASE_COLUMNS)
    for group in NESTED:
        canonical = _CANONICAL_BY_GROUP[group]
        order.extend(canonical)
        order.extend(sorted(c for c, g in groups.items() if g == group and c not in canonical))
    order.append("tags")
    order.extend(sorted(c for c, g in groups.items() if g == "features"))
    return order


def iterations_frame(rows: Sequence[IterationRow], phase_order: Sequence[str] = ()
                     ) -> pd.DataFrame:
    """Per-iteration table of one or several runs.

    Parameters
    ----------
    rows : sequence of IterationRow
        With ``phases`` already parsed into a dict or None, ordered by run and index.
    phase_order : sequence of str
        The phases in the order a training step runs them (``gpuperf_magics.run.PHASES``,
        given by the caller: the store's frames do not import the record types); others
        follow in alphabetical order.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ITERATION_COLUMNS` and one ``phase_<name>`` column (seconds) per
        phase recorded with ``--phases``.
    """
    phase_names = {name for r in rows if r.phases for name in r.phases}
    ordered = [p for p in phase_order if p in phase_names] + sorted(
        phase_names - set(phase_order))
    data: dict[str, Any] = {
        "run_id": pd.Series([r.run_id for r in rows], dtype="int64"),
        "index": pd.Series([r.idx for r in rows], dtype="int64"),
        "duration_s": pd.Series([r.duration_s for r in rows], dtype="float64"),
        "samples": pd.Series([r.samples for r in rows], dtype=object).astype("Int64"),
        "warmup": pd.Series([bool(r.warmup) for r in rows], dtype=bool),
        "skipped_step": pd.Series([bool(r.skipped_step) for r in rows], dtype=bool),
        "micro_batches": pd.Series([r.micro_batches for r in rows], dtype=object).astype("Int64"),
    }
    for name in ordered:
        values = [(r.phases or {}).get(name) for r in rows]
        data[f"phase_{name}"] = pd.to_numeric(pd.Series(values, dtype=object)).astype("float64")
    return pd.DataFrame(data)
