"""The evidence move inside the default model: its candidate for GPU moves.

:class:`EvidenceMove` holds the bases a fit consults (the user's own, from the training data,
then the public one) and turns one source configuration of a network into a moved time on
the query's device (:func:`~.evidence_move.estimate`), with the spec-sheet move of
:mod:`~.gpu_move` as the prior. :mod:`~.local` calls it for every source GPU of a GPU move and
:meth:`EvidenceMove.combine` joins the sources; the bucket and the words of the strongest one
are kept for the prediction's interval and ``detail``.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import pandas as pd

from gpuperf_magics.model.clusters import at_least_cluster, expected_error, sample_interval
from gpuperf_magics.model.evidence import EvidenceBase, family_of
from gpuperf_magics.model.evidence_move import (
    BUCKETS,
    Estimate,
    Query,
    Settings,
    estimate,
    few_sources,
    from_other_hosts,
    interval,
    reach_variance,
    spec_sd,
    weighted_median,
)
from gpuperf_magics.model.gpu_move import GpuMove
from gpuperf_magics.model.series import SeriesIndex

#: Own validated residuals of a bucket from which they, not the public calibration, set the
#: bucket's interval.
OWN_CALIBRATION = 20
#: The prefix of a bucket's residuals of moves from one source GPU alone (validation scores
#: each held-out configuration's move from every source too, not only their join).
SINGLE = "one|"


def own_rows(index: SeriesIndex, network: str) -> pd.DataFrame:
    """One network's configurations as evidence rows: a workload is one value of every
    feature, measured on each device it ran on."""
    keep = np.array([isinstance(d, str) for d in index.device], dtype=bool)
    if not keep.any():
        return pd.DataFrame()
    values = np.round(index.values[keep], 9)
    labels = ["|".join(f"{x:g}" for x in row) for row in values]
    batch = (index.values[keep, index.batch_axis] if index.batch_axis is not None
             else np.ones(int(keep.sum())))
    return pd.DataFrame({"workload": [f"{network}|{w}" for w in labels], "network": network,
                         "gpu": [d.rpartition("|")[0] for d in index.device[keep]],
                         "precision": [d.rpartition("|")[2] for d in index.device[keep]],
                         "batch_size": batch, "t": index.t[keep]})


@dataclass
class EvidenceMove:
    """The evidence candidate of one network's GPU moves (see the module docstring)."""

    own: EvidenceBase
    public: EvidenceBase
    prior_move: GpuMove
    network: str = "*"
    #: During validation: the network whose own rows are withheld (its held-out GPU).
    withhold: bool = False
    last: Estimate | None = None
    #: Every source's estimate of the last :meth:`combine` with its weight there, for
    #: validation to score the move from one source GPU (:meth:`by_source`).
    last_sources: list[tuple[Estimate, float]] = field(default_factory=list)
    #: Seconds per iteration of the spec-sheet move alone, for the last :meth:`combine`.
    last_spec: float = float("nan")
    kind: str | None = field(default=None)

    def __post_init__(self) -> None:
        self.kind = family_of(self.network)[1]
        self.settings = Settings.of(self.public.settings)

    def for_network(self, network: str) -> EvidenceMove:
        return EvidenceMove(self.own, self.public, self.prior_move, network)

    def bases(self) -> list[EvidenceBase]:
        if self.withhold:
            if "_withheld" not in self.__dict__:  # once per network, not per move
                self._withheld = self.own.without(families=(family_of(self.network)[0],))
            return [self._withheld, self.public]
        return [self.own, self.public]

    def move(self, index: SeriesIndex, rep: int, t_src: float, v: np.ndarray, h: np.ndarray,
             dst: object, carried: float = 0.0) -> Estimate | None:
        """Seconds per iteration on the query's device ``dst`` from ``t_src`` measured (or
        moved along a series) on configuration ``rep``'s device; ``carried``: the ``|log|``
        batch ratio over which ``t_src`` was carried per sample (its reach,
        :func:`~.evidence_move.reach_variance`)."""
        src = index.device[rep]
        if not isinstance(src, str) or not isinstance(dst, str) or t_src <= 0:
            return None
        bw = h[1] if len(h) > 1 else None
        hw = index.hw[rep]
        src_gpu = src.rpartition("|")[0]
        prior_t = float(self.prior_move.scale(
            np.array([t_src]), np.array([hw[0]]), None if bw is None else np.array([hw[1]]),
            np.array([h[0]]), None if bw is None else np.array([bw]),
            np.array([hw[0]]), np.array([h[0]]))[0])
        batch = (float(v[index.batch_axis]) if index.batch_axis is not None else float("nan"))
        q = Query(src, dst, math.log(t_src), math.log(batch) if batch > 0 else float("nan"),
                  self.kind)
        bases = self.bases()
        # Nothing of the user's own reaches the two devices: every pair was measured on other
        # hosts (the public base), and weighs as other hosts' evidence does.
        est = estimate(bases, q, math.log(prior_t / t_src), self.settings,
                       other_hosts=from_other_hosts(bases[0], src, dst))
        return Estimate(math.log(t_src) + est.log_ratio, est.sd, est.bucket,
                        est.detail + (_unrecorded(src, dst) if est.bucket.endswith(":spec")
                                      else ""), est.workloads, spec=math.log(prior_t),
                        reach_var=reach_variance(carried, self.settings), prior=est.prior,
                        other_hosts=est.other_hosts,
                        both=(est.bucket.startswith("precision:")
                              and src_gpu != dst.rpartition("|")[0]),
                        source=src_gpu)

    def combine(self, estimates: list[Estimate]) -> float:
        """Seconds per iteration from the sources' estimates: the median of their log times
        weighted by their precision (one source GPU whose host was slow must not move the
        answer, as a mean would let it), each source's reach in batch included (a GPU that ran
        the asked batch outweighs one whose time per sample was carried from a tenth of it);
        the strongest bucket's estimate is kept in :attr:`last`.

        A source that changes both the GPU and the precision errs as both moves do: its
        variance adds the spec-sheet GPU move's (``prior_sd²``) to its own."""
        both = np.array([self.settings.prior_sd ** 2 if e.both else 0.0 for e in estimates])
        w = 1.0 / (np.array([max(e.sd, 1e-3) ** 2 + e.reach_var for e in estimates]) + both)
        best = min(estimates, key=_strength)
        self.last = dataclasses.replace(best, sources=len({e.source for e in estimates}))
        self.last_sources = list(zip(estimates, w, strict=True))
        # The spec-sheet move alone, joined the same way: each source's spread the prior's
        # (what :func:`~.evidence_move.estimate` gives a move without evidence), its reach,
        # and a move of both the GPU move's.
        prior_var = np.array([_prior_sd(e.bucket, self.settings) ** 2 for e in estimates])
        extra = np.array([e.reach_var for e in estimates]) + both
        self.last_spec = float(np.exp(weighted_median(
            np.array([e.spec for e in estimates]), 1.0 / (prior_var + extra), midway=True)))
        return float(np.exp(weighted_median(np.array([e.log_ratio for e in estimates]), w,
                                            midway=True)))

    def by_source(self, limit: int) -> list[tuple[str, float]]:
        """(bucket, log seconds per iteration) of the last :meth:`combine`'s move from each
        source GPU alone, joined over its precisions as :meth:`combine` joins them, for at
        most ``limit`` source GPUs spread over them (in their order); none from one GPU."""
        of_gpu: dict[str, list[tuple[Estimate, float]]] = {}
        for e, w in self.last_sources:
            of_gpu.setdefault(e.source, []).append((e, w))
        if len(of_gpu) < 2:
            return []
        gpus = list(of_gpu.values())
        n = len(gpus)
        if n > limit:
            gpus = [gpus[round(k * (n - 1) / max(limit - 1, 1))] for k in range(limit)]
        out = []
        for mine in gpus:
            if len(mine) == 1:
                out.append((mine[0][0].bucket, mine[0][0].log_ratio))
                continue
            best = min((e for e, _ in mine), key=_strength)
            out.append((best.bucket, weighted_median(np.array([e.log_ratio for e, _ in mine]),
                                                     np.array([w for _, w in mine]),
                                                     midway=True)))
        return out

    def interval(self, own: dict[str, np.ndarray], last: Estimate, coverage: float,
                 groups: dict[str, np.ndarray] | None = None) -> tuple[float, float, float]:
        """(low, high, MAPE) of the move ``last``: the user's validated residuals of its
        bucket where there are enough, else the public calibration scaled by its spread.
        ``groups``: the GPU each residual moved to, in their order; where given, the
        interval is at least that of a new GPU (:func:`~.clusters.cluster_interval`)."""
        groups = groups or {}
        if last.bucket == "gpu:spec":
            spec = self._spec_interval(own, coverage, groups)
            if spec is not None:
                return spec
        # A move without evidence spreads as far as the peak ratio it spans says.
        spread = (spec_sd(last.prior, last.bucket.partition(":")[0], self.settings)
                  if math.isfinite(last.prior) else None)
        public = interval(self.public.calibration, last.bucket, coverage, last.sd, spread)
        if last.other_hosts and last.bucket.startswith("gpu:"):
            # A GPU move by other hosts' evidence (a host-bound series' too) errs by a spread
            # the base's few sources measured; a move between precisions is the GPU's and
            # the network's, as the cross-source factor on its weight says too.
            k = few_sources(coverage, self.public.n_sources)
            public = (k * public[0], k * public[1], public[2])
        key = last.bucket
        if (last.sources == 1 and not last.other_hosts
                and len(own.get(SINGLE + key, ())) >= OWN_CALIBRATION):
            # A move from one GPU by the user's own pairs: the user's validated moves from one
            # (those were all by the user's pairs; other hosts' evidence errs as its own).
            key = SINGLE + key
        res = own.get(key)
        if res is None or len(res) < OWN_CALIBRATION:
            return public
        mine = _clustered(_own_interval(res, coverage), res, groups.get(key), coverage)
        if key.endswith("weak") or (key.endswith("direct") and not key.startswith(SINGLE)):
            # A move from few alike workloads errs by how far those few are from it, as its
            # spread says and the public calibration scales: at least that. The user's moves
            # validated only joined over every other GPU of a network (their median) say
            # too little of a move from fewer: at least what single moves of the public base
            # made. The wider of the two.
            return min(mine[0], public[0]), max(mine[1], public[1]), max(mine[2], public[2])
        return mine

    def _spec_interval(self, own: dict[str, np.ndarray], coverage: float,
                       groups: dict[str, np.ndarray]) -> tuple[float, float, float] | None:
        """No evidence on the two GPUs: the move is the spec-sheet prior (:attr:`prior_move`).

        The public calibration of the ``spec`` bucket measures the plain peak ratio over
        every public source, and is too wide where the learnt move is better and the user's
        machines behave (lambda2025: 98% inside). Where the user's own GPU moves were
        validated (:data:`OWN_CALIBRATION` or more), the errors the spec-sheet move alone made
        on them (validation scores it on every GPU move, ``gpu:spec``) say how this user's
        machines behave; the interval is the wider of those and the learnt
        move's own errors on held-out GPUs (its 10th and 90th percentiles, other coverages by
        a normal's quantiles): a move with no evidence errs at least as much as one with it.
        None: no own validation (the public calibration then)."""
        res, group = own.get("gpu:spec", np.zeros(0)), groups.get("gpu:spec")
        if len(res) < OWN_CALIBRATION:  # (older fits: every bucket's residuals pooled)
            pooled = [b for b in own if b.startswith("gpu:")]
            res = np.concatenate([own[b] for b in pooled]) if pooled else np.zeros(0)
            group = (np.concatenate([groups[b] for b in pooled])
                     if pooled and all(b in groups for b in pooled) else None)
        if len(res) < OWN_CALIBRATION:
            return None
        lo, hi, mape = _clustered(_own_interval(res, coverage), res, group, coverage)
        m = self.prior_move
        if m.n_pairs and m.weight > 0:
            scale = NormalDist().inv_cdf((1 + coverage) / 2) / NormalDist().inv_cdf(0.9)
            lo, hi, mape = min(lo, scale * m.q_lo), max(hi, scale * m.q_hi), max(mape, m.mape)
        return min(lo, 0.0), max(hi, 0.0), mape


