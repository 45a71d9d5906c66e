"""Accuracy of the remaining time of a stopped run, on real CPU training.

Run: ``.venv/bin/python benchmarks/remaining_accuracy.py``

An MLP trained on the CPU at batch 64 for a job of 600 iterations, with an "evaluation" (20
forward passes without gradients) every 100 steps. The store first holds short complete runs
at batch 32, 64 and 128 (what the model learns from). Full runs of the whole job are then cut
after 25 %, 50 % and 75 % of their iterations and saved as interrupted runs (what a crash at
that point would have recorded); :func:`gpuperf_magics.prediction.remaining.remaining_time` predicts the
rest, compared with what the full run's remaining iterations took. Three full runs; the
machine is shared, so the spread between them is part of the answer. Aim: within 10 % of the
remainder.
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch import nn

import gpuperf_magics as gm
from gpuperf_magics.prediction.remaining import remaining_time

JOB = 600
BATCH = 64


class Stop(Exception):
    """Ends a run part-way, as a crash would."""


def train(store: Path, batch: int, steps: int, *, total: int | None = None,
          stop_after: int | None = None) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                          nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(batch, 512), torch.randint(0, 10, (batch,))
    try:
        with gm.profile_training(name="mlp", store=store, total_iterations=total):
            for step in range(steps):
                if stop_after is not None and step == stop_after:
                    raise Stop
                opt.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
                if total is not None and step % 100 == 99:
                    with torch.no_grad():  # a pause between steps, inside the next iteration
                        for _ in range(20):
                            model(x)
    except Stop:
        pass


def main() -> None:
    torch.set_num_threads(1)
    store = Path(tempfile.mkdtemp()) / "runs.sqlite"
    for batch in (32, 64, 128):
        train(store, batch, 60)
    st = gm.Store(store)
    errors: dict[float, list[float]] = {0.25: [], 0.5: [], 0.75: []}
    print(f"{'full run':>9} {'stopped at':>10} {'truth':>8} {'predicted':>10} {'error':>7}")
    for repeat in range(3):
        train(store, BATCH, JOB, total=JOB)
        full = st.get_run(int(st.runs(status="ok")["run_id"].iloc[-1]))
        durations = [i.duration_s for i in full.iterations]
        for share in errors:
            k = int(len(durations) * share)
            cut = dataclasses.replace(full, iterations=full.iterations[:k],
                                      status="interrupted", run_id=None, created_at=None)
            result = remaining_time(st, st.save_run(cut))
            truth = sum(durations[k:])
            predicted = float(result.frame.iloc[0]["remaining_s"])
            errors[share].append(predicted / truth - 1)
            print(f"{repeat + 1:>9} {share:>10.0%} {truth:>7.2f}s {predicted:>9.2f}s "
                  f"{100 * errors[share][-1]:>+6.1f}%")
    for share, values in errors.items():
        print(f"stopped at {share:.0%}: median |error| "
              f"{100 * statistics.median(map(abs, values)):.1f}% over {len(values)} runs")

if __name__ == "__main__":
    main()
