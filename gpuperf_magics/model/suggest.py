"""What to profile next: the candidates whose measurement narrows the answer most per second.

:func:`suggest` answers "which configuration should I profile next?" for a fitted default
model (:class:`~.default.DefaultModel`). The expected error of a target comes from the same
validated moves that give its interval (:mod:`~.validation`): the target is routed over the
measured configurations (:mod:`~.local`), its kind of move gives the validated MAPE, and a move
further beyond its series than the validated ones errs in proportion (:func:`~.local.reach`),
as :meth:`DefaultModel.predict_table` widens its interval. Each candidate is then added to
the measured configurations *by position only* (its time is not needed to know which series it
extends) and the targets are routed again.

The gain is the information the run brings about the targets: the drop of the log of the
spread of their log time. Errors are log-normal here (intervals are quantiles of log
residuals), and an expected error ``e`` (a MAPE) spreads the log time by about
``log(1 + e)``, whose entropy is ``log log(1 + e)`` plus a constant, so
``log(log(1 + before) / log(1 + after))`` is the expected information gain of Bayesian
experimental design; for errors of a few percent it is ``log(before / after)``, a narrowing by
a factor ("±31% → ±9%"). Counted as ``log(before / after)`` also for large errors (until
2026-12-05), an answer several times off (far beyond its measured batches) made every
candidate's gain large, and the cheapest won whatever it left: sia2023's cifar10 on the T4,
measured at batch 32 and 45 and asked 1,024, took batch 182 (expected 100%, realised 4.5%)
over 725 (20%, realised 1.4%), and now takes 725. A plain drop ``before − after`` is nearly
the same for every candidate once ``before`` is large (each removes most of it), so the
cheapest won there too. Its cost: the predicted seconds of a ``--stop-after auto`` run of the
candidate, :func:`profile_seconds`; where that prediction is itself far off, the ranking is
too (sia2023's ncf, host-bound, measured at 32 and 45: a line through them prices batch
23,211 at 1,266 s, which runs in 6 s, so the cheap batch 129 is still taken first).

Two terms make up a route's expected error:

- the chosen move's validated MAPE, scaled by ``d₁·d₂ / s²`` over ``v(1 + v)`` (``d₁, d₂``: the
  target's distances to the two points the line is drawn through, ``s`` the last spacing of
  the measured series, ``v`` the validated reach in such spacings; a line drawn through a
  curved series misses by about the product of the distances times its curvature, as a
  Taylor expansion has it, ``r(1 + r)`` at ``r`` spacings beyond, and the validated error at
  reach ``v`` gives the curvature; :func:`route_error` says why ``s`` stays the measured
  series' own as candidates are added). Along the batch size it stops at the physical bound
  the intervals stop at (a time per iteration neither falls with the batch nor grows faster
  than it, so a point ``d₁`` away in log errs by at most ``e^d₁ − 1``); along other axes,
  past :data:`MAX_WIDER` times, where their intervals stop, it keeps growing with the log of
  the factor (:func:`_wider`), so that a candidate nearer the target still narrows the
  answer. Below the validated reach it keeps shrinking: a point measured next to the target
  leaves less to extrapolate;
- the measurement noise of the points the prediction is drawn through, carried to the target
  by the line the chosen method draws: ``√(Σ hᵢ² σᵢ²)`` with ``hᵢ`` the weight of point ``i``
  in the line's value at the target (:func:`_hat`; ``1 + r`` and ``−r`` for a line through
  the last two points at ``r`` spacings beyond), a point's ``σ`` the validated repeat noise of
  the series (or :data:`AUTO_PRECISION`, what one ``--stop-after auto`` run knows its median
  to, where the series has no repeats) over the square root of its runs: a median of twelve
  repeats is known better than one new run.

Both terms follow the method the validation chose for the move. The two-point lines (``lin``,
``log``) go through the two measured points nearest the target; the naive ``line`` (what a
depth or image-size move with few points uses) is a least-squares line through every point of
the series, so its curvature term is ``|Σ hᵢ xᵢ² − q²|`` (:func:`_product`, which is ``d₁·d₂``
for two points) and every point's noise reaches the target by its weight. Counted as a line
through the two nearest points (until 2026-12-05), lattuada2022's depth series measured at 1,
2 and 9 and asked 10 took depth 6 over 8 as the second run (a wider base against noise), where
the least-squares line through every point is narrowed more by 8; realised, 8 was better in 15
of 28 series and worse in 5.

A move to another GPU adds its validated error to the error of the source's own move in
quadrature.

The answer's expected error anchors the scale. With the measured configurations only, each
target's route error is scaled to equal the expected error :meth:`DefaultModel.predict_table`
gives its answer, and every candidate's route error is scaled alike. The terms above say by
how much a candidate narrows the answer, and the answer's own figure says from where (its
batch moves widen as validated on held-out batch series, ``default.BATCH_WIDER_POWER``).
Unanchored (until 2026-12-06), the suggestion line said ``±117% → ±1%`` under an answer whose
expected error read 57%: the curvature term grows as ``r(1 + r)``, the answers' as
``r^1.25``. On the public series of ``benchmarks/suggest.py`` the realised error was below the
expected one in 76% of the cases; anchored, 54% (calibrated: about half). The picks moved in
2 of 102 series.

The budget is counted in seconds by default (the gain per predicted second of profiling);
``per="run"`` counts it in runs and ranks by the gain alone (:data:`PER`).

The choice of k candidates is greedy: the first is the best alone, the second the
best once the first is measured, and so on. Cost: one route per target, candidate and pick, each
a pass over the network's configurations (no pairwise matrices over the rows).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from gpuperf_magics.auto_stop import AUTO_PRECISION, auto_iterations
from gpuperf_magics.model.inputs import prepare
from gpuperf_magics.model.local import (
    Route,
    beyond_distance,
    family,
    on_gpu_batch,
    route,
    single_interval,
)
from gpuperf_magics.model.series import SeriesIndex, query_arrays

#: Spread of the iteration times (relative standard deviation) a run is costed at where the
#: fitted runs do not tell it (tables imported without ``it_median_s`` and ``it_p90_s``): a
#: ``--stop-after auto`` run then needs about 300 iterations (:func:`auto_iterations`). A prior,
#: between a steady GPU loop (1-3%: the floor of 50) and a busy machine (12%: the ceiling).
DEFAULT_NOISE = 0.05
#: Seconds a profiled run costs beyond its iterations: entering the block (the hardware and the
#: model's architecture read, the hooks set) and the first iteration's extra. Measured on a tiny
#: MLP on this project's CPU: 0.2-0.5 s for a fresh process's first run, 0.03-0.04 s after.
#: The user's own set-up (data, model) enters through the series' set-up time where its runs
#: tell it (:func:`~.series.build_index`).
RUN_OVERHEAD_S = 0.5
#: z of the 90th percentile of a normal: ``(p90 / median - 1) / z`` estimates the spread.
_P90_Z = 1.2815515655446004
#: Most a move's error grows beyond the validated reach here (the intervals' cap on the axes
#: other than the batch size; a batch size's interval now grows without one, up to the
#: physical bound, ``default._beyond_interval``).
MAX_WIDER = 4.0
#: What a budget of profiling is counted in (:func:`suggest`'s ``per``). By seconds, a cheap
#: run that narrows the answer a little can beat a dear one that narrows it much; with a
#: budget of runs (a few more cells, each run whatever it takes) the dear one is worth more.
#: On ``benchmarks/suggest.py``'s public series, at the same count of runs, the per-second
#: picks lose to "the candidate nearest the target" (median target error 3.66% against 3.27%
#: at one run: worse in 10 of 102 series, better in 3), and the per-run picks are never worse
#: (3.27%, 2.90%, 2.93% at one, two, three runs; better in 2 of 66 and 2 of 61 series).
PER = ("second", "run")
#: Columns :func:`suggest` adds to the candidates it returns.
COLUMNS = ("expected_mape_after", "cost_s", "gain_per_s")


def device_name(value: object) -> str:
    """The device a ``gpu`` value names, spelled the catalog's way ("CPU" for none), so that
    "Tesla T4" and "T4" are one device."""
    if not isinstance(value, str) or not value.strip() or value.strip().upper() == "CPU":
        return "CPU"
    from gpuperf_magics.hardware import catalog

    return catalog.match(value) or value.strip()


def latest_device(X: Any) -> str | None:
    """The device of the latest run of a fit table (by ``created_at`` where the table has it,
    else its last row), as :func:`device_name` spells it; None for an empty table or an
    array."""
    if not isinstance(X, pd.DataFrame) or len(X) == 0:
        return None
    row = len(X) - 1
    if "created_at" in X.columns:  # the last row among the latest time stamps
        stamps = X["created_at"].astype(object).where(X["created_at"].notna(), "")
        text = stamps.astype(str).to_numpy()
        row = len(text) - 1 - int(np.argmax(text[::-1] == text.max()))
    # The row's label as the model reads it ("Tesla T4", "7.4 TFLOPS GPU", "CPU").
    label = prepare(X.iloc[[row]]).hardware_label[0]
    return device_name(str(label))


def iteration_noise(X: Any) -> dict[str, float]:
    """Per network of a fit table, the spread of its runs' steady iteration times (relative
    standard deviation, the median over its runs): what a ``--stop-after auto`` run of it
    needs iterations for (:func:`~gpuperf_magics.auto_stop.auto_iterations`).

    Read from ``(it_p90_s / it_median_s - 1) / 1.28`` (a 90th percentile is not moved by the
    rare long step, a garbage collection, that a standard deviation is), else from
    ``it_std_s / it_mean_s``; networks whose runs hold neither (imported tables) are left out.
    """
    if not isinstance(X, pd.DataFrame) or "it_median_s" not in X.columns:
        return {}
    median = pd.to_numeric(X["it_median_s"], errors="coerce").to_numpy(float)
    sigma = np.full(len(X), np.nan)
    if "it_p90_s" in X.columns:
        p90 = pd.to_numeric(X["it_p90_s"], errors="coerce").to_numpy(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            sigma = (p90 / median - 1) / _P90_Z
    if "it_std_s" in X.columns and "it_mean_s" in X.columns:
        std = pd.to_numeric(X["it_std_s"], errors="coerce").to_numpy(float)
        mean = pd.to_numeric(X["it_mean_s"], errors="coerce").to_numpy(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            sigma = np.where(np.isfinite(sigma), sigma, std / mean)
    valid = np.isfinite(sigma) & (sigma >= 0) & (median > 0)
    nets = (X["network"].astype(str).to_numpy() if "network" in X.columns
            else np.full(len(X), "*"))
    return {str(net): float(np.median(sigma[valid & (nets == net)]))
            for net in pd.unique(nets[valid])}


def profile_seconds(model: Any, candidates: pd.DataFrame, iterations: np.ndarray) -> np.ndarray:
    """Predicted seconds of profiling each candidate for ``iterations`` (warm-up included):
    the model's time of that many iterations (the series' set-up time with it, where its runs
    tell one) plus :data:`RUN_OVERHEAD_S`."""
    table = model.predict_table(candidates.assign(iterations=iterations))
    return RUN_OVERHEAD_S + table["time_s"].to_numpy(float)


def suggest(model: Any, target: Any, candidates: Any, k: int = 3, device: str | None = None,
            latest: str | None = None, noise: dict[str, float] | None = None,
            per: str = "second") -> pd.DataFrame:
    """The ``k`` candidates worth profiling next, best first (see the module docstring).

    Parameters
    ----------
    model : DefaultModel
        A fitted default model (``TrainingTimeModel().fit(...).estimator_``).
    target, candidates : DataFrame
        Configurations asked about, and configurations that could be profiled, with the
        columns of the fit table.
    k : int, default 3
        Candidates to return at most.
    device : str, optional
        Only candidates on this device ("CPU" or a GPU name) are suggested; default
        ``latest``.
    latest : str, optional
        The device of the latest run of the fit table (:func:`latest_device`).
    noise : dict, optional
        Spread of the iteration times per network (:func:`iteration_noise`); a network left
        out is costed at :data:`DEFAULT_NOISE`.
    per : {"second", "run"}, default "second"
        What the budget is counted in: ``"second"`` ranks by the gain per predicted second
        of profiling (a time budget); ``"run"`` by the gain alone, the cheaper first where
        gains tie (a budget of a few more runs, whatever each takes). See :data:`PER`.

    Returns
    -------
    DataFrame
        Rows of ``candidates`` (their index and columns kept), best first, with
        ``expected_mape_after`` (the targets' mean expected error, fraction, once this and
        the rows above it are measured), ``cost_s`` (predicted seconds of a
        ``--stop-after auto`` run: :func:`profile_seconds` at the iterations
        :func:`~gpuperf_magics.auto_stop.auto_iterations` gives the network's noise) and
        ``gain_per_s`` (``log(log(1 + before) / log(1 + after))`` of that error, before and
        after this row, per second of its cost: the information the run brings, see the module
        docstring). ``attrs["expected_mape_before"]``: the targets'
        expected error now. Candidates already measured, on another device, or of a network
        without runs are never returned.
    """
    _check(model, target, candidates, k, per)
    wanted = device_name(device if device is not None else latest)
    table = model.predict_table(target)
    before = table["expected_mape"].to_numpy(float).copy()
    prep_t = prepare(target, model.ignore, prefer_catalog=True)
    prep_c = prepare(candidates, model.ignore, prefer_catalog=True)
    t_nets = _networks(prep_t, len(target))
    c_nets = _networks(prep_c, len(candidates))
    spread = noise or {}
    its = np.array([auto_iterations(spread.get(str(net), DEFAULT_NOISE)) for net in c_nets],
                   dtype=float)
    cost = profile_seconds(model, candidates, its)
    on_device = np.array([device_name(str(lab)) == wanted for lab in prep_c.hardware_label])
    spaces: dict[str, _Space] = {}
    for net in pd.unique(c_nets[on_device]):
        local = getattr(model, "local_", {}).get(net)
        rows = np.flatnonzero(on_device & (c_nets == net))
        space = _space(local, prep_t, np.flatnonzero(t_nets == net), prep_c, rows, its[rows])
        if space is not None:
            spaces[net] = space
    errors = before.copy()
    units: dict[str, np.ndarray] = {}  # the measured series' spacing, per target (route_error)
    for net, space in spaces.items():
        errors[space.targets], units[net] = space.anchor(before[space.targets])
    picked = _greedy(spaces, units, errors, before, cost, k, per)
    out = candidates.iloc[[c for c, _, _ in picked]].copy()
    out["expected_mape_after"] = [after for _, after, _ in picked]
    out["cost_s"] = cost[[c for c, _, _ in picked]]
    out["gain_per_s"] = [gain for _, _, gain in picked]
    out.attrs["expected_mape_before"] = float(np.mean(errors)) if len(errors) else float("nan")
    out.attrs["device"] = wanted
    return out


def _check(model: Any, target: Any, candidates: Any, k: int, per: str = "second") -> None:
    """Clear errors for what :func:`suggest` cannot answer."""
    if per not in PER:
        raise ValueError(f"per must be one of {', '.join(map(repr, PER))} (what the budget is "
                         f"counted in), not {per!r}")
    for name, frame in (("target", target), ("candidates", candidates)):
        if not isinstance(frame, pd.DataFrame):
            raise TypeError(f"{name} must be a DataFrame with the columns of the fit table "
                            f"(one row per configuration), not {type(frame).__name__}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive whole number of candidates, not {k!r}")
    if len(target) == 0:
        raise ValueError("target is empty: give at least one configuration you ask about")
    if not hasattr(model, "local_"):
        raise ValueError("suggest needs the default model's validated moves: fit "
                         "TrainingTimeModel() (method='default'), not method='paper'")


def _networks(prep: Any, n: int) -> np.ndarray:
    return prep.network if prep.network is not None else np.full(n, "*")


class _Space:
    """One network's measured configurations plus its candidates, as one index: a subset of
    candidates is a mask over it."""

    def __init__(self, local: Any, index: SeriesIndex, n_measured: int, targets: np.ndarray,
                 values: np.ndarray, hw: np.ndarray, rows: np.ndarray,
                 novel: np.ndarray) -> None:
        self.local, self.index, self.n = local, index, n_measured
        self.targets, self.values, self.hw = targets, values, hw
        self.rows, self.novel = rows, novel  # candidate rows; not already measured
        repeat = local.moves.get("repeat")
        self.noise = AUTO_PRECISION if repeat is None or repeat.prior else max(
            repeat.mape, AUTO_PRECISION)
        self.scale = np.ones(len(targets))  # set by :meth:`anchor`

    def anchor(self, answered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scale this network's route errors so that, with the measured configurations only,
        each target's equals ``answered`` (the answer's own expected error). Returns the
        targets' errors now (``answered`` where the route tells none) and the unit their
        distances are counted in (:meth:`errors`)."""
        now, units = self.errors(self.measured())
        ok = np.isfinite(now) & (now > 0) & np.isfinite(answered) & (answered > 0)
        self.scale = np.where(ok, answered / np.where(ok, now, 1.0), 1.0)
        return np.where(np.isfinite(now), now * self.scale, answered), units

    def measured(self, extra: tuple[int, ...] = ()) -> np.ndarray:
        mask = np.zeros(self.index.n, dtype=bool)
        mask[: self.n] = True
        mask[[self.n + e for e in extra]] = True
        return mask

    def errors(self, allowed: np.ndarray, unit: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Expected error of every target of this network over ``allowed`` (NaN: no route),
        and the unit its distances were counted in: ``unit`` where given (the spacing of the
        measured series, which the candidates do not change; see :func:`route_error`), else
        its route's own last spacing (:func:`_unit`; NaN where the route goes beyond no
        series, and each later route then counts in its own)."""
        out = np.full(len(self.targets), np.nan)
        units = np.zeros(len(self.targets))
        for i in range(len(self.targets)):
            r = route(self.index, self.values[i], self.hw[i], allowed)
            units[i] = (_unit(self.index, r, self.values[i]) if unit is None
                        else float(unit[i]))
            out[i] = route_error(self.local, self.index, r, self.values[i], self.noise,
                                 units[i]) * self.scale[i]
        return out, units


def _space(local: Any, prep_t: Any, t_rows: np.ndarray, prep_c: Any,
           c_rows: np.ndarray, its: np.ndarray) -> _Space | None:
    """The augmented index of one network (None: the network has no runs, no targets, or the
    rows lack the columns its series are keyed by)."""
    if local is None or len(t_rows) == 0:
        return None
    index = local.index
    queries = query_arrays(index, local.hw_cols, prep_t, t_rows)
    cands = query_arrays(index, local.hw_cols, prep_c, c_rows)
    if queries is None or cands is None:
        return None
    values, hw, naive = cands
    everyone = np.ones(index.n, dtype=bool)
    novel = np.array([route(index, values[j], hw[j], everyone).kind != "repeat"
                      for j in range(len(c_rows))], dtype=bool)
    m = len(c_rows)
    device = np.concatenate([index.device, (
        np.asarray(prep_c.device, dtype=object)[c_rows] if prep_c.device is not None
        else np.full(m, None, dtype=object))])
    aug = SeriesIndex(index.cols, index.batch_axis, np.vstack([index.values, values]),
                      np.vstack([index.hw, hw]), np.concatenate([index.naive_peak, naive]),
                      np.concatenate([index.t, np.full(m, np.nan)]),
                      np.concatenate([index.count, np.ones(m, int)]),
                      np.concatenate([index.spread, np.ones(m)]),
                      np.concatenate([index.busy, np.zeros(m)]),
                      np.concatenate([index.setup, np.zeros(m)]), index.per_it_row,
                      index.config_of_row,
                      np.concatenate([index.its, its]),
                      device=device)
    # The measured configurations decide which columns are axes, as for the predictions.
    aug.derived = index.derived.copy()
    aug.axes = list(index.axes)
    return _Space(local, aug, index.n, t_rows, queries[0], queries[1], c_rows, novel)


def route_error(local: Any, index: SeriesIndex, r: Route, v: np.ndarray,
                noise: float, spacing: float | None = None, gpu_source: bool = False) -> float:
    """Expected error (fraction) of a query reached by route ``r`` (NaN for ``none``).

    ``noise``: the error of one run of a configuration (the validated repeat noise).
    ``spacing``: the unit distances are counted in, the last spacing of the measured series
    (default, or NaN: the route's own). A move to another GPU or precision passes it on to
    its source's move. A line through the points ``x₁, x₂`` nearest a query ``q``
    misses a curve by about ``(q − x₁)(q − x₂)`` times its curvature (Taylor), whatever the
    spacing of ``x₁`` and ``x₂``; the curvature comes from the validated error at the
    validated reach, which is counted in the measured series' spacings, so that is the unit
    here too, and a candidate does not change it. Counted in the candidate's own, wider steps
    (until 2026-12-05: the wider of those and the series'), a candidate far from the target
    that stretched the series (513 added to 32 and 45, asked 3,072) looked as good as one next
    to the target (3.3% expected against 1.0%), and being cheaper it was picked: it erred by
    55% on sia2023, the one next to the target by 1.3%. Counted in the series' steps, the
    product of distances decides: measured 2, 4 and 128 and asked 256, adding 64 leaves
    ``0.69 × 1.39`` (log distances) where 4 and 128 left ``0.69 × 4.16``, a narrowing.

    Along the batch size the curvature term stops at the physical bound (``e^d₁ − 1`` at a log
    distance ``d₁`` from the nearest measured batch, never below the validated error), as the
    intervals do (``default._beyond_interval``): sia2023's ncf measured at 32 and 45 and asked
    32,768 errs by 290×, which a cap of :data:`MAX_WIDER` times a 7% error had called 30%, so
    the cheapest candidate far from the target had looked nearly as good as one next to it.
    """
    if r.kind == "none":
        return float("nan")
    if r.kind == "repeat":
        return noise / math.sqrt(max(float(np.min(index.count[r.members])), 1.0)) if len(
            r.members) else noise
    move = local.moves.get(r.key) or local.moves.get(family(r.key))
    base = move.mape if move is not None else float("nan")
    if r.kind == "gpu":  # the source's move counted in the same unit (another precision)
        sources = [route_error(local, index, sub, v, noise, spacing, gpu_source=True)
                   for _, sub in r.sources]
        return math.hypot(base, float(np.median(sources)))
    steps = 0.0
    if r.kind == "chain":
        steps = float(np.median([route_error(local, index, sub, vb, noise)
                                 for _, vb, sub in r.steps]))
    if (r.position == "single" and not gpu_source and on_gpu_batch(index, r)
            and (move is None or move.prior)):
        # One batch size measured on a GPU: the error of the public elasticities at this
        # distance, as the answer's interval has it (model/batch_single.py), not the public
        # extrapolation figure (which made the anchor scale every candidate's error up).
        base = single_interval(index, r, v, 0.8)[2]
    method = move.method if move is not None else "lin"
    design = _design(index, r, v, method, noise)
    if r.position == "beyond":
        own = _gaps(index, r, v)[2]
        unit = spacing if spacing is not None and math.isfinite(spacing) else own
        validated = max(move.reach if move is not None else 1.0, 1e-9)
        x = _product(index, r, v, method) / (unit * unit * validated * (1 + validated))
        if r.axis == r.batch_axis:  # up to the physical bound, as the intervals
            bound = beyond_distance(index, r, v)  # NaN: values not all positive, no bound
            scale = (min(x, max(1.0, math.expm1(bound) / base))
                     if base > 0 and math.isfinite(bound) else x)
        else:
            scale = _wider(x)
    else:  # between two points, or the one point moved (local.single_value)
        scale = 1.0
    fit_x, sigma, q = design
    carried = float(np.sqrt(np.sum((_hat(fit_x, q) * sigma) ** 2)))
    return math.sqrt((base * scale) ** 2 + carried ** 2 + steps ** 2)


def _unit(index: SeriesIndex, r: Route, v: np.ndarray) -> float:
    """The spacing a route's distances are counted in: the last spacing of the series it goes
    beyond (for a move to another GPU or precision, that of its source's route); NaN where
    it goes beyond none (between two points, one point, no route)."""
    if r.kind == "gpu":
        units = [_unit(index, sub, v) for _, sub in r.sources]
        finite = [u for u in units if math.isfinite(u)]
        return float(np.median(finite)) if finite else float("nan")
    if r.position != "beyond" or r.kind not in ("axis", "chain"):
        return float("nan")
    return _gaps(index, r, v)[2]


def _wider(x: float) -> float:
    """How many times its validated error a move ``x`` times the validated ``d₁·d₂`` errs
    along an axis other than the batch size: ``x`` up to :data:`MAX_WIDER`, then growing with
    its log (``MAX_WIDER·(1 + log(x / MAX_WIDER))``). The intervals stop at the cap; a ranking
    cannot: under a hard cap every candidate that leaves the target far away ties at the cap,
    no gain is left to tell them apart, and the cheapest (the farthest from the target) won."""
    return x if x <= MAX_WIDER else MAX_WIDER * (1.0 + math.log(x / MAX_WIDER))


def _gaps(index: SeriesIndex, r: Route, v: np.ndarray) -> tuple[float, float, float]:
    """For a move beyond its series: the query's distance to the series' end and to the point
    before it, and the spacing of those two (log scale where positive, as
    :func:`~.local.reach` counts; 1 spacing, 0 distances for another route)."""
    if r.position != "beyond":
        return 0.0, 0.0, 1.0
    if r.kind == "chain" and len(r.steps) >= 2:
        x = np.sort([b for b, _, _ in r.steps])
    elif r.kind == "axis" and len(r.members) >= 2:
        x = np.sort(index.values[r.members, r.axis])
    else:
        return 0.0, 0.0, 1.0
    q = float(v[r.axis])
    end, nxt = (x[-1], x[-2]) if q > x[-1] else (x[0], x[1])
    if min(q, end, nxt) > 0:
        q, end, nxt = math.log(q), math.log(end), math.log(nxt)
    return abs(q - end), abs(q - nxt), max(abs(end - nxt), 1e-12)


def _points(index: SeriesIndex, r: Route, v: np.ndarray, method: str) -> np.ndarray:
    """The configurations of an axis route that ``method`` draws its prediction through: every
    point of the series for the naive ``line`` (a least-squares line), else the two nearest
    the query (``lin`` and ``log`` join the neighbours inside the range and continue the last
    two points beyond it, :func:`~.local.local_value`); sorted by distance to the query."""
    members = np.asarray(r.members)
    gap = np.abs(index.values[members, r.axis] - float(v[r.axis]))
    order = members[np.argsort(gap, kind="stable")]
    if method == "line" or r.position == "single":
        return order if method == "line" else order[:1]
    if r.position == "inside":  # the neighbours on either side
        x = index.values[order, r.axis]
        q = float(v[r.axis])
        below, above = order[x <= q], order[x > q]
        return np.array([below[0], above[0]]) if len(below) and len(above) else order[:2]
    return order[:2]


def _design(index: SeriesIndex, r: Route, v: np.ndarray, method: str, noise: float
            ) -> tuple[np.ndarray, np.ndarray, float]:
    """The points an axis route's prediction is drawn through, with their positions (the naive
    ``line``'s in linear space, where its least-squares fit is drawn; a two-point line's in
    log steps where the values are positive, as the validated reach counts them), with
    each point's noise (one run's ``noise`` over the square root of its runs: a median of many
    repeats is known better than one new run) and the query's position. A chain's points are
    its estimated ones, each known to ``noise``: the two nearest, in log steps where positive.
    """
    q = float(v[r.axis])
    if r.kind == "chain":
        x = np.array([b for b, _, _ in r.steps], dtype=float)
        x, q = _log_steps(x[np.argsort(np.abs(x - q), kind="stable")][:2], q)
        return x, np.full(len(x), noise), q
    if len(r.members) == 0:
        return np.zeros(1), np.full(1, noise), 0.0
    pts = _points(index, r, v, method)
    x = index.values[pts, r.axis].astype(float)
    if method != "line":
        x, q = _log_steps(x, q)
    sigma = noise / np.sqrt(np.maximum(index.count[pts].astype(float), 1.0))
    return x, sigma, q


def _log_steps(x: np.ndarray, q: float) -> tuple[np.ndarray, float]:
    """Positions in log steps where every value is positive (as :func:`~.local.reach`
    counts), else as they are."""
    if len(x) and x.min() > 0 and q > 0:
        return np.log(x), math.log(q)
    return x, q


def _hat(x: np.ndarray, q: float) -> np.ndarray:
    """The weights of each point in a least-squares line's value at ``q`` (the prediction is
    ``Σ hᵢ tᵢ``; they sum to 1): a point's noise reaches the prediction times its weight. Two
    points ``r`` steps beyond the last give ``1 + r`` and ``−r``; one point, 1."""
    if len(x) < 2 or np.ptp(x) == 0:
        return np.full(len(x), 1.0 / max(len(x), 1))
    d = x - x.mean()
    return 1.0 / len(x) + (q - x.mean()) * d / float(np.sum(d * d))


def _product(index: SeriesIndex, r: Route, v: np.ndarray, method: str) -> float:
    """How far a move beyond its series reaches, as the curvature error of its line sees it:
    ``|Σ hᵢ xᵢ² − q²|`` with the line's weights :func:`_hat` (a line misses ``c·x²`` by
    ``c`` times this), counted in log steps where the values are positive, as
    :func:`~.local.reach` counts. For a line through the two nearest points (``lin``,
    ``log``) it is the product of the query's distances to them, ``d₁·d₂``; for the naive
    ``line`` through every point, points far from the query count too: measured at depths 1,
    2 and 9 and asked 10, adding 8 leaves 0.45 (log steps²), adding 6 leaves 0.67."""
    if r.kind == "chain":
        near, far, _ = _gaps(index, r, v)
        return near * far
    pts = _points(index, r, v, method if method == "line" else "lin")
    x, q = _log_steps(index.values[pts, r.axis].astype(float), float(v[r.axis]))
    return abs(float(np.sum(_hat(x, q) * x * x)) - q * q)


def _greedy(spaces: dict[str, _Space], units: dict[str, np.ndarray], errors: np.ndarray,
            before: np.ndarray, cost: np.ndarray, k: int, per: str = "second"
            ) -> list[tuple[int, float, float]]:
    """Pick up to ``k`` candidates one by one, each the best gain per second (``per="run"``:
    the best gain) given the ones before it (the gain: :func:`_information` of the targets'
    mean expected error, the module docstring says why): (candidate position, targets' mean
    error after, gain per second). ``units``: per network, the measured series' spacing each
    target's distances are counted in, whatever is added (:func:`route_error`)."""
    chosen: dict[str, list[int]] = {net: [] for net in spaces}
    current = errors.copy()
    picked: list[tuple[int, float, float]] = []
    for _ in range(k):
        best: tuple[tuple[float, float, float], float, str, int, np.ndarray] | None = None
        for net, space in spaces.items():
            for j in map(int, np.flatnonzero(space.novel)):
                if j in chosen[net]:
                    continue
                now = space.errors(space.measured((*chosen[net], j)), units[net])[0]
                trial = current.copy()
                trial[space.targets] = np.where(np.isfinite(now), now, before[space.targets])
                gain = _information(float(np.mean(current)), float(np.mean(trial)))
                c = float(cost[space.rows[j]])
                rate = gain / c if c > 0 else 0.0
                # A run that would not narrow the answer comes after every one that would:
                # the least widening, then the cheapest (per second, a widening run costing
                # more would look less harmful).
                key = (1.0, rate if per == "second" else gain, -c) if gain > 0 else (
                    0.0, gain, -c)
                if best is None or key > best[0]:
                    best = (key, rate, net, j, trial)
        if best is None:
            break
        _, rate, net, pick, trial = best
        chosen[net].append(pick)
        current = trial
        picked.append((int(spaces[net].rows[pick]), float(np.mean(current)), rate))
    return picked


def _information(before: float, after: float) -> float:
    """``log(log(1 + before) / log(1 + after))``: what narrowing an expected error (a MAPE,
    fraction) from ``before`` to ``after`` is worth, the drop of the log of the log time's
    spread (0 where either is not a positive number)."""
    if not (before > 0 and after > 0 and math.isfinite(before) and math.isfinite(after)):
        return 0.0
    return math.log(math.log1p(before) / math.log1p(after))
