"""How far beyond the measured batch sizes an answer can go: error and interval coverage by reach.

Run: ``GPUPERF_DATA_HOME=../shared/data nice -n 10 .venv/bin/python benchmarks/batch_reach.py
[--write] [--rows FILE]``

The accuracy scenarios hold out one end of a series, about one spacing beyond the rest. A
notebook user more often profiles two or three small batch sizes and asks about a much larger
one. Per batch series of sia2023 (one node, one GPU), gavel2020 (one GPU) and lattuada2022
(each file, GPU, loader and depth), a user measured the ``k`` smallest batch sizes (k = 2, 3)
and asks every larger one the series holds: the default is fitted on those rows alone, as a
user's store would hold them. Per bucket of reach (how many of the measured series' last
spacings the asked batch lies beyond its end, log scale, as ``model.local.reach`` counts),
the MAPE, the share of the asked rows inside the 80% interval, its median width (high / low),
and the mean ``expected_mape``. lattuada2022 is reported apart (a data set to check a rule
on, after it is set on the other two).

``--write`` stores the report in ``docs/figures/batch_reach.md``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GPUPERF_DATA_HOME", str(ROOT.parent / "shared" / "data"))

from gpuperf_magics.datasets import fetch_lattuada2022, fetch_sia2023  # noqa: E402
from gpuperf_magics.model import TrainingTimeModel  # noqa: E402

#: Edges of the reach buckets (spacings beyond the measured end).
EDGES = (0, 1.5, 3, 6, 12, np.inf)
KS = (2, 3)
COVERAGE = 0.8


def series() -> list[tuple[str, str, pd.DataFrame, str]]:
    """(data set, name, rows with ``time_s``, batch column) of every batch series with at
    least k + 1 batch sizes."""
    out = []
    sia = fetch_sia2023()
    sia = sia[(sia["nodes"] == 1) & (sia["gpu_count"] == 1)].drop(
        columns=["sync_time_s", "status", "source", "cluster", "placement"], errors="ignore")
    for key, part in sia.groupby(["network", "gpu"], sort=True):
        out.append(("sia2023", "/".join(key), part.reset_index(drop=True), "local_batch_size"))
    home = Path(os.environ["GPUPERF_DATA_HOME"])
    gavel = pd.read_csv(home / "gavel2020" / "gavel.csv")
    gavel = gavel[gavel["gpu_count"] == 1][["network", "gpu", "precision", "batch_size",
                                            "gpu_count", "time_s"]].assign(iterations=1)
    for key, part in gavel.groupby(["network", "gpu", "precision"], sort=True):
        out.append(("gavel2020", "/".join(map(str, key)), part.reset_index(drop=True),
                    "batch_size"))
    lat = fetch_lattuada2022().drop(columns=["status", "source", "framework"])
    keys = ["file", "gpu", "gpu_count", "disk_speed", "dataloader_workers", "depth"]
    for key, part in lat.groupby(keys, sort=True, dropna=False):
        out.append(("lattuada2022", "/".join(map(str, key)), part.reset_index(drop=True),
                    "batch_size"))
    return [s for s in out if s[2][s[3]].nunique() >= min(KS) + 1]


def simulate(source: str, name: str, frame: pd.DataFrame, axis: str) -> list[dict]:
    values = np.sort(frame[axis].unique())
    rows = []
    for k in KS:
        if len(values) < k + 1:
            continue
        measured = frame[frame[axis].isin(values[:k])]
        asked = frame[frame[axis] > values[k - 1]]
        model = TrainingTimeModel(n_jobs=1).fit(measured.drop(columns="time_s"),
                                                measured["time_s"])
        table = model.predict_table(asked.drop(columns="time_s"), coverage=COVERAGE)
        end, before = np.log(values[k - 1]), np.log(values[k - 2])
        reach = (np.log(asked[axis].to_numpy(float)) - end) / (end - before)
        actual = asked["time_s"].to_numpy(float)
        for i in range(len(asked)):
            rows.append({"source": source, "series": name, "k": k, "reach": reach[i],
                         "actual": actual[i], "pred": table["time_s"].iloc[i],
                         "low": table["time_low_s"].iloc[i],
                         "high": table["time_high_s"].iloc[i],
                         "expected": table["expected_mape"].iloc[i],
                         "kind": table["kind"].iloc[i]})
    return rows


def report(results: pd.DataFrame) -> list[str]:
    lines = []
    r = results.assign(
        ape=(results["pred"] / results["actual"] - 1).abs(),
        inside=(results["actual"] >= results["low"]) & (results["actual"] <= results["high"]),
        width=results["high"] / results["low"],
        bucket=pd.cut(results["reach"], EDGES, right=False))
    for title, part in (("sia2023 and gavel2020", r[r["source"] != "lattuada2022"]),
                        ("lattuada2022", r[r["source"] == "lattuada2022"])):
        lines += ["", f"**{title}** ({part['series'].nunique()} series, {len(part)} asked rows)",
                  "", "| reach (spacings) | rows | MAPE % | median APE % | inside 80% | "
                  "median high/low | mean expected % |", "| --- |" + " ---: |" * 6]
        for bucket, b in part.groupby("bucket", observed=True):
            lines.append(f"| {bucket} | {len(b)} | {100 * b['ape'].mean():.1f} | "
                         f"{100 * b['ape'].median():.1f} | {100 * b['inside'].mean():.0f}% | "
                         f"{b['width'].median():.2f} | {100 * b['expected'].mean():.1f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store docs/figures/batch_reach.md")
    parser.add_argument("--rows", help="also write every asked row to this CSV file")
    args = parser.parse_args()
    rows = [row for s in series() for row in simulate(*s)]
    results = pd.DataFrame(rows)
    if args.rows:
        results.to_csv(args.rows, index=False)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    changed = subprocess.run(["git", "status", "--porcelain", "gpuperf_magics"], cwd=ROOT,
                             capture_output=True, text=True).stdout.strip()
    lines = [f"*Measured by `python benchmarks/batch_reach.py` on commit `{commit}`"
             f"{' with uncommitted changes' if changed else ''} "
             f"({time.strftime('%Y-%m-%d')}). A user measured the 2 or 3 smallest batch sizes "
             "of a series and asks every larger one; by how far beyond (in the measured "
             "series' last spacings, log scale). `--write` regenerates this file.*",
             *report(results)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        (ROOT / "docs" / "figures" / "batch_reach.md").write_text(text)


if __name__ == "__main__":
    main()
