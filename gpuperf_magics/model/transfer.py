"""Moving a measured time to another GPU: ``time ∝ scale × (1/peak FLOPS + ρ/bandwidth)``.

A configuration measured on GPU ``g`` is carried to GPU ``n`` by the ratio ``h(n)/h(g)`` with
``h = 1/gpu_fp32_tflops + ρ/gpu_bandwidth_gbs``. ``ρ`` (TFLOPS per GB/s, i.e. 1000 / arithmetic
intensity in FLOP/byte) weighs memory-bound work against compute-bound work. It is learnt, in
order of preference, from the user's own runs on several GPUs, from the public multi-GPU
measurements (the parameters shipped with the package), or else the documented physical prior
:data:`RHO_PRIOR` (an arithmetic intensity of 50 FLOP/byte), with a wider interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from gpuperf_magics.model.features import Table

#: Candidate values of ρ.
RHO_GRID = (0.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
#: ρ when neither the user's runs nor public data can tell: 1000 / (50 FLOP/byte).
RHO_PRIOR = 20.0
#: MAPE assumed for a transfer with the physical prior only (no public data to measure it);
#: the notes' finding that spec-sheet ratios miss by 40% and more is why it is this wide.
PRIOR_TRANSFER_MAPE = 0.40


@dataclass(frozen=True)
class TransferPrior:
    """ρ and the leave-one-GPU-out MAPE it was measured with (``source`` says where from)."""

    rho: float
    mape: float
    source: str


def hardware_factor(tflops: np.ndarray, bandwidth: np.ndarray | None, rho: float) -> np.ndarray:
    """``h = 1/tflops + ρ/bandwidth`` (``1/tflops`` when the bandwidth is unknown)."""
    h = 1.0 / np.asarray(tflops, dtype=float)
    if bandwidth is not None:
        h = h + rho / np.asarray(bandwidth, dtype=float)
    return h


def move_by_ratio(model: Any, hardware: np.ndarray, hw_cols: list[str], rho: float,
                  feats: pd.DataFrame | Table, its: np.ndarray) -> np.ndarray:
    """Carry ``model``'s prediction on each measured GPU (a row of ``hardware``, figures in
    ``hw_cols``) to the GPU of each row of ``feats`` by the ratio of hardware factors, and
    average the carried times in log space, weighted towards the nearest measured GPUs."""
    has_bw = "gpu_bandwidth_gbs" in hw_cols

    def factor(values: np.ndarray) -> np.ndarray:
        return hardware_factor(values[:, 0], values[:, 1] if has_bw else None, rho)

    table = Table.of(feats)
    h_new = factor(table.matrix(hw_cols))
    h_known = factor(hardware)
    logs = np.zeros((len(table), len(hardware)))
    for j, spec in enumerate(hardware):
        moved = table.replace({c: np.full(len(table), float(spec[k]))
                               for k, c in enumerate(hw_cols)})
        logs[:, j] = np.log(np.maximum(model.predict(moved, its), 1e-12))
    logs += np.log(h_new)[:, None] - np.log(h_known)[None, :]
    # The nearest measured GPUs (in the hardware factor) say most about the new one.
    w = 1.0 / (np.abs(np.log(h_new)[:, None] - np.log(h_known)[None, :]) + 0.05)
    return np.exp((logs * w).sum(axis=1) / w.sum(axis=1))


def fit_rho(table: pd.DataFrame, config_cols: list[str]) -> TransferPrior | None:
    """Choose ρ by leave-one-GPU-out error over configurations measured on several GPUs.

    Parameters
    ----------
    table : DataFrame
        Columns ``config_cols``, ``gpu_fp32_tflops``, ``gpu_bandwidth_gbs`` and ``time_s``.
    config_cols : list of str
        Columns that identify one configuration (network, batch size, GPU count ...).

    Returns
    -------
    TransferPrior or None
        None when no configuration was measured on two GPUs.
    """
    hw = ["gpu_fp32_tflops", "gpu_bandwidth_gbs"]
    grouped = table.groupby([*config_cols, *hw], dropna=False)["time_s"].mean().reset_index()
    keys = grouped[config_cols].astype(str).agg("|".join, axis=1)
    gpu_key = grouped[hw].astype(str).agg("|".join, axis=1)
    pivot = pd.pivot_table(
        pd.DataFrame({"c": keys, "g": gpu_key, "t": np.log(grouped["time_s"])}),
        index="c", columns="g", values="t",
    )
    if pivot.shape[1] < 2:
        return None
    specs = np.array([[float(v) for v in g.split("|")] for g in pivot.columns])
    return _best_rho(pivot.to_numpy(), specs)


def fit_rho_arrays(config: np.ndarray, specs: np.ndarray,
                   time_s: np.ndarray) -> TransferPrior | None:
    """:func:`fit_rho` on float arrays: the same ρ and MAPE, without pandas.

    A network's fit calls this on every refit, where the pivot table cost more than the
    choice of ρ. Rows and GPUs are ordered as :func:`fit_rho`'s pivot orders them (by the
    text of their values), so every mean adds in the same order and the figures match to the
    last bit.

    Parameters
    ----------
    config : ndarray of shape (n, k)
        The values that identify each row's configuration.
    specs : ndarray of shape (n, 2)
        Each row's ``gpu_fp32_tflops`` and ``gpu_bandwidth_gbs``.
    time_s : ndarray of shape (n,)
        Seconds of each row.
    """
    keys = np.array(["|".join(map(str, r)) for r in np.asarray(config, dtype=float).tolist()])
    gpu = np.array(["|".join(map(str, r)) for r in np.asarray(specs, dtype=float).tolist()])
    c_names, c_id = np.unique(keys, return_inverse=True)
    g_names, g_id = np.unique(gpu, return_inverse=True)
    if len(g_names) < 2:
        return None
    cell = c_id.reshape(-1) * len(g_names) + g_id.reshape(-1)
    if len(np.unique(cell)) < len(cell):  # repeats of a configuration on one GPU: average
        return fit_rho(pd.DataFrame({**{f"c{j}": config[:, j] for j in range(config.shape[1])},
                                     "gpu_fp32_tflops": specs[:, 0],
                                     "gpu_bandwidth_gbs": specs[:, 1], "time_s": time_s}),
                       [f"c{j}" for j in range(config.shape[1])])
    logt = np.full((len(c_names), len(g_names)), np.nan)
    logt.reshape(-1)[cell] = np.log(np.asarray(time_s, dtype=float))
    first = np.zeros(len(g_names), dtype=int)
    first[g_id.reshape(-1)] = np.arange(len(g_id))
    return _best_rho(logt, np.asarray(specs, dtype=float)[first])


def _best_rho(logt: np.ndarray, specs: np.ndarray) -> TransferPrior | None:
    """The ρ of :data:`RHO_GRID` whose leave-one-GPU-out MAPE is lowest on ``logt`` (log
    seconds, configurations × GPUs, NaN where not measured; ``specs``: each GPU's figures).

    Every ρ at once (one array per held-out GPU, ρ × configurations × other GPUs); each mean
    still adds one ρ's row on its own, so the figures are those of a loop over ρ to the last
    bit (a fit calls this on every refit: the loop took a tenth of a 1,000-configuration fit).
    """
    logh = np.stack([np.log(hardware_factor(specs[:, 0], specs[:, 1], rho)) for rho in RHO_GRID])
    scale = logt[None, :, :] - logh[:, None, :]  # log per-configuration scale from each GPU
    finite = np.isfinite(logt)
    errs: list[list[float]] = []  # per held-out GPU, per ρ
    for j in range(logt.shape[1]):
        rest = [k for k in range(logt.shape[1]) if k != j]
        have = finite[:, j] & finite[:, rest].any(axis=1)
        if not have.any():
            continue
        pred = np.nanmean(scale[:, have][:, :, rest], axis=2) + logh[:, j, None]
        # One row (ρ) at a time: a mean along a 2-D array's rows may add in another order.
        errs.append([float(np.mean(row))
                     for row in np.abs(np.exp(pred - logt[have, j][None, :]) - 1)])
    if not errs:
        return None
    best: TransferPrior | None = None
    for r, rho in enumerate(RHO_GRID):
        mape = float(np.mean([e[r] for e in errs]))
        if best is None or mape < best.mape:
            best = TransferPrior(rho, mape, "")
    return best


def public_prior() -> TransferPrior:
    """ρ learnt from public multi-GPU measurements, as shipped in the package.

    Read from the parameters :mod:`~gpuperf_magics.model.gpu_move` ships (learnt by
    ``benchmarks/gpu_transfer_params.py`` on data with the precision recorded); never from the
    network, so a fit gives the same answer online and offline.
    """
    from gpuperf_magics.model.gpu_move import shipped

    move = shipped()["recorded"]
    if move.n_pairs == 0:
        return TransferPrior(RHO_PRIOR, PRIOR_TRANSFER_MAPE, "physical prior (no public data)")
    return TransferPrior(move.rho, move.mape, f"public data ({move.source})")
