"""A network never measured, predicted from the others through its architecture.

The per-network models cannot say anything about a network without runs. Across networks,
the architecture features ``%%profile_training`` records explain much of the time of one
iteration: the work (batch × FLOPs per sample, forward and backward), the weights the optimizer
reads and writes (parameters), the kernels each step launches (layers). The model is

``time per iteration = sum_k c_k × t_k`` with non-negative ``c_k``

over candidate terms, each a time that is physically plausible (:data:`TERMS`):

- ``1``: a fixed floor per iteration (the Python loop, launches, the optimizer's bookkeeping),
  always in the model;
- ``batch × flops × h``: the arithmetic, ``h = 1/peak FLOPS + ρ/bandwidth`` on a GPU (the batch
  divided by the GPU count in data-parallel runs, as each GPU gets its share);
- the same scaled by the share of convolution, recurrent or attention layers among the layers
  (kernels whose efficiency differs: on a CPU a convolution FLOP costs 2-4× a matrix-multiply
  FLOP);
- ``params × m``: weight and optimizer traffic, ``m = 1/bandwidth`` on a GPU;
- ``params × (1 − 1/gpu_count)``: the gradient exchange of data-parallel training.

On a CPU every hardware factor is 1 (the CPU is the same for all rows a store holds). Terms are
chosen by forward selection scored by leave-one-network-out MAPE and fitted for relative error
(weights ``1/t²``), so the score is the error a network never measured gets; it is reported as
the expected error of those predictions. A cost per layer (kernel launches) was a candidate and
is not one: on a zoo of 9 small networks it let a deep, narrow MLP miss by 135 % (see
benchmarks/new_network.py), and with the handful of networks a store holds the terms have to be
few.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuperf_magics.model.selection import forward_select, solve_subset
from gpuperf_magics.model.transfer import RHO_GRID, hardware_factor

#: Architecture columns a row needs for the cross-network model.
REQUIRED = ("batch_size", "arch_flops_fwd_bwd")
#: Networks needed: leave-one-network-out must train on at least two.
MIN_NETWORKS = 3
#: Candidate terms (names as :meth:`PooledModel.report` shows them).
TERMS = (
    "1",
    "batch*flops*h",
    "batch*flops*h*conv share",
    "batch*flops*h*recurrent share",
    "batch*flops*h*attention share",
    "params*m",
    "params*(1-1/gpu_count)",
)


#: Columns (besides :data:`REQUIRED` and the hardware) each term reads.
TERM_COLUMNS = {
    "1": (),
    "batch*flops*h": (),
    "batch*flops*h*conv share": ("arch_layers_conv", "arch_layers_total"),
    "batch*flops*h*recurrent share": ("arch_layers_recurrent", "arch_layers_total"),
    "batch*flops*h*attention share": ("arch_layers_attention", "arch_layers_total"),
    "params*m": ("arch_params",),
    "params*(1-1/gpu_count)": ("arch_params", "gpu_count"),
}


def _column(features: pd.DataFrame, name: str, default: float) -> np.ndarray:
    if name in features.columns:
        return features[name].to_numpy(dtype=float)
    return np.full(len(features), default)


def _terms(features: pd.DataFrame, hw_cols: tuple[str, ...], rho: float) -> np.ndarray:
    """The candidate terms of :data:`TERMS` for each row (per iteration)."""
    batch = features["batch_size"].to_numpy(dtype=float)
    flops = features["arch_flops_fwd_bwd"].to_numpy(dtype=float)
    params = _column(features, "arch_params", 0.0)
    layers = np.maximum(_column(features, "arch_layers_total", 0.0), 1.0)
    count = np.maximum(_column(features, "gpu_count", 1.0), 1.0)
    if hw_cols:
        tflops = features[hw_cols[0]].to_numpy(dtype=float)
        bw = features[hw_cols[1]].to_numpy(dtype=float) if len(hw_cols) > 1 else None
        h = hardware_factor(tflops, bw, rho) * 1e-12  # seconds per FLOP at peak
        m = 1e-9 / bw if bw is not None else np.full(len(features), 1e-12)
    else:
        h = m = np.ones(len(features))
    compute = batch / count * flops * h

    def share(kind: str) -> np.ndarray:
        return np.clip(_column(features, f"arch_layers_{kind}", 0.0) / layers, 0.0, 1.0)

    return np.column_stack([
        np.ones(len(features)),
        compute,
        compute * share("conv"),
        compute * share("recurrent"),
        compute * share("attention"),
        params * m,
        params * (1.0 - 1.0 / count),
    ])


@dataclass
class PooledModel:
    """The fitted cross-network model (see the module's docstring).

    Attributes
    ----------
    terms : tuple of str
        Selected terms (names from :data:`TERMS`).
    coef : ndarray
        Their non-negative coefficients (seconds per unit of the term).
    cv_mape : float
        Leave-one-network-out MAPE (fraction) of the selected terms.
    networks : tuple of str
        Networks it learnt from.
    hw_cols : tuple of str
        Hardware columns used (empty on the CPU).
    rho : float
        ρ of the hardware factor (chosen with the terms by leave-one-network-out MAPE when
        the bandwidth is known).
    abs_logres : ndarray
        Sorted absolute log-residuals out of network (for intervals).
    """

    terms: tuple[str, ...]
    coef: np.ndarray
    cv_mape: float
    networks: tuple[str, ...]
    hw_cols: tuple[str, ...]
    rho: float
    abs_logres: np.ndarray

    @property
    def needed(self) -> tuple[str, ...]:
        """Columns a row of a new network must give: the required ones, the hardware, and
        those the selected terms read (a missing one would silently count as 0)."""
        extra = [c for t in self.terms for c in TERM_COLUMNS[t] if c != "gpu_count"]
        return tuple(dict.fromkeys([*REQUIRED, *self.hw_cols, *extra]))

    def predict(self, features: pd.DataFrame, iterations: np.ndarray) -> np.ndarray:
        """Seconds for ``iterations`` iterations of each row's configuration."""
        z = _terms(features, self.hw_cols, self.rho)
        idx = [TERMS.index(t) for t in self.terms]
        return np.maximum(z[:, idx] @ self.coef, 1e-12) * np.asarray(iterations, dtype=float)

    def report(self) -> pd.DataFrame:
        """Terms and coefficients, then the leave-one-network-out MAPE."""
        rows = [{"item": "new network term", "name": t, "value": float(c)}
                for t, c in zip(self.terms, self.coef, strict=True)]
        rows.append({"item": "new network cv_mape",
                     "name": "leave-one-network-out over " + ", ".join(self.networks),
                     "value": self.cv_mape})
        return pd.DataFrame(rows)


def fit_pooled(
    features: pd.DataFrame,
    iterations: np.ndarray,
    y: np.ndarray,
    networks: np.ndarray,
    hw_cols: tuple[str, ...],
    rho: float,
    k_max: int = 5,
) -> PooledModel | None:
    """Fit the cross-network model, or None when the runs cannot support one.

    Needs the columns of :data:`REQUIRED` (positive FLOPs per sample, as
    ``%%profile_training`` records them) on every row, and at least :data:`MIN_NETWORKS`
    networks; ``arch_params`` and the ``arch_layers_*`` counts are used where given.
    """
    if any(c not in features.columns for c in REQUIRED) or networks is None:
        return None
    names = sorted(pd.unique(networks).tolist())
    if len(names) < MIN_NETWORKS or not (features["arch_flops_fwd_bwd"] > 0).all():
        return None
    per_it = np.asarray(y, dtype=float) / np.asarray(iterations, dtype=float)
    net_id = np.searchsorted(names, networks)
    folds = [(np.flatnonzero(net_id != k), np.flatnonzero(net_id == k))
             for k in range(len(names))]
    weights = 1.0 / per_it**2
    # ρ is chosen with the terms when the bandwidth is known (ties keep the given one).
    rhos = [rho, *(r for r in RHO_GRID if r != rho)] if len(hw_cols) > 1 else [rho]
    best = None
    for r in rhos:
        z = _terms(features, hw_cols, r)
        usable = [j for j in range(1, z.shape[1]) if np.ptp(z[:, j]) > 0]
        if not usable:
            return None  # the networks' architectures do not differ: nothing to learn from
        result = forward_select(z, per_it, folds, k_max=k_max, weights=weights, nonneg=True,
                                intercept=False, candidates=usable, required=[0])
        if best is None or result.cv_mape < best[0].cv_mape - 1e-6:
            best = (result, z, r)
    assert best is not None
    result, z, rho = best
    idx = list(result.terms)
    coef, _ = solve_subset(z[:, idx], per_it, weights=weights, nonneg=True, intercept=False)
    logres = []
    for train, test in folds:
        c, _ = solve_subset(z[train][:, idx], per_it[train], weights=weights[train],
                            nonneg=True, intercept=False)
        pred = np.maximum(z[test][:, idx] @ c, 1e-12)
        logres.append(np.log(per_it[test] / pred))
    return PooledModel(
        terms=tuple(TERMS[j] for j in idx), coef=np.asarray(coef, dtype=float),
        cv_mape=float(result.cv_mape), networks=tuple(names), hw_cols=hw_cols, rho=rho,
        abs_logres=np.sort(np.abs(np.concatenate(logres))),
    )
