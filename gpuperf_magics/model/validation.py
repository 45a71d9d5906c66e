"""Validation of the default model's local routes on the user's own data.

Every kind of move (a repeat, a batch size inside or beyond the measured ones, another value
of a feature, another GPU, a chain of two moves) is validated by leaving configurations out
and predicting them with every candidate method; :func:`choose` keeps the candidate with the
lowest validated error and the residuals that set its intervals. Where too few moves of a kind
could be validated, the public figures (``MEASURED_MAPE``, the shipped GPU move) stand in.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from gpuperf_magics.model.clusters import expected_error
from gpuperf_magics.model.evidence_query import SINGLE
from gpuperf_magics.model.gpu_move import GpuMove
from gpuperf_magics.model.inputs import Prepared
from gpuperf_magics.model.local import (
    HOST_BUCKET,
    axis_routes,
    candidates,
    family,
    reach,
    route,
)
from gpuperf_magics.model.network_fit import MEASURED_MAPE
from gpuperf_magics.model.series import SeriesIndex, run_residuals

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.model.evidence_query import EvidenceMove


class DefaultModel(Protocol):
    """What validation reads of the model it validates: the default model's fit settings,
    as :class:`~.parallel.Refitter` carries them into a worker process. A protocol rather
    than a class, so that the model and its validation do not import each other."""

    random_state: int
    coverage: float
    advice_: list[str]

    def _fit_network(self, net: str, prep: Prepared, rows: np.ndarray, y: np.ndarray
                     ) -> Any: ...

    def _predict_network(self, fit: Any, prep: Prepared, rows: np.ndarray, cov: float,
                         out: dict) -> None: ...


class _Local(Protocol):
    """What validation reads of one network's configurations (``default._Local``)."""

    index: SeriesIndex
    move: GpuMove
    evidence: EvidenceMove | None

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
#: Source GPUs of a validated GPU move whose moves alone are scored too, at most.
SINGLE_SOURCES = 3
#: The method each kind of move uses before validation says otherwise.
DEFAULT_METHOD = {"repeat": "lin", "batch:inside": "lin", "batch:beyond": "lin",
                  "batch:single": "lin",
                  "feature:inside": "line", "feature:beyond": "line", "gpu": "evidence",
                  "transfer": "evidence",
                  "chain:batch:inside": "lin", "chain:batch:beyond": "lin",
                  "chain:batch:single": "lin", "chain:feature:inside": "line",
                  "chain:feature:beyond": "line", "chain:feature:single": "lin"}
#: Public figure (MEASURED_MAPE's kind) standing in for each kind of move.
PRIOR_KIND = {"repeat": "interpolation", "batch:inside": "interpolation",
              "feature:inside": "interpolation", "batch:beyond": "extrapolation",
              "feature:beyond": "extrapolation", "batch:single": "extrapolation",
              "gpu": "transfer", "transfer": "transfer",
              **{f"chain:{a}:{p}": "extrapolation" for a in ("batch", "feature")
                 for p in ("inside", "beyond", "single")}}


@dataclass
class Move:
    """The chosen method of one kind of move and its validated log residuals."""

    method: str
    logres: np.ndarray  # sorted log(actual / predicted) of the chosen method
    errors: dict[str, float] = field(default_factory=dict)  # MAPE of every candidate
    prior_mape: float | None = None  # too few validated moves: the public figure
    reach: float = 1.0  # median reach of the validated moves beyond a series (local.reach)
    #: GPU moves: the held-out GPU of each residual in ``logres`` (:mod:`~.clusters`)
    groups: np.ndarray | None = None

    @property
    def prior(self) -> bool:
        return self.prior_mape is not None

    @property
    def mape(self) -> float:
        if self.prior_mape is not None:
            return self.prior_mape
        return expected_error(self.logres)


def validate(model: DefaultModel, local: _Local, medians: tuple[Any, ...]
             ) -> tuple[dict[str, list[dict[str, float]]], dict[str, list[float]],
                        dict[str, list[float]]]:
    """Log residuals of every candidate, per kind of move, on the user's own data.

    Local and naive candidates: each configuration left out in turn (and each GPU, for
    GPU moves). The cross-series model (``global``) is refitted without the held-out GPU
    (GPU moves) or without a third of the configurations (other moves; only up to
    :data:`MAX_REFIT` configurations, as each refit costs a fit). The evidence move is
    validated without the network's own rows (a held-out GPU's rows would be its own
    evidence); its residuals are also returned per evidence bucket, with the GPU each
    moved to (:func:`gpu_group`: one GPU's moves share its error, :mod:`~.clusters`).
    """
    index = local.index
    rng = np.random.default_rng(model.random_state)
    withheld = None
    if local.evidence is not None:
        withheld = dataclasses.replace(local.evidence, withhold=True)
        withheld.settings = local.evidence.settings
    scorer = _Scorer(index, local.move, evidence=withheld)
    picked = np.arange(index.n)
    if index.n > MAX_VALIDATED:
        picked = np.sort(rng.choice(index.n, MAX_VALIDATED, replace=False))
    refits = (MIN_REFIT <= index.n <= MAX_REFIT
              and index.n >= SERIES_PER_GPU * len(index.hw_table))
    chained = _axis_holdouts(model, index, medians, picked, refits, scorer.global_pred)
    everyone = np.ones(index.n, dtype=bool)
    for pick in picked:
        allowed = everyone.copy()
        allowed[pick] = False
        scorer.add(int(pick), allowed, every_axis=True)
    for c, allowed in chained:
        r = route(index, index.values[c], index.hw[c], allowed)
        if r.kind == "chain":
            scorer.score(c, r)
    if index.hw.shape[1]:
        _gpu_moves(model, index, medians, rng, refits, scorer.global_pred, scorer.add)
    _repeat_tasks(index, scorer.tasks)
    return scorer.tasks, scorer.buckets, scorer.bucket_groups


