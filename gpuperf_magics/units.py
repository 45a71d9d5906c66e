"""Numbers as the package shows them: durations and prices in their units.

The bottom layer (standard library only): the record of a run, the live line of the capture,
the prediction tables and the what-if panel all format with these, so one duration reads alike
everywhere and no layer imports another only for a formatter.
"""

from __future__ import annotations

import math

__all__ = ["format_cost", "format_duration", "format_seconds"]


def format_seconds(seconds: float) -> str:
    """A short duration with its unit: ``2.31 s``, ``38.2 ms``, ``740 µs``."""
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def format_duration(seconds: float) -> str:
    """``h:mm:ss`` (days when needed); under a minute in s, under a second in ms."""
    if not math.isfinite(seconds):
        return "—"
    if seconds < 1:
        return f"{seconds * 1e3:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    total = round(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{days}d {text}" if days else text


def format_cost(usd: float) -> str:
    """Money by one fixed rule, never in scientific notation (``$4.9e-05`` read as noise):
    ``$1,234.50`` and ``$12.35`` from $1 on (two decimals), ``$0.30`` or ``$0.8048`` from a
    cent on (four significant digits at most, at least the cents), ``$0.000049`` below a
    cent (two significant digits), ``—`` when there is no price."""
    if not math.isfinite(usd):
        return "—"
    if usd >= 1 or usd == 0:
        return f"${usd:,.2f}"
    digits = 4 if usd >= 0.01 else 2  # significant digits, in fixed notation
    decimals = max(2, digits - 1 - math.floor(math.log10(abs(usd))))
    text = f"{usd:.{decimals}f}".rstrip("0")
    whole, _, fraction = text.partition(".")
    return f"${whole}.{fraction.ljust(2, '0')}"
