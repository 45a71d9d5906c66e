"""Local-first prediction: a query that lies on a measured series is predicted from that series.

A *configuration* is one value of every feature (batch size, depth, GPU count, image size ...)
on one GPU; its time is the median per-iteration time of its runs (repeats and busy outliers
do not move a median). A query is *routed*:

- ``repeat``: the configuration was measured: its median.
- an *axis* move: the configurations that share every feature with the query but one (the
  axis: the batch size, the depth, the GPU count ...) on the same GPU form a series; the query is
  predicted from it: between the neighbouring measured points (``inside``), or beyond the
  measured range (``beyond``) from the nearest points, bounded by what a batch can do (per
  iteration never faster than at a smaller batch, per sample never slower: ``max(floor, a +
  b·batch)`` in effect).
- ``gpu``: the query's configuration was measured on other GPUs only (or its GPU never): each
  of those GPUs' estimate (its repeat, or its own axis move) is carried to the query's GPU by
  a GPU move (:mod:`~.gpu_move`), and the median over the source GPUs is taken.
- ``chain``: no series reaches the query, but one does after a first move: the query differs
  from every measured configuration in two features or more (a deeper network with other loader
  threads; a batch size never run at this depth). Each measured value ``b`` of one axis gives
  an estimated point (the query with that axis at ``b``, reached by a move along another
  axis); the query is then a move along the axis through those points. With one point only,
  a feature no series varies is carried over unchanged (the batch size on a GPU grows as the
  public series' elasticity, :mod:`~.batch_single`; on the CPU it keeps its time per sample):
  the data cannot tell its effect, and a regression extrapolating it is worse.
- ``none``: nothing local covers the query; the cross-series model answers.

Every candidate method of a route (local piecewise in linear or log-log space, the naive line
through all points of the series, the learnt or the plain GPU move) is computed by
:func:`candidates`; the estimator validates them against each other on the user's own data.
Cost: a query is one pass over the configurations (no pairwise matrices), so fitting and
validation grow linearly in the configurations per query.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from gpuperf_magics.model import batch_single
from gpuperf_magics.model.gpu_move import GpuMove, peak_ratio
from gpuperf_magics.model.series import Lookup, SeriesIndex, lookup

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.model.evidence_query import EvidenceMove

#: Points of the series a move beyond the measured range is drawn through.
NEAREST = 2
#: Above the largest batch measured on a GPU, the line through the nearest points is trusted
#: for this many of their spacings (log scale, as :func:`reach` counts them); further out the
#: time grows from there as a power of the batch (:func:`_far_slope`). A line's own
#: elasticity tends to 1 far out, so two points a little apart on a flat (host-bound) series
#: answered a batch 700x beyond them 290x too slow. Chosen on sia2023 and gavel2020
#: (``benchmarks/batch_reach.py``): 3 and 4 spacings made lattuada2022's moves 3-6 spacings out
#: worse, 6 changes none of them.
LINE_SPACINGS = 6.0
#: The run noise (log) assumed of a measured point where the slope of the nearest points is
#: weighed against the public elasticity (:func:`_far_slope`): the public tables' default.
POINT_NOISE = 0.05
#: A batch series on a GPU whose time per iteration grows by less than this elasticity from
#: its smallest to its largest batch, at least :data:`HOST_SPAN` apart, waited for its host
#: (:func:`host_share`): a GPU move scales only the share that grows with the batch.
HOST_ELASTICITY = 0.2
HOST_SPAN = 8.0
#: The evidence bucket of a move from a host-bound series: its residuals are validated and
#: its interval calibrated apart from the GPU-bound moves' (a slow host errs its own way).
HOST_BUCKET = "host"
#: No configuration (a route's members by default; shared, never written).
_NO_IDS = np.zeros(0, dtype=int)
_NO_IDS.flags.writeable = False


@dataclass
class Route:
    """How a query is reached from the measured configurations."""

    kind: str  # "repeat", "axis", "gpu", "chain" or "none"
    members: np.ndarray = field(default_factory=lambda: _NO_IDS)  # configuration ids
    axis: int = -1
    position: str = ""  # "inside", "beyond" or "single" (one other point: single_value)
    sources: list[tuple[int, Route]] = field(default_factory=list)  # gpu: (a config id, route)
    new_gpu: bool = False  # gpu: the query's GPU was never measured

    @property
    def key(self) -> str:
        """The validation key: which kind of move this is (a feature move names its axis:
        moving the depth and moving the loader threads are validated apart)."""
        if self.kind == "axis":
            if self.axis == self.batch_axis:
                return f"batch:{self.position}"
            return f"feature:{self.name}:{self.position}"
        if self.kind == "gpu":
            return "transfer" if self.new_gpu else "gpu"
        if self.kind == "chain":
            along = "batch" if self.axis == self.batch_axis else "feature"
            return f"chain:{along}:{self.position}"
        return self.kind

    batch_axis: int | None = None  # the index's batch axis (a batch move or another)
    name: str = ""  # the axis' column
    #: chain: the estimated points along ``axis``: (value, the query at that value, its route)
    steps: list[tuple[float, np.ndarray, Route]] = field(default_factory=list)


def route(index: SeriesIndex, v: np.ndarray, h: np.ndarray, allowed: np.ndarray) -> Route:
    """The route of one query (features ``v``, hardware ``h``) over ``allowed`` configurations."""
    gid = index.gpu_of(h)
    on_hw = allowed & (index.hw_id == gid)
    own = _route_on(index, v, on_hw)
    if own.kind != "none":
        return own
    if index.hw.shape[1] == 0:
        return _chain(index, v, on_hw)
    others = allowed & ~on_hw
    if not others.any():
        return _chain(index, v, on_hw)
    sources = _twins(index, h, _sources(index, v, others))
    if not sources:
        return _chain(index, v, on_hw)
    return Route("gpu", sources=sources, new_gpu=not on_hw.any(), batch_axis=index.batch_axis)


def _twins(index: SeriesIndex, h: np.ndarray, sources: list[tuple[int, Route]]
           ) -> list[tuple[int, Route]]:
    """The sources on a twin of the query's GPU, where there are any: another GPU with its
    spec sheet (peak, bandwidth and precision; the Quadro RTX 6000 and 8000, the A100 40 GB in
    PCIe and SXM4) is the nearest evidence there is, and the others' moves, each off by its
    own architecture, would only blur it. Else every source. Without the device codes
    (:func:`~.series.device_codes`) GPUs of one spec sheet are one GPU, and there are none."""
    spec = 3  # peak, bandwidth, precision's code; the GPU's code follows
    if index.hw.shape[1] <= spec or len(sources) < 2:
        return sources
    twins = [(rep, sub) for rep, sub in sources
             if np.array_equal(index.hw[rep, :spec], h[:spec])]
    return twins or sources


def _sources(index: SeriesIndex, v: np.ndarray, others: np.ndarray) -> list[tuple[int, Route]]:
    """Each other GPU's route to the query, with the GPU's first configuration: the
    :func:`_route_on` of each GPU's configurations among ``others``, found through one
    look-up per axis for all GPUs (each GPU's share of it is what a look-up of its own
    configurations returns, in the same order) rather than one per GPU and axis."""
    hw = index.hw_id
    gpus = np.unique(hw[others])
    look = lookup(index) if len(index.cols) else None
    q = look.query(v) if look is not None else None
    out: list[tuple[int, Route]] = []
    if look is None or q is None:
        for g in gpus:
            mine = others & (hw == g)
            sub = _route_on(index, v, mine)
            if sub.kind != "none":
                out.append((int(np.flatnonzero(mine)[0]), sub))
        return out
    exact = look.same(q, others)
    along: dict[int, np.ndarray] = {}

    def members_of(j: int, g: int) -> np.ndarray:
        if j not in along:
            along[j] = look.along(q, j, others)
        return along[j][hw[along[j]] == g]

    for g in gpus:
        mine_exact = exact[hw[exact] == g]
        if len(mine_exact) and look.derived_differ(q, mine_exact):
            continue
        sub = (Route("repeat", members=mine_exact[:1]) if len(mine_exact)
               else _best_axis(index, v, None, functools.partial(members_of, g=int(g))))
        if sub.kind != "none":
            out.append((int(np.flatnonzero(others & (hw == g))[0]), sub))
    return out


def axis_routes(index: SeriesIndex, v: np.ndarray, h: np.ndarray,
                allowed: np.ndarray) -> list[Route]:
    """Every axis move that reaches the query on its own GPU (validation tries each axis)."""
    mask = allowed & (index.hw_id == index.gpu_of(h))
    out = []
    for j in index.axes:
        r = _route_on(index, v, mask, only=j)
        if r.kind == "axis":
            out.append(r)
    return out


def _beyond_points(index: SeriesIndex, r: Route, v: np.ndarray
                   ) -> tuple[float, float, float] | None:
    """For a move beyond its series: the asked value, the series' end and the point before
    the end (None for another move)."""
    if r.position != "beyond":
        return None
    if r.kind == "chain" and len(r.steps) >= 2:
        x = np.sort([b for b, _, _ in r.steps])
    elif r.kind == "axis" and len(r.members) >= 2:
        x = np.sort(index.values[r.members, r.axis])
    else:
        return None
    q = float(v[r.axis])
    end, nxt = (x[-1], x[-2]) if q > x[-1] else (x[0], x[1])
    return q, float(end), float(nxt)


def reach(index: SeriesIndex, r: Route, v: np.ndarray) -> float:
    """How far beyond its series a move goes, in steps of the series' last spacing (log
    scale where positive): 0 inside the range. Errors grow with it, so an interval validated
    on one-step moves is widened for a longer one."""
    points = _beyond_points(index, r, v)
    if points is None:
        return 0.0
    q, end, nxt = points
    if min(q, end, nxt) > 0:
        return float(abs(np.log(q / end)) / max(abs(np.log(end / nxt)), 1e-9))
    return float(abs(q - end) / max(abs(end - nxt), 1e-12))


def beyond_distance(index: SeriesIndex, r: Route, v: np.ndarray) -> float:
    """``|log(asked / end)|`` of a move beyond its series (NaN for another move, or values
    that are not positive)."""
    points = _beyond_points(index, r, v)
    if points is None or min(points) <= 0:
        return float("nan")
    return float(abs(math.log(points[0] / points[1])))


def family(key: str) -> str:
    """The kind of a validation key without the axis name ("feature:depth:beyond" →
    "feature:beyond")."""
    parts = key.split(":")
    return f"{parts[0]}:{parts[-1]}" if parts[0] == "feature" and len(parts) == 3 else key


def _differences(index: SeriesIndex, ids: np.ndarray, v: np.ndarray) -> np.ndarray | None:
    """Which axes (:attr:`SeriesIndex.axes`) of configurations ``ids`` differ from ``v``; None
    when a configuration equals ``v`` on every axis but not on a derived column: the query
    changes what the axes do not tell (another width at a measured depth), so no series of
    these configurations describes it."""
    diff = np.abs(index.values[ids] - v[None, :]) > 1e-9 * np.abs(v[None, :]) + 1e-12
    if not index.derived.any():
        return diff
    by_axis = diff[:, index.axes]
    if (~by_axis.any(axis=1) & diff[:, index.derived].any(axis=1)).any():
        return None
    return by_axis


def _route_on(index: SeriesIndex, v: np.ndarray, mask: np.ndarray,
              only: int | None = None) -> Route:
    if len(index.cols) == 0:
        ids = np.flatnonzero(mask)
        return Route("repeat", members=ids[:1]) if len(ids) else Route("none")
    look = lookup(index)
    q = look.query(v) if look is not None else None
    if look is not None and q is not None:
        return _route_looked_up(index, look, q, v, mask, only)
    ids = np.flatnonzero(mask)
    if len(ids) == 0:
        return Route("none")
    by_axis = _differences(index, ids, v)
    if by_axis is None:
        return Route("none")
    ndiff = by_axis.sum(axis=1)
    exact = ids[ndiff == 0]
    if len(exact) and only is None:
        return Route("repeat", members=exact[:1])
    return _best_axis(index, v, only, lambda j: ids[
        (ndiff == 1) & by_axis[:, index.axes.index(j)]])


def _route_looked_up(index: SeriesIndex, look: Lookup, q: list[int], v: np.ndarray,
                     mask: np.ndarray, only: int | None) -> Route:
    """:func:`_route_on` through the index's :class:`Lookup`: the same route, found from the
    configurations that share the query's values rather than by comparing all of them."""
    exact = look.same(q, mask)
    if len(exact) and look.derived_differ(q, exact):
        return Route("none")
    if not mask.any():
        return Route("none")
    if len(exact) and only is None:
        return Route("repeat", members=exact[:1])
    return _best_axis(index, v, only, lambda j: look.along(q, j, mask))


