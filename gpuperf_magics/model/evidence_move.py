"""The evidence move: a time on device S carried to device T by what other workloads did.

For a query measured on S (``t_S`` seconds per iteration at batch ``b``) and asked on T, every
workload of the evidence bases (:mod:`~.evidence`) measured on both gives a log ratio of time
per sample ``r = log(t_T/b_T) − log(t_S/b_S)``. Each weighs by how alike it is to the query
(its time on S and its batch, in log space, by Gaussian kernels: small iterations barely speed
up on a faster GPU, so they borrow from small iterations; its kind of network; whether its
precision on each device is the query's) and by its source's quality. Then:

- **direct**: the weighted mean ``m`` of the pairs' ratios (a move between precisions: the
  weighted median, over every batch, with a wide kernel in time; see :class:`Settings`),
  their weighted spread ``τ²`` and the evidence's strength ``n``: over network families, the
  sum of each family's best weight (weights are at most 1: ten batch sizes of one network
  are one network's evidence, and workloads unlike the query count for little);
- **chain** (no direct pair): S → M → T through the device M with the strongest evidence on
  both hops; the means add, the spreads add, the variance of the mean takes both hops'
  spreads (the hops rest on different workloads), and the strength is half the weaker hop's;
- **shrinkage**: the spec-sheet move is the prior ``p`` with spread ``σ_p`` (what spec-sheet
  moves miss on the public data); the estimate is the precision-weighted mean of ``m`` (its
  variance ``τ²/n``) and ``p`` in log space: little or disagreeing evidence stays near the
  spec sheet, much that agrees moves away from it. No evidence: the prior alone.

The bucket of a move (``direct``, ``weak``, ``chain``, ``spec``) says how strong its evidence
was; intervals and expected errors come from validated residuals of moves of the same bucket
(:func:`calibrate` on the public base; the user's own validation where it has enough). A GPU
move by other hosts' evidence alone is drawn wider by how few sources measured the spread
between hosts (:func:`few_sources`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from gpuperf_magics.model.clusters import t_over_normal
from gpuperf_magics.model.evidence import EvidenceBase, alternates

#: Buckets of evidence strength, strongest first.
BUCKETS = ("direct", "weak", "chain", "spec")
#: Quantile levels the calibration stores (intervals interpolate between them).
LEVELS = tuple(round(0.05 * k, 2) for k in range(1, 20))


@dataclass(frozen=True)
class Settings:
    """Kernel widths and shrinkage constants of the move (stored in the evidence file)."""

    width_t: float = 1.0  # kernel width in log time on S
    width_b: float = 1.5  # kernel width in log batch
    other_kind: float = 0.3  # weight of a workload of another kind of network
    unknown_kind: float = 0.6  # weight where either kind is unknown
    tau0: float = 0.15  # spread of pairs assumed before any is seen (log)
    prior_sd: float = 0.35  # spread of the spec-sheet move (log), calibrated on the base
    prior_sd_precision: float = 0.5  # the same for a move between precisions
    strong: float = 1.0  # strength from which evidence is "direct" rather than "weak"
    floor: float = 0.05  # strength below which evidence is ignored
    #: Kernel widths of a move between precisions (0: no batch kernel). What AMP gains
    #: depends on the network's mix of operations more than on its size or batch (the batch
    #: often doubles under AMP), so far sizes and every batch count; the pairs' weighted
    #: median, not their mean, carries them (a few networks gain 3x, most 1.3-2x).
    width_t_precision: float = 2.0
    width_b_precision: float = 0.0
    #: Factor on the variance of a GPU move's evidence, in its weight against the spec sheet,
    #: where all of it was measured on other hosts than the run (the public base, where
    #: nothing of the user's own reaches either device, :func:`from_other_hosts`): each
    #: source shares its host's quirks, which more workloads of that source do not average
    #: out. Set by ``benchmarks/build_evidence.py``
    #: (:func:`cross_variance`) to the square of the spread of the z-scores that moves between
    #: sources showed (weak and chain buckets of the shipped base: 2.15x and 2.19x a unit
    #: normal's, so 4.76); a base too small to measure it takes 1.
    cross_var: float = 1.0
    #: How the spread of a source's move grows with its reach in batch size, in log space:
    #: per unit of ``|log(asked batch / the batch it ran)|``, over which its time per sample
    #: was carried. Fitted on the base's spec-sheet moves by ``benchmarks/build_evidence.py``
    #: (:func:`reach_spread`); it weighs the source GPUs of one answer against each other
    #: (:func:`reach_variance`). 0 (older files): every source alike.
    reach_batch: float = 0.0
    #: How the spread of a GPU move without evidence grows with the peak ratio it spans:
    #: per unit of ``|log|`` of the spec-sheet ratio (:func:`spec_sd`), fitted as
    #: ``reach_batch`` is. It shapes the interval of a spec-sheet move (a K80 to a V100 errs
    #: more than a V100 to a Quadro RTX 6000), not its answer. 0 (older files): one spread.
    reach_peak: float = 0.0

    @classmethod
    def of(cls, stored: dict) -> Settings:
        return cls(**{k: float(v) for k, v in stored.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class Query:
    """One move: devices, the time per iteration and batch on S, the network's kind."""

    src: str
    dst: str
    log_t: float
    log_b: float
    kind: str | None = None
    exclude: str | None = None  # a network family whose rows must not be used


