"""How many iterations ``stop_after="auto"`` needs, and how close its median is to a full run.

For each workload of ``benchmarks/overhead.py`` (hook floor, MLP, CNN, Lightning), alternating
in one process so machine noise hits both alike: runs with ``stop_after="auto"`` over a loop
long enough never to end by itself, each between two full profiled runs of 200 iterations.
Reports, over the rounds, the median iterations ``auto`` ran, how often it stopped for
precision (rather than at its ceiling), and the error of its median time per iteration against
the mean of the two full runs around it (median, signed median and worst round), beside the
spread of the full runs' own medians (max/min − 1: how much the machine itself drifted).

    python benchmarks/stop_after.py [--rounds 5] [--threads 1] [--device cuda]

Aim (issue 20): the median ``auto`` stopped at is within 2% of the full run's. ``--device
cuda`` runs the MLP and the CNN on the GPU too (the auto rule then reads CUDA events).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import gpuperf_magics as gm
from gpuperf_magics.capture.stopping import AUTO_CEILING, AUTO_FLOOR, AUTO_PRECISION

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("overhead_benchmark", _HERE / "overhead.py")
assert _spec is not None and _spec.loader is not None
overhead = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = overhead
_spec.loader.exec_module(overhead)

#: The full run every ``auto`` run is compared with.
FULL = 200


def profiled(loop: Callable[[int], None], iterations: int, stop_after: Any = None) -> Any:
    """One profiled run of ``loop`` (nothing saved): the Run."""
    with gm.profile_training(save=False, stop_after=stop_after) as run:
        loop(iterations)
    return run


def compare(loop: Callable[[int], None], rounds: int) -> dict[str, float]:
    """Rounds of auto runs between full runs: iterations auto needed and the error of its
    median against the mean of the two full runs around it (a machine whose load drifts
    moves both alike)."""
    loop(20)  # warm up allocators and autograd
    needed, errors, precise = [], [], 0
    fulls = [profiled(loop, FULL).median_s]
    for _ in range(rounds):
        auto = profiled(loop, AUTO_CEILING + 50, stop_after="auto")
        fulls.append(profiled(loop, FULL).median_s)
        needed.append(len(auto.iterations))
        precise += auto.stopped_by == "precision"
        errors.append(auto.median_s / ((fulls[-2] + fulls[-1]) / 2) - 1)
    return {"iterations": statistics.median(needed), "min": min(needed), "max": max(needed),
            "precise": precise / rounds, "bias": statistics.median(errors),
            "error": statistics.median(abs(e) for e in errors),
            "worst": max(abs(e) for e in errors), "median_s": statistics.median(fulls),
            "drift": max(fulls) / min(fulls) - 1}


def cuda_workloads() -> list[Callable[[], tuple[Callable[[int], None], str]]]:
    """The MLP and CNN workloads, on the GPU."""
    def on_gpu(make: Callable[[], tuple[Callable[[int], None], str]]) -> Any:
        def build() -> tuple[Callable[[int], None], str]:
            default = torch.get_default_device()
            torch.set_default_device("cuda")
            try:
                loop, label = make()
            finally:
                torch.set_default_device(default)
            return loop, f"{label} (CUDA)"
        return build

    return [on_gpu(overhead.mlp_workload), on_gpu(overhead.cnn_workload)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.1f}; auto: median within "
          f"{100 * AUTO_PRECISION:g}%, {AUTO_FLOOR} to {AUTO_CEILING} iterations; "
          f"error = |auto median / {FULL}-iteration median − 1|")
    print()
    print("| workload | full-run median | full runs' spread | auto iterations (min–max) "
          "| stopped for precision | median error | signed median | worst round |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    plan = [overhead.hook_floor_workload, overhead.mlp_workload, overhead.cnn_workload]
    if importlib.util.find_spec("lightning") is not None:
        plan.append(overhead.lightning_workload)
    if args.device == "cuda":
        plan += cuda_workloads()
    for make in plan:
        loop, label = make()
        r = compare(loop, args.rounds)
        print(f"| {label} | {1e3 * r['median_s']:.3f} ms | {100 * r['drift']:.1f}% | "
              f"{r['iterations']:.0f} ({r['min']}–{r['max']}) | {100 * r['precise']:.0f}% | "
              f"{100 * r['error']:.2f}% | {100 * r['bias']:+.2f}% | {100 * r['worst']:.2f}% |",
              flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
