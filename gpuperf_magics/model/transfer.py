"""Moving a measured time to another GPU: ``time ∝ scale × (1/peak FLOPS + ρ/bandwidth)``.

A configuration measured on GPU ``g`` is carried to GPU ``n`` by the ratio ``h(n)/h(g)`` with
``h = 1/gpu_fp32_tflops + ρ/gpu_bandwidth_gbs``. ``ρ`` (TFLOPS per GB/s, i.e. 1000 / arithmetic
intensity in FLOP/byte) weighs memory-bound work against compute-bound work. It is learnt, in
order of preference, from the user's own runs on several GPUs, from the public multi-GPU
measurements (sia2023, leave-one-GPU-out), or else the documented physical prior
:data:`RHO_PRIOR` (an arithmetic intensity of 50 FLOP/byte), with a wider interval.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["RHO_GRID", "RHO_PRIOR", "TransferPrior", "fit_rho", "hardware_factor", "public_prior"]

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
    logt = pivot.to_numpy()
    best: TransferPrior | None = None
    for rho in RHO_GRID:
        logh = np.log(hardware_factor(specs[:, 0], specs[:, 1], rho))
        scale = logt - logh[None, :]  # log per-configuration scale seen from each GPU
        errs = []
        for j in range(len(logh)):
            others = np.delete(scale, j, axis=1)
            have = np.isfinite(logt[:, j]) & np.isfinite(others).any(axis=1)
            if not have.any():
                continue
            pred = np.nanmean(others[have], axis=1) + logh[j]
            errs.append(np.mean(np.abs(np.exp(pred - logt[have, j]) - 1)))
        if not errs:
            return None
        mape = float(np.mean(errs))
        if best is None or mape < best.mape:
            best = TransferPrior(rho, mape, "")
    return best


@functools.lru_cache(maxsize=1)
def public_prior() -> TransferPrior:
    """ρ learnt from the public sia2023 measurements, or the physical prior if unavailable.

    Computed once per process (about 0.1 s). Needs :mod:`gpuperf_magics.datasets` to find the
    data (``GPUPERF_DATA_HOME`` or its download cache) and the hardware catalog for the GPUs'
    figures; any failure falls back to :data:`RHO_PRIOR` with :data:`PRIOR_TRANSFER_MAPE`.
    """
    try:
        from gpuperf_magics import datasets
        from gpuperf_magics.hardware import catalog

        table = datasets.fetch_sia2023()
        specs = {name: catalog.lookup(name) for name in table["gpu"].unique()}
        table = table.assign(
            gpu_fp32_tflops=table["gpu"].map(lambda g: specs[g]["gpu_fp32_tflops"]),
            gpu_bandwidth_gbs=table["gpu"].map(lambda g: specs[g]["gpu_bandwidth_gbs"]),
        )
        cols = [c for c in ("network", "placement", "local_batch_size") if c in table.columns]
        prior = fit_rho(table, cols)
    except Exception:
        prior = None
    if prior is None:
        return TransferPrior(RHO_PRIOR, PRIOR_TRANSFER_MAPE, "physical prior (no public data)")
    return TransferPrior(prior.rho, prior.mape, "public data (sia2023, leave-one-GPU-out)")