@dataclass(frozen=True)
class Evidence:
    """Pairs of one hop (or a chain) summarised."""

    m: float  # weighted mean log ratio
    tau2: float  # spread of the pairs (shrunk towards tau0²)
    var: float  # variance of m
    strength: float
    workloads: int
    via: str = ""


@dataclass(frozen=True)
class Estimate:
    """The move's log ratio, its predictive spread, bucket and what it rests on."""

    log_ratio: float
    sd: float
    bucket: str
    detail: str
    workloads: int = 0
    #: The spec-sheet move's log ratio (log time, once moved): what the move would be
    #: without evidence; validation scores it too, so spec-sheet moves are calibrated by
    #: spec-sheet residuals on the user's own GPUs.
    spec: float = float("nan")
    #: Variance the source's reach in batch adds when the sources of one answer are joined
    #: (:func:`reach_variance`); 0: none.
    reach_var: float = 0.0
    #: The spec-sheet log ratio the move was shrunk towards (NaN: not known).
    prior: float = float("nan")
    #: Its evidence was all measured on other hosts than the run (:func:`from_other_hosts`):
    #: its interval is drawn as a new source's (:func:`few_sources`).
    other_hosts: bool = False
    #: The move changes the GPU and the precision at once (a run in FP32 on one GPU asked in
    #: AMP on another): it errs as both moves do.
    both: bool = False
    #: The GPU the move is from (its name, every precision alike).
    source: str = ""
    #: How many source GPUs the answer it stands for joined (:meth:`~.evidence_query.
    #: EvidenceMove.combine`): a move from one errs as a single move does.
    sources: int = 1


def spec_sd(prior: float, move: str, s: Settings) -> float:
    """The spread of a spec-sheet move of log ratio ``prior`` (``move``: "gpu" or
    "precision"): a GPU move's grows with the peak ratio it spans, ``sqrt(prior_sd² +
    (reach_peak · prior)²)``; a precision move's is ``prior_sd_precision``."""
    if move == "precision":
        return s.prior_sd_precision
    return float(math.sqrt(s.prior_sd ** 2 + (s.reach_peak * prior) ** 2))


def reach_variance(carried: float, s: Settings) -> float:
    """What a source's reach adds to the variance of its estimate when the source GPUs of one
    answer are weighed against each other: its time per sample carried over ``carried`` (the
    ``|log|`` batch ratio) from the batch it ran. A spec-sheet move errs more the further
    its batch is carried (per sample, a GPU runs a small batch less efficiently than a
    large one), and evidence between the two GPUs is weighed at the asked batch, not the
    source's."""
    return float((s.reach_batch * carried) ** 2)


