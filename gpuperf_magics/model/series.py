"""A network's measured configurations as arrays: the series that local moves run along.

A *configuration* is one value of every feature (batch size, depth, GPU count, image size ...)
on one GPU; its time is the median per-iteration time of its runs (repeats and busy outliers
do not move a median), and its set-up time is told apart where its runs' iteration counts
differ enough (:data:`SETUP_SPREAD`). :func:`network_index` builds the :class:`SeriesIndex`
of one network's rows; :mod:`~.local` routes queries over it.
"""

from __future__ import annotations

import math
import zlib
from bisect import bisect_left
from dataclasses import dataclass, field

import numpy as np

from gpuperf_magics.model.clusters import sample_interval
from gpuperf_magics.model.inputs import HARDWARE, Prepared

#: Columns that are the batch axis (the per-device batch first). ``batch_size`` is derived
#: (per device × GPU count) where ``local_batch_size`` is present, and left out of the key then.
BATCH_AXES = ("local_batch_size", "batch_size")
#: Iteration counts of one configuration must differ by this factor to tell its set-up time
#: (counts a few percent apart, e.g. 1201 and 1221 in one public file, give a slope that is all
#: noise and a set-up time anywhere from 0 to the whole run).
SETUP_SPREAD = 1.25


@dataclass
class SeriesIndex:
    """Configurations of one network, as arrays (see :func:`build_index`)."""

    cols: list[str]  # key columns (features besides the hardware)
    batch_axis: int | None  # index in cols of the batch axis
    values: np.ndarray  # (n_configs, n_cols)
    #: (n_configs, n_hw): effective peak, bandwidth (0 columns on the CPU), then the
    #: precision's and the GPU's codes where devices are known (:func:`device_codes`).
    hw: np.ndarray
    naive_peak: np.ndarray  # (n_configs,) plain spec-sheet peak of the precision
    t: np.ndarray  # (n_configs,) median seconds per iteration
    count: np.ndarray  # runs per configuration
    spread: np.ndarray  # max / min of the runs' per-iteration times
    busy: np.ndarray  # runs flagged busy per configuration
    setup: np.ndarray  # (n_configs,) set-up seconds outside the iterations
    per_it_row: np.ndarray  # seconds per iteration of every row (set-up removed)
    config_of_row: np.ndarray  # configuration id of every row
    its: np.ndarray  # median iterations of each configuration's runs
    hw_table: np.ndarray = field(default_factory=lambda: np.zeros((1, 0)))  # distinct GPUs
    hw_id: np.ndarray = field(default_factory=lambda: np.zeros(0, int))  # GPU of each config
    #: Key columns that follow from the others over every configuration (a network's
    #: parameters and FLOPs from its depth and image size): they move along with the axis that
    #: moves them. ``axes``: the other columns, the ones a move goes along.
    derived: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    axes: list[int] = field(default_factory=list)
    #: Device key of each configuration (:func:`~.evidence.device_key`; None: not a catalog
    #: GPU): what the evidence of GPU moves is looked up by.
    device: np.ndarray = field(default_factory=lambda: np.zeros(0, object))
    #: Whether each configuration's own runs told its set-up time (iteration counts at least
    #: :data:`SETUP_SPREAD` apart); the others took the median of those that did.
    setup_told: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))

    def __post_init__(self) -> None:
        self.derived = _derived(self.values, self.cols, self.batch_axis)
        self.axes = [int(j) for j in np.flatnonzero(~self.derived)]
        if self.hw.shape[1] == 0:
            self.hw_table = np.zeros((1, 0))
            self.hw_id = np.zeros(len(self.t), dtype=int)
            return
        table, ids = np.unique(np.round(self.hw, 6), axis=0, return_inverse=True)
        self.hw_table, self.hw_id = table, ids.reshape(-1)

    def per_job(self, members: np.ndarray, its: float) -> np.ndarray:
        """Seconds per iteration of ``members`` in a job of ``its`` iterations (set-up spread)."""
        return self.t[members] + self.setup[members] / its

    def gpu_of(self, h: np.ndarray) -> int:
        """The id of GPU figures ``h`` among the measured ones, or -1."""
        if self.hw.shape[1] == 0:
            return 0
        same = (np.abs(self.hw_table - h[None, :]) <= 1e-6 * np.abs(h[None, :])).all(axis=1)
        hit = np.flatnonzero(same)
        return int(hit[0]) if len(hit) else -1

    @property
    def n(self) -> int:
        return len(self.t)


