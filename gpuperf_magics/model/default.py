"""The default model: the measured series first, the cross-series model for what they miss.

:class:`DefaultModel` routes every query (:mod:`~.local`): a measured configuration, a move
along one measured series (batch size, depth, GPU count ...), or a move to another GPU. For each
kind of move it holds several candidate methods, the naive one among them (a straight line
through the series; the plain spec-sheet ratio for GPUs), and picks the one with the lowest
error when validated on the user's own data at fit time: every configuration left out in turn
and predicted from the others, every GPU left out in turn for GPU moves. The validated
residuals of the chosen method are what a prediction of that kind reports: its interval (their
quantiles) and its expected error (their MAPE). Where too few moves of a kind can be validated,
the figures measured on public data stand in. Queries no series covers go to the cross-series
model (:class:`~.estimator.GlobalModel`), fitted on the configurations' median times.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gpuperf_magics.model.estimator import MEASURED_MAPE, GlobalModel
from gpuperf_magics.model.gpu_move import GpuMove, shipped
from gpuperf_magics.model.inputs import (
    Prepared,
    check_coverage,
    check_target,
    precision_of,
    prepare,
)
from gpuperf_magics.model.local import (
    SeriesIndex,
    axis_routes,
    candidates,
    family,
    network_index,
    query_arrays,
    reach,
    route,
)

#: Validated moves of one kind below which the public figures stand in for the user's own.
MIN_TASKS = 6
#: Configurations validated per network at most (a random subset beyond: validation stays
#: linear in the configurations).
MAX_VALIDATED = 800
#: Configurations per network between which the cross-series model is validated by refits
#: (below: too few to learn it or to validate it on; above: each refit costs too much). It is
#: also only validated where the network has series to learn from: at least
#: :data:`SERIES_PER_GPU` configurations per GPU on average (one batch per GPU, as in
#: benchmark tables, gives it nothing a GPU move does not have).
MIN_REFIT, MAX_REFIT, SERIES_PER_GPU = 10, 400, 3
#: Configurations per held-out axis value whose chains are validated, at most.
CHAIN_TASKS = 50
#: Groups of GPUs held out in turn to validate the cross-series model's GPU moves.
GPU_FOLDS = 3
#: The method each kind of move uses before validation says otherwise.
DEFAULT_METHOD = {"repeat": "lin", "batch:inside": "lin", "batch:beyond": "lin",
                  "batch:single": "lin",
                  "feature:inside": "line", "feature:beyond": "line", "gpu": "learnt",
                  "transfer": "learnt",
                  "chain:batch:inside": "lin", "chain:batch:beyond": "lin",
                  "chain:batch:single": "lin", "chain:feature:inside": "line",
                  "chain:feature:beyond": "line", "chain:feature:single": "lin"}
#: Kind of prediction (the column ``kind``) of each kind of move.
KIND = {"repeat": "interpolation", "batch:inside": "interpolation",
        "feature:inside": "interpolation", "batch:beyond": "extrapolation",
        "feature:beyond": "extrapolation", "batch:single": "extrapolation",
        "gpu": "extrapolation", "transfer": "transfer",
        **{f"chain:{a}:{p}": "extrapolation" for a in ("batch", "feature")
           for p in ("inside", "beyond", "single")}}
#: Public figure (MEASURED_MAPE's kind) standing in for each kind of move.
PRIOR_KIND = {"repeat": "interpolation", "batch:inside": "interpolation",
              "feature:inside": "interpolation", "batch:beyond": "extrapolation",
              "feature:beyond": "extrapolation", "batch:single": "extrapolation",
              "gpu": "transfer", "transfer": "transfer",
              **{f"chain:{a}:{p}": "extrapolation" for a in ("batch", "feature")
                 for p in ("inside", "beyond", "single")}}
#: Repeats of a configuration that differ by more than this (max/min) are reported as noisy.
NOISY = 1.25


@dataclass
class _Move:
    """The chosen method of one kind of move and its validated log residuals."""

    method: str
    logres: np.ndarray  # sorted log(actual / predicted) of the chosen method
    errors: dict[str, float] = field(default_factory=dict)  # MAPE of every candidate
    prior_mape: float | None = None  # too few validated moves: the public figure
    reach: float = 1.0  # median reach of the validated moves beyond a series (local.reach)

    @property
    def prior(self) -> bool:
        return self.prior_mape is not None

    @property
    def mape(self) -> float:
        if self.prior_mape is not None:
            return self.prior_mape
        return float(np.mean(np.abs(np.exp(-self.logres) - 1)))


@dataclass
class _Local:
    """One network's configurations and what validation chose."""

    index: SeriesIndex
    move: GpuMove
    moves: dict[str, _Move]
    hw_cols: list[str]

    def method(self, key: str) -> str:
        chosen = self.moves.get(key)
        return chosen.method if chosen is not None else DEFAULT_METHOD.get(family(key), "lin")

    def sub_methods(self) -> dict[str, str]:
        return {k: self.method(k) for k in {*DEFAULT_METHOD, *self.moves}}