def reach_spread(residuals: np.ndarray, carried: np.ndarray, groups: np.ndarray) -> float:
    """How the spread of spec-sheet moves grows with a distance they span
    (:attr:`Settings.reach_batch`: the ``|log|`` batch ratio a move carried its time per
    sample over; :attr:`Settings.reach_peak`: the log peak ratio), from their log residuals,
    that distance and each move's source. Each
    residual is taken as Laplace with scale ``sqrt(s_g² + (a·carried)²)`` (``s_g`` the
    spread of its source at no reach: hosts of one data set share their quirks, and pooled
    data sets would lend one set's noise to another's far moves), centred on its source's
    median, and ``a`` and the ``s_g`` fitted by maximum likelihood (heavy tails: one
    host-bound workload must not set them); returned as a normal's σ of the same median
    absolute value (``ln 2 / 0.6745`` times the scale), rounded (stable text). Fewer than 30
    moves: 0."""
    from scipy.optimize import minimize

    ok = np.isfinite(residuals) & np.isfinite(carried)
    r, b = residuals[ok], np.abs(carried[ok])
    names, g = np.unique(np.asarray(groups)[ok].astype(str), return_inverse=True)
    if len(r) < 30:
        return 0.0
    r = r - np.array([np.median(r[g == k]) for k in range(len(names))])[g]
    n = len(names)

    def loss(theta: np.ndarray) -> float:
        scale = np.sqrt(np.exp(theta[:n])[g] ** 2 + (np.exp(theta[n]) * b) ** 2)
        return float(np.sum(np.abs(r) / scale + np.log(scale)))

    start = np.log(np.r_[np.full(n, max(float(np.median(np.abs(r))), 1e-3)), 0.1])
    fit = minimize(loss, start, method="Nelder-Mead",
                   options={"xatol": 1e-7, "fatol": 1e-9, "maxiter": 20000, "maxfev": 20000})
    return round(float(np.exp(fit.x[n])) * math.log(2) / NormalDist().inv_cdf(0.75), 3)


def direct(bases: Sequence[EvidenceBase], q: Query, s: Settings) -> Evidence | None:
    """Summary of the workloads measured on both ``q.src`` and ``q.dst`` (None: none alike)."""
    stacked = _stacked(bases, q, s)
    if stacked is None:
        return None
    r, w0, log_t, log_b, order, start = stacked
    precision = is_precision_move(q.src, q.dst)
    width_t = s.width_t_precision if precision else s.width_t
    width_b = s.width_b_precision if precision else s.width_b
    w = w0 * np.exp(-0.5 * ((log_t - q.log_t) / width_t) ** 2)
    if np.isfinite(q.log_b) and width_b > 0:  # without a batch size: no batch kernel
        w = w * np.exp(-0.5 * ((log_b - q.log_b) / width_b) ** 2)
    # Strength: per network family (of one source), its best weight; summed.
    strength = float(np.maximum.reduceat(w[order], start).sum()) if len(start) else 0.0
    total = w.sum()
    if strength < s.floor or total <= 0:
        return None
    # np.average's arithmetic (a weighted sum over the sum of weights) without its checks;
    # a precision move takes the weighted median (its pairs hold outliers a mean follows).
    m = weighted_median(r, w) if precision else float((r * w).sum() / total)
    spread = float(((r - m) ** 2 * w).sum() / total)
    tau2 = (strength * spread + s.tau0 ** 2) / (strength + 1.0)
    return Evidence(m, tau2, tau2 / strength, strength, len(r))


def _stacked(bases: Sequence[EvidenceBase], q: Query, s: Settings
             ) -> tuple[np.ndarray, ...] | None:
    """The pairs of every base for ``q``'s devices, kind and excluded family, concatenated,
    with the order that groups them by family and where each family starts: the same for
    every query between two devices, so computed once (a validation asks thousands, and
    sorting the family names per query cost more than the rest of the move)."""
    if not bases:
        return None
    cache = bases[0].__dict__.setdefault("_stacked", {})
    key = (tuple(id(b) for b in bases[1:]), q.src, q.dst, q.kind, q.exclude,
           s.other_kind, s.unknown_kind)
    if key in cache:
        return cache[key][1]
    rs, w0s, ts, bs, fams = [], [], [], [], []
    for base in bases:
        pairs = _pair_arrays(base, q.src, q.dst, q.kind, s)
        if pairs is None:
            continue
        r, w0, log_t, log_b, fam, family = pairs
        if q.exclude is not None:
            keep = family != q.exclude
            r, w0, log_t, log_b, fam = r[keep], w0[keep], log_t[keep], log_b[keep], fam[keep]
        rs.append(r)
        w0s.append(w0)
        ts.append(log_t)
        bs.append(log_b)
        fams.append(fam)
    out: tuple[np.ndarray, ...] | None = None
    if rs and sum(len(r) for r in rs):
        fam = np.concatenate(fams)
        order = np.argsort(fam, kind="stable")
        _, start = np.unique(fam[order], return_index=True)
        out = (np.concatenate(rs), np.concatenate(w0s), np.concatenate(ts),
               np.concatenate(bs), order, start)
    cache[key] = (list(bases[1:]), out)  # the other bases held: their ids stay theirs
    return out


