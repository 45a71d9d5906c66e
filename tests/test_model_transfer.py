"""ρ of the hardware factor: fit_rho on a table and on arrays agree to the last bit; moves by
the ratio of hardware factors."""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpuperf_magics.model.transfer import RHO_GRID, fit_rho, fit_rho_arrays, hardware_factor

GPUS = ((8.1, 320.0), (15.7, 900.0), (13.4, 616.0), (4.4, 240.0))


def _runs(seed: int = 0, rho: float = 10.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for tflops, bw in GPUS:
        for b in (8, 16, 32, 64, 128):
            for size in (64.0, 96.0, 128.0):
                if rng.uniform() < 0.2:
                    continue  # not every configuration ran on every GPU
                h = hardware_factor(tflops, bw, rho)
                rows.append({"batch_size": float(b), "image_size": size,
                             "gpu_fp32_tflops": tflops, "gpu_bandwidth_gbs": bw,
                             "time_s": b * size * h * (1 + 0.05 * rng.standard_normal())})
    return pd.DataFrame(rows)


def test_fit_rho_arrays_equals_fit_rho_exactly() -> None:
    for seed in range(5):
        runs = _runs(seed)
        config = ["batch_size", "image_size"]
        slow = fit_rho(runs, config)
        fast = fit_rho_arrays(runs[config].to_numpy(), runs[["gpu_fp32_tflops",
                                                             "gpu_bandwidth_gbs"]].to_numpy(),
                              runs["time_s"].to_numpy())
        assert slow is not None and fast is not None
        assert (fast.rho, fast.mape) == (slow.rho, slow.mape)
        assert fast.rho in RHO_GRID


def test_fit_rho_arrays_averages_repeats_as_fit_rho_does() -> None:
    runs = _runs(1)
    runs = pd.concat([runs, runs.assign(time_s=runs["time_s"] * 1.1)], ignore_index=True)
    config = ["batch_size", "image_size"]
    slow = fit_rho(runs, config)
    fast = fit_rho_arrays(runs[config].to_numpy(),
                          runs[["gpu_fp32_tflops", "gpu_bandwidth_gbs"]].to_numpy(),
                          runs["time_s"].to_numpy())
    assert slow is not None and fast is not None
    assert (fast.rho, fast.mape) == (slow.rho, slow.mape)


def test_fit_rho_needs_two_gpus() -> None:
    runs = _runs(2)
    one = runs[runs["gpu_fp32_tflops"] == 8.1]
    specs = one[["gpu_fp32_tflops", "gpu_bandwidth_gbs"]].to_numpy()
    assert fit_rho(one, ["batch_size"]) is None
    assert fit_rho_arrays(one[["batch_size"]].to_numpy(), specs, one["time_s"].to_numpy()) is None
