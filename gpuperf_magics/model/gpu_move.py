"""Moving a measured per-iteration time to another GPU: the spec-sheet ratio, and what it misses.

The naive move scales a time by the ratio of the GPUs' peaks (:func:`peak_ratio`). It misses
that part of an iteration does not speed up on a faster GPU (kernel launches, Python, the input
pipeline, synchronisation): small iterations are bound by it, large ones by the GPU. The learnt
move (:class:`GpuMove`) splits the measured time ``t`` into a share ``s(t)`` that stays and a
share that scales with the hardware factor ``h = 1/peak + ρ/bandwidth``::

    t_new = t · (s + (1 − s) · h_new / h_measured),   s = sigmoid(α + β · log10 t)

and blends it with the naive ratio in log space by the weight ``weight`` that held-out GPUs of
the public data chose (0 = the plain ratio). ``peak`` is the precision's effective peak
(:func:`~gpuperf_magics.model.inputs.effective_peak`); the naive ratio uses the plain peak of
the precision.

The parameters are learnt by :func:`learn` from pairs of one configuration measured on two GPUs
(:func:`pairs`), and ship in ``gpu_transfer.json`` beside this module, written by
``benchmarks/gpu_transfer_params.py`` from the public data sets. Fitting and predicting read
that file only: they never touch the network.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import asdict, dataclass
from importlib import resources

import numpy as np
import pandas as pd

PARAMS_FILE = "gpu_transfer.json"
#: Version of the file's format; bump when the formula changes.
FORMAT = 1
RHO_GRID = (0.0, 5.0, 10.0, 20.0, 40.0, 80.0)
#: Bounds of the share's sigmoid. Unbounded, lambda2025's pairs (0.04-9.5 s per iteration,
#: hardly any fixed share) drove it to a step (α −139.7, β 140.9: no share below 9.8 s, all of
#: it above), placed at the edge of the data for its longest pair: a cliff for any longer
#: iteration and no better a fit (mean |log error| 0.22195 against 0.22197 with no share at
#: all). |β| ≤ 4: the share takes at least about a decade of iteration time to go from 10% to
#: 90%.
ALPHA_MAX, BETA_MAX = 30.0, 4.0
WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0)


def peak_ratio(t_src: np.ndarray, peak_src: np.ndarray, peak_dst: np.ndarray) -> np.ndarray:
    """The naive move: the time scaled by the ratio of the two GPUs' peaks."""
    return np.asarray(t_src, float) * np.asarray(peak_src, float) / np.asarray(peak_dst, float)


@dataclass(frozen=True)
class GpuMove:
    """Parameters of the learnt GPU move and the error held-out GPUs measured for it.

    ``mape``, ``q_lo`` and ``q_hi`` describe the log residuals ``log(actual / predicted)`` of
    the blended move on GPUs held out of the learning (``q_lo``/``q_hi``: 10th and 90th
    percentiles); ``naive_mape`` is the plain ratio's error on the same rows.
    """

    rho: float = 20.0
    alpha: float = 0.0
    beta: float = 0.0
    weight: float = 0.0
    mape: float = 0.4
    naive_mape: float = 0.4
    q_lo: float = -0.5
    q_hi: float = 0.5
    n_pairs: int = 0
    source: str = "no data: the plain peak ratio"

    def scale(
        self,
        t_src: np.ndarray,
        peak_src: np.ndarray,
        bw_src: np.ndarray | None,
        peak_dst: np.ndarray,
        bw_dst: np.ndarray | None,
        naive_src: np.ndarray | None = None,
        naive_dst: np.ndarray | None = None,
    ) -> np.ndarray:
        """Times on the destination GPU from times on the source GPU (arrays, elementwise)."""
        t = np.asarray(t_src, float)
        naive = peak_ratio(t, peak_src if naive_src is None else naive_src,
                           peak_dst if naive_dst is None else naive_dst)
        if self.weight == 0.0:
            return naive
        learnt = t * self._factor(t, peak_src, bw_src, peak_dst, bw_dst)
        return np.exp(self.weight * np.log(learnt) + (1 - self.weight) * np.log(naive))

    def _factor(self, t: np.ndarray, peak_src: np.ndarray, bw_src: np.ndarray | None,
                peak_dst: np.ndarray, bw_dst: np.ndarray | None) -> np.ndarray:
        return _factor(t, peak_src, bw_src, peak_dst, bw_dst, self.rho, self.alpha, self.beta)


def _h(peak: np.ndarray, bw: np.ndarray | None, rho: float) -> np.ndarray:
    h = 1.0 / np.asarray(peak, float)
    if bw is not None:
        b = np.asarray(bw, float)
        h = h + np.where(np.isfinite(b) & (b > 0), rho / np.where(b > 0, b, 1.0), 0.0)
    return h