def _derived(values: np.ndarray, cols: list[str], batch_axis: int | None) -> np.ndarray:
    """Which key columns follow from the other key columns over every configuration.

    A deeper network differs from every measured one in its depth, its parameters and its
    FLOPs; routed on all three it would share no series. The architecture's figures are tried
    first (they follow from depth and image size, not the other way), each column only against
    the columns still kept; the batch axis and columns with one value are always kept.
    """
    n_cols = values.shape[1]
    derived = np.zeros(n_cols, dtype=bool)
    if len(values) < 3:
        return derived
    codes = np.column_stack([np.unique(np.round(values[:, j], 9), return_inverse=True)[1]
                             .reshape(-1) for j in range(n_cols)]) if n_cols else values

    def distinct(columns: np.ndarray) -> int:
        return len(np.unique(codes[:, columns], axis=0)) if len(columns) else 1

    order = sorted(range(n_cols), key=lambda j: (not cols[j].startswith("arch_"), -j))
    for k in order:
        if k == batch_axis or len(np.unique(codes[:, k])) < 2:
            continue
        rest = np.flatnonzero(~derived & (np.arange(n_cols) != k))
        if len(rest) and distinct(rest) == distinct(np.append(rest, k)):
            derived[k] = True
    return derived


def build_index(values: np.ndarray, cols: list[str], hw: np.ndarray, naive_peak: np.ndarray,
                iterations: np.ndarray, seconds: np.ndarray,
                busy: np.ndarray | None = None,
                device: np.ndarray | None = None) -> SeriesIndex:
    """Group rows into configurations: per-iteration time and set-up time of each.

    A configuration run for iteration counts at least :data:`SETUP_SPREAD` apart tells its
    set-up time (the intercept of seconds over iterations, never negative) from its time per
    iteration (the slope).
    Configurations run for one count take the median set-up time of those that tell it (0
    when none does: every run is then taken as iterations only, e.g. per-step timings).
    """
    key = np.column_stack([values, hw]) if hw.shape[1] else values
    if key.shape[1] == 0:
        ids = np.zeros(len(seconds), dtype=int)
    else:
        _, ids = np.unique(np.round(key, 9), axis=0, return_inverse=True)
        ids = ids.reshape(-1)
    n = int(ids.max()) + 1 if len(ids) else 0
    order = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[order], np.arange(n + 1))
    first = order[bounds[:-1]]
    setup = np.full(n, np.nan)
    for c in range(n):
        rows = order[bounds[c]:bounds[c + 1]]
        its = iterations[rows]
        if its.max() >= SETUP_SPREAD * its.min():
            b, a = np.polyfit(its, seconds[rows], 1)
            setup[c] = a if a > 0 and b > 0 else 0.0
    told = np.isfinite(setup)
    known = setup[told]
    setup = np.where(told, setup, float(np.median(known)) if len(known) else 0.0)
    per_it = np.maximum(seconds - setup[ids], 1e-3 * seconds) / iterations
    t = np.empty(n)
    spread = np.empty(n)
    for c in range(n):
        times = per_it[order[bounds[c]:bounds[c + 1]]]
        t[c] = float(np.median(times))
        spread[c] = float(times.max() / times.min())
    count = np.diff(bounds)
    flagged = np.zeros(n) if busy is None else np.bincount(ids, weights=busy, minlength=n)
    batch_axis = next((cols.index(c) for c in BATCH_AXES if c in cols), None)
    its_median = np.array([float(np.median(iterations[order[bounds[c]:bounds[c + 1]]]))
                           for c in range(n)])
    devices = (np.full(n, None, dtype=object) if device is None
               else np.asarray(device, dtype=object)[first])
    return SeriesIndex(cols, batch_axis, values[first], hw[first], naive_peak[first], t, count,
                       spread, flagged, setup, per_it, ids, its_median, device=devices,
                       setup_told=told)


