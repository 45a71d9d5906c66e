"""What to profile next: the candidates whose measurement narrows the answer most per second.

:func:`suggest` answers "which configuration should I profile next?" for a fitted default
model (:class:`~.default.DefaultModel`). The expected error of a target comes from the same
validated moves that give its interval (:mod:`~.validation`): the target is routed over the
measured configurations (:mod:`~.local`), its kind of move gives the validated MAPE, and a move
further beyond its series than the validated ones errs in proportion (:func:`~.local.reach`),
as :meth:`DefaultModel.predict_table` widens its interval. Each candidate is then added to
the measured configurations *by position only* (its time is not needed to know which series it
extends) and the targets are routed again: the drop of their mean expected error is the gain,
the predicted seconds of a ``--stop-after auto`` run of the candidate its cost.

Two terms make up a route's expected error:

- the chosen move's validated MAPE, scaled by ``r(1 + r)`` over the same at the validated
  reach (``r``: the reach in steps of the series' last spacing; a line drawn through a curved
  series misses by about the distance times the span, as a Taylor expansion has it), capped as
  the intervals are, at :data:`MAX_WIDER`; below the validated reach it keeps shrinking: a point
  measured next to the target leaves less to extrapolate (a plain ``r`` scaling did as well
  on the benchmark, 4.0% against 4.1% at k = 1);
- the measurement noise of the series' end points carried to the target by a straight line
  through them (``σ·√((1 + r)² + r²)`` at ``r`` spacings beyond the last point), with ``σ`` the
  validated repeat noise of the series (or :data:`AUTO_PRECISION`, what one ``--stop-after auto``
  run knows its median to, where the series has no repeats).

A move to another GPU adds its validated error to the error of the source's own move in
quadrature. The choice of k candidates is greedy: the first is the best alone, the second the
best once the first is measured, and so on. Cost: one route per target, candidate and pick, each
a pass over the network's configurations (no pairwise matrices over the rows).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from gpuperf_magics.model.inputs import prepare
from gpuperf_magics.model.local import Route, family, reach, route
from gpuperf_magics.model.series import SeriesIndex, query_arrays

#: Iterations a ``--stop-after auto`` run is costed at: the ceiling of the automatic stop
#: (a run stops earlier once its median is known within 1%, so this is the dearest case).
AUTO_ITERATIONS = 200
#: What one ``--stop-after auto`` run knows its median per iteration to (the stop rule's
#: confidence interval, 1%): the noise of a new point where the series shows no repeats.
AUTO_PRECISION = 0.01
#: Most a move's error grows beyond the validated reach (the intervals' own cap).
MAX_WIDER = 4.0
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


def suggest(model: Any, target: Any, candidates: Any, k: int = 3, device: str | None = None,
            latest: str | None = None) -> pd.DataFrame:
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

    Returns
    -------
    DataFrame
        Rows of ``candidates`` (their index and columns kept), best first, with
        ``expected_mape_after`` (the targets' mean expected error, fraction, once this and
        the rows above it are measured), ``cost_s`` (predicted seconds of a run of
        :data:`AUTO_ITERATIONS` iterations) and ``gain_per_s`` (the drop of that error this
        row brings, per second of its cost). ``attrs["expected_mape_before"]``: the targets'
        expected error now. Candidates already measured, on another device, or of a network
        without runs are never returned.
    """
    _check(model, target, candidates, k)
    wanted = device_name(device if device is not None else latest)
    table = model.predict_table(target)
    before = table["expected_mape"].to_numpy(float).copy()
    prep_t = prepare(target, model.ignore, prefer_catalog=True)
    prep_c = prepare(candidates, model.ignore, prefer_catalog=True)
    cost = model.predict_table(candidates.assign(iterations=AUTO_ITERATIONS))["time_s"]
    cost = cost.to_numpy(float)
    t_nets = _networks(prep_t, len(target))
    c_nets = _networks(prep_c, len(candidates))
    on_device = np.array([device_name(str(lab)) == wanted for lab in prep_c.hardware_label])
    spaces: dict[str, _Space] = {}
    for net in pd.unique(c_nets[on_device]):
        local = getattr(model, "local_", {}).get(net)
        rows = np.flatnonzero(on_device & (c_nets == net))
        space = _space(local, prep_t, np.flatnonzero(t_nets == net), prep_c, rows)
        if space is not None:
            spaces[net] = space
    errors = before.copy()
    for space in spaces.values():
        errors[space.targets] = np.where(
            np.isfinite(now := space.errors(space.measured())), now, before[space.targets])
    picked = _greedy(spaces, errors, before, cost, k)
    out = candidates.iloc[[c for c, _, _ in picked]].copy()
    out["expected_mape_after"] = [after for _, after, _ in picked]
    out["cost_s"] = cost[[c for c, _, _ in picked]]
    out["gain_per_s"] = [gain for _, _, gain in picked]
    out.attrs["expected_mape_before"] = float(np.mean(errors)) if len(errors) else float("nan")
    out.attrs["device"] = wanted
    return out


