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

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from gpuperf_magics.model.clusters import at_least_cluster, expected_error, sample_interval
from gpuperf_magics.model.estimator import GlobalModel
from gpuperf_magics.model.evidence import EvidenceBase, empty_base, own_base
from gpuperf_magics.model.evidence import shipped as shipped_evidence
from gpuperf_magics.model.evidence_query import EvidenceMove, own_rows
from gpuperf_magics.model.gpu_move import GpuMove, shipped
from gpuperf_magics.model.inputs import (
    Prepared,
    check_coverage,
    check_target,
    precision_of,
    prepare,
)
from gpuperf_magics.model.local import (
    beyond_distance,
    candidates,
    family,
    on_gpu_batch,
    own_elasticity,
    power_from,
    reach,
    route,
    single_elasticity,
    single_interval,
)
from gpuperf_magics.model.monotone import MEASURED
from gpuperf_magics.model.parallel import Refitter, validate_all, workers
from gpuperf_magics.model.series import (
    SeriesIndex,
    network_index,
    query_arrays,
    run_residuals,
    setup_interval,
)
from gpuperf_magics.model.validation import (
    DEFAULT_METHOD,
    MIN_TASKS,
    PRIOR_KIND,
    Move,
    choose,
    subset,
)

#: Kind of prediction (the column ``kind``) of each kind of move: the kind whose public figure
#: stands in for it, except a move to another measured GPU, which is an extrapolation (the
#: transfer figure only stands in for its error).
KIND = {**PRIOR_KIND, "gpu": "extrapolation"}
#: How the interval of a batch size beyond the measured ones widens with its reach (in the
#: measured series' spacings, over the validated moves' reach): to this power. Chosen on
#: sia2023 and gavel2020 (``benchmarks/batch_reach.py``: two or three smallest batch sizes
#: measured, every larger one asked), then looked at on lattuada2022. Inside the 80% interval
#: by reach (0-1.5, 1.5-3, 3-6, 6-12, 12+ spacings), power 1: 72, 71, 79, 54, 49%; 1.25: 72,
#: 77, 88, 81, 65%; 1.5: 72, 83, 94, 97, 100%. (Before, the widening stopped at 4: 72, 71,
#: 71, 44, 32%.)
BATCH_WIDER_POWER = 1.25
#: Repeats of a configuration that differ by more than this (max/min) are reported as noisy.
NOISY = 1.25