def _best_axis(index: SeriesIndex, v: np.ndarray, only: int | None,
               members_of: Callable[[int], np.ndarray]) -> Route:
    """The axis move with the most members (the batch axis first and final where it has
    two), else a single other batch size, else ``none``; ``members_of(j)``: the allowed
    configurations that differ from the query on axis ``j`` only."""
    best: Route | None = None
    order = _axis_order(index) if only is None else [only]
    single: Route | None = None
    for j in order:
        members = members_of(j)
        if len(members) == 1 and j == index.batch_axis and v[j] > 0:
            # One other batch size measured: time per sample carries over (proportional).
            single = Route("axis", members=members, axis=j, position="single",
                           batch_axis=index.batch_axis)
        if len(members) < 2:
            continue
        # A few values: Python's min and max are faster than numpy's (a NaN: numpy's answer).
        x = index.values[members, j].tolist()
        inside = min(x) < v[j] < max(x) if all(e == e for e in x) else False
        position = "inside" if inside else "beyond"
        candidate = Route("axis", members=members, axis=j, position=position,
                          batch_axis=index.batch_axis, name=index.cols[j])
        if best is None or len(members) > len(best.members):
            best = candidate
        if j == index.batch_axis:
            break
    return best or single or Route("none")


def _axis_order(index: SeriesIndex) -> list[int]:
    """The index's axes, the batch axis first (it is what users move most); built once."""
    cache = index.__dict__
    if "_axis_order" not in cache:
        order = list(index.axes)
        if index.batch_axis is not None:
            order.remove(index.batch_axis)
            order.insert(0, index.batch_axis)
        cache["_axis_order"] = order
    return cache["_axis_order"]