@dataclass
class _Scorer:
    """Collects the log residuals of every candidate per kind of move (:func:`validate`)."""

    index: SeriesIndex
    move: GpuMove
    tasks: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    #: The cross-series model's held-out predictions, keyed by (configuration, axis): an
    #: axis move is validated by a refit without every configuration of the held-out value
    #: on that axis (a depth never measured is never seen in another configuration either);
    #: axis -1: GPU moves, refitted without the held-out GPUs.
    global_pred: dict[tuple[int, int], float] = field(default_factory=dict)
    subs: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_METHOD))
    evidence: EvidenceMove | None = None
    buckets: dict[str, list[float]] = field(default_factory=dict)
    bucket_groups: dict[str, list[float]] = field(default_factory=dict)  # gpu_group of each

    def add(self, c: int, allowed: np.ndarray, every_axis: bool = False) -> None:
        """Score configuration ``c`` reached from the ``allowed`` configurations."""
        index = self.index
        r = route(index, index.values[c], index.hw[c], allowed)
        if every_axis:  # each axis that reaches the configuration is a move to validate
            for other in axis_routes(index, index.values[c], index.hw[c], allowed):
                if other.key != r.key:
                    self.score(c, other)
        if r.kind != "none":
            self.score(c, r)

    def score(self, c: int, r: Any) -> None:
        """Every candidate's log residual on configuration ``c`` reached by route ``r``."""
        index = self.index
        its = float(index.its[c])
        ev = self.evidence if r.kind == "gpu" else None
        preds = candidates(index, r, index.values[c], index.hw[c], index.naive_peak[c],
                           self.move, self.subs, its, ev, index.device[c])
        key = (c, r.axis if r.kind in ("axis", "chain") else -1)
        if key in self.global_pred and r.kind in ("axis", "gpu", "chain"):
            preds["global"] = self.global_pred[key]
        actual = float(index.per_job(np.array([c]), its)[0])
        # Only a held-out GPU's moves are draws of a new GPU's error, all alike for its
        # configurations (NaN: a move to a GPU measured in other configurations).
        group = gpu_group(index, c) if r.kind == "gpu" and r.new_gpu else math.nan
        task = {m: float(np.log(actual / p)) for m, p in preds.items() if p > 0}
        if ev is not None and "evidence" in task and ev.last is not None:
            # The move's bucket gets its residual; the spec-sheet move alone is scored on
            # every move, so that a move without evidence is calibrated by spec-sheet moves
            # on these GPUs, not by moves that had evidence.
            spec = f"{ev.last.bucket.partition(':')[0]}:spec"
            if ev.last.bucket != spec:
                self.buckets.setdefault(ev.last.bucket, []).append(task["evidence"])
                self.bucket_groups.setdefault(ev.last.bucket, []).append(group)
            # The move from each source GPU alone (a few): what a network measured on one
            # GPU errs by, as a join of many sources does not. (No source has evidence where
            # the strongest has none.)
            single = ev.last.bucket.endswith(("direct", "weak"))
            for bucket, log_t in ev.by_source(SINGLE_SOURCES) if single else ():
                if bucket.endswith(("direct", "weak")):
                    self.buckets.setdefault(SINGLE + bucket, []).append(math.log(actual) - log_t)
                    self.bucket_groups.setdefault(SINGLE + bucket, []).append(group)
            # A host-bound move's spec-sheet answer kept its host's time: not what the
            # spec-sheet moves of GPU-bound work err by.
            host = ev.last.bucket.endswith(f":{HOST_BUCKET}")
            if not host and np.isfinite(ev.last_spec) and ev.last_spec > 0:
                self.buckets.setdefault(spec, []).append(float(np.log(actual / ev.last_spec)))
                self.bucket_groups.setdefault(spec, []).append(group)
        task["_reach"] = reach(index, r, index.values[c])
        if math.isfinite(group):
            task["_group"] = group
        self.tasks.setdefault(r.key, []).append(task)


def gpu_group(index: SeriesIndex, c: int) -> float:
    """The GPU of configuration ``c`` as a number that names it in every network's index
    (its hardware row: peak, bandwidth and, where known, the precision's and the GPU's
    codes), so that one GPU's moves pooled over networks are one cluster."""
    return float(zlib.crc32(np.round(index.hw[c], 6).astype(float).tobytes()))