@dataclass
class _Local:
    """One network's configurations and what validation chose."""

    index: SeriesIndex
    move: GpuMove
    moves: dict[str, Move]
    hw_cols: list[str]
    evidence: EvidenceMove | None = None
    #: Validated log residuals of the evidence move per bucket (:mod:`~.evidence_move`).
    buckets: dict[str, np.ndarray] = field(default_factory=dict)
    #: The GPU each of those residuals moved to (``validation.gpu_group``), in their order.
    bucket_groups: dict[str, np.ndarray] = field(default_factory=dict)

    @functools.cached_property
    def runs(self) -> dict[int, np.ndarray]:
        """Each configuration's runs against the median of its other runs (two runs or
        more): :func:`~.series.run_residuals`."""
        return run_residuals(self.index)

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
    evidence : EvidenceBase, optional
        Public evidence of GPU moves instead of the shipped base (:mod:`~.evidence`; the
        benchmark passes one built without the GPU or network it holds out).
    n_jobs : int, optional
        Processes the networks are validated in (:mod:`~.parallel`; the answers are the same
        whatever it is): joblib's meaning (1: this one, -1: every core), None: every core
        from :data:`~.parallel.PARALLEL_FROM` configurations, else this one.

    Attributes
    ----------
    cv_mape_ : float
        MAPE of the moves to an unmeasured batch size validated on the user's runs; NaN
        where too few could be validated and public figures stand in.
    moves_ : dict
        Per network, per kind of move: the chosen method, its validated MAPE and the
        candidates' errors (also in :meth:`report`).
    evidence_residuals_ : dict
        Validated log residuals of the evidence move per evidence bucket, pooled over the
        networks (where a bucket has enough, they set its intervals instead of the public
        calibration), sorted.
    evidence_groups_ : dict
        The GPU each of those residuals moved to (a number per GPU), in their order: one
        GPU's moves share its error, and its intervals count GPUs, not moves
        (:mod:`~.clusters`).
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
        evidence: EvidenceBase | None = None,
        n_jobs: int | None = None,
    ) -> None:
        self.k_max = k_max
        self.coverage = coverage
        self.ignore = ignore
        self.public_data = public_data
        self.random_state = random_state
        self.gpu_moves = gpu_moves
        self.evidence = evidence
        self.n_jobs = n_jobs

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
        prep_agg = subset(prep, first)
        nets = prep.network if prep.network is not None else np.full(len(target), "*")
        busy = _busy(frame)
        moves = self.gpu_moves if self.gpu_moves is not None else (
            shipped() if self.public_data else {k: GpuMove() for k in ("recorded", "unrecorded")})
        recorded = precision_of(frame)
        self.local_: dict[str, _Local] = {}
        for net in self.networks_:
            mine = np.flatnonzero(nets == net)
            kind = "recorded" if all(p is not None for p in recorded[mine]) else "unrecorded"
            index, hw_cols = network_index(prep, mine, target[mine], busy[mine])
            self.local_[net] = _Local(index, moves[kind], {}, hw_cols)
        # The user's own evidence of GPU moves: every network's configurations measured on
        # several devices (first in line), then the public base.
        own = own_base(pd.concat([own_rows(loc.index, net) for net, loc in self.local_.items()],
                                 ignore_index=True))
        public = self.evidence if self.evidence is not None else (
            shipped_evidence() if self.public_data else empty_base())
        jobs = []
        for net in self.networks_:
            mine = np.flatnonzero(nets == net)
            # The network's configuration medians, for refits of the cross-series model.
            agg_rows = np.flatnonzero(np.isin(first, mine))
            position = np.searchsorted(mine, first[agg_rows])
            loc = self.local_[net]
            loc.evidence = EvidenceMove(own, public, loc.move, net)
            jobs.append((loc, (net, prep_agg, medians, agg_rows, position)))
        n_workers = workers(self.n_jobs, len(first), len(jobs))
        refitter = Refitter(self._settings(), self.random_state, self.coverage)
        for (loc, _), (tasks, buckets, groups) in zip(
                jobs, validate_all(refitter, jobs, n_workers), strict=True):
            self._choose_moves(loc, tasks, buckets, groups)
        # The evidence move's validated residuals per bucket, pooled over the networks: a
        # network measured on one GPU is moved with the errors the others' moves made.
        pooled: dict[str, list[np.ndarray]] = {}
        pooled_groups: dict[str, list[np.ndarray]] = {}
        for loc in self.local_.values():
            for bucket, res in loc.buckets.items():
                pooled.setdefault(bucket, []).append(res)
                pooled_groups.setdefault(bucket, []).append(loc.bucket_groups[bucket])
        self.evidence_residuals_, self.evidence_groups_ = {}, {}
        for b, v in pooled.items():
            res = np.concatenate(v)
            order = np.argsort(res, kind="stable")
            self.evidence_residuals_[b] = res[order]
            self.evidence_groups_[b] = np.concatenate(pooled_groups[b])[order]
        # The advice names the error of a move to another GPU: now that the moves are
        # validated, give theirs (see _transfer_error).
        self.advice_ = []
        for net in self.networks_:
            self._advise(net, self.fits_[net])
        # The error of moves to an unmeasured batch size, as validated on these runs: what
        # "the model's error" means to someone asking about another batch size. A public
        # figure standing in where too few moves could be validated is not a cross-validated
        # error of this model: with none validated, there is no such figure (NaN; each
        # prediction's expected error still gives the public one).
        errors = [loc.moves[k].mape for loc in self.local_.values()
                  for k in ("batch:inside", "batch:beyond")
                  if k in loc.moves and not loc.moves[k].prior]
        self.cv_mape_ = float(np.mean(errors)) if errors else float("nan")
        self.moves_ = {
            net: {k: {"method": m.method, "mape": m.mape, "validated": len(m.logres),
                      "public": m.prior, "candidates": dict(m.errors)}
                  for k, m in loc.moves.items()}
            for net, loc in self.local_.items()
        }
        return self

    def _transfer_error(self, net: str) -> float:
        local = getattr(self, "local_", {}).get(net)
        if local is None or "transfer" not in local.moves:  # before the moves are validated
            return super()._transfer_error(net)
        return local.moves["transfer"].mape

    @staticmethod
    def _choose_moves(local: _Local, tasks: dict[str, list[dict[str, float]]],
                      buckets: dict[str, list[float]],
                      groups: dict[str, list[float]]) -> None:
        """Each kind of move's method and residuals, from its validated moves."""
        local.buckets, local.bucket_groups = {}, {}
        for b, v in buckets.items():
            order = np.argsort(v, kind="stable")
            local.buckets[b] = np.asarray(v, dtype=float)[order]
            local.bucket_groups[b] = np.asarray(groups[b], dtype=float)[order]
        for key, entries in tasks.items():
            local.moves[key] = choose(key, entries, local.move)
        for key in DEFAULT_METHOD:
            if key not in local.moves:
                local.moves[key] = choose(key, [], local.move)

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
        # Networks measured on one GPU asked for more: the one-GPU step plus the all-reduce
        # the backward pass does not hide (model/data_parallel.py).
        from gpuperf_magics.model.data_parallel import scale_out

        return scale_out(self, X, out, cov)

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
        lo, hi = _interval(repeat.logres, cov, sample=not repeat.prior)
        noise = (lo, hi, repeat.mape)
        # The range of the GPUs it ran (the device codes after the hardware are names).
        measured = _hardware_range(index.hw[:, :len(local.hw_cols)])
        for i, row in enumerate(rows):
            r = route(index, values[i], hw[i], everyone)
            if r.kind == "none":
                continue
            its = float(prep.iterations[row])
            preds = candidates(index, r, values[i], hw[i], float(naive[i]), local.move, subs,
                               its, local.evidence,
                               None if prep.device is None else prep.device[row])
            key = r.key
            chosen = local.moves.get(key) or local.moves[family(key)]
            lo, hi = _interval(chosen.logres, cov, chosen.groups if r.new_gpu else None,
                               sample=not chosen.prior)
            # The noise of the runs this answer is drawn from, where they ran repeats enough
            # to tell it: a network's short configurations are often noisier than its long ones.
            near = _near_noise(local.runs, r, cov)
            if key == "repeat" and near is not None:
                lo, hi, base = near
            else:
                base = chosen.mape
            lo, hi, wider, cap = _beyond_interval(index, r, values[i], chosen, lo, hi)
            single = _single_batch(index, r, values[i], chosen, cov)
            if single is not None:  # one batch measured on a GPU: the public elasticities
                lo, hi, base = single
                wider, cap = 1.0, math.inf
            floor = _new_gpu_interval(self, local, r, hw[i], preds, cov, measured)
            if floor is not None:
                lo, hi, base = min(lo, floor[0]), max(hi, floor[1]), max(base, floor[2])
            beyond = BEYOND_RUN if floor is not None else ""
            # A move to another GPU or precision starts from the source device's answer, which
            # is itself a move where that configuration was not measured there.
            source = _source_error(local, r, values[i], cov)
            # A run is one draw around its configuration's median: add the repeat noise the
            # runs showed (validated moves compare medians, a new run is a single run), to the
            # interval and the expected error alike. A measured configuration asked for another
            # job length holds the set-up time its runs told, or the median one: add the
            # difference, carried to the length asked.
            run = (0.0, 0.0, 0.0) if key == "repeat" or repeat.prior else (near or noise)
            setup = (setup_interval(index, int(r.members[0]), its, cov)
                     if r.kind == "repeat" and len(r.members) else (0.0, 0.0, 0.0))
            lo = -math.hypot(lo, run[0], setup[0], source[0])
            hi = math.hypot(hi, run[1], setup[1], source[1])
            if chosen.method == "global":  # the cross-series answer, with this move's error
                total = float(out.iat[row, col["time_s"]])
                out.iat[row, col["time_low_s"]] = total * math.exp(lo)
                out.iat[row, col["time_high_s"]] = total * math.exp(hi)
                out.iat[row, col["expected_mape"]] = math.hypot(min(base * wider, cap),
                                                                run[2], setup[2], source[2])
                out.iat[row, col["detail"]] = f"{out.iat[row, col['detail']]}{beyond}"
                continue
            method = chosen.method if chosen.method in preds else next(iter(preds))
            expected = math.hypot(min(base * wider, cap), run[2], setup[2], source[2])
            detail = self._detail(local, r, key, method, values[i], prep.hardware_label[row])
            if method == "evidence" and local.evidence is not None and local.evidence.last:
                # The interval of the move's evidence bucket, with the repeat noise.
                last = local.evidence.last
                # A GPU never measured: at least the interval of a new GPU (its bucket's
                # held-out GPUs, :mod:`~.clusters`); fits before it have no groups.
                groups = getattr(self, "evidence_groups_", {}) if r.new_gpu else {}
                lo, hi, expected = local.evidence.interval(self.evidence_residuals_, last,
                                                           cov, groups)
                if not repeat.prior:
                    lo, hi = -math.hypot(lo, noise[0]), math.hypot(hi, noise[1])
                    expected = math.hypot(expected, noise[2])
                lo, hi = -math.hypot(lo, source[0]), math.hypot(hi, source[1])
                expected = math.hypot(expected, source[2])
                detail = f"{detail}: {last.detail}"
            else:
                detail += beyond
            total = preds[method] * its
            out.iat[row, col["time_s"]] = total
            out.iat[row, col["time_low_s"]] = total * math.exp(lo)
            out.iat[row, col["time_high_s"]] = total * math.exp(hi)
            out.iat[row, col["per_iteration_s"]] = total / its
            out.iat[row, col["kind"]] = _kind(r, key)
            out.iat[row, col["detail"]] = detail
            out.iat[row, col["expected_mape"]] = expected

    @staticmethod
    def _detail(local: _Local, r: Any, key: str, method: str, v: np.ndarray,
                label: str) -> str:
        index = local.index
        names = {"lin": "piecewise linear", "log": "piecewise log-log", "line": "straight line",
                 "learnt": "learnt GPU move", "ratio": "spec-sheet peak ratio",
                 "evidence": "measured evidence"}
        if r.kind == "repeat":
            text = f"{MEASURED} (median of its runs)"  # monotone.measured_rows reads it
            members = r.members
        elif r.kind == "axis":
            col = index.cols[r.axis]
            x = index.values[r.members, r.axis]
            where = {"inside": "between", "single": "from"}.get(r.position, "beyond")
            text = (f"{col} {v[r.axis]:g} {where} measured {x.min():g}–{x.max():g} "
                    f"({len(x)} points, {names[method]})")
            if r.position == "single":
                text = (f"{col} {v[r.axis]:g} from the one measured {x[0]:g} "
                        f"({_single_words(index, r, v)})")
            elif r.position == "beyond":
                text = f"{col} {v[r.axis]:g} {'>' if v[r.axis] > x.max() else '<'} measured " \
                       f"{'max' if v[r.axis] > x.max() else 'min'} " \
                       f"{x.max() if v[r.axis] > x.max() else x.min():g} " \
                       f"({len(x)} points, {names[method]}"
                far = power_from(index, r, v) if method in ("lin", "log") else None
                text += ")" if far is None else f", then as a power of {col} from {far:.0f})"
            members = r.members
        elif r.kind == "chain":
            col = index.cols[r.axis]
            xs = [b for b, _, _ in r.steps]
            if r.position == "single":
                text = (f"{col} {v[r.axis]:g}: only {xs[0]:g} measured with these features "
                        + (f"({_single_words(index, r, v)})" if r.axis == index.batch_axis
                           else "(its time carried over: no run varies it)"))
            else:
                text = (f"{col} {v[r.axis]:g} through {len(xs)} estimated points at "
                        f"{min(xs):g}–{max(xs):g}, each a move along another feature "
                        f"({names[method]})")
            members = np.concatenate([sub.members for _, _, sub in r.steps])
        else:
            # A GPU measured in two precisions is one source GPU, run twice.
            keys = [index.device[rep] for rep, _ in r.sources]
            n = len({k.rpartition("|")[0] if isinstance(k, str) else i
                     for i, k in enumerate(keys)})
            runs = ""
            if len(keys) > n:
                runs = f" in {len(keys)} " + ("precisions" if n == 1 else "GPU-precision pairs")
            text = (f"to {label} from {n} measured GPU{'s' if n > 1 else ''}{runs} "
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
                lo, hi = _interval(m.logres, self.coverage, m.groups, sample=not m.prior)
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


def _busy(frame: pd.DataFrame) -> np.ndarray:
    if "busy" not in frame.columns:
        return np.zeros(len(frame))
    values = pd.to_numeric(frame["busy"].astype(object), errors="coerce")
    return (values.fillna(0).to_numpy(float) > 0).astype(float)


#: What the ``detail`` of a move floored by :func:`_new_gpu_interval` adds.
BEYOND_RUN = ("; faster or slower than any GPU or precision this network ran: as uncertain "
              "as a move to a new GPU (a run profiled there narrows it)")


def _new_gpu_interval(model: DefaultModel, local: _Local, r: Any, h: np.ndarray,
                      preds: dict[str, float], coverage: float, measured: np.ndarray
                      ) -> tuple[float, float, float] | None:
    """(low, high, expected error) that a move to a GPU the network never ran, beyond the
    range of those it ran (``measured``, :func:`_hardware_range`: ``h``, the asked GPU's
    hardware row, above their highest or below their lowest peak or bandwidth), is drawn at
    least as wide as, whichever method answers it: its evidence move's (the public
    calibration of moves to a new GPU, or the user's own where validated enough). The
    network's own moves were validated between its GPUs, within their range: sia2023's
    unseen A100 and T4, answered by the cross-series fit from its other four GPUs, were 40%
    and 61% inside their own intervals. A GPU inside the range keeps them (lattuada2022's
    K80 and M60, between its P600 and GTX 1080 Ti, were 74% inside; the public interval of a
    move that far would have put all inside at four times the width). A precision the
    network never ran on a GPU is such a device too (its effective peak lies outside the
    others'): its moves between FP32 GPUs say nothing of what AMP gains it. None: not such
    a move, or no evidence move for this row (its :attr:`~.EvidenceMove.last` would be
    another row's)."""
    if r.kind != "gpu" or not r.new_gpu or "evidence" not in preds or local.evidence is None:
        return None
    last = local.evidence.last
    if last is None or not _beyond(measured, h):
        return None
    return local.evidence.interval(model.evidence_residuals_, last, coverage,
                                   getattr(model, "evidence_groups_", {}))


def _hardware_range(hw: np.ndarray) -> np.ndarray:
    """(2, columns): the lowest and highest known value of each hardware column (NaN where
    none is known), computed once per network rather than per asked row."""
    out = np.full((2, hw.shape[1]), np.nan)
    for j in range(hw.shape[1]):
        col = hw[:, j][np.isfinite(hw[:, j])]
        if len(col):
            out[:, j] = col.min(), col.max()
    return out


def _beyond(measured: np.ndarray, h: np.ndarray) -> bool:
    """Whether hardware row ``h`` lies outside the ``measured`` range in some column (a
    column unknown on either side tells nothing)."""
    k = min(measured.shape[1], len(h))
    lo, hi, x = measured[0, :k], measured[1, :k], np.asarray(h[:k], float)
    known = np.isfinite(lo) & np.isfinite(x)
    return bool(np.any(known & ((x < lo) | (x > hi))))


def _source_error(local: _Local, r: Any, v: np.ndarray,
                  coverage: float) -> tuple[float, float, float]:
    """(low, high, expected error) of the move on the measured devices that a move to another
    GPU or precision starts from (the median over its source devices; zeros where each source
    measured the configuration, or for another route).

    The validated moves between devices compare configurations measured on both, so their
    errors do not hold the source's own move: measured in FP32 at batch 16 and 32 and asked
    512 in AMP, the answer is a batch move of 4 spacings and a move between precisions, and
    its expected error had been the latter's alone, below the FP32 answer's at 512 (33%
    against 42%)."""
    if r.kind != "gpu":
        return 0.0, 0.0, 0.0
    parts = []
    for _, sub in r.sources:
        chosen = (local.moves.get(sub.key) or local.moves.get(family(sub.key))
                  if sub.kind not in ("repeat", "none", "gpu") else None)
        if chosen is None:
            parts.append((0.0, 0.0, 0.0))
            continue
        lo, hi = _interval(chosen.logres, coverage, sample=not chosen.prior)
        lo, hi, wider, cap = _beyond_interval(local.index, sub, v, chosen, lo, hi)
        # (A GPU move's source keeps its time per sample, local.local_value says why.)
        parts.append((lo, hi, min(chosen.mape * wider, cap)))
    if not parts:
        return 0.0, 0.0, 0.0
    lo, hi, expected = np.median(np.array(parts), axis=0)
    return float(lo), float(hi), float(expected)


def _single_words(index: SeriesIndex, r: Any, v: np.ndarray) -> str:
    """How a single-point batch move was made, for its detail (the public elasticity's value
    where the measured point is a configuration's own, not a chain's estimate)."""
    if not on_gpu_batch(index, r):
        return "time per sample kept"
    own = own_elasticity(index, r, v) is not None
    where = ("as this network's other batch series on this GPU grow" if own else
             "as public GPU batch series of that time per iteration grow")
    if r.kind != "axis":  # a chain's point is an estimate: its time, and so e, vary per query
        return f"time per iteration grown {where}"
    m = int(r.members[np.argmin(index.values[r.members, r.axis])])
    e = single_elasticity(index, r, v, float(index.t[m]))
    return f"time per iteration × (asked / measured)^{e:.2f}, {where}"


def _single_batch(index: SeriesIndex, r: Any, v: np.ndarray, chosen: Move,
                  coverage: float) -> tuple[float, float, float] | None:
    """(low, high, expected error) of a move from the one batch size measured on a GPU, from
    the public series' elasticities (:mod:`~.batch_single`: their spread times the log
    distance), where the user's validation had too few such moves to tell (the public
    extrapolation figure stood in, ±7% at any distance, and held 18% of sia2023's and
    gavel2020's single moves); None for another move."""
    if not (chosen.prior and on_gpu_batch(index, r)):
        return None
    return single_interval(index, r, v, coverage)


def _beyond_interval(index: SeriesIndex, r: Any, v: np.ndarray, chosen: Move, lo: float,
                     hi: float) -> tuple[float, float, float, float]:
    """The validated interval ``(lo, hi)`` (log residuals) of a move, widened for how far
    beyond its series it goes: ``(lo, hi, widening, most expected error)``.

    Another batch size beyond the measured ones: by the ratio of reaches to the power
    :data:`BATCH_WIDER_POWER`, with no cap but the physical one. A time per iteration never
    falls as the batch grows, nor grows faster than the batch (its log-log slope lies between
    0, host-bound, and 1, compute-bound), so a line through the measured points and the truth
    both lie between the flat and the proportional continuation of the end point, and no
    answer errs by more than ``|log(asked / end)|`` in log time: each side of the interval
    stops there (never inside the validated interval itself), and the expected error at
    ``asked / end − 1``. Other axes: widened in proportion, at most 4 times.

    The premise holds on sia2023 and gavel2020 (a larger batch runs more than 5% faster per
    iteration than the end in 2.8% of the rows, more than 5% slower than proportional in
    0.7%), not everywhere: in 21% of lattuada2022's larger batches the time per iteration
    grows more than 5% faster than the batch. With a doubling spacing and a validated interval
    of ±10% the stop is reached only thousands of spacings out: it guards absurd asks (a
    finely spaced series asked far away) rather than shaping usual ones.
    """
    far = reach(index, r, v) / max(chosen.reach, 1e-9)
    if r.axis != index.batch_axis or not far > 1.0:
        wider = min(4.0, max(1.0, far))
        return lo * wider, hi * wider, wider, math.inf
    wider = far ** BATCH_WIDER_POWER
    distance = beyond_distance(index, r, v)
    if not math.isfinite(distance):
        return lo * wider, hi * wider, wider, math.inf
    return (max(lo * wider, min(lo, -distance)), min(hi * wider, max(hi, distance)), wider,
            max(chosen.mape, math.expm1(distance)))


def _interval(logres: np.ndarray, coverage: float, groups: np.ndarray | None = None,
              sample: bool = False) -> tuple[float, float]:
    """The (1 − coverage)/2 and (1 + coverage)/2 quantiles of the residuals.

    ``sample``: they are the user's validated moves, a sample whose percentiles are not those
    of the next move (:func:`~.clusters.sample_interval`: the ranks of one more draw); else a
    stand-in spread (the public figures, :func:`~.validation._prior`) read as it is. Where
    they come in ``groups`` (a GPU move's held-out GPUs), at least the interval of a new group
    (:func:`~.clusters.cluster_interval`): a few GPUs' errors are a few draws, however many
    configurations each moved."""
    if len(logres) == 0:
        return -0.5, 0.5
    if sample:
        lo, hi = sample_interval(logres, coverage)
    else:
        lo = float(np.quantile(logres, (1 - coverage) / 2))
        hi = float(np.quantile(logres, (1 + coverage) / 2))
    lo, hi = at_least_cluster(lo, hi, logres, groups, coverage)
    return min(lo, 0.0), max(hi, 0.0)


def _near_noise(runs: dict[int, np.ndarray], r: Any,
                coverage: float) -> tuple[float, float, float] | None:
    """(low, high, MAPE) of one more run of the configurations an answer is drawn from, from
    their own runs against each other (``runs``: :func:`~.series.run_residuals`): a measured
    configuration's own, or those of the series a move along one axis of one device is drawn
    through. None where they hold fewer than :data:`~.validation.MIN_TASKS` such runs, or for
    other moves: the network's pooled repeat noise then.

    The pooled repeats mix configurations of different noise: lattuada2022's ResNet depth
    series (six runs each) spread 6% around their medians over the network, its deep
    configurations far less, so answers for deeper networks were 100% inside their 80%
    interval (median error 2.7%, width 25%); with the series' own runs, 96% (width 12%). Its
    interpolated rows went from 81% to 85% inside, over-covering more (not yet explained).
    Drawn from the two configurations nearest the answer instead, the figures were the same
    but for its grouped extrapolated rows (86% against 82%)."""
    if r.kind not in ("repeat", "axis") or not len(r.members):
        return None
    own = [runs[int(c)] for c in np.unique(r.members) if int(c) in runs]
    res = np.sort(np.concatenate(own)) if own else np.zeros(0)
    if len(res) < MIN_TASKS:
        return None
    lo, hi = _interval(res, coverage, sample=True)
    return lo, hi, expected_error(res)
