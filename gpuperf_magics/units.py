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
    """``$1,234`` from $100 on, ``$12.35`` below, ``$0.0042`` under a cent, ``—`` when
    there is no price."""
    if not math.isfinite(usd):
        return "—"
    if usd >= 100:
        return f"${usd:,.0f}"
    return f"${usd:,.2f}" if usd >= 0.01 or usd == 0 else f"${usd:.2g}"