def weighted_median(x: np.ndarray, w: np.ndarray, midway: bool = False) -> float:
    """The median of ``x`` weighted by ``w``: the first value whose cumulative weight reaches
    half. ``midway``: with an even count, where that value's cumulative weight is half
    exactly, the mean of it and the next (two alike sources give their middle)."""
    order = np.argsort(x, kind="stable")
    cum = np.cumsum(w[order])
    if not midway:
        return float(x[order][int(np.searchsorted(cum, 0.5 * cum[-1]))])
    cum = cum / np.sum(w)
    k = int(np.searchsorted(cum, 0.5))
    if len(x) % 2 == 0 and np.isclose(cum[k], 0.5) and k + 1 < len(x):
        return float(0.5 * (x[order][k] + x[order][k + 1]))
    return float(x[order][k])


def _pair_arrays(base: EvidenceBase, src: str, dst: str, kind: str | None,
                 s: Settings) -> tuple[np.ndarray, ...] | None:
    """The pairs of two devices (their alternates included) as arrays, computed once per
    base, devices and kind: log ratio, weight before the kernels, log time and log batch on
    the source, family group, family."""
    cache = base.__dict__.setdefault("_pair_arrays", {})
    key = (src, dst, kind, s.other_kind, s.unknown_kind)
    if key in cache:
        return cache[key]
    parts = []
    for a, w_src in alternates(src):
        for b, w_dst in alternates(dst):
            i, j = base.pairs(a, b)
            if len(i):
                parts.append((i, j, np.full(len(i), w_src * w_dst)))
    if not parts:
        cache[key] = None
        return None
    i = np.concatenate([p[0] for p in parts])
    j = np.concatenate([p[1] for p in parts])
    w = np.concatenate([p[2] for p in parts])
    out = ((base.log_t[j] - base.log_b[j]) - (base.log_t[i] - base.log_b[i]),
           w * np.minimum(base.quality[i], base.quality[j]) * _kind_weight(base.kind[i], kind, s),
           base.log_t[i], base.log_b[i], base.group[i], base.family[i])
    cache[key] = out
    return out


def _kind_weight(kinds: np.ndarray, kind: str | None, s: Settings) -> np.ndarray:
    if kind is None:
        return np.full(len(kinds), s.unknown_kind)
    known = np.array([isinstance(k, str) for k in kinds])
    same = np.array([k == kind for k in kinds])
    return np.where(same, 1.0, np.where(known, s.other_kind, s.unknown_kind))


#: Intermediate devices a chain tries at most (those sharing the most workloads with both).
CHAIN_MIDS = 4


def chain(bases: Sequence[EvidenceBase], q: Query, s: Settings) -> Evidence | None:
    """S → M → T through the intermediate device with the strongest evidence."""
    near_src: dict[str, int] = {}
    near_dst: dict[str, int] = {}
    for base in bases:
        for src, _ in alternates(q.src):
            for d, c in base.neighbours(src).items():
                near_src[d] = near_src.get(d, 0) + c
        for dst, _ in alternates(q.dst):
            for d, c in base.neighbours(dst).items():
                near_dst[d] = near_dst.get(d, 0) + c
    mids = sorted((set(near_src) & set(near_dst)) - {q.src, q.dst},
                  key=lambda d: (-min(near_src[d], near_dst[d]), d))[:CHAIN_MIDS]
    best: Evidence | None = None
    for mid in mids:
        one = direct(bases, Query(q.src, mid, q.log_t, q.log_b, q.kind, q.exclude), s)
        if one is None:
            continue
        two = direct(bases, Query(mid, q.dst, q.log_t + one.m, q.log_b, q.kind, q.exclude), s)
        if two is None:
            continue
        strength = 0.5 * min(one.strength, two.strength)
        if best is None or strength > best.strength:
            # The two hops rest on different workloads, so a chain's mean is no better known
            # than one pair of each hop: its variance takes the hops' spreads, not their
            # means' (chains lost to the plain pairs median where the hops' means were
            # trusted; now they stay near the spec sheet unless both hops agree tightly).
            best = Evidence(one.m + two.m, one.tau2 + two.tau2,
                            one.var + two.var + one.tau2 + two.tau2, strength,
                            min(one.workloads, two.workloads), via=mid)
    return best


