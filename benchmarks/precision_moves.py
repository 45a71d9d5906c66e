"""Precision moves on one GPU, measured on an H200: "what if I train this in AMP (or TF32)?"

    PYTHONPATH=. python benchmarks/precision_moves.py            # print the table
    PYTHONPATH=. python benchmarks/precision_moves.py --write    # and docs/figures/precision_moves.md

Reads ``benchmarks/measured/h200_2026-12-04_precision.csv``: the eleven networks of
``cpu_to_gpu_zoo`` (zoo and held out) profiled on one NVIDIA H200 by ``zoo_sweep.py
--precisions default,fp32,tf32,bf16,fp16 --batches 64,1024`` (30 steps each), the batch copied
to the GPU every step. Each FP32 or TF32 run is put alone in a store, as a user who measured
one configuration, and ``gm.predict_time(..., precision=P)`` asked for the other precisions at
the same batch (AMP: the bf16 and the fp16 runs each); each AMP run likewise asked for FP32 and
TF32. Methods:

- **default**: ``predict_time`` as shipped (the model's precision move, then the host floor);
- **model alone**: the same without the host floor (:mod:`gpuperf_magics.model.host_bound`);
- **same time**: the measured time unchanged (naive: precision does not matter);
- **peak ratio**: the measured time × the ratio of the two precisions' peaks in the catalog
  (naive: the spec sheet).

At batch 64 every network but the VGG is host-bound on that machine (time per iteration barely
moves with the batch, docs/figures/gpu_check.md); at batch 1024 the CNNs, the ViT and the VGG
are bound by the GPU, the MLPs and recurrent networks still by the host. The runs labelled
``default`` (PyTorch's: TF32 for convolutions only) are not used: each was its network's first
run in the process and read up to 1.7× slower than the same settings run later (``tf32`` for
the CNNs), docs/figures/gpu_check.md ("Sixth run").
"""

from __future__ import annotations

import argparse
import contextlib
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_bound import floor  # the sibling benchmark: the host floor on or bypassed

HERE = Path(__file__).resolve().parent
RUNS = HERE / "measured" / "h200_2026-12-04_precision.csv"
FIGURE = HERE.parent / "docs" / "figures" / "precision_moves.md"
#: Columns a profiled run holds that the prediction reads (imported as the run's own).
IMPORTED = ["network", "batch_size", "iterations", "time_s", "it_median_s", "gpu_count", "optimizer",
            "arch_params", "arch_flops_fwd_bwd", "arch_kernels", "arch_param_tensors",
            "arch_tf32_conv", "arch_tf32_matmul", "arch_amp", "arch_dtype", "arch_layers_conv",
            "arch_layers_linear"]
#: The precision a run was asked in -> the class a prediction takes.
CLASS = {"fp32": "fp32", "tf32": "tf32", "bf16": "fp16", "fp16": "fp16"}
PEAK = {"fp32": "gpu_fp32_tflops", "tf32": "gpu_tf32_tflops", "fp16": "gpu_fp16_tflops"}
METHODS = ("default", "model alone", "same time", "peak ratio")


def amp_factor(runs: pd.DataFrame) -> float:
    """``host_bound.AMP_HOST_FACTOR`` from ``runs``: the median, over the (network, batch)
    whose FP32 and TF32 runs were both host-bound (within ``HOST_MARGIN`` of their kernels'
    host time), of each AMP run's time over each FP32 or TF32 run's."""
    from gpuperf_magics.model.host_bound import HOST_MARGIN
    from gpuperf_magics.model.roofline import HOST_KERNEL_S, iteration_ops

    issue = {(r["network"], r["batch_size"]): iteration_ops(r.to_dict())["kernels"]
             * HOST_KERNEL_S for _, r in runs.iterrows()}
    ratios = []
    for key, group in runs.groupby(["network", "batch_size"]):
        t = dict(zip(group["precision_asked"], group["it_median_s"], strict=True))
        if all(t[p] <= (1 + HOST_MARGIN) * issue[key] for p in ("fp32", "tf32")):
            ratios += [t[a] / t[b] for a in ("bf16", "fp16") for b in ("fp32", "tf32")]
    return float(np.median(ratios))


@contextlib.contextmanager
def factor(value: float) -> Iterator[None]:
    from gpuperf_magics.model import host_bound

    shipped = host_bound.AMP_HOST_FACTOR
    host_bound.AMP_HOST_FACTOR = value
    try:
        yield
    finally:
        host_bound.AMP_HOST_FACTOR = shipped


def leave_one_out(runs: pd.DataFrame) -> pd.DataFrame:
    """:func:`rows` of each network with the AMP factor taken from the other networks."""
    parts = []
    for net in runs["network"].unique():
        with factor(amp_factor(runs[runs["network"] != net])):
            parts.append(rows(runs[runs["network"] == net]))
    return pd.concat(parts, ignore_index=True)


def _per_iteration(store: Path, run: pd.Series, precision: str) -> float:
    import gpuperf_magics as gm

    frame = gm.predict_time(store, str(run["network"]), batch_sizes=[int(run["batch_size"])],
                            iterations=1, precision=precision).frame
    return float(frame["per_iteration_s"].iloc[0])