#: Measured values of an axis a chain estimates points at, at most (the nearest to the query).
CHAIN_POINTS = 8


def _chain(index: SeriesIndex, v: np.ndarray, mask: np.ndarray) -> Route:
    """A move along one axis through points that are themselves moves along another (see the
    module docstring), or ``none``. The axis giving the most points wins (then the batch axis:
    its law is the best known)."""
    ids = np.flatnonzero(mask)
    if len(ids) == 0 or len(index.axes) < 2:
        return Route("none")
    by_axis = _differences(index, ids, v)
    if by_axis is None:
        return Route("none")
    best: Route | None = None
    for a in np.flatnonzero(by_axis.any(axis=0)):
        j = index.axes[a]
        differing = ids[by_axis[:, a]]
        values = np.unique(index.values[differing, j])
        if len(values) > CHAIN_POINTS:
            distance = np.abs(np.log(np.maximum(values, 1e-12) / max(v[j], 1e-12))) \
                if values.min() > 0 and v[j] > 0 else np.abs(values - v[j])
            values = values[np.sort(np.argsort(distance, kind="stable")[:CHAIN_POINTS])]
        steps = []
        for b in values:
            vb = v.copy()
            vb[j] = b
            vb[index.derived] = np.nan  # follows from the axes: unknown here, never compared
            sub = _route_on(index, vb, mask)
            if sub.kind in ("repeat", "axis"):
                steps.append((float(b), vb, sub))
        if not steps:
            continue
        if len(steps) == 1 and j != index.batch_axis and len(np.unique(index.values[ids, j])) > 1:
            # One point along a feature the data do vary: its effect is learnt across series
            # (the cross-series model), not assumed away.
            continue
        x = np.array([b for b, _, _ in steps])
        position = ("single" if len(steps) == 1
                    else "inside" if x.min() < v[j] < x.max() else "beyond")
        candidate = Route("chain", axis=int(j), position=position, batch_axis=index.batch_axis,
                          name=index.cols[j], steps=steps)
        if best is None or (len(steps), j == index.batch_axis) > (
                len(best.steps), best.axis == index.batch_axis):
            best = candidate
    return best or Route("none")