def _factor(t: np.ndarray, peak_src: np.ndarray, bw_src: np.ndarray | None,
            peak_dst: np.ndarray, bw_dst: np.ndarray | None, rho: float, alpha: float,
            beta: float) -> np.ndarray:
    z = np.clip(alpha + beta * np.log10(np.maximum(np.asarray(t, float), 1e-9)), -30, 30)
    share = 1.0 / (1.0 + np.exp(-z))
    return share + (1 - share) * _h(peak_dst, bw_dst, rho) / _h(peak_src, bw_src, rho)


#: The two kinds of data a move is learnt from: rows that record the precision their matrix
#: products ran in (what ``%%profile_training`` records; the peaks are then the precision's),
#: and rows that don't (imported tables: FP32 peaks, though Ampere and later GPUs may have run
#: TF32 or AMP). A table without precision cannot carry what the precision explains, so the two
#: are learnt and validated apart.
KINDS = ("recorded", "unrecorded")


@functools.lru_cache(maxsize=1)
def shipped() -> dict[str, GpuMove]:
    """The moves shipped with the package, by :data:`KINDS` (learnt from public data)."""
    try:
        text = resources.files("gpuperf_magics.model").joinpath(PARAMS_FILE).read_text()
        payload = json.loads(text)
        if payload.get("format") != FORMAT:
            return {k: GpuMove() for k in KINDS}
        return {k: GpuMove(**{f: payload["moves"][k][f] for f in GpuMove.__dataclass_fields__})
                for k in KINDS}
    except (OSError, ValueError, KeyError, TypeError):
        return {k: GpuMove() for k in KINDS}


def to_json(moves: dict[str, GpuMove], about: dict) -> str:
    """The parameter file's text (stable: rounded figures, sorted keys)."""
    out = {k: {f: (round(v, 6) if isinstance(v, float) else v) for f, v in asdict(m).items()}
           for k, m in moves.items()}
    return json.dumps({"format": FORMAT, "about": about, "moves": out}, indent=2,
                      sort_keys=True) + "\n"


# ---------------------------------------------------------------------------- learning
def pairs(table: pd.DataFrame, config_cols: list[str]) -> pd.DataFrame:
    """Ordered pairs of one configuration measured on two GPUs.

    ``table`` has ``gpu``, ``t`` (seconds per iteration), ``batch_size``, ``peak``,
    ``naive_peak``, ``bandwidth`` and the ``config_cols`` that identify a configuration (the
    batch size may differ between the GPUs of one configuration, as in lambda2025: the pair
    then compares time per sample). Repeats are reduced to their median first.
    """
    keep = [*config_cols, "gpu"]
    agg = (table.groupby(keep, dropna=False)
           .agg(t=("t", "median"), batch_size=("batch_size", "median"), peak=("peak", "first"),
                naive_peak=("naive_peak", "first"), bandwidth=("bandwidth", "first"))
           .reset_index())
    agg["config"] = agg[config_cols].apply(lambda col: col.map(str)).agg("|".join, axis=1)
    agg = agg[agg.groupby("config")["gpu"].transform("nunique") >= 2]
    merged = agg.merge(agg, on="config", suffixes=("_src", "_dst"))
    merged = merged[merged["gpu_src"] != merged["gpu_dst"]].reset_index(drop=True)
    merged["batch_ratio"] = merged["batch_size_dst"] / merged["batch_size_src"]
    return merged[["config", "gpu_src", "gpu_dst", "t_src", "t_dst", "batch_ratio",
                   "peak_src", "peak_dst", "naive_peak_src", "naive_peak_dst",
                   "bandwidth_src", "bandwidth_dst"]]


def _predict_pairs(p: pd.DataFrame, rho: float, alpha: float, beta: float,
                   weight: float) -> np.ndarray:
    """Predicted destination times of pairs (per iteration at the destination's batch)."""
    move = GpuMove(rho=rho, alpha=alpha, beta=beta, weight=weight)
    return move.scale(p["t_src"].to_numpy(), p["peak_src"].to_numpy(),
                      p["bandwidth_src"].to_numpy(), p["peak_dst"].to_numpy(),
                      p["bandwidth_dst"].to_numpy(), p["naive_peak_src"].to_numpy(),
                      p["naive_peak_dst"].to_numpy()) * p["batch_ratio"].to_numpy()