def _axis_holdouts(model: DefaultModel, index: SeriesIndex, medians: tuple[Any, ...],
                   picked: np.ndarray, refits: bool,
                   global_pred: dict[tuple[int, int], float]) -> list[tuple[int, np.ndarray]]:
    """Hold out the ends and two interior values of each axis: the cross-series model's refit
    predictions go into ``global_pred``; returns the (configuration, allowed) pairs that only
    a chain (two moves) reaches."""
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
                for held_c, p in _refit(model, index, medians, out_of).items():
                    global_pred[(held_c, j)] = p
            # A value no configuration keeps: what only a chain (two moves) reaches.
            allowed = np.ones(index.n, dtype=bool)
            allowed[out_of] = False
            chained.extend((int(c), allowed) for c in out_of[in_picked[out_of]][:CHAIN_TASKS])
    return chained


def _refit(model: DefaultModel, index: SeriesIndex, medians: tuple[Any, ...],
           held: np.ndarray) -> dict[int, float]:
    """Per-iteration predictions of the held-out configurations by a refit.

    Refits the cross-series model of this network on the prepared configuration medians (no
    second pass over the table), without the held-out configurations. Only the point
    predictions are read: ``out`` asks for ``time_s`` alone, so no interval is computed and
    the log-space candidate is fitted only where a point needs it (held-out ends and GPUs
    moved physically are the linear model's alone).
    """
    net, prep_agg, agg_y, own, agg_row = medians
    agg_config = index.config_of_row[agg_row]
    keep = ~np.isin(agg_config, held)
    if keep.sum() < 2 or (~keep).sum() == 0:
        return {}
    advice = list(model.advice_)
    try:
        fit = model._fit_network(net, prep_agg, own[keep], agg_y[own[keep]])
        test = own[~keep]
        out = {"time_s": np.zeros(len(prep_agg.iterations))}
        model._predict_network(fit, prep_agg, test, model.coverage, out)
    except (ValueError, np.linalg.LinAlgError):
        return {}
    finally:
        model.advice_ = advice
    pred, its = out["time_s"][test], prep_agg.iterations[test]
    result: dict[int, float] = {}
    for c, p, n in zip(agg_config[~keep], pred, its, strict=True):
        # Seconds per iteration at the configuration's median iteration count.
        at = float(index.its[c])
        per_it = max(p - index.setup[c], 1e-3 * p) / n
        result.setdefault(int(c), per_it + index.setup[c] / at)
    return result


def _gpu_moves(model: DefaultModel, index: SeriesIndex, medians: tuple[Any, ...],
               rng: np.random.Generator, refits: bool,
               global_pred: dict[tuple[int, int], float], add: Any) -> None:
    """GPU moves: each group of GPUs held out in turn (the cross-series model refitted
    without it), every configuration of each of its GPUs predicted from the others."""
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
                for held_c, p in _refit(model, index, medians, out_of).items():
                    global_pred[(held_c, -1)] = p
            for g in np.flatnonzero(group_of == k):
                _gpu_tasks(index, gpu_of, int(g), per_gpu, rng, add)


def _repeat_tasks(index: SeriesIndex, tasks: dict[str, list[dict[str, float]]]) -> None:
    """Repeats: each run against the median of its configuration's other runs."""
    residuals = run_residuals(index)
    for c in np.flatnonzero(index.count > 1)[:MAX_VALIDATED]:
        tasks.setdefault("repeat", []).extend({"lin": float(r)} for r in residuals[int(c)])


def _gpu_tasks(index: SeriesIndex, gpu_of: np.ndarray, g: int, per_gpu: int,
               rng: np.random.Generator, add: Any) -> None:
    """Every configuration of GPU ``g`` predicted from the other GPUs only."""
    mine = np.flatnonzero(gpu_of == g)
    if len(mine) > per_gpu:
        mine = np.sort(rng.choice(mine, per_gpu, replace=False))
    for c in mine:
        add(int(c), gpu_of != g)

def choose(key: str, entries: list[dict[str, float]], move: GpuMove) -> Move:
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
    mine = [e for e in entries if method in e]
    order = np.argsort([e[method] for e in mine], kind="stable")
    own = np.array([mine[i][method] for i in order], dtype=float)
    if enough and len(own) >= MIN_TASKS:
        reaches = [e["_reach"] for e in mine if e.get("_reach", 0) > 0]
        groups = (np.array([mine[i]["_group"] for i in order])
                  if all("_group" in e for e in mine) else None)
        return Move(method, own, errors, reach=float(np.median(reaches)) if reaches else 1.0,
                    groups=groups)
    logres, mape = _prior(key, move)
    return Move(method, logres, errors, prior_mape=mape)


def subset(prep: Prepared, rows: np.ndarray) -> Prepared:
    """The prepared rows ``rows`` (no second pass over the table)."""
    def pick(a: np.ndarray | None) -> np.ndarray | None:
        return None if a is None else a[rows]

    return Prepared(prep.features.iloc[rows].reset_index(drop=True), prep.iterations[rows],
                    pick(prep.network), prep.hardware_label[rows], pick(prep.architecture),
                    pick(prep.naive_peak), pick(prep.device))


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