# ---------------------------------------------------------------------------- candidates
def _series(index: SeriesIndex, r: Route, its: float) -> tuple[np.ndarray, np.ndarray]:
    """The series' axis values and seconds per iteration of a job of ``its`` iterations."""
    x = index.values[r.members, r.axis]
    order = np.argsort(x)
    return x[order], index.per_job(r.members, its)[order]


def _inside(x: np.ndarray, t: np.ndarray, q: float, space: str) -> float:
    k = int(np.searchsorted(x, q))
    x0, x1, t0, t1 = x[k - 1], x[k], t[k - 1], t[k]
    if space == "log" and x0 > 0:
        w = (np.log(q) - np.log(x0)) / (np.log(x1) - np.log(x0))
        return float(np.exp((1 - w) * np.log(t0) + w * np.log(t1)))
    w = (q - x0) / (x1 - x0)
    return float((1 - w) * t0 + w * t1)


def _beyond(x: np.ndarray, t: np.ndarray, q: float, space: str, batch: bool,
            gpu: bool = False) -> float:
    """Through the nearest points, bounded on the batch axis by what a batch can do. ``gpu``:
    a batch series on a GPU, which the line carries :data:`LINE_SPACINGS` of its last spacings
    above its largest batch, and a power of the batch from there (:func:`_far_slope`)."""
    above = q > x[-1]
    far = _far_start(x, q) if gpu and batch and t[-1] > 0 else None
    if far is not None:
        at_far = _beyond(x, t, far, space, batch)
        pred = at_far * (q / far) ** _far_slope(x[-NEAREST:], t[-NEAREST:], at_far)
        return float(np.clip(pred, t[-1], t[-1] * q / x[-1]))
    xs, ts = (x[-NEAREST:], t[-NEAREST:]) if above else (x[:NEAREST], t[:NEAREST])
    if space == "log" and xs.min() > 0 and q > 0:
        slope = _polyfit1(np.log(xs), np.log(ts))[0] if np.ptp(xs) else 0.0
        if batch:
            slope = min(max(slope, 0.0), 1.0)
        end = (xs[-1], ts[-1]) if above else (xs[0], ts[0])
        pred = float(end[1] * (q / end[0]) ** slope)
    else:
        b, a = _polyfit1(xs, ts) if np.ptp(xs) else (0.0, float(ts.mean()))
        if batch:
            b = max(b, 0.0)
        pred = float(a + b * q)
    if not batch:
        # Another feature (depth, image size, GPU count): no monotone law, but no move beyond
        # the range should more than halve the nearest time or outgrow proportion to the axis.
        end_x, end_t = (x[-1], t[-1]) if above else (x[0], t[0])
        ratio = q / end_x if q > 0 and end_x > 0 else 1.0
        return float(np.clip(pred, 0.5 * end_t * min(1.0, ratio), end_t * max(1.0, ratio)))
    if above:  # never faster per iteration than the largest batch, never slower per sample
        return float(np.clip(pred, t[-1], t[-1] * q / x[-1]))
    return float(np.clip(pred, t[0] * q / x[0], t[0]))  # the floor: never above the smallest