def from_other_hosts(own: EvidenceBase, src: str, dst: str) -> bool:
    """Whether no evidence of a move ``src`` → ``dst`` can come from ``own`` (the user's own
    base): none of its workloads on either device, or on a key standing in for one
    (:func:`~.evidence.alternates`), was measured on another device, so neither a direct
    pair nor a hop of a chain is the user's."""
    return not any(own.neighbours(k) for d in (src, dst) for k, _ in alternates(d))


def is_precision_move(src: str, dst: str) -> bool:
    """Whether a move changes the precision: half precision on one side only."""
    return (src.rpartition("|")[2] == "fp16") != (dst.rpartition("|")[2] == "fp16")


def estimate(bases: Sequence[EvidenceBase], q: Query, prior: float, s: Settings,
             allow_direct: bool = True, other_hosts: bool = False) -> Estimate:
    """The shrunk log ratio of a move (see the module docstring). Buckets are named by the
    kind of move and the evidence strength: ``gpu:direct``, ``precision:spec`` ...
    ``other_hosts``: the evidence was all measured on other hosts than the query's run
    (:func:`from_other_hosts`), and a GPU move weighs it against the spec sheet with its
    variance times :attr:`Settings.cross_var`; the spread of the estimate is the one stated
    without it. The calibration (moves between sources) was measured on estimates weighed
    without it too: its z-quantiles are those of the unweighted estimate, wider than the
    weighted one errs on the shipped base (weak bucket MAPE 0.61 against 0.35)."""
    ev = direct(bases, q, s) if allow_direct else None
    kind = "direct"
    if ev is None:
        ev, kind = chain(bases, q, s), "chain"
    move = "precision" if is_precision_move(q.src, q.dst) else "gpu"
    prior_sd = s.prior_sd_precision if move == "precision" else s.prior_sd
    if ev is None:
        words = "spec sheet only"
        if move == "precision" and abs(prior) < 1e-9:
            # No tensor peak for the precision in the catalog (a GTX 1080 Ti under AMP): the
            # spec sheet cannot tell the two precisions apart.
            words += " (no peak for this precision in the catalog: the same time)"
        return Estimate(prior, prior_sd, f"{move}:spec", words, prior=prior)
    prior_var = prior_sd ** 2
    post_var = 1.0 / (1.0 / ev.var + 1.0 / prior_var)
    # Other hosts' evidence weighs against the spec sheet with its variance times the factor;
    # the spread (and so the interval, calibrated without the factor) stays as stated.
    ev_var = ev.var * (s.cross_var if other_hosts and move == "gpu" else 1.0)
    mean = (ev.m / ev_var + prior / prior_var) / (1.0 / ev_var + 1.0 / prior_var)
    sd = float(np.sqrt(post_var + ev.tau2))
    if kind == "chain":
        gpu = ev.via.rpartition("|")[0]
        return Estimate(float(mean), sd, f"{move}:chain",
                        f"via {gpu} ({ev.workloads} workloads on each hop)", ev.workloads,
                        other_hosts=other_hosts)
    strong = ev.strength >= s.strong
    bucket = f"{move}:" + ("direct" if strong else "weak")
    words = f"{ev.workloads} workloads measured on both" + ("" if strong else ", few alike")
    return Estimate(float(mean), sd, bucket, words, ev.workloads, other_hosts=other_hosts)


# ---------------------------------------------------------------------------- calibration
#: Moves validated per bucket at most by :func:`calibrate` (a random subset beyond).
CALIBRATION_MOVES = 800