def _fit_shape(p: pd.DataFrame) -> tuple[float, float, float]:
    """ρ, α, β minimising the mean |log error| of the learnt factor over the pairs."""
    from scipy.optimize import minimize

    target = np.log(p["t_dst"].to_numpy() / p["batch_ratio"].to_numpy() / p["t_src"].to_numpy())
    t = p["t_src"].to_numpy()
    args = [p[c].to_numpy() for c in ("peak_src", "bandwidth_src", "peak_dst", "bandwidth_dst")]
    best = (float("inf"), 20.0, 0.0, 0.0)
    for rho in RHO_GRID:
        def loss(ab: np.ndarray, rho: float = rho) -> float:
            f = _factor(t, args[0], args[1], args[2], args[3], rho, ab[0], ab[1])
            return float(np.mean(np.abs(np.log(f) - target)))

        res = minimize(loss, np.array([-2.0, -1.0]), method="Nelder-Mead",
                       bounds=[(-ALPHA_MAX, ALPHA_MAX), (-BETA_MAX, BETA_MAX)],
                       options={"xatol": 1e-3, "fatol": 1e-5, "maxiter": 300})
        if res.fun < best[0]:
            best = (float(res.fun), rho, float(res.x[0]), float(res.x[1]))
    return best[1], best[2], best[3]


def _gpu_folds(gpus: list[str], k: int) -> list[list[str]]:
    order = sorted(gpus)
    return [order[i::k] for i in range(min(k, len(order)))]


def learn(p: pd.DataFrame, folds: int = 6, source: str = "") -> GpuMove:
    """Learn the move from pairs, and how far to trust it, on GPUs held out of the learning.

    The GPUs are split into ``folds`` groups; each group is held out in turn: the shape (ρ, α,
    β) is learnt on pairs between the other GPUs, then every configuration of a held-out GPU is
    predicted from the GPUs outside its group (the median over them), by the learnt move and by
    the plain ratio. The blend weight is the one whose worst held-out group errs least against
    the plain ratio on that group (:func:`robust_weight`); the shape of the shipped move is
    then learnt on all pairs.
    """
    gpus = sorted(set(p["gpu_src"]) | set(p["gpu_dst"]))
    if len(gpus) < 3 or len(p) < 10:
        return GpuMove(source=f"too few pairs ({len(p)}): the plain peak ratio")
    logres: dict[float, list[np.ndarray]] = {w: [] for w in WEIGHTS}
    per_group: list[dict[float, float]] = []
    for group in _gpu_folds(gpus, folds):
        inside = p["gpu_src"].isin(group) | p["gpu_dst"].isin(group)
        train = p[~inside]
        test = p[p["gpu_dst"].isin(group) & ~p["gpu_src"].isin(group)]
        if len(train) < 10 or test.empty:
            continue
        rho, alpha, beta = _fit_shape(train)
        for w in WEIGHTS:
            pred = _predict_pairs(test, rho, alpha, beta, w)
            frame = pd.DataFrame({"key": test["config"] + "|" + test["gpu_dst"],
                                  "lp": np.log(pred), "lt": np.log(test["t_dst"].to_numpy())})
            per = frame.groupby("key").agg(lp=("lp", "median"), lt=("lt", "first"))
            logres[w].append((per["lt"] - per["lp"]).to_numpy())
        per_group.append({w: float(np.mean(np.abs(np.exp(-v[-1]) - 1)))
                          for w, v in logres.items()})
    if not logres[0.0]:
        return GpuMove(source="no held-out GPU to test on: the plain peak ratio")
    res = {w: np.concatenate(v) for w, v in logres.items()}
    mape = {w: float(np.mean(np.abs(np.exp(-r) - 1))) for w, r in res.items()}
    weight = robust_weight(per_group)
    rho, alpha, beta = _fit_shape(p)
    chosen = res[weight]
    return GpuMove(rho=rho, alpha=alpha, beta=beta, weight=weight, mape=mape[weight],
                   naive_mape=mape[0.0], q_lo=float(np.quantile(chosen, 0.1)),
                   q_hi=float(np.quantile(chosen, 0.9)), n_pairs=len(p), source=source)


def robust_weight(per_group: list[dict[float, float]]) -> float:
    """The blend weight for GPUs nobody tuned on: the one whose worst held-out group errs
    least against the plain ratio on that group (``per_group``: each group's MAPE by weight;
    ratios equal once rounded to 3 decimals go to the smaller weight; a group the plain ratio
    answers exactly vetoes any weight that errs there).

    A weight chosen by the pooled error can win on most held-out GPUs and lose on the one
    least like the others: learnt on sia2023 without its A100, the move took weight 0.75
    (pooled 25.9% against the plain ratio's 28.2%, though already worse on the RTX 2080 Ti
    group), and on the A100 it answered 1.13x slower than the plain ratio (median; 45.5%
    against 38.9% MAPE on its rows). A newer GPU than any the move was learnt on is that
    least-alike case; a weight must therefore not lose to the plain ratio on any group.
    """
    def regret(w: float) -> float:
        return max(g[w] / g[0.0] if g[0.0] > 0 else (math.inf if g[w] > 0 else 1.0)
                   for g in per_group)

    return min(WEIGHTS, key=lambda w: (round(regret(w), 3), w))
