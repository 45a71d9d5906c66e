"""Another batch size from the one measured on a GPU: the public series' elasticity.

A network profiled at one batch size on a GPU and asked another has no series of its own to
follow. Keeping its time per sample (``t · q/x``) assumes every part of an iteration grows with
the batch; on a GPU the launches, the optimizer step, the host's work and an under-occupied
device do not. On the public batch series (sia2023, gavel2020) the time per iteration grows as
the batch to a power ``e = d log t / d log b`` that rises with the time per iteration: 0.06 at
3 ms (the host's time, which a batch does not change), 0.54 at 0.1 s, 0.92 from 3 s (a
saturated GPU). Kept per sample, single moves 1/8-8× apart erred by 81% (sia2023) and 52%
(gavel2020) MAPE, with an interval of the public extrapolation figure (±7%) that held 11% and
18% of them; moved by this curve, 21% and 32%, 75% and 66% inside (held-out lattuada2022: 30%
→ 16%, 38% → 93% inside; docs/figures/batch_single.md).

So a single GPU point moves as ``t · (q/x)^e(t)`` (:func:`elasticity`: the weighted median
elasticity of the public pairs 2-8× apart whose source took about ``t``, non-decreasing in
``t``), and its interval is the spread of the elasticities around the curve times the log
distance: a move of ``L = log(q/x)`` errs by
``(e_true − e)·L`` in log time, so the 10th-90th percentiles of ``e_true − e`` over the public
moves (each pair's elasticity clipped to [0, 1]: a time per iteration neither falls with the
batch nor grows faster than it), times ``|L|``, bound it. The figures ship in
``batch_elasticity.json``, rebuilt byte for byte by ``benchmarks/batch_elasticity.py`` from the
public data (:func:`learn`); ``fit`` and ``predict`` only read it.

Not on the CPU: the public series are all GPU runs, and a CPU's iteration is mostly arithmetic
that does grow with the batch; a CPU point keeps its time per sample. Where the user's own
validation measured moves from single batch sizes (six or more), their residuals give the
interval instead (:mod:`~.validation`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Sequence
from importlib import resources
from typing import Any

import numpy as np

PARAMS_FILE = "batch_elasticity.json"
#: Quantile levels of the stored deviations (intervals interpolate between them).
LEVELS = tuple(round(0.05 * k, 2) for k in range(1, 20))
#: Moves learnt from: at least this far apart (a closer pair's elasticity is mostly noise) and
#: at most :data:`MAX_RATIO` (the reach single moves are asked at, judged on).
MIN_RATIO, MAX_RATIO = 2.0, 8.0
#: Times per iteration (log10 seconds) the elasticity is learnt at, and how far (decades) a
#: pair's weight reaches around each: 3 ms to 30 s.
KNOTS = tuple(round(-2.5 + 0.5 * k, 1) for k in range(9))
KNOT_WIDTH = 0.25
#: Where the file is missing or unreadable: time per sample kept, the interval of no spread.
FALLBACK = {"knots": list(KNOTS), "elasticity": [1.0] * len(KNOTS),
            "deviation_quantiles": [0.0] * len(LEVELS)}


@functools.lru_cache(maxsize=1)
def params() -> dict:
    """The shipped figures (:data:`PARAMS_FILE`): ``elasticity`` at each of ``knots`` and
    ``deviation_quantiles`` (of ``e_true − elasticity`` at :data:`LEVELS`)."""
    try:
        text = resources.files("gpuperf_magics.model").joinpath(PARAMS_FILE).read_text()
        stored = json.loads(text)
        if (len(stored["deviation_quantiles"]) != len(LEVELS)
                or len(stored["knots"]) != len(stored["elasticity"])):
            return dict(FALLBACK)
        return stored
    except (OSError, ValueError, KeyError, TypeError):
        return dict(FALLBACK)


def elasticity(t: float) -> float:
    """The public series' elasticity at a measured time per iteration ``t`` (seconds):
    interpolated between the knots (log10 seconds), flat beyond them."""
    p = params()
    at = math.log10(t) if t > 0 else p["knots"][0]
    return float(np.interp(at, p["knots"], p["elasticity"]))


def deviation_sd() -> float:
    """About one σ of the true elasticity around :func:`elasticity`: half the 16th-84th
    percentile range of the shipped deviations."""
    dev = np.asarray(params()["deviation_quantiles"], dtype=float)
    return float(np.interp(0.84, LEVELS, dev) - np.interp(0.16, LEVELS, dev)) / 2


def interval(x: float, q: float, coverage: float) -> tuple[float, float, float]:
    """(low, high, expected MAPE) of the move ``x → q`` in log residuals
    ``log(actual / predicted)``: the deviations' quantiles at ``(1 ∓ coverage)/2`` times
    ``log(q/x)`` (sorted), and the mean error over the stored quantiles. Not stopped where
    the truth's elasticity would leave [0, 1] around the one used: the runs' noise crosses
    that bound (so stopped, single moves 1/8-8x fell from 75% to 67% inside the 80% interval
    on sia2023, 66% to 64% on gavel2020, 93% to 82% on lattuada2022)."""
    if not (x > 0 and q > 0):
        return 0.0, 0.0, 0.0
    step = math.log(q / x)
    dev = np.asarray(params()["deviation_quantiles"], dtype=float)
    a = float(np.interp((1 - coverage) / 2, LEVELS, dev)) * step
    b = float(np.interp((1 + coverage) / 2, LEVELS, dev)) * step
    expected = float(np.mean(np.abs(np.exp(-dev * step) - 1.0)))
    return min(a, b, 0.0), max(a, b, 0.0), expected


def learn(series: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict:
    """The figures of :data:`PARAMS_FILE` from batch series ``(batch sizes, seconds per
    iteration)`` of one network on one GPU each.

    Every ordered pair of a series' points :data:`MIN_RATIO` to :data:`MAX_RATIO` apart gives
    an elasticity (clipped to [0, 1]) at its source point's time per iteration; each series
    weighs 1 in all, shared by its pairs. ``elasticity`` at each of :data:`KNOTS` (log10
    seconds): the weighted median of the pairs within :data:`KNOT_WIDTH` decades of it
    (Gaussian weights), made non-decreasing; ``deviation_quantiles``: the weighted quantiles
    of each pair's elasticity minus the curve's at its time. Rounded: stable text."""
    el, lt, w = [], [], []
    for x, t in series:
        e, source = pair_elasticities(x, t, with_source=True)
        if not len(e):
            continue
        el.append(e)
        lt.append(np.log10(source))
        w.append(np.full(len(e), 1.0 / len(e)))
    if not el:
        return {**FALLBACK, "series": 0, "moves": 0}
    e, at, weight = np.concatenate(el), np.concatenate(lt), np.concatenate(w)
    curve = []
    for k in KNOTS:
        near = weight * np.exp(-0.5 * ((at - k) / KNOT_WIDTH) ** 2)
        curve.append(_weighted_quantile(e, near, 0.5) if near.sum() > 1e-9 else np.nan)
    values = np.array(curve)
    values = np.interp(KNOTS, np.array(KNOTS)[np.isfinite(values)], values[np.isfinite(values)])
    values = np.round(np.maximum.accumulate(values), 4)
    dev = e - np.interp(at, KNOTS, values)
    quantiles = [_weighted_quantile(dev, weight, p) for p in LEVELS]
    return {"knots": list(KNOTS), "elasticity": [float(v) for v in values],
            "deviation_quantiles": [round(q, 4) for q in quantiles],
            "series": len(el), "moves": len(e)}


def pair_elasticities(x: np.ndarray, t: np.ndarray, with_source: bool = False,
                      with_batches: bool = False) -> Any:
    """Elasticities ``Δlog t / Δlog x`` (clipped to [0, 1]) of every ordered pair of a
    series' points :data:`MIN_RATIO` to :data:`MAX_RATIO` apart; with ``with_source``, also
    each pair's source time (the pair's first point); with ``with_batches``, each pair's two
    batch sizes."""
    x, t = np.asarray(x, float), np.asarray(t, float)
    ok = (x > 0) & (t > 0)
    lx, ly = np.log(x[ok]), np.log(t[ok])
    d = lx[None, :] - lx[:, None]
    near = (np.abs(d) >= math.log(MIN_RATIO) - 1e-12) & (np.abs(d) <= math.log(MAX_RATIO) + 1e-12)
    i, j = np.nonzero(near)
    e = np.clip((ly[j] - ly[i]) / (lx[j] - lx[i]), 0.0, 1.0) if len(i) else np.zeros(0)
    if with_batches:
        return e, x[ok][i], x[ok][j]
    return (e, t[ok][i]) if with_source else e


def _weighted_quantile(x: np.ndarray, w: np.ndarray, p: float) -> float:
    """The ``p`` quantile of ``x`` weighted by ``w`` (the value where the cumulative weight,
    taken at each value's middle, reaches ``p``, interpolated)."""
    order = np.argsort(x, kind="stable")
    x, w = x[order], w[order]
    cum = (np.cumsum(w) - 0.5 * w) / w.sum()
    return float(np.interp(p, cum, x))
