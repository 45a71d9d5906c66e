"""Batch moves of host-bound networks, measured on an H200: the model alone against the model
with the host's floor (``gpuperf_magics.model.host_bound``).

    python benchmarks/host_bound.py [--write]

Reads what the GPU check measured on an H200 on 2026-12-04 (``benchmarks/measured/``: the
runs of ``zoo_sweep.py`` and ``gpu_check.py``, and the loops of ``gpu_host_floor.py``). Each
network's kernel count is taken anew from its definition in ``cpu_to_gpu_zoo.py`` (the
runs were recorded before the count was stored, or with an earlier count). Then, as a user
who profiled one batch size would ask:

- **tuned on**: the five networks of the zoo the host's cost per kernel was read from, each
  batch of the sweep (8 to 2048) measured alone, the four others predicted;
- **busy measured**: the small CNN profiled by ``gpu_check.py`` at batch 8, 64, 256 and 1024
  on a fourth machine, each run with the share of it the GPU was busy (``device_busy``, NVML's
  samples): each measured alone, the three others predicted, with and without that share;
- **busy measured, other networks**: six other networks (three of the zoo, three held out)
  swept over the same batches on a fifth machine by ``zoo_sweep.py --seconds 1.5``, looked at
  once the busy share's use (``BUSY_HOST``, ``KERNEL_MIN_S``) was settled on the small CNN;
- **held out**: the six networks of ``cpu_to_gpu_zoo.heldout``, measured at the one batch
  ``gpu_check.py`` ran (64 to 512), predicted at batch 8 and 256 and compared with
  ``gpu_host_floor.py``'s loop on the same machine (the batch copied every step, as the check's
  loop does).

Both without the floor (``apply_host_floor`` off) and with it. ``--write`` saves the tables to
``docs/figures/host_bound.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_to_gpu_zoo import heldout, zoo  # the sibling file

HERE = Path(__file__).resolve().parent
RUNS = HERE / "measured" / "h200_2026-12-04_runs.csv"
LOOPS = HERE / "measured" / "h200_2026-12-04_loops.csv"
FIGURE = HERE.parent / "docs" / "figures" / "host_bound.md"
IMPORTED = ["network", "batch_size", "iterations", "time_s", "it_median_s", "gpu_count",
            "optimizer", "arch_params", "arch_flops_fwd_bwd", "arch_tf32_conv",
            "arch_tf32_matmul", "gpu_fp32_tflops", "gpu_tf32_tflops", "gpu_bandwidth_gbs",
            "device_busy"]


def kernel_counts() -> dict[str, tuple[int, int]]:
    """Kernels and parameter tensors of every zoo network, as describe() counts them now."""
    from gpuperf_magics.architecture import describe

    out = {}
    for net in zoo() + heldout():
        model = net.build()
        x, _ = net.inputs(8)
        arch = describe(model, (x,))
        out[net.name] = (int(arch.kernels or 0), int(arch.param_tensors or 0))
    return out


@contextlib.contextmanager
def floor(on: bool, use_busy: bool = False) -> Iterator[None]:
    """The host floor as shipped (on), bypassed (off), or taking the runs' busy share."""
    import functools

    from gpuperf_magics.model import host_bound

    shipped = host_bound.apply_host_floor
    if not on:
        host_bound.apply_host_floor = lambda table, runs, **_: table
    elif use_busy:
        host_bound.apply_host_floor = functools.partial(shipped, use_busy=True)
    try:
        yield
    finally:
        host_bound.apply_host_floor = shipped


def predict(run: pd.Series, counts: tuple[int, int], batches: list[int]) -> dict[str, dict]:
    """Per iteration (ms) at ``batches`` on the run's GPU from a store holding ``run`` alone:
    without the floor, with it, and (where the run measured it) with the floor taking the
    GPU's busy share (``use_busy``, off in the package)."""
    import gpuperf_magics as gm

    row = run[[c for c in IMPORTED if c in run.index]].to_frame().T.assign(
        arch_kernels=counts[0], arch_param_tensors=counts[1]).dropna(axis=1)
    methods = [("model alone", False, False), ("with the floor", True, False)]
    if "device_busy" in row.columns:
        methods.append(("with the floor and the busy share (not shipped)", True, True))
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "one.sqlite"
        gm.Store(store).import_table(row, gpu=str(run["gpu"]))
        for name, on, use_busy in methods:
            with floor(on, use_busy):
                frame = gm.predict_time(store, str(run["network"]), batch_sizes=batches,
                                        iterations=1).frame
            out[name] = dict(zip(frame["batch_size"].astype(int),
                                 1e3 * frame["per_iteration_s"], strict=True))
    return out