def _check(model: Any, target: Any, candidates: Any, k: int) -> None:
    """Clear errors for what :func:`suggest` cannot answer."""
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

    def measured(self, extra: tuple[int, ...] = ()) -> np.ndarray:
        mask = np.zeros(self.index.n, dtype=bool)
        mask[: self.n] = True
        mask[[self.n + e for e in extra]] = True
        return mask

    def errors(self, allowed: np.ndarray) -> np.ndarray:
        """Expected error of every target of this network over ``allowed`` (NaN: no route)."""
        out = np.full(len(self.targets), np.nan)
        for i in range(len(self.targets)):
            r = route(self.index, self.values[i], self.hw[i], allowed)
            out[i] = route_error(self.local, self.index, r, self.values[i], self.noise)
        return out


def _space(local: Any, prep_t: Any, t_rows: np.ndarray, prep_c: Any,
           c_rows: np.ndarray) -> _Space | None:
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
    device = np.concatenate([index.device, np.full(m, None, dtype=object)])
    aug = SeriesIndex(index.cols, index.batch_axis, np.vstack([index.values, values]),
                      np.vstack([index.hw, hw]), np.concatenate([index.naive_peak, naive]),
                      np.concatenate([index.t, np.full(m, np.nan)]),
                      np.concatenate([index.count, np.ones(m, int)]),
                      np.concatenate([index.spread, np.ones(m)]),
                      np.concatenate([index.busy, np.zeros(m)]),
                      np.concatenate([index.setup, np.zeros(m)]), index.per_it_row,
                      index.config_of_row,
                      np.concatenate([index.its, np.full(m, float(AUTO_ITERATIONS))]),
                      device=device)
    # The measured configurations decide which columns are axes, as for the predictions.
    aug.derived = index.derived.copy()
    aug.axes = list(index.axes)
    return _Space(local, aug, index.n, t_rows, queries[0], queries[1], c_rows, novel)


def route_error(local: Any, index: SeriesIndex, r: Route, v: np.ndarray,
                noise: float) -> float:
    """Expected error (fraction) of a query reached by route ``r`` (NaN for ``none``)."""
    if r.kind == "none":
        return float("nan")
    if r.kind == "repeat":
        return noise
    move = local.moves.get(r.key) or local.moves.get(family(r.key))
    base = move.mape if move is not None else float("nan")
    if r.kind == "gpu":
        sources = [route_error(local, index, sub, v, noise) for _, sub in r.sources]
        return math.hypot(base, float(np.median(sources)))
    steps = 0.0
    if r.kind == "chain":
        steps = float(np.median([route_error(local, index, sub, vb, noise)
                                 for _, vb, sub in r.steps]))
    if r.position == "beyond":
        far = reach(index, r, v)
        validated = max(move.reach if move is not None else 1.0, 1e-9)
        scale = min(MAX_WIDER, far * (1 + far) / (validated * (1 + validated)))
        lever = math.hypot(1 + far, far)
    else:  # between two points, or the time per sample of the one point carried over
        scale, lever = 1.0, 1.0
    return math.sqrt((base * scale) ** 2 + (noise * lever) ** 2 + steps ** 2)


def _greedy(spaces: dict[str, _Space], errors: np.ndarray, before: np.ndarray,
            cost: np.ndarray, k: int) -> list[tuple[int, float, float]]:
    """Pick up to ``k`` candidates one by one, each the best gain per second given the ones
    before it: (candidate position, targets' mean error after, gain per second)."""
    chosen: dict[str, list[int]] = {net: [] for net in spaces}
    current = errors.copy()
    picked: list[tuple[int, float, float]] = []
    for _ in range(k):
        best: tuple[float, float, str, int, np.ndarray] | None = None
        for net, space in spaces.items():
            for j in map(int, np.flatnonzero(space.novel)):
                if j in chosen[net]:
                    continue
                now = space.errors(space.measured((*chosen[net], j)))
                trial = current.copy()
                trial[space.targets] = np.where(np.isfinite(now), now, before[space.targets])
                gain = float(np.mean(current) - np.mean(trial))
                c = float(cost[space.rows[j]])
                rate = gain / c if c > 0 else 0.0
                if best is None or (rate, -c) > (best[0], -best[1]):
                    best = (rate, c, net, j, trial)
        if best is None:
            break
        rate, _, net, pick, trial = best
        chosen[net].append(pick)
        current = trial
        picked.append((int(spaces[net].rows[pick]), float(np.mean(current)), rate))
    return picked