def rows(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (source run, target run, method) with the predicted and measured ms."""
    import gpuperf_magics as gm

    runs = runs[runs["precision_asked"] != "default"].copy()
    runs["time_s"] = runs["it_median_s"] * runs["iterations"]
    out = []
    for (net, batch), group in runs.groupby(["network", "batch_size"], sort=False):
        for _, src in group.iterrows():
            row = src[[c for c in IMPORTED if c in src.index]].to_frame().T.dropna(axis=1)
            targets = group[group["precision_asked"].map(CLASS)
                            != CLASS[src["precision_asked"]]]
            with tempfile.TemporaryDirectory() as tmp:
                store = Path(tmp) / "one.sqlite"
                gm.Store(store).import_table(row, gpu=str(src["gpu"]))
                for cls in targets["precision_asked"].map(CLASS).unique():
                    got = {}
                    for method, on in (("default", True), ("model alone", False)):
                        with floor(on):
                            got[method] = _per_iteration(store, src, cls)
                    got["same time"] = float(src["it_median_s"])
                    got["peak ratio"] = float(src["it_median_s"]) * float(
                        src[PEAK[CLASS[src["precision_asked"]]]]) / float(src[PEAK[cls]])
                    for _, dst in targets[targets["precision_asked"].map(CLASS) == cls].iterrows():
                        out += [(net, int(batch), src["precision_asked"], dst["precision_asked"],
                                 1e3 * float(src["it_median_s"]),
                                 1e3 * float(dst["it_median_s"]), m, 1e3 * got[m])
                                for m in METHODS]
    frame = pd.DataFrame(out, columns=["network", "batch", "from", "to", "from ms",
                                       "measured ms", "method", "predicted ms"])
    frame["move"] = [_move(a, b) for a, b in zip(frame["from"], frame["to"], strict=True)]
    frame["ape"] = (frame["predicted ms"] / frame["measured ms"] - 1).abs()
    return frame


def _move(a: str, b: str) -> str:
    def name(p: str) -> str:
        return "AMP" if CLASS[p] == "fp16" else p.upper()

    return f"{name(a)} → {name(b)}"


def report(frame: pd.DataFrame) -> str:
    lines = ["| move | batch | cases | " + " | ".join(METHODS) + " |",
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in METHODS) + " |"]
    for (move, batch), part in frame.groupby(["move", "batch"]):
        mape = part.groupby("method")["ape"].mean()
        lines.append(f"| {move} | {batch} | {len(part) // len(METHODS)} | "
                     + " | ".join(f"{100 * mape[m]:.0f}%" for m in METHODS) + " |")
    mape = frame.groupby("method")["ape"].mean()
    lines.append(f"| **all** | | {len(frame) // len(METHODS)} | "
                 + " | ".join(f"**{100 * mape[m]:.0f}%**" for m in METHODS) + " |")
    return "\n".join(lines)


def detail(frame: pd.DataFrame) -> str:
    """Measured and predicted ms of the FP32 → AMP (bf16) moves, network by network."""
    part = frame[(frame["from"] == "fp32") & (frame["to"] == "bf16")]
    wide = part.pivot_table(index=["network", "batch", "from ms", "measured ms"],
                            columns="method", values="predicted ms").reset_index()
    lines = ["| network | batch | FP32 ms | AMP (bf16) measured ms | "
             + " | ".join(METHODS) + " |",
             "| --- | ---: | ---: | ---: | " + " | ".join("---:" for _ in METHODS) + " |"]
    for _, r in wide.sort_values(["batch", "network"]).iterrows():
        lines.append(f"| {r['network']} | {r['batch']} | {r['from ms']:.2f} | "
                     f"{r['measured ms']:.2f} | "
                     + " | ".join(f"{r[m]:.2f}" for m in METHODS) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {FIGURE.name}")
    args = parser.parse_args()
    from gpuperf_magics.model.host_bound import AMP_HOST_FACTOR

    runs = pd.read_csv(RUNS)
    learnt = amp_factor(runs)
    frame = rows(runs)
    loo = leave_one_out(runs)
    loo_mape = loo.groupby("method")["ape"].mean()
    table, per_net = report(frame), detail(frame)
    summary = (f"AMP's host factor: shipped {AMP_HOST_FACTOR:g}, from these runs {learnt:.3f}. "
               f"Each network with the factor from the other ten (leave one network out): "
               + ", ".join(f"{m} {100 * loo_mape[m]:.0f}%" for m in METHODS) + ".")
    print(table, summary, per_net, sep="\n\n")
    if args.write:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, cwd=HERE).stdout.strip()
        FIGURE.write_text(
            "*Written by `python benchmarks/precision_moves.py --write` at "
            f"`{commit}`, from the H200 measurements of 2026-12-04 in `benchmarks/measured/`. "
            "MAPE of the time per iteration, one run measured, another precision asked at the "
            "same batch.*\n\n" + table + "\n\n" + summary + "\n\nFP32 → AMP (bf16), network by network:\n\n"
            + per_net + "\n")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
