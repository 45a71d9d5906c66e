"""Cost of the live remaining-time line on the training loop: profiled with and without it.

Run: ``.venv/bin/python benchmarks/live_line_overhead.py [--rounds 15]``

The hook-floor workload of benchmarks/overhead.py (a near-empty iteration: one tiny linear
layer, 20,000 steps: about 1 s a round, so the line wakes twice) runs under
``profile_training`` with a known job length, alternately without and with the live line's
thread (updating every 0.5 s into a no-op output, as in a kernel minus the message to the
front end). With the line, the store's model of the workload is fitted before the loop (off
the timed window, as the magic does before the cell) and the line's thread asks it once the
loop has shown its batch: the rounds before fill the store. Reports the median of the
per-round differences in µs per iteration. The line's thread reads the step count and, once,
the loop's configuration and the model's answer; its cost is the thread's wake-ups and the
GIL it takes meanwhile.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch
from torch import nn

from gpuperf_magics.capture import profile_training
from gpuperf_magics.capture.progress import LiveLine
from gpuperf_magics.prediction.live import live_prior

STEPS = 20_000
#: The model's seconds per step each round with the line got (None: it did not answer).
ANSWERS: list[float | None] = []


def one_round(store: Path, live: bool) -> float:
    model = nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(2, 4)
    session = profile_training("floor", store, total_iterations=STEPS)
    session.__enter__()
    line = prior = None
    if live:
        from tqdm import tqdm

        prior = live_prior(store, "floor")
        # A real tqdm bar, drawn into memory (what a terminal would show, without the noise).
        line = LiveLine(session.progress, configuration=session.configuration, prior=prior,
                        bar=lambda **keywords: tqdm(file=io.StringIO(), **keywords)).start()
    start = time.perf_counter()
    for _ in range(STEPS):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    elapsed = time.perf_counter() - start
    if line is not None:
        line.stop()
        ANSWERS.append(prior.model_per_step if prior is not None else None)
    session.stop(None)
    return elapsed / STEPS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    store = Path(tempfile.mkdtemp()) / "runs.sqlite"
    one_round(store, False)  # warm-up: imports, first-cell costs
    without, with_line, diffs = [], [], []
    for _ in range(args.rounds):
        a, b = one_round(store, False), one_round(store, True)
        without.append(a)
        with_line.append(b)
        diffs.append(b - a)
    print(f"per iteration without the line: median {1e6 * statistics.median(without):.1f} µs")
    print(f"per iteration with the line:    median {1e6 * statistics.median(with_line):.1f} µs")
    print(f"difference: median {1e6 * statistics.median(diffs):+.2f} µs per iteration "
          f"(round-to-round spread {1e6 * statistics.pstdev(diffs):.1f} µs)")
    answered = [a for a in ANSWERS if a is not None]
    print(f"the store's model answered the line in {len(answered)} of {len(ANSWERS)} rounds"
          + (f" (median {1e6 * statistics.median(answered):.1f} µs per step)"
             if answered else ""))


if __name__ == "__main__":
    main()
