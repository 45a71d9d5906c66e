"""Kept so that ``gpuperf_magics.store.columns`` still imports: the canonical columns are
declared once, in :mod:`gpuperf_magics.columns`, which the store's modules import directly."""

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