def _prior_sd(bucket: str, s: Settings) -> float:
    """The spread a move of ``bucket``'s kind has with no evidence (:func:`estimate`'s)."""
    return s.prior_sd_precision if bucket.startswith("precision:") else s.prior_sd


def _unrecorded(src: str, dst: str) -> str:
    """The words a spec-sheet move adds where the precision of a run, or of the query, on a GPU
    with TF32 was not given (its device key's class ``unk``, :func:`~.evidence.device_key`):
    the spec sheet reads the FP32 peak, which is not what PyTorch's defaults run there
    (docs/figures/gpu_moves.md measures what that costs on sia2023's A100)."""
    gpus = [key.rpartition("|")[0] for key in (src, dst) if key.endswith("|unk")]
    if not gpus:
        return ""
    return (f"; precision not given for {' and '.join(dict.fromkeys(gpus))}: its peak read "
            f"as FP32, though PyTorch runs convolutions there in TF32 by default (matrix "
            f"products too in 1.7-1.11); say which with a precision column in the imported "
            f"table, or when asking (--precision fp32|tf32|amp; precision='tf32' in Python)")


def _own_interval(res: np.ndarray, coverage: float) -> tuple[float, float, float]:
    """(low, high, MAPE) of the user's validated moves of a bucket: the bounds of one more
    move (:func:`~.clusters.sample_interval`: the ranks of a new draw, not the percentiles of
    these), their MAPE as the expected error."""
    lo, hi = sample_interval(res, coverage)
    return lo, hi, expected_error(res)


def _clustered(bounds: tuple[float, float, float], res: np.ndarray,
               groups: np.ndarray | None, coverage: float) -> tuple[float, float, float]:
    """An interval ``(low, high, MAPE)`` of residuals ``res``, at least that of a new GPU
    where the GPU of each residual is known (:func:`~.clusters.at_least_cluster`)."""
    lo, hi = at_least_cluster(bounds[0], bounds[1], res, groups, coverage)
    return min(lo, 0.0), max(hi, 0.0), bounds[2]


def _strength(e: Estimate) -> tuple[int, int]:
    """Sort key of the strongest estimate first: its bucket's rank, then more workloads (the
    first of equals wins, as ``min`` keeps it)."""
    return _rank(e.bucket), -e.workloads


def _rank(bucket: str) -> int:
    strength = bucket.partition(":")[2]
    return BUCKETS.index(strength) if strength in BUCKETS else len(BUCKETS)