def calibrate(base: EvidenceBase, s: Settings,
              prior: Callable[[str, str], float], seed: int = 0, spec_only: bool = False,
              chains: bool = True, moves: int = CALIBRATION_MOVES,
              cross: bool = False, balance: bool = False) -> dict[str, dict]:
    """Validated residuals per bucket on the base: each network family held out in turn.

    Every workload of the held-out family, on every pair of its devices (a random subset of
    at most :data:`CALIBRATION_MOVES`), is moved by the evidence of the other families:
    directly, through a chain (direct pairs refused), and by the spec sheet alone. The
    residuals ``log(actual/predicted)`` of each bucket give its quantiles (:data:`LEVELS`),
    MAPE and count; ``prior(src, dst)`` is the spec-sheet log ratio of two devices.
    ``spec_only``: the spec-sheet residuals alone; ``chains=False``: no chain bucket.
    ``cross``: each workload is moved by the evidence of the *other* sources only, as a user's
    run is moved by measurements of other hosts (its own source's rows share its host's
    quirks, and moves inside one source err less than moves between sources).
    ``balance``: each source weighs alike in every bucket's quantiles and MAPE, however many
    moves it holds (a user's host is one more host, not one more move of the largest set).
    """
    rng = np.random.default_rng(seed)
    pairs = _moves(base)
    source = base.frame["source"].astype(str).to_numpy()
    others = ({src: base.without(sources=(src,)) for src in np.unique(source)} if cross
              else {})
    if cross:  # the moves whose two GPUs the other sources measured (the others: spec only)
        gpus = {src: set(b.frame["gpu"].astype(str)) for src, b in others.items()}
        gpu = base.frame["gpu"].astype(str).to_numpy()
        pairs = pairs[[gpu[i] in gpus[source[i]] and gpu[j] in gpus[source[i]]
                       for i, j in pairs]] if len(pairs) else pairs
    if len(pairs) > moves:
        pairs = pairs[np.sort(rng.choice(len(pairs), moves, replace=False))]
    res: dict[str, list[float]] = {f"{m}:{b}": [] for m in ("gpu", "precision")
                                   for b in BUCKETS}
    zs: dict[str, list[float]] = {b: [] for b in res}
    of: dict[str, list[str]] = {b: [] for b in res}
    for i, j in pairs:
        actual = (base.log_t[j] - base.log_b[j]) - (base.log_t[i] - base.log_b[i])
        q = Query(base.device[i], base.device[j], float(base.log_t[i]), float(base.log_b[i]),
                  base.kind[i] if isinstance(base.kind[i], str) else None, base.family[i])
        evidence = others.get(source[i], base)
        p = prior(q.src, q.dst)
        move = "precision" if is_precision_move(q.src, q.dst) else "gpu"
        res[f"{move}:spec"].append(actual - p)
        zs[f"{move}:spec"].append((actual - p) / spec_sd(p, move, s))
        of[f"{move}:spec"].append(source[i])
        if spec_only:
            continue
        est = estimate([evidence], q, p, s)
        if not est.bucket.endswith(":spec"):
            res[est.bucket].append(actual - est.log_ratio)
            zs[est.bucket].append((actual - est.log_ratio) / est.sd)
            of[est.bucket].append(source[i])
        via = estimate([evidence], q, p, s, allow_direct=False) if chains else None
        if via is not None and via.bucket.endswith(":chain"):
            res[via.bucket].append(actual - via.log_ratio)
            zs[via.bucket].append((actual - via.log_ratio) / via.sd)
            of[via.bucket].append(source[i])
    return {b: summary(np.array(v), np.array(zs[b]),
                       _alike(np.array(of[b])) if balance else None)
            for b, v in res.items() if len(v)}


def _alike(groups: np.ndarray) -> np.ndarray:
    """Weights under which each group of ``groups`` sums to one."""
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    return 1.0 / counts[inverse]


def cross_variance(calibration: dict[str, dict], min_moves: int) -> float:
    """The factor on the variance of other hosts' evidence (:attr:`Settings.cross_var`): the
    square of the spread of the z-scores of moves between sources (their 10th-90th
    percentile range over a unit normal's), over the GPU evidence buckets of
    ``calibration`` (:func:`calibrate` with ``cross=True``) holding ``min_moves`` or more,
    weighed by their counts; at least 1, rounded (stable text)."""
    z90 = NormalDist().inv_cdf(0.9)
    lo, hi = LEVELS.index(0.1), LEVELS.index(0.9)
    parts = [(c["n"], (c["z_quantiles"][hi] - c["z_quantiles"][lo]) / (2 * z90))
             for b, c in calibration.items()
             if b.startswith("gpu:") and not b.endswith(":spec") and c["n"] >= min_moves
             and "z_quantiles" in c]
    if not parts:
        return 1.0
    k2 = sum(n * k * k for n, k in parts) / sum(n for n, _ in parts)
    return round(max(1.0, k2), 2)


