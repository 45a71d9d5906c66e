"""Fit and predict timings of TrainingTimeModel, against a naive mlxtend-style SFS.

Run: ``.venv/bin/python benchmarks/fit_speed.py``

Data: 1,000 synthetic rows with 6 raw features (the paper's count), so the augmentation gives
72 candidate terms (the default model adds ``1`` and ``it``); K = 8. The naive baseline refits a
scikit-learn ``Ridge`` per candidate per fold, as mlxtend's SequentialFeatureSelector does
(mlxtend itself is not a dependency). Timings are the best of 3 on this (shared) machine.

Scale: per-step traces of 10,000s of rows are what users import. ``--scale`` fits the default
on 10,000 / 30,000 / 100,000 rows of 1,000 distinct configurations (per-step times: every row a
repeat of its configuration) and reports the time and the peak memory the fit added (the
process's peak RSS, measured in a fresh child process per size). Target: 100,000 rows in under
10 s and 1 GB, growing linearly.

Shape: an imported public table is many networks on several GPUs, each over an image-size and
a batch-size grid (a public CNN set: 15 networks × 4 GPUs, 1,304 configurations, 60 series).
``--shape`` fits the default on tables of that shape, one row per configuration, at 300,
1,000, 1,304 and 10,000 configurations, each in a fresh child process (wall and CPU seconds).
Targets: 1,000 configurations in at most 2 s, 10,000 in at most 15 s. ``--shape --before DIR``
times another checkout (``git archive main | tar -x -C DIR``) alternately with this one, in one
run (``--repeats`` fits each), so that the ratio is measured under one load.

Processes: ``--jobs`` fits the same shape (300, 1,000 and 10,000 configurations) in one
process and on every core (``TrainingTimeModel(n_jobs=-1)``: the networks are validated in
joblib's worker processes, ``model.parallel``), twice, in one fresh process per size: the first
parallel fit starts the workers, the second finds them started. Wall seconds, and whether the
answers are identical (they must be).

Anchor: ``--anchor`` fits the anchored model of one network (``model.anchored``) on 2,000,
5,000 and 14,000 configurations of batch × image size × channels × GPU, one row each, in a
fresh child process per size: seconds and the peak memory the fit added. Its kernel's
leave-one-out once took an n × n matrix per bandwidth; ``--anchor --before DIR`` times the
other checkout's code (imported from DIR) alternately with this one.
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

# FIT_SPEED_ROOT: the checkout whose package a child process imports (``--before``).
sys.path.insert(0, os.environ.get("FIT_SPEED_ROOT") or str(Path(__file__).resolve().parents[1]))

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.features import augment
from gpuperf_magics.model.paper import random_folds
from gpuperf_magics.model.selection import forward_select


def _data(n: int = 1000, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = pd.DataFrame({
        "network": "net",
        "batch_size": rng.choice([16, 32, 64, 128, 256, 512], n),
        "iterations": rng.choice([100, 200, 500, 1000], n),
        "gpu_count": rng.choice([1, 2, 4, 8], n),
        "gpu_fp32_tflops": rng.choice([4.4, 8.1, 13.4, 19.5], n),
        "disk_speed": rng.choice([216.0, 384.0, 445.0], n),
        "dataloader_workers": rng.choice([2, 4, 8], n),
    })
    per_it = 0.01 + x["batch_size"] / x["gpu_count"] * 0.003 / x["gpu_fp32_tflops"]
    y = 20 + x["iterations"] * per_it * (1 + 0.02 * rng.standard_normal(n))
    return x, y.to_numpy()


def _best(fn, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def naive_sfs(z: np.ndarray, y: np.ndarray, folds: list, k_max: int, alpha: float) -> tuple:
    """mlxtend semantics, the slow way: refit Ridge for every candidate on every fold."""
    from sklearn.linear_model import Ridge

    chosen: list[int] = []
    path = []
    for _ in range(k_max):
        best = (np.inf, -1)
        for c in range(z.shape[1]):
            if c in chosen:
                continue
            cols = [*chosen, c]
            scores = []
            for train, test in folds:
                model = Ridge(alpha=alpha).fit(z[train][:, cols], y[train])
                pred = model.predict(z[test][:, cols])
                scores.append(np.mean(np.abs(pred - y[test]) / y[test]))
            best = min(best, (float(np.mean(scores)), c))
        chosen.append(best[1])
        path.append((tuple(chosen), best[0]))
    return min(path, key=lambda item: item[1])


def _trace(n: int, configs: int = 1000, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """``n`` per-step rows of ``configs`` configurations (batch × GPU × image size)."""
    rng = np.random.default_rng(seed)
    batch = np.array([8, 16, 32, 64, 128, 256, 384, 512, 768, 1024])
    gpus = np.array(["Tesla T4", "Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-40GB",
                     "NVIDIA GeForce RTX 3090", "NVIDIA L4"])
    image = np.arange(64, 64 + 16 * (configs // (len(batch) * len(gpus))), 16)
    grid = np.array(np.meshgrid(np.arange(len(batch)), np.arange(len(gpus)),
                                np.arange(len(image)))).reshape(3, -1).T[:configs]
    pick = grid[rng.integers(0, len(grid), n)]
    b, g, i = batch[pick[:, 0]], gpus[pick[:, 1]], image[pick[:, 2]]
    speed = pd.Series(g).map({"Tesla T4": 1.0, "Tesla V100-SXM2-16GB": 0.45,
                              "NVIDIA A100-SXM4-40GB": 0.3, "NVIDIA GeForce RTX 3090": 0.5,
                              "NVIDIA L4": 0.7}).to_numpy()
    per_step = (0.01 + 2e-5 * b * (i / 64) ** 2 * speed) * (1 + 0.03 * rng.standard_normal(n))
    x = pd.DataFrame({"network": "resnet", "batch_size": b, "image_size": i, "gpu": g,
                      "iterations": 1})
    return x, per_step


GPU_SPEED = {"Tesla K80": 3.2, "Tesla P100-PCIE-16GB": 1.4, "Tesla T4": 1.0,
             "Tesla V100-SXM2-16GB": 0.5, "NVIDIA A100-SXM4-40GB": 0.3}


def _zoo(configs: int, networks: int = 15, gpus: int = 4,
         seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """About ``configs`` configurations of the public CNN sets' shape: ``networks`` CNNs on
    ``gpus`` GPUs, each over an image × batch grid, one row (100 iterations) each; every
    network has its own size (parameters, FLOPs) and its own sensitivity to the GPU."""
    rng = np.random.default_rng(seed)
    names = list(GPU_SPEED)[:gpus]
    per_series = max(configs // (networks * gpus), 1)
    images = max(int(np.sqrt(per_series / 2)), 1)
    batches = -(-per_series // images) + 1  # a little over, then trimmed to ``configs``
    rows = []
    for net in range(networks):
        params = 1e6 * rng.uniform(1, 60)
        flops = 1e9 * rng.uniform(0.5, 12)  # per sample at 224 px
        power = rng.uniform(0.5, 1.0)  # how much of the GPU's speed this network sees
        for gpu in names:
            for i in range(images):
                size = 64 + 32 * i
                for j in range(batches):
                    b = 2 ** (2 + j) if j < 8 else 512 + 128 * (j - 7)
                    work = flops * (size / 224) ** 2 * b
                    per_it = 0.005 + work * 2e-13 * GPU_SPEED[gpu] ** power
                    rows.append({"network": f"cnn{net}", "gpu": gpu, "batch_size": b,
                                 "image_size": size, "iterations": 100,
                                 "arch_params": params, "arch_flops_fwd": flops,
                                 "time_s": 100 * per_it * (1 + 0.02 * rng.standard_normal())})
    frame = pd.DataFrame(rows)
    frame = frame.iloc[np.sort(rng.permutation(len(frame))[:configs])].reset_index(drop=True)
    return frame.drop(columns="time_s"), frame["time_s"].to_numpy()


def _shape_child(configs: int) -> None:
    x, y = _zoo(configs)
    start, cpu = time.perf_counter(), time.process_time()
    TrainingTimeModel(n_jobs=1).fit(x, y)  # one process: CPU seconds say the work
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    series = x.groupby(["network", "gpu"]).ngroups
    print(f"{len(x)},{series},{took:.2f},{cpu:.2f}")


def _shape_run(script: str, n: int) -> tuple[int, int, float, float]:
    """One fit of ``n`` configurations in a fresh process of ``script`` (this file or
    another checkout's): configurations, series, wall and CPU seconds."""
    out = subprocess.run([sys.executable, script, "--shape-child", str(n)],
                         capture_output=True, text=True, check=True).stdout.strip()
    rows, series, took, cpu = out.splitlines()[-1].split(",")
    return int(rows), int(series), float(took), float(cpu)


def shape(before: str | None = None, repeats: int = 1) -> None:
    """The shape table; with ``before`` (another checkout), that checkout's fits alternate
    with this one's, ``repeats`` times each, so that both see the same load."""
    # CPU seconds beside the wall clock: on a shared machine the wall clock mostly measures
    # the other users (the load average is printed for the same reason).
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if before is None:
        print("| configurations | series | fit seconds | CPU seconds | target |")
        print("| ---: | ---: | ---: | ---: | ---: |")
        for n, target in ((300, ""), (1_000, "2 s"), (1_304, ""), (10_000, "15 s")):
            rows, series, took, cpu = _shape_run(__file__, n)
            print(f"| {rows:,} | {series} | {took:.1f} | {cpu:.1f} | {target} |")
        return
    old = str(Path(before).resolve() / "benchmarks" / "fit_speed.py")
    print("| configurations | before: wall s | before: CPU s | after: wall s | after: CPU s "
          "| after ÷ before (CPU, medians) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for n in (300, 1_000, 10_000):
        times: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
        for _ in range(repeats if n < 10_000 else 1):
            for name, script in (("before", old), ("after", __file__)):
                rows, _, took, cpu = _shape_run(script, n)
                times[name].append((took, cpu))
        cells = [", ".join(f"{t[i]:.1f}" for t in times[k]) for k in times for i in (0, 1)]
        ratio = (np.median([t[1] for t in times["after"]])
                 / np.median([t[1] for t in times["before"]]))
        print(f"| {rows:,} | {' | '.join(cells)} | {ratio:.2f} |")


def _jobs_child(configs: int) -> None:
    """One process: a fit validating in this process, then two on every core (the first
    starts joblib's workers, the second finds them started); wall seconds of each, and
    whether the answers are identical."""
    x, y = _zoo(configs)
    query = pd.concat([x.iloc[::7], x.iloc[::11].assign(batch_size=x["batch_size"] * 3),
                       x.iloc[::13].assign(gpu="NVIDIA A100-SXM4-40GB")], ignore_index=True)
    took, tables = [], []
    for n_jobs in (1, -1, -1):
        start = time.perf_counter()
        model = TrainingTimeModel(n_jobs=n_jobs).fit(x, y)
        took.append(time.perf_counter() - start)
        tables.append(model.predict_table(query))
    same = all(tables[0][c].equals(t[c]) for t in tables[1:] for c in tables[0].columns)
    print(f"{len(x)},{took[0]:.2f},{took[1]:.2f},{took[2]:.2f},{same}")


def jobs() -> None:
    """The fit in one process against every core (``n_jobs``), in a fresh process per size."""
    from joblib import cpu_count

    print(f"cores: {cpu_count()}; load average before: "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("| configurations | one process: s | every core, first fit: s | every core, next fit: s "
          "| first ÷ one | next ÷ one | answers identical |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for n in (300, 1_000, 10_000):
        out = subprocess.run([sys.executable, __file__, "--jobs-child", str(n)],
                             capture_output=True, text=True, check=True).stdout.strip()
        rows, one, first, warm, same = out.splitlines()[-1].split(",")
        one_s, first_s, warm_s = float(one), float(first), float(warm)
        print(f"| {int(rows):,} | {one_s:.1f} | {first_s:.1f} | {warm_s:.1f} | "
              f"{first_s / one_s:.2f} | {warm_s / one_s:.2f} | {same} |")


def _scale_child(n: int) -> None:
    import resource

    x, y = _trace(n)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    model = TrainingTimeModel().fit(x, y)
    took = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model.predict_table(x.iloc[:100])
    print(f"{n},{took:.2f},{(peak - before) / 1024:.0f},{len(model.local_['resnet'].index.t)}")


def _one_network(configs: int, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """``configs`` distinct configurations of one network (batch × image × channels × GPU),
    one row of 100 iterations each, 3% noise around a known cost."""
    rng = np.random.default_rng(seed)
    grid = np.array(np.meshgrid(2 ** np.arange(2, 11), np.arange(32, 2048, 8), [1, 3, 8],
                                [8.1, 15.7, 19.5, 65.0])).reshape(4, -1).T
    pick = grid[np.sort(rng.permutation(len(grid))[:configs])]
    x = pd.DataFrame(pick, columns=["batch_size", "image_size", "channels", "gpu_fp32_tflops"])
    x["gpu_bandwidth_gbs"] = 40 * x["gpu_fp32_tflops"]
    work = x["batch_size"] * (x["image_size"] / 224) ** 2 * x["channels"]
    per_it = 0.005 + 2e-6 * work / x["gpu_fp32_tflops"]
    y = 100 * per_it * (1 + 0.03 * rng.standard_normal(len(x)))
    return x, np.full(len(x), 100.0), y.to_numpy()


def _anchor_child(configs: int) -> None:
    import resource

    from gpuperf_magics.model.anchored import AnchoredNetworkModel

    x, its, y = _one_network(configs)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    model = AnchoredNetworkModel(hw_cols=("gpu_fp32_tflops", "gpu_bandwidth_gbs"))
    model.fit(x, its, y)
    took = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"{configs},{took:.2f},{(peak - before) / 1024:.0f},{model.bandwidth},"
          f"{model.anchor_mape:.6f}")


def anchor(before: str | None = None) -> None:
    """The anchor table; with ``before``, that checkout's package alternately."""
    roots = {"after": str(Path(__file__).resolve().parents[1])}
    if before is not None:
        roots = {"before": str(Path(before).resolve()), **roots}
    print("| configurations | code | fit seconds | memory added (MB) | bandwidth | "
          "leave-out MAPE |")
    print("| ---: | --- | ---: | ---: | ---: | ---: |")
    for n in (2_000, 5_000, 14_000):
        for name, root in roots.items():
            out = subprocess.run([sys.executable, __file__, "--anchor-child", str(n)],
                                 capture_output=True, text=True, check=True,
                                 env={**os.environ, "FIT_SPEED_ROOT": root}).stdout.strip()
            _, took, mem, bandwidth, mape = out.splitlines()[-1].split(",")
            print(f"| {n:,} | {name} | {float(took):.2f} | {mem} | {bandwidth} | "
                  f"{100 * float(mape):.4f}% |")


def scale() -> None:
    print("| rows | configurations | fit seconds | memory added (MB) |")
    print("| ---: | ---: | ---: | ---: |")
    for n in (10_000, 30_000, 100_000):
        out = subprocess.run([sys.executable, __file__, "--scale-child", str(n)],
                             capture_output=True, text=True, check=True).stdout.strip()
        rows, took, mem, configs = out.splitlines()[-1].split(",")
        print(f"| {int(rows):,} | {int(configs):,} | {float(took):.1f} | {mem} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", action="store_true", help="only the scale table")
    parser.add_argument("--shape", action="store_true",
                        help="only the fit time on tables of a public CNN set's shape")
    parser.add_argument("--anchor", action="store_true",
                        help="only the anchored model of one network of many configurations")
    parser.add_argument("--jobs", action="store_true",
                        help="only the shape fit in one process against every core (n_jobs)")
    parser.add_argument("--before", metavar="DIR",
                        help="with --shape or --anchor: time another checkout (e.g. a git archive of main) "
                             "alternately with this one, in one run")
    parser.add_argument("--repeats", type=int, default=3,
                        help="with --before: fits per size and checkout (10,000: one)")
    parser.add_argument("--scale-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--shape-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--anchor-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--jobs-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.jobs_child:
        _jobs_child(args.jobs_child)
        return
    if args.jobs:
        jobs()
        return
    if args.scale_child:
        _scale_child(args.scale_child)
        return
    if args.shape_child:
        _shape_child(args.shape_child)
        return
    if args.anchor_child:
        _anchor_child(args.anchor_child)
        return
    if args.anchor:
        anchor(args.before)
        return
    if args.scale or args.shape:
        scale() if args.scale else shape(args.before, args.repeats)
        return
    speed()
    print()
    scale()
    print()
    shape()


def speed() -> None:
    x, y = _data()
    raw = x.drop(columns="network").to_numpy(dtype=float)
    z, _ = augment(raw, list(x.columns[1:]))
    folds = random_folds(len(y), 5, 0)
    print(f"rows {len(y)}, candidate terms {z.shape[1]}, K = 8, 5 folds")
    ours_sfs = _best(lambda: forward_select(z, y, folds, k_max=8, alpha=1.0))
    naive = _best(lambda: naive_sfs(z, y, folds, 8, 1.0), repeats=1)
    fast, slow = forward_select(z, y, folds, k_max=8, alpha=1.0), naive_sfs(z, y, folds, 8, 1.0)
    same = tuple(sorted(fast.terms)) == tuple(sorted(slow[0]))
    fit_default = _best(lambda: TrainingTimeModel(public_data=False).fit(x, y))
    fit_paper = _best(lambda: TrainingTimeModel(method="paper").fit(x, y))
    model = TrainingTimeModel(public_data=False).fit(x, y)
    query = x.iloc[:100]
    predict = _best(lambda: model.predict_table(query), repeats=5)
    print("| step | seconds |")
    print("| --- | ---: |")
    print(f"| SFS, Gram/batched solves (one alpha) | {ours_sfs:.3f} |")
    print(f"| SFS, naive Ridge refits (one alpha) | {naive:.3f} |")
    print(f"| speed-up | {naive / ours_sfs:.0f}x (same subset: {same}) |")
    print(f"| fit TrainingTimeModel() (default, 1,000 rows) | {fit_default:.3f} |")
    print(f"| fit TrainingTimeModel(method='paper') (4 alphas) | {fit_paper:.3f} |")
    print(f"| predict_table, 100 configurations | {1000 * predict:.1f} ms |")


if __name__ == "__main__":
    main()
