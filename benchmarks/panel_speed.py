"""Time of the what-if panel's answer per change: the numbers alone, and with the plot.

Run: ``.venv/bin/python benchmarks/panel_speed.py``

A store of fixed imported T4 measurements (4 batch sizes), ten priced offers (two of one's own
from a price file, as ``%config GpuPerf.prices`` gives it, and the first eight of the built-in
table), the model fitted once when the panel opens. Each change sets the
batch size; "numbers" is the prediction plus the offers table (what a change must compute),
"with plot" the whole callback (the numbers, the plot's predictions over batch sizes, the PNG
drawn and swapped into the Output widget). Median and worst of 20 changes on this (shared)
machine. Targets: numbers under 50 ms, with the plot under 0.5 s.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import gpuperf_magics as gm
from gpuperf_magics.prediction.offers import offers

EXTRA = pd.DataFrame([
    {"provider": "own", "region": "lab", "instance": f"box-{n}", "gpu": "T4", "gpus": n,
     "pricing": "on-demand", "usd_per_hour": 0.4 * n, "date": "2026-12-01", "source": "own"}
    for n in (1, 2)
])


def main() -> None:
    folder = Path(tempfile.mkdtemp())
    store = folder / "runs.sqlite"
    prices = folder / "my_prices.csv"
    EXTRA.to_csv(prices, index=False)
    batches = [16, 32, 64, 128]
    gm.Store(store).import_table(pd.DataFrame({
        "network": "resnet", "batch_size": batches,
        "time_s": [0.01 + 0.001 * b for b in batches]}), gpu="T4")
    panel = gm.what_if(store, iterations=10_000, prices=prices)
    assert len(panel.instances.value) == 10, panel.instances.value
    numbers, whole = [], []
    for i in range(20):
        batch = 24 + 8 * (i % 10)
        start = time.perf_counter()
        gm.predict_time(store, batch_sizes=[batch], iterations=10_000)
        offers(store, batch_sizes=[batch], iterations=10_000, prices=prices,
               instances=list(panel.instances.value))
        numbers.append(time.perf_counter() - start)
        start = time.perf_counter()
        panel.batch_size.value = batch + 1
        whole.append(time.perf_counter() - start)
        assert "expected error" in panel.text and panel.offers is not None
    for label, times in (("numbers (prediction + 10 offers)", numbers),
                         ("whole change with the plot", whole)):
        print(f"{label:34s} median {1e3 * statistics.median(times):6.1f} ms   "
              f"worst {1e3 * max(times):6.1f} ms")


if __name__ == "__main__":
    main()