def summary(res: np.ndarray, z: np.ndarray | None = None,
            weights: np.ndarray | None = None) -> dict:
    """Quantiles at :data:`LEVELS`, MAPE and count of log residuals (rounded: stable text);
    with ``z`` (the residuals over each move's own spread), their quantiles too; with
    ``weights``, each residual weighs that much in both (the count stays the moves')."""
    out = {"quantiles": [round(float(x), 4) for x in _quantiles(res, weights)],
           "mape": round(float(np.average(np.abs(np.exp(-res) - 1), weights=weights)), 4),
           "n": len(res)}
    if z is not None and len(z):
        out["z_quantiles"] = [round(float(x), 4) for x in _quantiles(z, weights)]
    return out


def _quantiles(x: np.ndarray, weights: np.ndarray | None) -> np.ndarray:
    """``x``'s quantiles at :data:`LEVELS`, weighed (the weighted empirical CDF, linearly
    interpolated between the midpoints of each value's mass; unweighted: numpy's default)."""
    if weights is None:
        return np.quantile(x, LEVELS)
    order = np.argsort(x, kind="stable")
    xs, w = x[order], weights[order] / weights.sum()
    mid = np.cumsum(w) - w / 2
    return np.interp(LEVELS, mid, xs)


def _moves(base: EvidenceBase) -> np.ndarray:
    """(row on S, row on T) of every ordered pair of devices of every workload."""
    out = []
    for _, rows in base.frame.groupby("workload", sort=True).indices.items():
        rows = np.sort(rows)
        if len(rows) < 2:
            continue
        a, b = np.meshgrid(rows, rows, indexing="ij")
        off = a != b
        out.append(np.column_stack([a[off], b[off]]))
    return np.concatenate(out) if out else np.zeros((0, 2), int)


def few_sources(coverage: float, sources: int) -> float:
    """How much wider than its calibration a move by other hosts' evidence is drawn, at
    ``coverage``, where the evidence base holds ``sources`` public sources: Student's t with
    ``sources − 1`` degrees of freedom (at least 1) over a normal's quantile.

    Such a move errs by how its source's hosts differ from the run's, and the calibration
    measured that between-source spread on moves between the base's own sources (each
    workload moved by the others', :func:`calibrate` with ``cross=True``): a spread known
    from ``sources`` sources, as :func:`~.clusters.cluster_interval` knows a GPU effect's
    from its GPUs. The shipped base's four sources widen an 80% interval 1.28×; a
    development base of two, 2.40× (gpu_scenarios' across data sets: sia2023's evidence
    buckets, moved by lambda2025 and gavel2020 alone, covered 46-67% without it).
    No source: 1."""
    if sources < 1:
        return 1.0
    return t_over_normal(max(sources - 1, 1), coverage)


def interval(calibration: dict, bucket: str, coverage: float,
             sd: float | None = None, spec_spread: float | None = None
             ) -> tuple[float, float, float]:
    """(low, high, MAPE) of a bucket's calibrated residuals at ``coverage`` (log ratios).

    With the move's own spread ``sd`` and standardised quantiles in the calibration, the
    interval is those quantiles times ``sd``: a move whose evidence disagrees gets a wider
    interval than one of the same bucket whose evidence agrees. Read from the spec-sheet
    entry (a ``spec`` move, or a bucket without an entry of its own), whose z-scores were
    measured by :func:`spec_sd`, the factor is at least ``spec_spread``, the move's own
    :func:`spec_sd`.
    """
    move = bucket.partition(":")[0]
    of_bucket = calibration.get(bucket)
    entry = of_bucket or calibration.get(f"{move}:spec")
    if not entry:
        return -0.5, 0.5, 0.4
    from_spec = of_bucket is None or bucket == f"{move}:spec"
    if from_spec and spec_spread is not None and sd is not None:
        sd = max(sd, spec_spread)
    scaled = sd is not None and "z_quantiles" in entry
    levels = entry["z_quantiles"] if scaled else entry["quantiles"]
    factor = float(sd) if scaled and sd is not None else 1.0
    lo = factor * float(np.interp((1 - coverage) / 2, LEVELS, levels))
    hi = factor * float(np.interp((1 + coverage) / 2, LEVELS, levels))
    return min(lo, 0.0), max(hi, 0.0), float(entry["mape"])
