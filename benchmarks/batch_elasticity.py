"""Build ``gpuperf_magics/model/batch_elasticity.json`` and measure single-batch moves.

Run: ``GPUPERF_DATA_HOME=../shared/data .venv/bin/python benchmarks/batch_elasticity.py``
``--write`` (the shipped file), ``--check`` (compare a rebuild with it, byte for byte), or no
option: the benchmark.

The file holds how the time per iteration grows with the batch on a GPU
(:mod:`gpuperf_magics.model.batch_single`): learnt from every batch series of sia2023 (one GPU
of one node) and gavel2020 (one GPU), the median time per iteration per batch size.
lattuada2022 (whole runs divided by their iterations, set-up included) is left out of it, and
looked at once as held-out data.

The benchmark: per series, each measured batch size in turn is the one a user profiled, and
every other batch size 1/8 to 8 times it is asked (one run per configuration, the first);
``TrainingTimeModel()`` answers from that single point. Beside it, the time per sample kept
(what the model answered before). MAPE, the share inside the 80% interval, and the median
expected error against the realised one; per data set, then lattuada2022 apart (the held-out
look).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "benchmarks"))
os.environ.setdefault("GPUPERF_DATA_HOME", str(ROOT.parent / "shared" / "data"))

from shipped import check_or_write  # noqa: E402

from gpuperf_magics.model import batch_single  # noqa: E402

#: Data sets learnt from, with the commit and licence of each (as the evidence base's).
LEARNT_FROM = ("sia2023", "gavel2020")


def _sources() -> dict:
    from build_evidence import SOURCES

    return {s: SOURCES[s] for s in LEARNT_FROM}


def series(name: str) -> list[tuple[str, pd.DataFrame, str]]:
    """(label, rows, axis) of every batch series of a data set with three batch sizes or more
    (the rows of ``benchmarks/suggest.py``'s simulated users, at least three values)."""
    import suggest

    found = {"sia2023": suggest.sia_series, "gavel2020": suggest.gavel_series,
             "lattuada2022": lambda: [s for s in suggest.lattuada_series(
                 suggest.lattuada_table()) if s.source == "lattuada2022"]}[name]()
    return [(s.name, s.frame, s.axis) for s in found]


def per_iteration(frame: pd.DataFrame, axis: str) -> tuple[np.ndarray, np.ndarray]:
    """Batch sizes and the median seconds per iteration at each."""
    per = (frame["time_s"] / frame["iterations"]).groupby(frame[axis]).median()
    return per.index.to_numpy(float), per.to_numpy(float)


def build() -> str:
    learnt = batch_single.learn([per_iteration(f, axis) for name in LEARNT_FROM
                                 for _, f, axis in series(name)])
    payload = {"about": "How a GPU's time per iteration grows with the batch "
               "(gpuperf_magics.model.batch_single), written by "
               "benchmarks/batch_elasticity.py --write from the public batch series",
               "levels": list(batch_single.LEVELS),
               "ratios": [batch_single.MIN_RATIO, batch_single.MAX_RATIO],
               "sources": _sources(), **learnt}
    return json.dumps(payload, indent=1, sort_keys=True) + "\n"


def single_moves(name: str) -> pd.DataFrame:
    """Every single-point move of a data set's series, answered by the default model."""
    from gpuperf_magics.model import TrainingTimeModel

    rows = []
    for label, frame, axis in series(name):
        firsts = frame.groupby(axis, sort=True).head(1)
        values = np.sort(firsts[axis].unique())
        for x in values:
            asked = firsts[(firsts[axis] != x) & (firsts[axis] <= 8 * x)
                           & (firsts[axis] >= x / 8)]
            if asked.empty:
                continue
            one = firsts[firsts[axis] == x]
            model = TrainingTimeModel().fit(one.drop(columns="time_s"), one["time_s"])
            table = model.predict_table(asked.drop(columns="time_s"))
            t = float(one["time_s"].iloc[0] / one["iterations"].iloc[0])
            its = asked["iterations"].to_numpy(float)
            actual = asked["time_s"].to_numpy(float)
            q = asked[axis].to_numpy(float)
            rows.append(pd.DataFrame({
                "series": label, "x": x, "q": q, "actual": actual,
                "default": table["time_s"].to_numpy(float),
                "per_sample": t * q / x * its,
                "low": table["time_low_s"].to_numpy(float),
                "high": table["time_high_s"].to_numpy(float),
                "expected": table["expected_mape"].to_numpy(float)}))
    return pd.concat(rows, ignore_index=True)


def report(name: str, moves: pd.DataFrame) -> str:
    ape = (moves["default"] / moves["actual"] - 1).abs()
    naive = (moves["per_sample"] / moves["actual"] - 1).abs()
    inside = (moves["low"] <= moves["actual"]) & (moves["actual"] <= moves["high"])
    up = moves["q"] > moves["x"]
    width = ((moves["high"] - moves["low"]) / moves["default"]).median()
    return (f"| {name} | {moves['series'].nunique()} | {len(moves)} | {100 * naive.mean():.1f} | "
            f"{100 * ape.mean():.1f} | {100 * ape[up].mean():.1f} | {100 * ape[~up].mean():.1f} "
            f"| {100 * inside.mean():.0f}% | {100 * width:.0f}% | "
            f"{100 * moves['expected'].median():.1f} | {100 * ape.median():.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="write the shipped file")
    parser.add_argument("--check", action="store_true", help="compare with the shipped file")
    parser.add_argument("--figure", action="store_true",
                        help="also store the benchmark in docs/figures/batch_single.md")
    args = parser.parse_args()
    path = ROOT / "gpuperf_magics" / "model" / batch_single.PARAMS_FILE
    if args.write or args.check:
        check_or_write(path, build(), args.check, ROOT)
        return
    import subprocess
    import time

    p = batch_single.params()
    lo, hi, _ = batch_single.interval(1.0, np.e, 0.8)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    lines = [f"*Measured by `python benchmarks/batch_elasticity.py` on commit `{commit}` "
             f"({time.strftime('%Y-%m-%d')}); `--figure` rewrites this file.*", "",
             "The elasticity the public GPU batch series show (`batch_elasticity.json`, "
             "learnt from sia2023 and gavel2020), by the measured time per iteration:", "",
             "| time per iteration | " + " | ".join(f"{10 ** k:.3g} s" for k in p["knots"])
             + " |", "| --- |" + " ---: |" * len(p["knots"]),
             "| elasticity | " + " | ".join(f"{e:.2f}" for e in p["elasticity"]) + " |", "",
             f"Spread around it (10th-90th percentile of the pairs' elasticities minus the "
             f"curve's): {lo:+.2f} to {hi:+.2f}.", "",
             "One batch size measured per series, every other one 1/8 to 8 times it asked "
             "(MAPE %; \"time per sample kept\" is what the model answered before):", "",
             "| data set | series | moves | time per sample kept: MAPE % | default: MAPE % | "
             "up | down | inside the 80% interval | median width | expected (median) % | "
             "realised (median) % |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    print("\n".join(lines), flush=True)
    for name in (*LEARNT_FROM, "lattuada2022"):
        lines.append(report(name + (" (held out)" if name not in LEARNT_FROM else ""),
                            single_moves(name)))
        print(lines[-1], flush=True)
    if args.figure:
        (ROOT / "docs" / "figures" / "batch_single.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
