"""GPU-count scenario: a network measured on one GPU, asked for 2, 4 or 8 GPUs of one node.

Run: ``GPUPERF_DATA_HOME=../shared/data .venv/bin/python benchmarks/gpu_count.py [--boot N]``

Per data set, ``TrainingTimeModel()`` is fitted on the one-GPU rows only, exactly as a user
would (the public API, nothing private), and asked for every multi-GPU row of one node; the
MAPE (%) of those rows is printed per GPU count beside:

- ``naive``: the same time per iteration as on one GPU (the same model asked for the query at
  ``gpu_count`` 1 and the same per-GPU batch; on sia2023 that is the measured one-GPU median);
- ``before``: the default without the data-parallel move (``model/data_parallel.scale_out``
  switched off), i.e. what the default answered before it;
- ``default``: the default as shipped.

``split`` (strong scaling only): one GPU at the per-GPU batch, the default without its
all-reduce term, a second naive method where the global batch is split.

``ratio`` is MAPE default / naive with a 95% bootstrap interval (series of one network and GPU
resampled, ``--boot`` times); ``cover`` the share of rows inside the default's 80% interval.

Data sets: sia2023 (per-GPU batch held: weak scaling; single-node placements only),
lambda2025 (multi-GPU rows of one node, the per-GPU batch of the run logs) and, apart,
lattuada2022 (the global batch split over the GPUs: strong scaling; whole-run times).

Parameter counts are what a profiled run records (``arch_params``); the imported tables lack
them, so :data:`PARAMS` supplies the published size of each network where it is known. A
network without one gets no all-reduce term (the default then equals the naive method);
each table is also reported on its networks with a count only.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GPUPERF_DATA_HOME", str(ROOT.parent / "shared" / "data"))

from gpuperf_magics.datasets import fetch_lattuada2022, fetch_sia2023  # noqa: E402
from gpuperf_magics.hardware import catalog  # noqa: E402
from gpuperf_magics.model import TrainingTimeModel, data_parallel  # noqa: E402

#: Published parameter counts (a profiled run records its own ``arch_params``).
PARAMS = {
    # ResNet-18 of kuangliu/pytorch-cifar, which AdaptDL's examples/pytorch-cifar train.
    ("sia2023", "cifar10"): 11_173_962,
    # torchvision ResNet-50 (model card: 25,557,032 parameters).
    ("sia2023", "imagenet"): 25_557_032,
    # BERT-base (Devlin et al. 2019: 110M); which BERT the trace ran is not recorded: assumed.
    ("sia2023", "bert"): 110_000_000,
    # YOLOv3 at 416 px (about 61.9M); assumed from the network's name.
    ("sia2023", "yolov3"): 61_900_000,
    ("lambda2025", "resnet50"): 25_557_032,
    ("lambda2025", "bert_base_squad"): 110_000_000,
    ("lambda2025", "bert_large_squad"): 340_000_000,  # Devlin et al. 2019
    # torchvision AlexNet and VGG-19 (model cards: 61,100,840 and 143,667,240).
    ("lattuada2022", "alexnet"): 61_100_840,
    ("lattuada2022", "vgg19"): 143_667_240,
    ("lattuada2022", "resnet50"): 25_557_032,
}
#: The system each sia2023 cluster ran on (its README); quad and rtx name none.
SIA_SYSTEMS = {"aws": "g4dn.12xlarge", "azure": "ND40rs_v2", "dgx-ext": "DGX-A100"}
COUNTS = (2, 4, 8)


def _params(dataset: str, network: pd.Series) -> pd.Series:
    base = network.astype(str).str.split("|").str[0]
    return base.map(lambda n: PARAMS.get((dataset, n), np.nan)).astype(float)


def sia() -> tuple[pd.DataFrame, np.ndarray]:
    table = fetch_sia2023()
    table = table[table["nodes"] == 1].drop(columns=["sync_time_s", "placement", "nodes"])
    table = table.assign(system=table["cluster"].map(SIA_SYSTEMS),
                         arch_params=_params("sia2023", table["network"]))
    table = table.drop(columns=["cluster"]).reset_index(drop=True)
    return table, table["gpu_count"].isin(COUNTS).to_numpy()


def lambda2025() -> tuple[pd.DataFrame, np.ndarray]:
    raw = pd.read_csv(Path(os.environ["GPUPERF_DATA_HOME"]) / "lambda2025" / "lambda_pytorch.csv")
    raw = raw[[catalog.match(g) is not None for g in raw["gpu"]]]
    # NCF's multi-GPU runs split one global batch (4 GPUs take 0.03× the one-GPU time per
    # logged step): not the per-GPU batch the other logs give; left out.
    raw = raw[raw["network"] != "ncf_neumf"]
    frame = pd.DataFrame({
        "network": raw["network"] + "|" + raw["precision"] + "|" + raw["benchmark_version"],
        "gpu": raw["gpu"], "system": raw["system"], "precision": raw["precision"],
        "batch_size": raw["batch_size"], "gpu_count": raw["gpu_count"], "iterations": 1,
        "time_s": raw["time_s"]})
    frame["arch_params"] = _params("lambda2025", frame["network"])
    frame = frame.reset_index(drop=True)
    single = frame[frame["gpu_count"] == 1]
    measured = set(zip(single["network"], single["gpu"], single["batch_size"], strict=True))
    test = np.array([(n, g, b) in measured and c in COUNTS for n, g, b, c in zip(
        frame["network"], frame["gpu"], frame["batch_size"], frame["gpu_count"], strict=True)])
    return frame, test


def lattuada() -> tuple[pd.DataFrame, np.ndarray]:
    table = fetch_lattuada2022()
    files = ["alexnet_pt", "alexnet_tf", "resnet50_pt", "resnet50_tf", "vgg19_pt", "vgg19_tf",
             "deepspeech_tf"]
    table = table[table["file"].isin(files)].copy()
    table["network"] = table["file"]
    table["arch_params"] = _params("lattuada2022", table["file"].str.split("_").str[0])
    table = table.drop(columns=["status", "source", "file", "framework"]).reset_index(drop=True)
    # The table's batch is the global one: say so, so that it is split over the GPUs.
    table["global_batch_size"] = table["batch_size"]
    return table, table["gpu_count"].isin(COUNTS).to_numpy()


def predictions(frame: pd.DataFrame, test: np.ndarray) -> pd.DataFrame:
    """:func:`predict_group` for the networks with a parameter count and those without (a
    table holds a feature for every row or none)."""
    known = frame["arch_params"].notna().to_numpy()
    parts = []
    for mask in (known, ~known):
        if (mask & test).any():
            part = frame[mask].reset_index(drop=True)
            if not known[mask].any():
                part = part.drop(columns="arch_params")
            parts.append(predict_group(part, test[mask]))
    return pd.concat(parts, ignore_index=True)


def predict_group(frame: pd.DataFrame, test: np.ndarray) -> pd.DataFrame:
    """Fit on the one-GPU rows; naive, before and default for the test rows."""
    train = frame[frame["gpu_count"] == 1]
    x, y = train.drop(columns="time_s"), train["time_s"].to_numpy(float)
    model = TrainingTimeModel().fit(x, y)
    queries = frame[test].drop(columns="time_s")
    table = model.predict_table(queries)
    per_gpu, _, _ = data_parallel._one_gpu_queries(queries)
    split = model.predict_table(per_gpu)["time_s"].to_numpy()  # one GPU at the per-GPU batch
    if "global_batch_size" in queries.columns:  # the same global batch on one GPU
        naive = model.predict_table(queries.assign(gpu_count=1))["time_s"].to_numpy()
    else:
        naive = split
    saved = data_parallel.scale_out
    data_parallel.scale_out = lambda model, X, out, cov: out  # the default before this move
    try:
        before = model.predict_table(queries)["time_s"].to_numpy()
    finally:
        data_parallel.scale_out = saved
    return pd.DataFrame({
        "network": queries["network"].to_numpy(), "gpu": queries["gpu"].to_numpy(),
        "gpu_count": queries["gpu_count"].to_numpy(),
        "actual": frame.loc[test, "time_s"].to_numpy(float), "naive": naive, "split": split,
        "before": before,
        "default": table["time_s"].to_numpy(), "low": table["time_low_s"].to_numpy(),
        "high": table["time_high_s"].to_numpy(),
        "known": queries["arch_params"].notna().to_numpy() if "arch_params" in queries
        else np.zeros(len(queries), dtype=bool)})


def ratio_interval(res: pd.DataFrame, boot: int, seed: int = 0) -> tuple[float, float]:
    """95% bootstrap interval of MAPE default / naive, resampling series (network, GPU)."""
    groups = [g for _, g in res.groupby(["network", "gpu"])]
    err = [(np.abs(g["default"] / g["actual"] - 1).sum(), np.abs(g["naive"] / g["actual"] - 1)
            .sum()) for g in groups]
    arr = np.array(err)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(arr), size=(boot, len(arr)))
    sums = arr[picks].sum(axis=1)
    ratios = sums[:, 0] / np.maximum(sums[:, 1], 1e-12)
    return float(np.quantile(ratios, 0.025)), float(np.quantile(ratios, 0.975))


def report(name: str, res: pd.DataFrame, boot: int) -> None:
    def mape(col: str, part: pd.DataFrame) -> float:
        return 100 * float(np.mean(np.abs(part[col] / part["actual"] - 1)))

    print(f"\n{name} ({len(res)} rows, {res['known'].mean():.0%} with a parameter count)")
    strong = bool(np.any(res["split"] != res["naive"]))
    print(f"  {'GPUs':>6} {'rows':>5} {'naive':>7} {'before':>7} {'default':>8} "
          f"{'ratio [95% CI]':>20} {'cover':>6}" + ("   split" if strong else ""))
    for count in [*COUNTS, "all"]:
        part = res if count == "all" else res[res["gpu_count"] == count]
        if part.empty:
            continue
        lo, hi = ratio_interval(part, boot)
        cover = float(np.mean((part["low"] <= part["actual"]) & (part["actual"] <= part["high"])))
        ratio = mape("default", part) / mape("naive", part)
        print(f"  {count!s:>6} {len(part):>5} {mape('naive', part):>7.1f} "
              f"{mape('before', part):>7.1f} {mape('default', part):>8.1f} "
              f"{ratio:>7.2f} [{lo:.2f}, {hi:.2f}] {cover:>6.0%}"
              + (f" {mape('split', part):>7.1f}" if strong else ""))


def sync_check() -> None:
    """The all-reduce term beside sia2023's measured gradient synchronisation, per cluster:
    median of measured sync time / predicted all-reduce (1: the link as recorded)."""
    table = fetch_sia2023()
    table = table[(table["nodes"] == 1) & table["gpu_count"].isin(COUNTS)]
    params = _params("sia2023", table["network"])
    table = table[params.notna()].assign(params=params[params.notna()])
    ratios = []
    for (cluster, gpu, n), part in table.groupby(["cluster", "gpu", "gpu_count"]):
        link = data_parallel.interconnect(gpu, SIA_SYSTEMS.get(cluster))
        comm = np.array([data_parallel.allreduce_seconds(data_parallel.grad_bytes(p), n, link)
                         for p in part["params"]])
        ratios.append({"cluster": cluster, "gpu_count": n, "link": link.link,
                       "ratio": float(np.median(part["sync_time_s"].to_numpy() / comm))})
    frame = pd.DataFrame(ratios).pivot_table(index=["cluster", "link"], columns="gpu_count",
                                             values="ratio")
    print("\nsia2023: measured sync time / predicted all-reduce (median over rows with a "
          "parameter count)")
    print(frame.round(2).to_string())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boot", type=int, default=2000, help="bootstrap resamples")
    args = parser.parse_args()
    for name, load in (("sia2023 (weak scaling)", sia), ("lambda2025 (weak scaling)", lambda2025),
                       ("lattuada2022 (global batch: strong scaling), reported apart", lattuada)):
        frame, test = load()
        res = predictions(frame, test)
        report(name, res, args.boot)
        known = res[res["known"]]
        if 0 < len(known) < len(res):
            report(f"{name}, networks with a parameter count only", known, args.boot)
        if load is sia:
            sync_check()


if __name__ == "__main__":
    main()