def network_index(prep: Prepared, rows: np.ndarray, seconds: np.ndarray,
                  busy: np.ndarray | None = None) -> tuple[SeriesIndex, list[str]]:
    """The configurations of one network's ``rows`` and its hardware columns."""
    feats = prep.features.iloc[rows].reset_index(drop=True)
    feats = feats.loc[:, feats.notna().all()]
    hw_cols = [c for c in HARDWARE if c in feats.columns]
    cols = [c for c in feats.columns if c not in HARDWARE]
    if "local_batch_size" in cols:  # batch_size = local × GPU count: derived, not a key
        cols = [c for c in cols if c not in ("batch_size", "global_batch_size")]
    naive = (prep.naive_peak[rows] if prep.naive_peak is not None
             else np.full(len(rows), np.nan))
    if hw_cols:
        naive = np.where(np.isfinite(naive), naive, feats[hw_cols[0]].to_numpy())
    device = None if prep.device is None else prep.device[rows]
    index = build_index(feats[cols].to_numpy(float), cols,
                        _with_precision(feats[hw_cols].to_numpy(float), hw_cols, device),
                        naive, prep.iterations[rows], seconds, busy, device)
    return index, hw_cols


#: Code of each precision class of :func:`~.evidence.device_key` in the hardware of a
#: series (any other device, or none: 0, as FP32).
PRECISION_CODES = {"fp32": 0.0, "tf32": 1.0, "fp16": 2.0, "unk": 3.0}


def precision_codes(device: np.ndarray) -> np.ndarray:
    """The precision class of each device key as a number (:data:`PRECISION_CODES`)."""
    return np.array([PRECISION_CODES.get(d.rpartition("|")[2], 0.0) if isinstance(d, str)
                     else 0.0 for d in device], dtype=float)


def gpu_codes(device: np.ndarray) -> np.ndarray:
    """The catalog GPU of each device key as a number (its name's CRC-32; 0 for none)."""
    return np.array([float(zlib.crc32(d.rpartition("|")[0].encode())) if isinstance(d, str)
                     else 0.0 for d in device], dtype=float)


def device_codes(device: np.ndarray) -> np.ndarray:
    """(n, 2): the precision's and the GPU's codes of each device key."""
    return np.column_stack([precision_codes(device), gpu_codes(device)])


def _with_precision(hw: np.ndarray, hw_cols: list[str], device: np.ndarray | None
                    ) -> np.ndarray:
    """The hardware columns and, where devices are known, the precision's and the GPU's
    codes after them (:func:`device_codes`).

    A precision is part of the device whether or not the catalog has its peak: the GTX
    1080 Ti has no FP16 tensor peak, so its FP32 and AMP runs have the same peak and
    bandwidth, and without the code they were one GPU (an AMP run of a network a repeat of,
    or a batch move from, its FP32 run). With it, FP32 → AMP is a move between devices,
    answered by the evidence of workloads measured both ways (:mod:`~.evidence_move`), and
    without evidence by the spec sheet (equal peaks: the same time). So is the GPU: the
    Quadro RTX 6000, the Quadro RTX 8000 and the TITAN RTX have one peak and one bandwidth,
    as have the A100 40 GB in PCIe and SXM4 and the V100 SXM2 in 16 and 32 GB; without its
    code a run on one was a measured configuration of the other (until 2026-12-05: lambda2025
    held out one of them and answered it as a repeat, 58% of those rows inside an interval of
    the repeat noise), where a 250 W PCIe card and a 400 W SXM4 module run apart. Only beside
    both hardware columns: the moves read the bandwidth as the second.
    """
    if device is None or list(hw_cols) != list(HARDWARE):
        return hw
    return np.column_stack([hw, device_codes(device)])


