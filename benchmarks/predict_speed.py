"""Time of one ``predict_table`` call of 100 configurations on a fitted default model.

Run: ``.venv/bin/python benchmarks/predict_speed.py``

The interactive figure behind the what-if panel and ``%predict_time``: a synthetic roofline-like
network (6 batch sizes, two iteration counts, 2% noise), fitted once, then 100 rows asked 20
times. Prints the median and worst call on this (shared) machine; the target is 50 ms. (The
test suite checks only that no estimator is refitted inside ``predict_table``.)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuperf_magics.model import TrainingTimeModel


def synthetic(seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    rows = []
    for b in 2 ** np.arange(3, 9):
        for it in (50, 200):
            per_it = 0.004 + b * (0.002 / 8.1 + 0.05 / 320.0)
            rows.append({"network": "net", "batch_size": int(b), "iterations": it,
                         "gpu_fp32_tflops": 8.1, "gpu_bandwidth_gbs": 320.0,
                         "time_s": 1.5 + it * per_it * (1 + 0.02 * rng.standard_normal())})
    frame = pd.DataFrame(rows)
    return frame.drop(columns="time_s"), frame["time_s"].to_numpy()


def main() -> None:
    x, y = synthetic()
    model = TrainingTimeModel().fit(x, y)
    query = pd.concat([x] * 9, ignore_index=True).iloc[:100]
    model.predict_table(query)  # first call: lazy imports
    times = []
    for _ in range(20):
        start = time.perf_counter()
        model.predict_table(query)
        times.append(time.perf_counter() - start)
    print(f"predict_table, 100 configurations: median {statistics.median(times) * 1e3:.1f} ms, "
          f"worst {max(times) * 1e3:.1f} ms (target 50 ms)")


if __name__ == "__main__":
    main()
