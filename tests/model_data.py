"""Synthetic training-time tables that the model tests share: runs of a roofline-like
workload, data-parallel runs on four GPUs, steady per-run times and a launch-bound series."""

from __future__ import annotations

import numpy as np
import pandas as pd


def synthetic(n_batches: int = 6, gpus: tuple[tuple[float, float], ...] = ((8.1, 320.0),),
              seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Per-iteration times of a roofline-like workload with a floor and 2% noise."""
    rng = np.random.default_rng(seed)
    rows = []
    for tflops, bw in gpus:
        for b in 2 ** np.arange(3, 3 + n_batches):
            for it in (50, 200):
                per_it = 0.004 + b * (0.002 / tflops + 0.05 / bw)
                rows.append({"network": "net", "batch_size": int(b), "iterations": it,
                             "gpu_fp32_tflops": tflops, "gpu_bandwidth_gbs": bw,
                             "status": "ok", "source": "test", "created_at": "2024-01-01",
                             "time_s": 1.5 + it * per_it * (1 + 0.02 * rng.standard_normal())})
    frame = pd.DataFrame(rows)
    return frame.drop(columns="time_s"), frame["time_s"].to_numpy()


def multi_gpu_rows() -> pd.DataFrame:
    """Data parallel on 4 GPUs: a floor, compute ∝ batch/GPUs/peak, and a GPU-independent
    gradient exchange ∝ (g-1)/g, so 2 GPUs are slower than 1 on the fastest GPU."""
    rng = np.random.default_rng(0)
    rows = []
    for tflops, bw in ((1.2, 64.0), (4.4, 240.0), (4.8, 160.0), (11.3, 484.0)):
        for g in (1, 2, 4):
            for b in (8, 16, 32, 64):
                per_it = 0.01 + 0.05 * (1 - 1 / g) + 0.02 * (b / g) / tflops
                for _ in range(2):
                    rows.append({"network": "net", "batch_size": b, "gpu_count": g,
                                 "iterations": 1000, "gpu_fp32_tflops": tflops,
                                 "gpu_bandwidth_gbs": bw,
                                 "time_s": 1000 * per_it * (1 + 0.01 * rng.standard_normal())})
    return pd.DataFrame(rows)


def steady(gpu: str | None = "Tesla T4", batches=(8, 16, 32, 64, 128, 256), net="net"):
    """Per-run times of 20 iterations each (a profiled store): no set-up constant to learn."""
    x = pd.DataFrame({"network": net, "batch_size": list(batches), "iterations": 20})
    if gpu is not None:
        x["gpu"] = gpu
    return x, 20 * (0.002 + 5e-5 * x["batch_size"].to_numpy(float))


#: The batch sizes of :func:`floor_series`.
BATCHES = (8, 16, 32, 64, 128, 256, 512)


def floor_series(noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Launch-bound up to batch 100 (1 s per iteration), then linear in the batch."""
    rng = np.random.default_rng(seed)
    rows = [{"network": "net", "batch_size": b, "iterations": 1, "gpu": "Tesla T4",
             "time_s": max(1.0, 0.01 * b) * (1 + noise * rng.standard_normal())}
            for b in BATCHES]
    return pd.DataFrame(rows)