def query_arrays(index: SeriesIndex, hw_cols: list[str], prep: Prepared, rows: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Key values, hardware and plain peaks of query ``rows`` (None: a column is missing)."""
    feats = prep.features.iloc[rows].reset_index(drop=True)
    if any(c not in feats.columns for c in index.cols + hw_cols):
        return None
    values = feats[index.cols].to_numpy(float)
    hw = feats[hw_cols].to_numpy(float) if hw_cols else np.zeros((len(rows), 0))
    if hw.size and np.isnan(hw).any():
        return None
    if index.hw.shape[1] > hw.shape[1]:  # the device's codes (see _with_precision)
        device = (prep.device[rows] if prep.device is not None
                  else np.full(len(rows), None, dtype=object))
        hw = np.column_stack([hw, device_codes(device)])
    naive = prep.naive_peak[rows] if prep.naive_peak is not None else np.full(len(rows), np.nan)
    if hw.size:
        naive = np.where(np.isfinite(naive), naive, hw[:, 0])
    return values, hw, naive


#: Code of a query value no configuration has, and of one that equals every value (NaN: a
#: derived column of a chain's point, never compared).
_UNSEEN, _ANY = -1, -2


@dataclass
class Lookup:
    """The configurations of an index grouped by their values, so that a route is found from
    the few that share the query's values (a dictionary look-up per axis) instead of a pass
    over all of them per query: validation routes thousands of queries per network.

    Values are compared as :func:`~.local._differences` does (equal within ``1e-9·|v| + 1e-12``);
    :func:`lookup` only builds one where each column's distinct values lie further apart
    than that, so that a query value equals at most one of them and a code per value says
    exactly what the comparison says.
    """

    index: SeriesIndex
    distinct: list[list[float]]  # each column's sorted distinct values
    codes: np.ndarray  # (n_configs, n_cols) position of each value in ``distinct``
    by_axes: dict[tuple[int, ...], np.ndarray]  # codes on every axis → configurations
    by_others: dict[int, dict[tuple[int, ...], np.ndarray]]  # axis → codes of the others
    memo: dict[bytes, list[int] | None] = field(default_factory=dict)

    def query(self, v: np.ndarray) -> list[int] | None:
        """The query's code per column (None: a NaN on an axis, which equals every value:
        left to the comparison). Validation asks the same query many times: remembered."""
        key = v.tobytes()
        if key in self.memo:
            return self.memo[key]
        q = []
        for x, values in zip(v.tolist(), self.distinct, strict=True):
            if x != x:
                q.append(_ANY)
                continue
            tol = 1e-9 * abs(x) + 1e-12
            k = bisect_left(values, x)
            code = _UNSEEN
            if k < len(values) and not abs(values[k] - x) > tol:
                code = k
            elif k > 0 and not abs(values[k - 1] - x) > tol:
                code = k - 1
            q.append(code)
        out = None if any(q[a] == _ANY for a in self.index.axes) else q
        if len(self.memo) < MEMO:
            self.memo[key] = out
        return out

    def same(self, q: list[int], mask: np.ndarray) -> np.ndarray:
        """Allowed configurations equal to the query on every axis."""
        hit = self.by_axes.get(tuple(q[a] for a in self.index.axes))
        return _EMPTY if hit is None else hit[mask[hit]]

    def along(self, q: list[int], j: int, mask: np.ndarray) -> np.ndarray:
        """Allowed configurations that differ from the query on axis ``j`` only."""
        hit = self.by_others[j].get(tuple(q[a] for a in self.index.axes if a != j))
        if hit is None:
            return _EMPTY
        hit = hit[mask[hit]]
        return hit[self.codes[hit, j] != q[j]]

    def derived_differ(self, q: list[int], ids: np.ndarray) -> bool:
        """Whether one of ``ids`` (equal to the query on every axis) differs from it on a
        derived column (see :func:`~.local._differences`)."""
        derived = np.flatnonzero(self.index.derived)
        if not len(derived):
            return False
        dq = np.array([q[d] for d in derived])
        return bool(((self.codes[np.ix_(ids, derived)] != dq) & (dq != _ANY)).any())


#: Queries a :class:`Lookup` remembers the codes of, at most.
MEMO = 100_000
_EMPTY = np.zeros(0, dtype=np.intp)


def lookup(index: SeriesIndex) -> Lookup | None:
    """The index's :class:`Lookup`, built once (None: some column's distinct values lie too
    close together for codes to say what the comparison says; routes then compare)."""
    cache = index.__dict__
    if "_lookup" in cache:
        return cache["_lookup"]
    found: Lookup | None = None
    values = index.values
    distinct = [np.unique(values[:, j]) for j in range(values.shape[1])]
    # Further apart than twice the comparison's tolerance (with margin), and finite.
    apart = all(np.isfinite(u).all() and (
        len(u) < 2 or bool(np.all(np.diff(u) > 4e-9 * np.maximum(np.abs(u[1:]), np.abs(u[:-1]))
                                  + 4e-12))) for u in distinct)
    if apart and len(index.cols):
        codes = np.column_stack([np.searchsorted(u, values[:, j])
                                 for j, u in enumerate(distinct)])
        axes = index.axes
        by_axes = _groups(codes[:, axes])
        by_others = {j: _groups(codes[:, [a for a in axes if a != j]]) for j in axes}
        found = Lookup(index, [u.tolist() for u in distinct], codes, by_axes, by_others)
    cache["_lookup"] = found
    return found


def _groups(keys: np.ndarray) -> dict[tuple[int, ...], np.ndarray]:
    """Rows (ascending) per distinct row of ``keys``."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, row in enumerate(keys.tolist()):
        groups.setdefault(tuple(row), []).append(i)
    return {k: np.array(v, dtype=np.intp) for k, v in groups.items()}


