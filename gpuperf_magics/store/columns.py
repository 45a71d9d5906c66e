"""The canonical table's columns, as the store reads them: re-exported from
:mod:`gpuperf_magics.columns`, which declares them once for every layer (the model reads them
too, and must not import the store)."""

from __future__ import annotations

from gpuperf_magics.columns import (
    ARCH_COLUMNS,
    BASE_COLUMNS,
    CANONICAL_COLUMNS,
    FIRST_COLUMNS,
    HARDWARE_COLUMNS,
    HARDWARE_PREFIXES,
    HYPER_COLUMNS,
    KINDS,
    NOT_NULL_INT,
    QUALITY_COLUMNS,
    STATUSES,
    group_of,
)

__all__ = [
    "ARCH_COLUMNS",
    "BASE_COLUMNS",
    "CANONICAL_COLUMNS",
    "FIRST_COLUMNS",
    "HARDWARE_COLUMNS",
    "HARDWARE_PREFIXES",
    "HYPER_COLUMNS",
    "KINDS",
    "NOT_NULL_INT",
    "QUALITY_COLUMNS",
    "STATUSES",
    "group_of",
]