def _far_start(x: np.ndarray, q: float) -> float | None:
    """The batch where an answer at ``q`` above a GPU batch series (sorted batches ``x``)
    leaves the line through its nearest points, :data:`LINE_SPACINGS` of their last spacing
    above the largest; None where ``q`` is not beyond it (or the points tell no spacing)."""
    if len(x) < 2 or x[-2] <= 0:
        return None
    far = float(x[-1] * (x[-1] / x[-2]) ** LINE_SPACINGS)
    return far if q > far else None


def power_from(index: SeriesIndex, r: Route, v: np.ndarray) -> float | None:
    """Where an axis move above a GPU batch series stops following the line and grows as a
    power of the batch (:func:`_beyond`); None where it does not."""
    if (r.kind != "axis" or r.position != "beyond" or r.axis != index.batch_axis
            or not _on_gpu(index, r.members)):
        return None
    return _far_start(np.sort(index.values[r.members, r.axis].astype(float)), float(v[r.axis]))


def _far_slope(x: np.ndarray, t: np.ndarray, t_far: float) -> float:
    """The elasticity of the time per iteration far above a GPU's batch series: the log-log
    slope of its nearest points ``(x, t)``, its variance that of :data:`POINT_NOISE` on each
    point, weighed against the public series' elasticity at ``t_far`` (the time where the
    line stopped, :func:`~.batch_single.elasticity`) and its spread (the shipped deviations'
    16th-84th percentile half-range); in [0, 1]."""
    lx, lt = np.log(x), np.log(t)
    spread = float(np.sum((lx - lx.mean()) ** 2))
    prior = batch_single.elasticity(t_far)
    if spread <= 0:
        return prior
    data = float(_polyfit1(lx, lt)[0])
    w_data = spread / POINT_NOISE ** 2
    w_prior = 1.0 / batch_single.deviation_sd() ** 2
    return min(max((w_data * data + w_prior * prior) / (w_data + w_prior), 0.0), 1.0)


def on_gpu_batch(index: SeriesIndex, r: Route) -> bool:
    """Whether a single-point move goes along the batch size from configurations measured on
    a catalog GPU (:mod:`~.batch_single` applies: the public series it was learnt from are GPU
    runs). A chain's points were each estimated from its steps' configurations."""
    if r.axis != index.batch_axis or r.position != "single":
        return False
    return _on_gpu(index, np.concatenate([sub.members for _, _, sub in r.steps])
                   if r.kind == "chain" else r.members)


def single_value(index: SeriesIndex, r: Route, v: np.ndarray, x: float, t: float,
                 q: float) -> float:
    """Seconds per iteration at ``q`` from the one point ``(x, t)`` of a single-point move of
    query ``v``: along the batch size on a GPU, ``t · (q/x)^e`` with
    :func:`single_elasticity`; along another axis, or on the CPU, in proportion (the time per
    sample kept)."""
    if not on_gpu_batch(index, r) or not (x > 0 and q > 0):
        return float(t * q / x)
    return float(t * (q / x) ** single_elasticity(index, r, v, t))


def single_elasticity(index: SeriesIndex, r: Route, v: np.ndarray, t: float) -> float:
    """The elasticity a single-point batch move on a GPU grows by: this network's own batch
    series on that GPU (:func:`own_elasticity`), else the public series' at the measured time
    per iteration ``t`` (:func:`~.batch_single.elasticity`)."""
    own = own_elasticity(index, r, v)
    return own if own is not None else batch_single.elasticity(t)


def single_interval(index: SeriesIndex, r: Route, v: np.ndarray,
                    coverage: float) -> tuple[float, float, float]:
    """(low, high, expected error) of a single-point batch move on a GPU: the public
    elasticities' spread at its log distance (:func:`~.batch_single.interval`)."""
    x = (float(r.steps[0][0]) if r.kind == "chain"
         else float(np.min(index.values[r.members, r.axis])))
    return batch_single.interval(x, float(v[r.axis]), coverage)


