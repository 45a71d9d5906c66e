"""Intervals of one more move from few validated ones: in clusters (the moves to another GPU),
or one draw each (:func:`sample_interval`, every other kind of move).

A GPU move is validated by holding each measured GPU out in turn and moving every
configuration of it from the others (:mod:`~.validation`). Its residuals are many, but they are
not many draws: the configurations of one held-out GPU share that GPU's error (the spec sheet,
or the cross-series model, is off for it by one factor), so a network measured on four GPUs
has four independent draws of the error that matters for a fifth. The 10th and 90th
percentiles of the pooled residuals then lie near the smallest and the largest of four GPU
errors, and a new draw falls between the smallest and the largest of ``n`` exchangeable ones
with probability ``(n − 1)/(n + 1)``: 60% for four, whatever the nominal 80%.

:func:`cluster_interval` is the prediction interval of one more run on one more GPU under a
random-effects model of the residuals (a GPU's effect around a common mean, and the spread of
the runs around their GPU's): its mean, plus or minus Student's ``t`` with ``G − 1`` degrees
of freedom (``G`` GPUs) times the GPUs' spread ``√((s_b² − s_w²/n̄)(1 + 1/G))``, added in
quadrature to the runs' own: the ``coverage`` quantile of their distances to their GPU's mean
(scaled by ``√(n/(n − 1))`` for a GPU of ``n`` runs, and by Student's t of the runs' ``n − G``
degrees of freedom over the normal's).
``s_b²`` is the variance of the GPUs' mean residuals (which holds the runs' spread ``s_w²``
over ``n̄``, the harmonic mean of the runs per GPU). The runs' term is their empirical
quantile, not a normal's: their errors are heavy-tailed (a few host-bound configurations), and
a normal quantile of their variance made sia2023's intervals wider (median 250% against
222%) with the same coverage. With few GPUs the interval is as wide as so few GPUs allow one
to be sure of; with many (:func:`enough_groups`) the pooled percentiles are left as they are.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

#: GPUs below which no interval of a new one is drawn from their spread: with two, each was
#: moved from the other and their residuals are one draw, mirrored.
MIN_GROUPS = 3


def enough_groups(n_groups: float, coverage: float) -> bool:
    """Whether ``n_groups`` clusters' pooled percentiles already cover a new cluster.

    With ``G`` exchangeable draws, a new one falls between the ``j``-th smallest and the
    ``j``-th largest with probability ``(G + 1 − 2j)/(G + 1)``. The pooled ``(1 − coverage)/2``
    percentile lies at or beyond the smallest cluster's draw while ``G (1 − coverage)/2 < 1``;
    from ``G ≥ 2/(1 − coverage)`` (10 GPUs at 80%) it is the ``j ≥ 1``-th draw from each end, and
    such percentiles cover a new draw at least ``coverage`` of the time with no assumption on
    the clusters' distribution; a normal's interval of their spread would only add one (on
    lambda2025, 30 to 40 GPUs per network whose errors have heavy tails, it widened the
    intervals and covered 89% where the pooled percentiles covered 86%)."""
    return n_groups * (1.0 - coverage) / 2.0 >= 1.0 - 1e-9


def cluster_interval(logres: np.ndarray, groups: np.ndarray,
                     coverage: float) -> tuple[float, float] | None:
    """(low, high) log residuals of a new run in a new cluster at ``coverage`` (None: fewer
    than :data:`MIN_GROUPS` clusters, or enough for the pooled percentiles, see
    :func:`enough_groups`)."""
    logres = np.asarray(logres, dtype=float)
    groups = np.asarray(groups, dtype=float)
    if len(logres) != len(groups):
        return None
    # NaN: a residual of no new GPU (a move to a GPU measured in other configurations).
    keep = np.isfinite(groups)
    logres, groups = logres[keep], groups[keep]
    keys, ids, counts = np.unique(groups, return_inverse=True, return_counts=True)
    n_groups = len(keys)
    # One GPU holding most of the residuals makes the pooled percentiles its own: count the
    # GPUs as many as equal ones would weigh (Kish's effective number).
    weights = counts.astype(float)
    effective = float(weights.sum() ** 2 / np.sum(weights ** 2)) if n_groups else 0.0
    if n_groups < MIN_GROUPS or enough_groups(effective, coverage):
        return None
    means = np.bincount(ids, weights=logres, minlength=n_groups) / counts
    centre = float(np.mean(means))
    between = float(np.var(means, ddof=1))
    within_df = len(logres) - n_groups
    within = (float(np.sum((logres - means[ids]) ** 2)) / within_df if within_df > 0 else 0.0)
    # The runs' variance in a GPU's mean residual, 1/n of theirs on average over the GPUs.
    per_run = float(np.mean(1.0 / counts))
    # Each GPU was moved from the others, so its residual is its own effect less the mean of
    # the others': G/(G − 1) times its effect's distance to the mean of all G, whose
    # variance is the GPUs' spread. A new GPU is moved from all G: its effect less their
    # mean, (1 + 1/G) times that spread.
    shrink = ((n_groups - 1) / n_groups) ** 2
    spread = max(between - within * per_run, 0.0) * shrink * (1.0 + 1.0 / n_groups)
    from scipy.special import stdtrit

    p = (1.0 + coverage) / 2.0
    # The runs' spread by their own quantile (heavy tails). A run's distance to its own
    # GPU's mean is √((n − 1)/n) of its distance to the GPU's true one: scaled back, and a
    # GPU of one run (distance 0) tells nothing of the runs' spread.
    n_of = counts[ids]
    several = n_of > 1
    runs = (float(np.quantile(np.abs(logres - means[ids])[several]
                              * np.sqrt(n_of[several] / (n_of[several] - 1.0)), coverage))
            if several.any() else 0.0)
    # Each term at its Student's t: the GPUs' spread known from G − 1 degrees of freedom,
    # the runs' from n − G (with two runs per GPU, few). Adding the widths in quadrature at
    # their own t errs wide of one t for the sum (Satterthwaite's covered 76% with three
    # GPUs, or six of two runs each, in the tests' simulations).
    t = float(stdtrit(n_groups - 1, p))
    if runs > 0:
        runs *= t_over_normal(within_df, coverage)
    half = math.hypot(t * math.sqrt(spread), runs)
    return centre - half, centre + half


def t_over_normal(df: float, coverage: float) -> float:
    """How much wider a two-sided interval at ``coverage`` is drawn when its spread is known
    from ``df`` degrees of freedom: Student's t quantile over the normal's."""
    from scipy.special import stdtrit

    p = (1.0 + coverage) / 2.0
    return float(stdtrit(df, p)) / NormalDist().inv_cdf(p)


def at_least_cluster(lo: float, hi: float, logres: np.ndarray, groups: np.ndarray | None,
                     coverage: float) -> tuple[float, float]:
    """``(lo, hi)`` widened to at least :func:`cluster_interval` of ``logres`` where the
    cluster of each is known (``groups`` aligned with them; None: as they are)."""
    clustered = cluster_interval(logres, groups, coverage) if groups is not None else None
    if clustered is None:
        return lo, hi
    return min(lo, clustered[0]), max(hi, clustered[1])


def expected_error(logres: np.ndarray) -> float:
    """The MAPE of log residuals ``log(actual / predicted)``: the expected error their move
    is reported with beside its interval."""
    return float(np.mean(np.abs(np.exp(-np.asarray(logres, dtype=float)) - 1)))


def sample_interval(logres: np.ndarray, coverage: float) -> tuple[float, float]:
    """(low, high) log residual of one more move of a kind from its ``n`` validated ones.

    The ``p``-th percentile of ``n`` residuals is not the ``p``-th percentile of the next one:
    a new draw falls between the ``j``-th smallest and the ``j``-th largest of ``n``
    exchangeable ones with probability ``(n + 1 − 2j)/(n + 1)``, so the bounds are the order
    statistics of rank ``(n + 1)(1 ∓ coverage)/2`` (interpolated between ranks: the ranks of
    split-conformal prediction), not ``np.quantile``'s ``(n − 1) p + 1``. Drawn at the latter,
    the 10th-90th percentiles of six residuals covered 60% in simulation, of twenty 72%, of
    forty 76%; gavel2020's batch moves (four or five sizes per series, one run each) were 57%
    (ends) and 71% (inside) inside. Below ``n = 2/(1 − coverage) − 1`` (9 at 80%) no pair of
    order statistics covers enough, and the bounds are at least Student's prediction interval,
    mean ± ``t(n − 1) · s · √(1 + 1/n)``. Simulated over normal, Laplace and t(3) residuals,
    this covers 79-83% from 6 to 100 residuals."""
    logres = np.sort(np.asarray(logres, dtype=float))
    n = len(logres)
    if n == 0:
        return -0.5, 0.5
    low_p, high_p = (1 - coverage) / 2, (1 + coverage) / 2
    lo = float(np.quantile(logres, low_p, method="weibull"))
    hi = float(np.quantile(logres, high_p, method="weibull"))
    if n >= 2 and (n + 1) * low_p < 1.0 - 1e-9:  # beyond the smallest and the largest
        from scipy.special import stdtrit

        half = (float(stdtrit(n - 1, high_p)) * float(np.std(logres, ddof=1))
                * math.sqrt(1.0 + 1.0 / n))
        centre = float(np.mean(logres))
        lo, hi = min(lo, centre - half), max(hi, centre + half)
    return lo, hi