class DefaultModel(GlobalModel):
    """Local-first training-time model (see the module docstring).

    Parameters
    ----------
    k_max : int, optional
        Most terms of the cross-series model's forward selection (default 8).
    coverage : float, default 0.8
        Coverage of the intervals (0.8: from the 10th to the 90th percentile of the validated
        residuals of that kind of move).
    ignore : sequence of str, default ()
        Numeric columns of ``X`` that are not features.
    public_data : bool, default True
        Use what the package learnt from public multi-GPU data (the GPU moves of
        :mod:`~.gpu_move`); False: the plain spec-sheet ratio and a physical prior.
    random_state : int, default 0
        Seed of the cross-validation splits and of the validated subset.
    gpu_moves : dict, optional
        GPU moves by kind ("recorded", "unrecorded") instead of the shipped ones (the
        benchmark passes moves learnt without the GPU it holds out).

    Attributes
    ----------
    moves_ : dict
        Per network, per kind of move: the chosen method, its validated MAPE and the
        candidates' errors (also in :meth:`report`).
    """

    method = "default"
    regressor = "ridge"

    def __init__(
        self,
        k_max: int | None = None,
        coverage: float = 0.8,
        ignore: Sequence[str] = (),
        public_data: bool = True,
        random_state: int = 0,
        gpu_moves: dict[str, GpuMove] | None = None,
    ) -> None:
        self.k_max = k_max
        self.coverage = coverage
        self.ignore = ignore
        self.public_data = public_data
        self.random_state = random_state
        self.gpu_moves = gpu_moves

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any) -> DefaultModel:
        """Fit the series of every network and the cross-series model.

        Parameters
        ----------
        X : DataFrame or 2-D numeric array
            Canonical table (see :class:`~.training_time.TrainingTimeModel`).
        y : array-like of float
            Seconds each row's iterations took.

        Returns
        -------
        self
        """
        check_coverage(self.coverage)
        prep = prepare(X, self.ignore, prefer_catalog=True)
        target = check_target(y, len(prep.features))
        frame = X if isinstance(X, pd.DataFrame) else pd.DataFrame(prep.features)
        frame = frame.reset_index(drop=True)
        medians, first = _configuration_medians(prep, target)
        agg = frame.iloc[first].reset_index(drop=True)
        super().fit(agg, medians)
        prep_agg = _subset(prep, first)
        nets = prep.network if prep.network is not None else np.full(len(target), "*")
        busy = _busy(frame)
        moves = self.gpu_moves if self.gpu_moves is not None else (
            shipped() if self.public_data else {k: GpuMove() for k in ("recorded", "unrecorded")})
        recorded = precision_of(frame)
        self.local_: dict[str, _Local] = {}
        for net in self.networks_:
            mine = np.flatnonzero(nets == net)
            kind = "recorded" if all(p is not None for p in recorded[mine]) else "unrecorded"
            # The network's configuration medians, for refits of the cross-series model.
            own = np.flatnonzero(np.isin(first, mine))
            position = np.searchsorted(mine, first[own])
            self.local_[net] = self._fit_local(prep, mine, target[mine], busy[mine],
                                               moves[kind], (net, prep_agg, medians, own,
                                                             position))
        # The advice names the error of a move to another GPU: now that the moves are
        # validated, give theirs (see _transfer_error).
        self.advice_ = []
        for net in self.networks_:
            self._advise(net, self.fits_[net])
        # The error of moves to an unmeasured batch size, as validated on these runs (or the
        # public figure standing in where too few could be): what "the model's error" means
        # to someone asking about another batch size.
        errors = [loc.moves[k].mape for loc in self.local_.values()
                  for k in ("batch:inside", "batch:beyond") if k in loc.moves]
        if errors:
            self.cv_mape_ = float(np.mean(errors))
        self.moves_ = {
            net: {k: {"method": m.method, "mape": m.mape, "validated": len(m.logres),
                      "public": m.prior, "candidates": dict(m.errors)}
                  for k, m in loc.moves.items()}
            for net, loc in self.local_.items()
        }
        return self

    def _transfer_error(self, net: str) -> float:
        local = getattr(self, "local_", {}).get(net)
        if local is None:  # during the cross-series fit, before the moves are validated
            return super()._transfer_error(net)
        return local.moves["transfer"].mape

    def _fit_local(self, prep: Prepared, rows: np.ndarray, y: np.ndarray, busy: np.ndarray,
                   move: GpuMove, medians: tuple[Any, ...]) -> _Local:
        index, hw_cols = network_index(prep, rows, y, busy)
        local = _Local(index, move, {}, hw_cols)
        tasks = self._validate(local, medians)
        for key, entries in tasks.items():
            local.moves[key] = self._choose(key, entries, move)
        for key in DEFAULT_METHOD:
            if key not in local.moves:
                local.moves[key] = self._choose(key, [], move)
        return local

    def _validate(self, local: _Local, medians: tuple[Any, ...]
                  ) -> dict[str, list[dict[str, float]]]:
        """Log residuals of every candidate, per kind of move, on the user's own data.

        Local and naive candidates: each configuration left out in turn (and each GPU, for
        GPU moves). The cross-series model (``global``) is refitted without the held-out GPU
        (GPU moves) or without a third of the configurations (other moves; only up to
        :data:`MAX_REFIT` configurations, as each refit costs a fit).
        """
        index = local.index
        rng = np.random.default_rng(self.random_state)
        tasks: dict[str, list[dict[str, float]]] = {}
        subs = {k: DEFAULT_METHOD[k] for k in DEFAULT_METHOD}
        net, prep_agg, agg_y, own, agg_row = medians
        agg_config = index.config_of_row[agg_row]

        def refit(held: np.ndarray) -> dict[int, float]:
            """Per-iteration predictions of the held-out configurations by a refit.

            Refits the cross-series model of this network on the prepared configuration
            medians (no second pass over the table), without the held-out configurations.
            """
            keep = ~np.isin(agg_config, held)
            if keep.sum() < 2 or (~keep).sum() == 0:
                return {}
            advice = list(self.advice_)
            try:
                fit = self._fit_network(net, prep_agg, own[keep], agg_y[own[keep]])
                test = own[~keep]
                out = {k: np.zeros(len(test)) for k in
                       ("time_s", "time_low_s", "time_high_s", "per_iteration_s",
                        "expected_mape")}
                out.update(kind=np.empty(len(test), dtype=object),
                           detail=np.empty(len(test), dtype=object))
                self._predict_network(fit, _subset(prep_agg, test), np.arange(len(test)),
                                      self.coverage, out)
            except (ValueError, np.linalg.LinAlgError):
                return {}
            finally:
                self.advice_ = advice
            pred, its = out["time_s"], prep_agg.iterations[test]
            result: dict[int, float] = {}
            for c, p, n in zip(agg_config[~keep], pred, its, strict=True):
                # Seconds per iteration at the configuration's median iteration count.
                at = float(index.its[c])
                per_it = max(p - index.setup[c], 1e-3 * p) / n
                result.setdefault(int(c), per_it + index.setup[c] / at)
            return result

        # The cross-series model's held-out predictions, keyed by (configuration, axis): an
        # axis move is validated by a refit without every configuration of the held-out value
        # on that axis (a depth never measured is never seen in another configuration either);
        # axis -1: GPU moves, refitted without the held-out GPUs.
        global_pred: dict[tuple[int, int], float] = {}

        def add(c: int, allowed: np.ndarray, every_axis: bool = False) -> None:
            r = route(index, index.values[c], index.hw[c], allowed)
            if every_axis:  # each axis that reaches the configuration is a move to validate
                for other in axis_routes(index, index.values[c], index.hw[c], allowed):
                    if other.key != r.key:
                        score(c, other)
            if r.kind != "none":
                score(c, r)

        def score(c: int, r: Any) -> None:
            its = float(index.its[c])
            preds = candidates(index, r, index.values[c], index.hw[c], index.naive_peak[c],
                               local.move, subs, its)
            key = (c, r.axis if r.kind in ("axis", "chain") else -1)
            if key in global_pred and r.kind in ("axis", "gpu", "chain"):
                preds["global"] = global_pred[key]
            actual = float(index.per_job(np.array([c]), its)[0])
            task = {m: float(np.log(actual / p)) for m, p in preds.items() if p > 0}
            task["_reach"] = reach(index, r, index.values[c])
            tasks.setdefault(r.key, []).append(task)

        everyone = np.ones(index.n, dtype=bool)
        picked = np.arange(index.n)
        if index.n > MAX_VALIDATED:
            picked = np.sort(rng.choice(index.n, MAX_VALIDATED, replace=False))
        refits = (MIN_REFIT <= index.n <= MAX_REFIT
                  and index.n >= SERIES_PER_GPU * len(index.hw_table))
        chained: list[tuple[int, np.ndarray]] = []
        in_picked = np.zeros(index.n, dtype=bool)
        in_picked[picked] = True
        for j in index.axes:
            values = np.unique(index.values[:, j])
            if len(values) < 2:
                continue
            # The two ends and two interior values: beyond and inside moves.
            held = sorted({values[0], values[-1], values[len(values) // 3],
                           values[(2 * len(values)) // 3]})
            for value in held:
                out_of = np.flatnonzero(index.values[:, j] == value)
                if refits and len(values) >= 3:
                    for held_c, p in refit(out_of).items():
                        global_pred[(held_c, j)] = p
                # A value no configuration keeps: what only a chain (two moves) reaches.
                allowed = np.ones(index.n, dtype=bool)
                allowed[out_of] = False
                chained.extend((int(c), allowed) for c in out_of[in_picked[out_of]][:CHAIN_TASKS])
        for pick in picked:
            allowed = everyone.copy()
            allowed[pick] = False
            add(int(pick), allowed, every_axis=True)
        for c, allowed in chained:
            r = route(index, index.values[c], index.hw[c], allowed)
            if r.kind == "chain":
                score(c, r)
        if index.hw.shape[1]:
            _, gpu_of = np.unique(np.round(index.hw, 6), axis=0, return_inverse=True)
            gpu_of = gpu_of.reshape(-1)
            if gpu_of.max() > 0:
                n_gpus = int(gpu_of.max()) + 1
                per_gpu = max(1, MAX_VALIDATED // n_gpus)
                # The cross-series model is refitted per group of GPUs (at most GPU_FOLDS).
                group_of = rng.permutation(n_gpus) % min(n_gpus, GPU_FOLDS)
                for k in range(min(n_gpus, GPU_FOLDS)):
                    out_of = np.flatnonzero(group_of[gpu_of] == k)
                    if refits:
                        for held_c, p in refit(out_of).items():
                            global_pred[(held_c, -1)] = p
                    for g in np.flatnonzero(group_of == k):
                        self._gpu_tasks(index, gpu_of, int(g), per_gpu, rng, add)

        # Repeats: each run against the median of its configuration's other runs.
        groups = index.config_of_row
        repeated = np.flatnonzero(index.count > 1)
        for c in repeated[:MAX_VALIDATED]:
            times = index.per_it_row[groups == c]
            for i in range(len(times)):
                tasks.setdefault("repeat", []).append(
                    {"lin": float(np.log(times[i] / np.median(np.delete(times, i))))})
        return tasks

    @staticmethod
    def _gpu_tasks(index: SeriesIndex, gpu_of: np.ndarray, g: int, per_gpu: int,
                   rng: np.random.Generator, add: Any) -> None:
        """Every configuration of GPU ``g`` predicted from the other GPUs only."""
        mine = np.flatnonzero(gpu_of == g)
        if len(mine) > per_gpu:
            mine = np.sort(rng.choice(mine, per_gpu, replace=False))
        for c in mine:
            add(int(c), gpu_of != g)

    def _choose(self, key: str, entries: list[dict[str, float]], move: GpuMove) -> _Move:
        """The candidate with the lowest validated MAPE for one kind of move."""
        methods = sorted({m for e in entries for m in e if not m.startswith("_")})
        errors: dict[str, float] = {}
        for m in methods:
            # Compare on the moves every candidate answered, so that a method that only
            # answers the easy ones (the plain ratio needs the exact configuration) is not
            # favoured by that alone.
            common = [e for e in entries if all(k in e for k in methods)] or entries
            res = np.array([e[m] for e in common if m in e])
            if len(res):
                errors[m] = float(np.mean(np.abs(np.exp(-res) - 1)))
        enough = len(entries) >= MIN_TASKS and errors
        method = DEFAULT_METHOD.get(family(key), "lin")
        if enough:
            # Prefer the default method unless another is clearly better (beyond noise).
            best = min(errors, key=errors.__getitem__)
            if method not in errors or errors[best] < 0.97 * errors[method]:
                method = best
        own = np.sort([e[method] for e in entries if method in e])
        if enough and len(own) >= MIN_TASKS:
            reaches = [e["_reach"] for e in entries if method in e and e.get("_reach", 0) > 0]
            return _Move(method, own, errors,
                         reach=float(np.median(reaches)) if reaches else 1.0)
        logres, mape = _prior(key, move)
        return _Move(method, logres, errors, prior_mape=mape)

    # ------------------------------------------------------------------ prediction
    def predict_table(self, X: Any, coverage: float | None = None) -> pd.DataFrame:
        """Predictions with intervals and the kind of each prediction.

        Columns as :meth:`GlobalModel.predict_table`: ``network``, ``time_s``,
        ``time_low_s``, ``time_high_s`` (the interval: quantiles of the validated residuals of
        that kind of move), ``per_iteration_s``, ``kind``, ``detail`` (the move, the method,
        and whether the measured repeats were noisy), ``expected_mape`` (the validated MAPE of
        that kind of move).
        """
        self._check_fitted()
        cov = check_coverage(self.coverage if coverage is None else coverage)
        prep = prepare(X, self.ignore, prefer_catalog=True)  # once for both models
        index = X.index if isinstance(X, pd.DataFrame) else pd.RangeIndex(len(prep.features))
        out = self._table(prep, index, cov)
        nets = prep.network if prep.network is not None else np.full(len(out), "*")
        for net in pd.unique(nets):
            if net not in self.local_:
                continue
            rows = np.flatnonzero(nets == net)
            self._predict_local(self.local_[net], prep, rows, cov, out)
        return out

    def _predict_local(self, local: _Local, prep: Prepared, rows: np.ndarray, cov: float,
                       out: pd.DataFrame) -> None:
        index = local.index
        arrays = query_arrays(index, local.hw_cols, prep, rows)
        if arrays is None:
            return
        values, hw, naive = arrays
        everyone = np.ones(index.n, dtype=bool)
        subs = local.sub_methods()
        col = {c: out.columns.get_loc(c) for c in out.columns}
        repeat = local.moves["repeat"]
        noise = _interval(repeat.logres, cov)
        for i, row in enumerate(rows):
            r = route(index, values[i], hw[i], everyone)
            if r.kind == "none":
                continue
            its = float(prep.iterations[row])
            preds = candidates(index, r, values[i], hw[i], float(naive[i]), local.move, subs,
                               its)
            key = r.key
            chosen = local.moves.get(key) or local.moves[family(key)]
            lo, hi = _interval(chosen.logres, cov)
            # A move further beyond the series than the validated ones errs more: widen by the
            # ratio of reaches (errors of a line grow about linearly with the distance).
            wider = min(4.0, max(1.0, reach(index, r, values[i]) / max(chosen.reach, 1e-9)))
            lo, hi = lo * wider, hi * wider
            # A run is one draw around its configuration's median: add the repeat noise the
            # runs showed (validated moves compare medians, a new run is a single run).
            if key != "repeat" and not repeat.prior:
                lo = -math.hypot(lo, noise[0])
                hi = math.hypot(hi, noise[1])
            if chosen.method == "global":  # the cross-series answer, with this move's error
                total = float(out.iat[row, col["time_s"]])
                out.iat[row, col["time_low_s"]] = total * math.exp(lo)
                out.iat[row, col["time_high_s"]] = total * math.exp(hi)
                out.iat[row, col["expected_mape"]] = chosen.mape * wider
                continue
            method = chosen.method if chosen.method in preds else next(iter(preds))
            total = preds[method] * its
            out.iat[row, col["time_s"]] = total
            out.iat[row, col["time_low_s"]] = total * math.exp(lo)
            out.iat[row, col["time_high_s"]] = total * math.exp(hi)
            out.iat[row, col["per_iteration_s"]] = total / its
            out.iat[row, col["kind"]] = _kind(r, key)
            out.iat[row, col["detail"]] = self._detail(local, r, key, method, values[i],
                                                       prep.hardware_label[row])
            out.iat[row, col["expected_mape"]] = chosen.mape * wider

    @staticmethod
    def _detail(local: _Local, r: Any, key: str, method: str, v: np.ndarray,
                label: str) -> str:
        index = local.index
        names = {"lin": "piecewise linear", "log": "piecewise log-log", "line": "straight line",
                 "learnt": "learnt GPU move", "ratio": "spec-sheet peak ratio"}
        if r.kind == "repeat":
            text = "measured configuration (median of its runs)"
            members = r.members
        elif r.kind == "axis":
            col = index.cols[r.axis]
            x = index.values[r.members, r.axis]
            where = {"inside": "between", "single": "from"}.get(r.position, "beyond")
            text = (f"{col} {v[r.axis]:g} {where} measured {x.min():g}–{x.max():g} "
                    f"({len(x)} points, {names[method]})")
            if r.position == "single":
                text = (f"{col} {v[r.axis]:g} from the one measured {x[0]:g} "
                        "(time per sample kept)")
            elif r.position == "beyond":
                text = f"{col} {v[r.axis]:g} {'>' if v[r.axis] > x.max() else '<'} measured " \
                       f"{'max' if v[r.axis] > x.max() else 'min'} " \
                       f"{x.max() if v[r.axis] > x.max() else x.min():g} " \
                       f"({len(x)} points, {names[method]})"
            members = r.members
        elif r.kind == "chain":
            col = index.cols[r.axis]
            xs = [b for b, _, _ in r.steps]
            if r.position == "single":
                text = (f"{col} {v[r.axis]:g}: only {xs[0]:g} measured with these features "
                        + ("(time per sample kept)" if r.axis == index.batch_axis
                           else "(its time carried over: no run varies it)"))
            else:
                text = (f"{col} {v[r.axis]:g} through {len(xs)} estimated points at "
                        f"{min(xs):g}–{max(xs):g}, each a move along another feature "
                        f"({names[method]})")
            members = np.concatenate([sub.members for _, _, sub in r.steps])
        else:
            n = len(r.sources)
            text = (f"to {label} from {n} measured GPU{'s' if n > 1 else ''} "
                    f"({names[method]})")
            members = np.array([rep for rep, _ in r.sources])
        spread = float(index.spread[members].max()) if len(members) else 1.0
        busy = float(index.busy[members].sum()) if len(members) else 0.0
        if spread > NOISY:
            text += f"; repeats differ by {100 * (spread - 1):.0f}% (median used)"
        if busy:
            text += f"; {busy:.0f} run(s) flagged busy (median used)"
        return text

    # ------------------------------------------------------------------ reporting
    def report(self) -> pd.DataFrame:
        """:meth:`GlobalModel.report` plus one ``"move"`` row per network and kind of move.

        ``name`` is the kind of move and the chosen method ("batch:beyond → lin"), ``value``
        its validated MAPE (fraction), ``min``/``max`` the interval's bounds as ratios.
        """
        rows = [super().report()]
        extra = []
        for net, loc in self.local_.items():
            for key, m in loc.moves.items():
                lo, hi = _interval(m.logres, self.coverage)
                source = "public data" if m.prior else f"{len(m.logres)} validated"
                extra.append({"network": net, "item": "move",
                              "name": f"{key} → {m.method} ({source})", "value": m.mape,
                              "min": math.exp(lo), "max": math.exp(hi)})
        rows.append(pd.DataFrame(extra))
        return pd.concat(rows, ignore_index=True)


def _kind(r: Any, key: str) -> str:
    """The kind of a prediction: a chain interpolates only where every step does."""
    if r.kind == "chain" and r.position == "inside" and all(
            sub.kind == "repeat" or sub.position == "inside" for _, _, sub in r.steps):
        return "interpolation"
    return KIND[family(key)]


def _configuration_medians(prep: Prepared, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Median seconds per configuration (features, network, iterations) and a row of each.

    The cross-series model is fitted on these: repeats add no information to a regression of
    the median, and a table of 100,000 per-step rows of 1,000 configurations fits as 1,000.
    """
    parts = [prep.features.to_numpy(float), prep.iterations[:, None]]
    if prep.network is not None:
        parts.append(pd.factorize(prep.network)[0][:, None].astype(float))
    key = np.nan_to_num(np.column_stack(parts), nan=-1.0)
    _, first, ids = np.unique(np.round(key, 9), axis=0, return_index=True, return_inverse=True)
    ids = ids.reshape(-1)
    frame = pd.DataFrame({"id": ids, "y": y})
    medians = frame.groupby("id")["y"].median().to_numpy()
    return medians, first


def _subset(prep: Prepared, rows: np.ndarray) -> Prepared:
    """The prepared rows ``rows`` (no second pass over the table)."""
    def pick(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[rows]

    return Prepared(prep.features.iloc[rows].reset_index(drop=True), prep.iterations[rows],
                    pick(prep.network), prep.hardware_label[rows], pick(prep.architecture),
                    pick(prep.naive_peak))


def _busy(frame: pd.DataFrame) -> np.ndarray:
    if "busy" not in frame.columns:
        return np.zeros(len(frame))
    values = pd.to_numeric(frame["busy"].astype(object), errors="coerce")
    return (values.fillna(0).to_numpy(float) > 0).astype(float)


def _iterations_of(frame: pd.DataFrame) -> np.ndarray:
    if "iterations" not in frame.columns:
        return np.ones(len(frame))
    return pd.to_numeric(frame["iterations"], errors="coerce").fillna(1).to_numpy(float)


def _prior(key: str, move: GpuMove) -> tuple[np.ndarray, float]:
    """Residuals and MAPE standing in when too few moves of a kind could be validated.

    GPU moves: the held-out 10th-90th percentile range and MAPE of the shipped move on public
    data (the plain ratio's public figure when nothing was learnt); other kinds: the public
    figure of that kind (``MEASURED_MAPE``) as a Laplace spread in log time.
    """
    if key in ("gpu", "transfer"):
        if move.n_pairs == 0:
            mape = MEASURED_MAPE["transfer"]
            return np.linspace(-1.28 * mape, 1.28 * mape, 11), mape
        return np.linspace(move.q_lo, move.q_hi, 11), move.mape
    mape = MEASURED_MAPE[PRIOR_KIND.get(family(key), "extrapolation")]
    p = np.linspace(0.05, 0.95, 19)
    spread = np.where(p < 0.5, mape * np.log(2 * p), -mape * np.log(2 * (1 - p)))
    return np.sort(spread), mape


def _interval(logres: np.ndarray, coverage: float) -> tuple[float, float]:
    """The (1 − coverage)/2 and (1 + coverage)/2 quantiles of the residuals."""
    if len(logres) == 0:
        return -0.5, 0.5
    lo = float(np.quantile(logres, (1 - coverage) / 2))
    hi = float(np.quantile(logres, (1 + coverage) / 2))
    return min(lo, 0.0), max(hi, 0.0)