def own_elasticity(index: SeriesIndex, r: Route, v: np.ndarray) -> float | None:
    """How this network's own batch series grow on the GPU of a single-point batch move:
    the series of its other settings (depths, image sizes ...) measured there at two batch
    sizes or more, each pair :data:`~.batch_single.MIN_RATIO` to
    :data:`~.batch_single.MAX_RATIO` apart (elasticities clipped to [0, 1], each series
    weighing 1; :func:`~.batch_single.learn`'s rule). Left out: the query's own series (in
    validation, the held-out configuration's) and every pair that reaches the asked batch
    size (validation holds out a batch size from every series at once, and the answer must be
    the method it scored). The user's runs before the public curve: a network timed at batch
    32, 64 and 128 at depth 1 and at 32 alone at depth 2 grows at depth 2 as depth 1 did.
    None: no such pair. Each GPU's pairs are gathered once per index and kept sorted, so a
    query is one pass over that GPU's pairs."""
    members = (np.concatenate([sub.members for _, _, sub in r.steps]) if r.kind == "chain"
               else r.members)
    if not len(members) or index.batch_axis is None:
        return None
    gpu = int(index.hw_id[int(members[0])])
    cache = index.__dict__.setdefault("_own_elasticity", {})
    if gpu not in cache:
        cache[gpu] = _batch_pairs(index, gpu)
    pairs = cache[gpu]
    if pairs is None:
        return None
    e, w, key, xi, xj, keys = pairs
    q = float(v[index.batch_axis])
    mine = keys.get(_series_key(index, v), -1)
    keep = (key != mine) & ~np.isclose(xi, q) & ~np.isclose(xj, q)
    if not keep.any():
        return None
    cum = np.cumsum(w[keep])  # e is sorted: the weighted median without a sort per query
    return float(e[keep][int(np.searchsorted(cum, 0.5 * cum[-1]))])


def _series_key(index: SeriesIndex, values: np.ndarray) -> tuple[float, ...]:
    """A configuration's series along the batch: its values on the other axes (derived
    columns left out: a chain's estimated points hold them as NaN)."""
    axes = [j for j in index.axes if j != index.batch_axis]
    return tuple(np.round(np.asarray(values, float)[axes], 9).tolist())


def _batch_pairs(index: SeriesIndex, gpu: int) -> tuple | None:
    """Every batch series' pairs on one GPU, sorted by elasticity: (elasticity, weight,
    series number, the two batch sizes, series number by key); None where there are none.
    One pass over that GPU's configurations."""
    axis = index.batch_axis
    if axis is None:
        return None
    parts: list[tuple[np.ndarray, ...]] = []
    keys: dict[tuple[float, ...], int] = {}
    for key, ids in _gpu_series(index, gpu).items():
        if len(ids) < 2:
            continue
        e, xi, xj = batch_single.pair_elasticities(index.values[ids, axis], index.t[ids],
                                                   with_batches=True)
        if len(e):
            keys[key] = len(keys)
            parts.append((e, np.full(len(e), 1.0 / len(e)), np.full(len(e), keys[key]), xi, xj))
    if not parts:
        return None
    e, w, k, xi, xj = (np.concatenate([p[n] for p in parts]) for n in range(5))
    order = np.argsort(e, kind="stable")
    return e[order], w[order], k[order], xi[order], xj[order], keys


def _gpu_series(index: SeriesIndex, gpu: int) -> dict[tuple[float, ...], list[int]]:
    """One GPU's configurations grouped by their batch series (:func:`_series_key`), gathered
    once per index (the single-batch elasticities and the host-bound series both read them)."""
    cache = index.__dict__.setdefault("_gpu_series", {})
    if gpu not in cache:
        groups: dict[tuple[float, ...], list[int]] = {}
        for c in np.flatnonzero(index.hw_id == gpu):
            groups.setdefault(_series_key(index, index.values[c]), []).append(int(c))
        cache[gpu] = groups
    return cache[gpu]


