"""pandas frames of stored runs: the canonical runs table and per-iteration tables."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

from gpuperf_magics.run import PHASES
from gpuperf_magics.store.columns import (
    ARCH_COLUMNS,
    BASE_COLUMNS,
    HARDWARE_COLUMNS,
    HYPER_COLUMNS,
    KINDS,
    NOT_NULL_INT,
    QUALITY_COLUMNS,
    group_of,
)

__all__ = ["ITERATION_COLUMNS", "flatten", "iterations_frame", "runs_frame"]

ITERATION_COLUMNS = (
    "run_id", "index", "duration_s", "samples", "warmup", "skipped_step", "micro_batches",
)

#: The default string dtype of the installed pandas ("str" in pandas 3, object before).
_STR_DTYPE = pd.Series(["x"]).dtype

_NESTED = ("hardware", "arch", "hyper", "quality")
_CANONICAL_BY_GROUP = {
    "hardware": HARDWARE_COLUMNS,
    "arch": ARCH_COLUMNS,
    "hyper": HYPER_COLUMNS,
    "quality": QUALITY_COLUMNS,
}


def flatten(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """One run record (``Run.to_record()`` shape plus ``run_id``) as flat columns.

    Parameters
    ----------
    record : dict
        Base keys, nested ``hardware``/``arch``/``hyper``/``quality`` dicts, ``tags`` and
        ``features``.

    Returns
    -------
    values : dict
        Column → value.
    groups : dict
        Column → the group it came from (``base``, ``hardware``, ..., ``features``).

    Notes
    -----
    A nested key that would shadow another column (a feature named ``batch_size``, a hyper
    key named ``gpu_name``) is kept under ``<group>_<key>`` instead of overwriting it.
    """
    values: dict[str, Any] = {name: record.get(name) for name in BASE_COLUMNS}
    groups = dict.fromkeys(values, "base")
    for group in _NESTED:
        for key, value in (record.get(group) or {}).items():
            name = key
            if name in values or (name in KINDS and group_of(name) != group):
                name = f"{group}_{key}"
            values[name] = value
            groups[name] = group
    values["tags"] = dict(record.get("tags") or {})
    groups["tags"] = "tags"
    for key, value in (record.get("features") or {}).items():
        name = f"feature_{key}" if key in values or key in KINDS else key
        values[name] = value
        groups[name] = "features"
    return values, groups


def _column_order(groups: dict[str, str]) -> list[str]:
    """Canonical columns first, then extra keys of each group (sorted), features last."""
    order = list(BASE_COLUMNS)
    for group in _NESTED:
        canonical = _CANONICAL_BY_GROUP[group]
        order.extend(canonical)
        order.extend(sorted(c for c, g in groups.items() if g == group and c not in canonical))
    order.append("tags")
    order.extend(sorted(c for c, g in groups.items() if g == "features"))
    return order


def _series(name: str, values: list[Any], kind: str | None) -> pd.Series:
    """A column with the dtype its kind calls for; as inferred when the values do not fit."""
    raw = pd.Series(values, dtype=object, name=name)
    try:
        if kind == "float":
            return pd.to_numeric(raw).astype("float64")
        if kind == "int":
            if name in NOT_NULL_INT and raw.notna().all():
                return raw.astype("int64")
            return pd.to_numeric(raw).astype("Int64")
        if kind == "bool":
            return raw.astype("boolean")
        if kind == "str":
            return pd.Series(values, dtype=_STR_DTYPE, name=name)
        if kind == "dict":
            return raw
    except (TypeError, ValueError):
        # A value of another type than the contract says (e.g. a list for a count) is shown
        # as stored rather than dropped.
        pass
    return pd.Series(values, name=name) if values else raw


def runs_frame(records: Iterable[dict[str, Any]]) -> pd.DataFrame:
    """The canonical runs table of some run records (empty → the canonical columns)."""
    rows: list[dict[str, Any]] = []
    groups: dict[str, str] = {}
    for record in records:
        values, row_groups = flatten(record)
        rows.append(values)
        for name, group in row_groups.items():
            groups.setdefault(name, group)
    columns = _column_order(groups)
    data = {}
    for name in columns:
        group = groups.get(name, group_of(name))
        kind = "float" if group == "features" else KINDS.get(name)
        data[name] = _series(name, [row.get(name) for row in rows], kind)
    if not rows:
        data["tags"] = pd.Series([], dtype=object, name="tags")
    frame = pd.DataFrame(data, columns=columns)
    # Which columns are user features (imported numeric columns, Run.features): the
    # predictor uses them, and nothing else of the extra hyper/quality keys.
    frame.attrs["feature_columns"] = [c for c in columns if groups.get(c) == "features"]
    return frame


def iterations_frame(run_id: int, rows: list[tuple[Any, ...]]) -> pd.DataFrame:
    """Per-iteration table of one run.

    Parameters
    ----------
    run_id : int
        The run.
    rows : list of tuple
        ``(idx, duration_s, samples, warmup, skipped_step, micro_batches, phases)`` with
        ``phases`` already parsed into a dict or None.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`ITERATION_COLUMNS` and one ``phase_<name>`` column (seconds) per
        phase recorded with ``--phases``.
    """
    phase_names = {name for *_, phases in rows if phases for name in phases}
    ordered = [p for p in PHASES if p in phase_names] + sorted(phase_names - set(PHASES))
    data: dict[str, pd.Series] = {
        "run_id": pd.Series([run_id] * len(rows), dtype="int64"),
        "index": pd.Series([r[0] for r in rows], dtype="int64"),
        "duration_s": pd.Series([r[1] for r in rows], dtype="float64"),
        "samples": pd.Series([r[2] for r in rows], dtype=object).astype("Int64"),
        "warmup": pd.Series([bool(r[3]) for r in rows], dtype=bool),
        "skipped_step": pd.Series([bool(r[4]) for r in rows], dtype=bool),
        "micro_batches": pd.Series([r[5] for r in rows], dtype=object).astype("Int64"),
    }
    for name in ordered:
        values = [(r[6] or {}).get(name) for r in rows]
        data[f"phase_{name}"] = pd.to_numeric(pd.Series(values, dtype=object)).astype("float64")
    return pd.DataFrame(data)
