"""How many iterations ``stop_after="auto"`` needs, and how close its median is to a full run.

For each workload of ``benchmarks/overhead.py`` (hook floor, MLP, CNN, Lightning), alternating
in one process so machine noise hits both alike: runs with ``stop_after="auto"`` over a loop
long enough never to end by itself, each between two full profiled runs of 200 iterations.
Reports, over the rounds, the median iterations ``auto`` ran, how often it stopped for
precision (rather than at its ceiling), the half-width it claimed when it stopped (median),
the error of its median time per iteration against the mean of the two full runs around it
(median, signed median and worst round) and how many rounds that error was within the claim,
beside what the machine itself gives: the spread of the full runs' own medians (max/min − 1)
and the median gap between the two full runs around each auto run (no stop rule can be
expected to come closer to them than they are to each other).

    python benchmarks/stop_after.py [--rounds 5] [--threads 1] [--device cuda]
    python benchmarks/stop_after.py --synthetic [--draws 200]
    python benchmarks/stop_after.py --overshoot [--draws 15]

``--overshoot`` measures :data:`gpuperf_magics.auto_stop.RULE_OVERSHOOT`: the capture's rule
fed independent normal times of a known spread, its median stop over the order-statistic count
``(z·√(π/2)·σ / 1%)² + 1`` that ``suggest`` prices a run by.

Aim (issue 20): the median ``auto`` stopped at is within 2% of the full run's. ``--device
cuda`` runs the MLP and the CNN on the GPU too (the auto rule then reads CUDA events).

``--synthetic`` runs no loop: it feeds the rule iteration times with a known noise (independent,
autocorrelated, a drift, a wandering level, spikes, a second process taking the core now and
then) and reports, per case, where it stopped, the half-width it claimed, its error against the
true median, and how often the claim covered the error ("covered": about 95% is sound), for
the rule as it is and for the order statistics of all iterations (the rule before block
medians).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

import gpuperf_magics as gm
from gpuperf_magics.capture import stopping
from gpuperf_magics.capture.stopping import AUTO_CEILING, AUTO_FLOOR, AUTO_PRECISION

_HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("overhead_benchmark", _HERE / "overhead.py")
assert _spec is not None and _spec.loader is not None
overhead = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = overhead
_spec.loader.exec_module(overhead)

#: The full run every ``auto`` run is compared with.
FULL = 200


def profiled(loop: Callable[[int], None], iterations: int,
             stop_after: Any = None) -> tuple[Any, float | None]:
    """One profiled run of ``loop`` (nothing saved): the Run and, for ``auto``, the half-width
    its rule claimed when it stopped."""
    session = gm.profile_training(save=False, stop_after=stop_after)
    with session as run:
        loop(iterations)
    rule = getattr(session, "_stop_rule", None)
    interval = rule.auto.interval if rule is not None and rule.auto is not None else None
    return run, (interval.half_width if interval is not None else None)


def compare(loop: Callable[[int], None], rounds: int) -> dict[str, float]:
    """Rounds of auto runs between full runs: iterations auto needed and the error of its
    median against the mean of the two full runs around it (a machine whose load drifts
    moves both alike)."""
    loop(20)  # warm up allocators and autograd
    needed, errors, claims, gaps, precise = [], [], [], [], 0
    fulls = [profiled(loop, FULL)[0].median_s]
    for _ in range(rounds):
        auto, claimed = profiled(loop, AUTO_CEILING + 50, stop_after="auto")
        fulls.append(profiled(loop, FULL)[0].median_s)
        needed.append(len(auto.iterations))
        precise += auto.stopped_by == "precision"
        claims.append(math.nan if claimed is None else claimed)
        errors.append(auto.median_s / ((fulls[-2] + fulls[-1]) / 2) - 1)
        gaps.append(abs(fulls[-1] / fulls[-2] - 1))
    return {"iterations": statistics.median(needed), "min": min(needed), "max": max(needed),
            "precise": precise / rounds, "bias": statistics.median(errors),
            "error": statistics.median(abs(e) for e in errors),
            "worst": max(abs(e) for e in errors), "median_s": statistics.median(fulls),
            "drift": max(fulls) / min(fulls) - 1, "claimed": statistics.median(claims),
            "gap": statistics.median(gaps),
            "within": statistics.fmean(abs(e) <= c for e, c in zip(errors, claims))}


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


def real_loops(args: argparse.Namespace) -> None:
    """The table of the real workloads."""
    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.1f}; auto: median within "
          f"{100 * AUTO_PRECISION:g}%, {AUTO_FLOOR} to {AUTO_CEILING} iterations; "
          f"error = |auto median / {FULL}-iteration median − 1|")
    print()
    print("| workload | full-run median | full runs' spread | gap between full runs "
          "| auto iterations (min–max) | stopped for precision | claimed ± | median error "
          "| signed median | worst round | rounds within their claim |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    plan = [overhead.hook_floor_workload, overhead.mlp_workload, overhead.cnn_workload]
    if importlib.util.find_spec("lightning") is not None:
        plan.append(overhead.lightning_workload)
    if args.device == "cuda":  # first: on a lent GPU machine they are what is scarce
        plan = cuda_workloads() + plan
    for make in plan:
        loop, label = make()
        r = compare(loop, args.rounds)
        print(f"| {label} | {1e3 * r['median_s']:.3f} ms | {100 * r['drift']:.1f}% | "
              f"{100 * r['gap']:.1f}% | {r['iterations']:.0f} ({r['min']}–{r['max']}) | "
              f"{100 * r['precise']:.0f}% | {100 * r['claimed']:.1f}% | "
              f"{100 * r['error']:.2f}% | {100 * r['bias']:+.2f}% | {100 * r['worst']:.2f}% | "
              f"{100 * r['within']:.0f}% |", flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


#: The synthetic cases: iteration times around 10 ms.
CASES = {
    "independent, 5%": "iid 0.05",
    "independent, 20%": "iid 0.20",
    "autocorrelated (AR(1) ρ 0.5), 5%": "ar 0.5",
    "autocorrelated (AR(1) ρ 0.9), 5%": "ar 0.9",
    "slow drift +30% per 1000, 3%": "drift 0.30",
    "wandering level (~10% per 1000), 3%": "walk 0.10",
    "spikes (5% of iterations ×3), 3%": "spikes 0.05",
    "second process (25% of the time ×1.5), 3%": "load 0.25",
}


def synthetic(kind: str, rng: Any, n: int = AUTO_CEILING) -> tuple[Any, Any]:
    """Times and their noise-free level per iteration for a case of :data:`CASES`."""
    name, value = kind.split()
    a = float(value)
    level = np.full(n, 0.010)
    noise = rng.normal(0, 0.03, n)
    if name == "iid":
        noise = rng.normal(0, a, n)
    elif name == "ar":
        x, shocks = np.empty(n), rng.normal(0, 0.05 * math.sqrt(1 - a * a), n)
        x[0] = rng.normal(0, 0.05)
        for i in range(1, n):
            x[i] = a * x[i - 1] + shocks[i]
        noise = x
    elif name == "drift":
        level = level * (1 + a * np.arange(n) / 1000)
    elif name == "walk":
        level = level * np.exp(np.cumsum(rng.normal(0, a / math.sqrt(1000), n)))
    elif name == "load":  # a two-state chain: slow spells of 50 iterations on average
        slow, state = np.empty(n, bool), False
        for i in range(n):
            state = (rng.random() >= 1 / 50) if state else (rng.random() < a / (1 - a) / 50)
            slow[i] = state
        level = level * np.where(slow, 1.5, 1.0)
    times = level * np.exp(noise)
    if name == "spikes":
        times = times * np.where(rng.random(n) < a, 3, 1)
    return times, level


class OrderStatistics(stopping.MedianPrecision):
    """The rule before block medians: the order statistics of all iterations, as if they
    were independent."""

    def judge(self) -> Any:
        d = np.array(self.durations)
        skip = max(self.warmup - 1, 0) if self.warmup is not None else self._auto_skip(d)
        self.interval = stopping.median_interval(d[skip:])
        return self.interval


def synthetic_table(draws: int) -> None:
    """Per case and rule: the stop, the claim, the error and how often the claim covered it,
    and the error against full runs of :data:`FULL` iterations just before and after."""
    print(f"{draws} series per case; truth: the median of the noise-free level over the "
          "iterations the rule ran (spikes: the distribution's); errors are absolute; "
          "covered: error ≤ claimed; runs around: the mean of the medians of "
          f"{FULL} iterations before and after")
    print()
    print("| case | rule | stop (p10–p90) | stopped for precision | claimed ± | median error "
          "| error p95 | covered | error vs runs around | within 2% of them |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    spiky = 0.010 * math.exp(0.03 * statistics.NormalDist().inv_cdf(0.5 / 0.95))
    for label, kind in CASES.items():
        for rule_name, rule_type in (("order statistics (before)", OrderStatistics),
                                     ("block medians (now)", stopping.MedianPrecision)):
            rows = [_one_series(kind, seed, rule_type, spiky) for seed in range(draws)]
            stops, claims, errors, around = (np.array(column) for column in zip(*rows))
            print(f"| {label} | {rule_name} | {np.median(stops):.0f} "
                  f"({np.percentile(stops, 10):.0f}–{np.percentile(stops, 90):.0f}) | "
                  f"{100 * np.mean(stops < AUTO_CEILING):.0f}% | "
                  f"{100 * np.median(claims):.2f}% | {100 * np.median(errors):.2f}% | "
                  f"{100 * np.percentile(errors, 95):.2f}% | "
                  f"{100 * np.mean(errors <= claims):.0f}% | {100 * np.median(around):.2f}% | "
                  f"{100 * np.mean(around <= 0.02):.0f}% |", flush=True)


def _one_series(kind: str, seed: int, rule_type: type[stopping.MedianPrecision],
                spiky: float) -> tuple[int, float, float, float]:
    """One auto run on a synthetic series between two full runs: where it stopped, the
    half-width it claimed, its error against the truth and against the full runs."""
    times, level = synthetic(kind, np.random.default_rng(seed), FULL + AUTO_CEILING + FULL)
    rule = rule_type()
    for steps in range(1, AUTO_CEILING + 1):
        if steps > 1:
            rule.add(float(times[FULL + steps - 2]))
        if rule.reason(steps):
            break
    interval = rule.interval
    assert interval is not None
    ran = slice(FULL, FULL + steps - 1)
    true = spiky if kind.startswith("spikes") else float(np.median(level[ran]))
    after = times[ran.stop:ran.stop + FULL]
    around = (float(np.median(times[:FULL])) + float(np.median(after))) / 2
    return (steps, interval.half_width, abs(interval.median / true - 1),
            abs(interval.median / around - 1))


def overshoot_table(draws: int) -> None:
    """Median stop of the capture's rule on independent normal times per spread, over the
    order-statistic count (the count :func:`~gpuperf_magics.auto_stop.auto_iterations` gives
    before its :data:`~gpuperf_magics.auto_stop.RULE_OVERSHOOT`)."""
    import math
    import random

    from gpuperf_magics import auto_stop
    from gpuperf_magics.capture.stopping import MedianPrecision

    print("| spread | order-statistic count | median stop | ratio | stops |")
    print("| ---: | ---: | ---: | ---: | --- |")
    for sigma in (0.03, 0.04, 0.05, 0.07):
        stops = []
        for seed in range(draws):
            rng, rule = random.Random(seed), MedianPrecision()
            for steps in range(1, AUTO_CEILING + 1):
                if steps > 1:
                    rule.add(0.01 * (1 + rng.gauss(0.0, sigma)))
                if rule.reason(steps) is not None:
                    break
            stops.append(steps)
        plain = math.ceil((auto_stop.MEDIAN_Z * auto_stop.MEDIAN_EFFICIENCY * sigma
                           / AUTO_PRECISION) ** 2) + 1
        median = statistics.median(stops)
        print(f"| {sigma:.0%} | {plain} | {median:g} | {median / plain:.2f} | "
              f"{min(stops)}–{max(stops)} |")
    print(f"RULE_OVERSHOOT = {auto_stop.RULE_OVERSHOOT}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--synthetic", action="store_true",
                        help="feed the rule times with a known noise instead of running loops")
    parser.add_argument("--overshoot", action="store_true",
                        help="the stop rule's iterations over the order-statistic count")
    parser.add_argument("--draws", type=int, default=None,
                        help="series per case (200 for --synthetic, 15 for --overshoot)")
    args = parser.parse_args()
    if args.overshoot:
        overshoot_table(args.draws or 15)
        return
    if args.synthetic:
        synthetic_table(args.draws or 200)
        return
    torch.set_num_threads(args.threads)
    real_loops(args)


if __name__ == "__main__":
    main()