def _polyfit1(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """``np.polyfit(x, t, 1)`` (slope, intercept) by the same operations without its checks,
    which cost more than the fit on a series of a few points (validation fits thousands);
    where the points do not determine a line, np.polyfit itself (it warns)."""
    lhs = np.vander(np.asarray(x, dtype=float) + 0.0, 2)
    scale = np.sqrt((lhs * lhs).sum(axis=0))
    lhs /= scale
    c, _, rank, _ = np.linalg.lstsq(lhs, np.asarray(t, dtype=float) + 0.0,
                                    len(x) * np.finfo(float).eps)
    if rank != 2:
        return np.polyfit(x, t, 1)
    return c / scale


def _median(values: list[float]) -> float:
    """``float(np.median(values))`` of a short list, without numpy's overhead (NaN: numpy)."""
    n = len(values)
    if n == 0 or any(v != v for v in values):
        return float(np.median(values))
    ordered = sorted(values)
    mid = n // 2
    if n % 2:
        return float(ordered[mid])
    return float((np.float64(ordered[mid - 1]) + np.float64(ordered[mid])) / 2)


def _line(x: np.ndarray, t: np.ndarray, q: float) -> float:
    """The naive candidate: a straight line through every point of the series."""
    b, a = _polyfit1(x, t)
    return float(max(a + b * q, 1e-12))


def local_value(index: SeriesIndex, r: Route, v: np.ndarray, method: str,
                its: float = 1.0, per_sample: bool = False) -> float:
    """One route's seconds per iteration (of a job of ``its`` iterations, set-up included) by
    a local method ("lin" or "log"), or the naive "line". ``per_sample``: a single point keeps
    its time per sample (:func:`single_value` otherwise), and a series carried far above its
    largest batch keeps its line (not the power of :func:`_beyond`): the naive method's rule,
    and the source of a GPU move, whose learnt, plain and evidence moves all compare devices
    per sample at each device's own batch (lambda2025 runs each GPU at the batch its memory
    holds), so a source moved as batch series grow counted that gain twice (lambda2025
    unseen GPU 14.9% -> 20.8% MAPE; with the power far out, 14.3% -> 14.4%)."""
    if r.kind == "repeat":
        return float(index.per_job(r.members[:1], its)[0])
    x, t = _series(index, r, its)
    q = float(v[r.axis])
    if r.position == "single":
        if per_sample or not on_gpu_batch(index, r):
            return float(t[0] * q / x[0])
        # The elasticity moves the time per iteration; a run's set-up spread over the job
        # does not grow with the batch.
        m = int(r.members[np.argmin(index.values[r.members, r.axis])])
        return (single_value(index, r, v, float(x[0]), float(index.t[m]), q)
                + float(index.setup[m]) / its)
    if method == "line":
        return _line(x, t, q)
    if r.position == "inside":
        return _inside(x, t, q, method)
    return _beyond(x, t, q, method, r.axis == index.batch_axis,
                   not per_sample and _on_gpu(index, r.members))


def _on_gpu(index: SeriesIndex, members: np.ndarray) -> bool:
    """Whether every configuration of a series was measured on a catalog GPU."""
    return (len(index.device) == index.n and len(members) > 0
            and all(isinstance(index.device[int(c)], str) for c in members))


def candidates(index: SeriesIndex, r: Route, v: np.ndarray, h: np.ndarray, naive_peak: float,
               move: GpuMove, sub_method: dict[str, str], its: float = 1.0,
               evidence: EvidenceMove | None = None, dst: object = None) -> dict[str, float]:
    """Each candidate method's prediction for a routed query: seconds per iteration of a job of
    ``its`` iterations, its set-up time included (a whole run's set-up spread over them).

    Axis moves: ``lin`` and ``log`` (local) and ``line`` (naive). GPU moves: ``learnt`` (the
    sources' estimates carried by the learnt move) and ``ratio`` (the naive method: the same
    configuration measured on other GPUs, scaled by the ratio of the plain peaks; only sources
    that measured it) and ``evidence`` (where an :class:`~.evidence_query.EvidenceMove` is
    given: other workloads measured on both devices, shrunk towards the learnt move; ``dst``
    is the query's device key). ``sub_method`` says which local method a source's own move
    uses.
    """
    if r.kind in ("repeat", "axis"):
        if r.kind == "repeat" or r.position == "single":
            return {"lin": local_value(index, r, v, "lin", its)}
        return {m: local_value(index, r, v, m, its) for m in ("lin", "log", "line")}
    if r.kind == "chain":
        return _chain_candidates(index, r, v, sub_method, its)
    if r.kind != "gpu":
        return {}
    learnt, ratio, moved = [], [], []
    bw = h[1] if len(h) > 1 else None
    for rep, sub in r.sources:
        method = sub_method.get(sub.key, sub_method.get(family(sub.key), "lin"))
        t_src = local_value(index, sub, v, method, its, per_sample=True)
        src = index.hw[rep]
        # The share of the source's time its host took stays; the rest moves (host-bound
        # series only: 0 elsewhere).
        fixed = host_share(index, rep, v) * t_src
        learnt.append(_kept(fixed, float(move.scale(
            np.array([t_src]), np.array([src[0]]),
            None if bw is None else np.array([src[1]]), np.array([h[0]]),
            None if bw is None else np.array([bw]),
            np.array([index.naive_peak[rep]]), np.array([naive_peak]))[0]), t_src))
        if evidence is not None:
            est = evidence.move(index, rep, t_src, v, h, dst, carried(index, sub, v))
            if est is not None:
                if fixed > 0:  # calibrated apart: hosts differ as GPUs do not
                    est = dataclasses.replace(
                        est, log_ratio=math.log(_kept(fixed, math.exp(est.log_ratio), t_src)),
                        spec=math.log(_kept(fixed, math.exp(est.spec), t_src))
                        if math.isfinite(est.spec) else est.spec,
                        bucket=f"{est.bucket.partition(':')[0]}:{HOST_BUCKET}",
                        detail=f"{est.detail}; host-bound where measured (its time per "
                               f"iteration hardly grows with the batch): the host's "
                               f"{fixed / t_src:.0%} of it kept")
                moved.append(est)
        if sub.kind == "repeat" or sub.position == "single":
            ratio.append(float(peak_ratio(np.array([t_src]), np.array([index.naive_peak[rep]]),
                                          np.array([naive_peak]))[0]))
    out = {"learnt": _median(learnt)}
    if ratio:
        out["ratio"] = _median(ratio)
    if moved and evidence is not None:
        out["evidence"] = evidence.combine(moved)
    return out


def carried(index: SeriesIndex, r: Route, v: np.ndarray) -> float:
    """How far a source GPU's own batch move carries its time past what it measured: the
    ``|log|`` of the asked batch over its one measured batch (``single``) or the end of its
    series (``beyond``, :func:`beyond_distance`); 0 for a measured or interpolated batch, a
    move along another axis, or values that are not positive."""
    if r.kind != "axis" or r.axis != index.batch_axis:
        return 0.0
    if r.position == "beyond":
        distance = beyond_distance(index, r, v)
    elif r.position == "single":
        x, q = float(index.values[r.members[0], r.axis]), float(v[r.axis])
        distance = abs(math.log(q / x)) if x > 0 and q > 0 else math.nan
    else:
        return 0.0
    return distance if math.isfinite(distance) else 0.0


def _kept(fixed: float, moved: float, t_src: float) -> float:
    """A source's time ``t_src`` moved to ``moved``, its ``fixed`` seconds kept as they were:
    ``fixed + (t_src - fixed) * moved / t_src``."""
    if not (fixed > 0 and t_src > 0):
        return moved
    return fixed + (t_src - fixed) * moved / t_src


def host_share(index: SeriesIndex, rep: int, v: np.ndarray) -> float:
    """The share of the time per iteration at query ``v``'s batch, on configuration ``rep``'s
    GPU, that its host took: where the network's batch series there (``v``'s values on the
    other axes) spans :data:`HOST_SPAN` or more in batch and its time grows by less than
    :data:`HOST_ELASTICITY` end to end, the intercept of a line through it (what an iteration
    costs whatever its batch: the host issuing its kernels, which another GPU does not speed
    up) over the line's value at the batch; 0 elsewhere (a series that grows with the batch is
    the GPU's work, which a GPU move scales whole). sia2023's NCF, a recommender of about 10
    ms per iteration, grew 1.02-1.11x from batch 32 to 32,768 on each of five GPUs and ran
    faster on a T4 than on an A100; every other public series grew with elasticity 0.22 or
    more. Each GPU's series are gathered once per index."""
    axis = index.batch_axis
    if axis is None or len(index.device) != index.n:
        return 0.0
    gpu = int(index.hw_id[rep])
    cache = index.__dict__.setdefault("_host_series", {})
    if gpu not in cache:
        cache[gpu] = _host_bound_series(index, gpu)
    line = cache[gpu].get(_series_key(index, v))
    if line is None:
        return 0.0
    a, g = line
    b = float(v[axis])
    total = a + g * b
    return float(min(max(a / total, 0.0), 1.0)) if total > 0 and b > 0 else 0.0


def _host_bound_series(index: SeriesIndex, gpu: int) -> dict[tuple[float, ...], tuple[float,
                                                                                       float]]:
    """The host-bound batch series on one GPU (:func:`host_share`): their line's intercept
    (within [0, their least time]) and slope (at least 0), by series key."""
    axis = index.batch_axis
    out: dict[tuple[float, ...], tuple[float, float]] = {}
    for key, all_ids in _gpu_series(index, gpu).items():
        ids = [c for c in all_ids if isinstance(index.device[c], str)]  # catalog GPUs only
        x, t = index.values[ids, axis].astype(float), index.t[ids].astype(float)
        ok = (x > 0) & (t > 0)
        x, t = x[ok], t[ok]
        if len(x) < 3 or x.max() < HOST_SPAN * x.min():
            continue
        lo, hi = int(np.argmin(x)), int(np.argmax(x))
        if math.log(t[hi] / t[lo]) >= HOST_ELASTICITY * math.log(x[hi] / x[lo]):
            continue
        g, a = _polyfit1(x, t)
        out[key] = (min(max(float(a), 0.0), float(t.min())), max(float(g), 0.0))
    return out


def _chain_candidates(index: SeriesIndex, r: Route, v: np.ndarray, sub_method: dict[str, str],
                      its: float) -> dict[str, float]:
    """A chain's estimated points (each by its own move's method), then the move along the
    chain's axis through them: ``lin``, ``log`` or the ``line``; one point: carried over."""
    x = np.array([b for b, _, _ in r.steps])
    t = np.array([local_value(index, sub, vb,
                              sub_method.get(sub.key, sub_method.get(family(sub.key), "lin")),
                              its) for _, vb, sub in r.steps])
    order = np.argsort(x)
    x, t = x[order], t[order]
    q = float(v[r.axis])
    batch = r.axis == index.batch_axis
    if r.position == "single":
        return {"lin": single_value(index, r, v, float(x[0]), float(t[0]), q) if batch and x[0] > 0
                else float(t[0])}
    out = {"line": _line(x, t, q)}
    for m in ("lin", "log"):
        out[m] = _inside(x, t, q, m) if r.position == "inside" else _beyond(x, t, q, m, batch)
    return out