def _moves(label: str, runs: pd.DataFrame, truth: pd.DataFrame, column: str,
           counts: dict[str, tuple[int, int]], scale: float = 1.0) -> list[tuple]:
    """Each run of ``runs`` measured alone, the batches ``truth`` holds for its network asked:
    (set, network, measured batch, asked batch, measured ms, method, predicted ms) rows."""
    out = []
    for _, run in runs.iterrows():
        mine = truth[truth["network"] == run["network"]]
        others = [int(b) for b in mine["batch_size"] if b != run["batch_size"]]
        got = predict(run, counts[run["network"]], others)
        for b in others:
            measured = scale * float(mine.loc[mine["batch_size"] == b, column].iloc[0])
            out += [(label, run["network"], int(run["batch_size"]), b, measured, name,
                     got[name][b]) for name in got]
    return out


def rows() -> pd.DataFrame:
    runs = pd.read_csv(RUNS)
    counts = kernel_counts()
    out = []
    for label, group in (("tuned on", "zoo_sweep.py"), ("busy measured", "gpu_check.py busy"),
                         ("busy measured, other networks", "zoo_sweep.py busy")):
        mine = runs[runs["benchmark"] == group]
        out += _moves(label, mine, mine, "it_median_s", counts, scale=1e3)
    checked = runs[(runs["benchmark"] == "gpu_check.py")
                   & runs["network"].str.startswith("heldout-")]
    out += _moves("held out", checked, pd.read_csv(LOOPS), "copied_ms", counts)
    frame = pd.DataFrame(out, columns=["set", "network", "measured batch", "asked batch",
                                       "measured ms", "method", "predicted ms"])
    frame["error"] = frame["predicted ms"] / frame["measured ms"] - 1
    return frame


def report(frame: pd.DataFrame) -> str:
    lines = ["| networks | method | moves | MAPE | median error | within 2× | to smaller batches "
             "(MAPE) | to larger batches (MAPE) |", "| --- | --- | ---: | ---: | ---: | ---: "
             "| ---: | ---: |"]
    for (group, method), part in frame.groupby(["set", "method"], sort=False):
        err = part["error"].abs()
        ratio = part["predicted ms"] / part["measured ms"]
        down = part["asked batch"] < part["measured batch"]
        lines.append(f"| {group} | {method} | {len(part)} | {100 * err.mean():.0f}% | "
                     f"{100 * err.median():.0f}% | {100 * ratio.between(0.5, 2).mean():.0f}% | "
                     f"{100 * err[down].mean():.0f}% | {100 * err[~down].mean():.0f}% |")
    for group, title in (("busy measured", "Busy share measured (the small CNN)"),
                         ("busy measured, other networks",
                          "Busy share measured, other networks"),
                         ("held out", "Held out")):
        part = frame[frame["set"] == group]
        methods = list(dict.fromkeys(part["method"]))
        held = part.pivot_table(index=["network", "measured batch", "asked batch",
                                       "measured ms"], columns="method",
                                values="predicted ms").reset_index()
        lines += ["", f"{title}, each move (ms per iteration):", "",
                  "| network | measured at batch | asked batch | measured | "
                  + " | ".join(methods) + " |", "| --- | ---: | ---: | ---: | "
                  + " | ".join("---:" for _ in methods) + " |"]
        for _, r in held.iterrows():
            lines.append(f"| {r['network']} | {r['measured batch']} | {r['asked batch']} | "
                         f"{r['measured ms']:.2f} | "
                         + " | ".join(f"{r[m]:.2f}" for m in methods) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"save to {FIGURE}")
    args = parser.parse_args()
    table = report(rows())
    print(table)
    if args.write:
        import subprocess

        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=HERE).stdout.strip()
        FIGURE.write_text(
            f"*Written by `python benchmarks/host_bound.py --write` on {date.today()}, commit "
            f"`{commit}`, from the H200 measurements of 2026-12-04 in `benchmarks/measured/`. "
            "Per iteration, one measured batch size, the others predicted; error = predicted "
            "/ measured − 1.*\n\n" + table + "\n", encoding="utf-8")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