def setup_interval(index: SeriesIndex, c: int, its: float,
                   coverage: float) -> tuple[float, float, float]:
    """(low, high, MAPE) in log time of a job of ``its`` iterations of configuration ``c``
    that comes from its set-up time: (0, 0, 0) where its runs told it.

    A configuration run for one iteration count takes the median set-up time of those that
    told theirs (:func:`build_index`), and its time per iteration is what is left of its runs'
    seconds. Asked for another count, the answer then errs by its own set-up's difference
    ``Δ`` from that median times ``1 − its / its_measured`` (the set-up counted once in the
    answer and spread over the measured iterations in its time per iteration): the interval
    of one more configuration's difference (:func:`~.clusters.sample_interval` of those that
    told theirs) carried to the asked length. lattuada2022's runs come at two lengths
    (16,156 and 48,505 iterations); with one of them held out, a run of the other was answered
    from the median set-up and 50% of them fell inside the repeat noise's 80% interval, 81%
    with this term.
    """
    told = getattr(index, "setup_told", None)  # None: a fit pickled before it was kept
    if told is None or len(told) <= c or told[c]:
        return 0.0, 0.0, 0.0
    known = index.setup[told]
    if len(known) < 2:
        return 0.0, 0.0, 0.0
    deviation = known - float(np.median(known))
    lo, hi = sample_interval(deviation, coverage)
    lever = 1.0 - its / max(float(index.its[c]), 1e-12)
    total = max(float(index.setup[c] + index.t[c] * its), 1e-12)
    a, b = sorted((lo * lever / total, hi * lever / total))
    mape = float(np.mean(np.abs(deviation))) * abs(lever) / total
    return math.log1p(max(min(a, 0.0), -0.99)), math.log1p(max(b, 0.0)), mape


def run_residuals(index: SeriesIndex) -> dict[int, np.ndarray]:
    """Per configuration of two runs or more, each run's log time per iteration against the
    median of its configuration's other runs (in the rows' order): the noise its runs show.
    One pass over the rows."""
    order = np.argsort(index.config_of_row, kind="stable")
    ids = index.config_of_row[order]
    out: dict[int, np.ndarray] = {}
    for rows in np.split(order, np.flatnonzero(np.diff(ids)) + 1):
        if len(rows) < 2:
            continue
        times = index.per_it_row[rows]
        out[int(index.config_of_row[rows[0]])] = np.array(
            [float(np.log(times[i] / np.median(np.delete(times, i))))
             for i in range(len(times))])
    return out

