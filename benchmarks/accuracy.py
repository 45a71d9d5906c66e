"""Accuracy of the default model against baselines and the paper's method, on public data.

Run: ``GPUPERF_DATA_HOME=../shared/data .venv/bin/python benchmarks/accuracy.py [--quick]``

Prints a markdown table (MAPE, %; lower is better) with one row per scenario:

- lattuada2022 interpolation, per network file (7 files, averaged): a random 20% of rows (the
  paper's protocol; repeats of a test configuration leak into training) and a random 20% of
  configurations (grouped: all repeats held out together), 3 seeds each.
- lattuada2022 GPU extrapolation: extrapolation_P files, train on GFLOPS <= 10000, test on the
  GTX 1080 Ti (> 10000).
- lattuada2022 depth extrapolation: extrapolation_N files, train depth <= t, test > t,
  t in {4, 5, 6, 8}.
- sia2023 (single-node placements: 1-8 GPUs in one machine; one row per configuration, so no
  repeats to leak): leave one local batch size out (interior and ends reported apart), and leave
  one GPU type out; per network, averaged.

Methods: a straight line in batch size per setting (``line``), the same with a peak-FLOPS ratio
for GPU moves (``flops ratio``), the paper's method (``paper``), and ``TrainingTimeModel()``.

Below the table, the default model's numbers without data no model can be judged on, each
printed next to the full average (the table keeps everything):

- interpolation without deepspeech_tf (14% repeat noise: its width column is missing, so
  different networks share one feature vector);
- depth extrapolation without the 21 rows of another campaign in extrapolation_N_resnet_1
  (N = 10, 9-123 iterations, disk speed and loader threads never seen in training);
- sia2023 leave-one-GPU-out without ncf (about 10x slower on the V100 than elsewhere).

The default model's sia2023 leave-one-GPU-out runs with ``public_data=False``: the public prior
learns ρ on all of sia2023, the held-out GPU included. Below that, sia2023 leave-one-batch-out
per network beside the data's roughness floor (:func:`roughness_floor`), with and without
yolov3, and the GPU moves beside what hindsight GPU factors reach (:func:`transfer_floor`).

``--write`` stores the default model's errors per kind of prediction in
``gpuperf_magics/model/measured_mape.json`` (read by the estimator as ``MEASURED_MAPE``):
interpolation = lattuada grouped interpolation and sia interior batch sizes; extrapolation =
lattuada depth and sia end batch sizes; transfer = lattuada 1080 Ti and sia leave-one-GPU-out
(all rows, nothing excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GPUPERF_DATA_HOME", str(ROOT.parent / "shared" / "data"))

from sklearn.base import clone  # noqa: E402

from gpuperf_magics.datasets import fetch_lattuada2022, fetch_sia2023  # noqa: E402
from gpuperf_magics.model import TrainingTimeModel, evaluate  # noqa: E402

TARGETS = {
    "lattuada interpolation, random rows": 5,
    "lattuada interpolation, grouped": 5,
    "lattuada GPU extrapolation (1080 Ti)": 10,
    "lattuada depth extrapolation": 5,
    "sia2023 leave-one-batch-out, interior": 5,
    "sia2023 leave-one-batch-out, ends": 10,
    "sia2023 leave-one-GPU-out": 15,
}


# ---------------------------------------------------------------------------- data
def _lattuada(stem: str) -> pd.DataFrame:
    table = fetch_lattuada2022()
    return table[table["file"] == stem].reset_index(drop=True)


def _sia() -> pd.DataFrame:
    table = fetch_sia2023()
    # Single-node placements: the model's use case (one machine), and it keeps the run short.
    table = table[table["nodes"] == 1].drop(columns=["sync_time_s"], errors="ignore")
    return table.reset_index(drop=True)


# ---------------------------------------------------------------------------- baselines
class LineBaseline:
    """Per-iteration time = a + b·batch per setting; another GPU by the peak-FLOPS ratio.

    A *setting* is one value of every other numeric column (GPU, GPU count, depth ...).
    ``gpu_move="flops"`` carries the nearest measured GPU's line by the FLOPS ratio; "line"
    falls back to one line over all rows of the network instead.
    """

    def __init__(self, gpu_move: str = "line") -> None:
        self.gpu_move = gpu_move

    def get_params(self, deep: bool = True) -> dict:
        return {"gpu_move": self.gpu_move}

    def set_params(self, **params: object) -> LineBaseline:
        for k, v in params.items():
            setattr(self, k, v)
        return self

    def _keys(self, X: pd.DataFrame) -> list[str]:
        skip = {"batch_size", "local_batch_size", "iterations", "time_s", "sync_time_s"}
        numeric = X.select_dtypes("number")
        return [c for c in numeric.columns if c not in skip and numeric[c].notna().all()]

    @staticmethod
    def _line(batch: np.ndarray, per_it: np.ndarray) -> tuple[float, float]:
        if np.ptp(batch) == 0:
            return 0.0, float(np.mean(per_it / batch))
        b, a = np.polyfit(batch, per_it, 1)
        return float(a), float(b)

    def fit(self, X: pd.DataFrame, y: np.ndarray) -> LineBaseline:
        per_it = np.asarray(y, float) / X["iterations"].to_numpy(float)
        if "gpu" in X and "gpu_fp32_tflops" not in X:  # settings must tell GPUs apart
            from gpuperf_magics.hardware import catalog

            X = X.assign(gpu_fp32_tflops=X["gpu"].map(
                lambda g: catalog.lookup(g)["gpu_fp32_tflops"]))
        self.keys_ = self._keys(X)
        self.lines_ = {}
        frame = X[self.keys_].astype(float).round(9).astype(str).agg("|".join, axis=1) if self.keys_ else None
        groups = frame if frame is not None else pd.Series("", index=X.index)
        for key, idx in groups.groupby(groups).groups.items():
            rows = X.index.get_indexer(idx)
            self.lines_[key] = self._line(X["batch_size"].to_numpy(float)[rows], per_it[rows])
        self.settings_ = X[self.keys_].astype(float).drop_duplicates().reset_index(drop=True)
        self.global_ = self._line(X["batch_size"].to_numpy(float), per_it)
        return self

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if "gpu" in X and "gpu_fp32_tflops" not in X:
            from gpuperf_magics.hardware import catalog

            X = X.assign(gpu_fp32_tflops=X["gpu"].map(
                lambda g: catalog.lookup(g)["gpu_fp32_tflops"]))
        out = np.empty(len(X))
        batch = X["batch_size"].to_numpy(float)
        for i, (_, row) in enumerate(X[self.keys_].astype(float).iterrows()):
            key = "|".join(row.round(9).astype(str)) if self.keys_ else ""
            ratio = 1.0
            if key not in self.lines_ and self.gpu_move == "flops" and "gpu_fp32_tflops" in row:
                others = [c for c in self.keys_ if not c.startswith("gpu_")]
                # The nearest measured setting: fewest other differences, then closest FLOPS.
                mismatch = sum(~np.isclose(self.settings_[c], row[c]) for c in others)
                dist = np.abs(np.log(self.settings_["gpu_fp32_tflops"] / row["gpu_fp32_tflops"]))
                near = self.settings_.iloc[int(np.lexsort((dist, mismatch))[0])]
                ratio = near["gpu_fp32_tflops"] / row["gpu_fp32_tflops"]
                key = "|".join(near.round(9).astype(str))
            a, b = self.lines_.get(key, self.global_)
            out[i] = (a + b * batch[i]) * ratio
        return out * X["iterations"].to_numpy(float)


# ---------------------------------------------------------------------------- noise floor
def roughness_floor(table: pd.DataFrame, k: int = 4) -> pd.DataFrame:
    """Leave-one-batch-out error of a local smoother per network: what the data's roughness costs.

    For every series of one network, GPU and GPU count, each local batch size is predicted from
    the ``k`` nearest *other* batch sizes of the same series by a tricube-weighted straight line
    in log(time) over log(batch) (at the ends of the range that line extrapolates). A model
    that, like this smoother, assumes time varies smoothly with batch cannot do much better on
    non-monotonic series (sia2023 imagenet on the RTX 2080 Ti: 0.214 s at 57, 0.321 at 81,
    0.330 at 115, 0.506 at 163, 0.463 at 200; yolov3 slower at batch 6 than at 8 on every GPU).

    Returns
    -------
    DataFrame
        One row per network: ``interior`` and ``end`` (MAPE, fractions), averaged per held-out
        batch size as :func:`evaluate`'s leave-one-out does (ends: the network's smallest and
        largest local batch size).
    """
    errs = []
    for (net, _, _), series in table.groupby(["network", "gpu", "gpu_count"]):
        series = series.sort_values("local_batch_size")
        lb = np.log(series["local_batch_size"].to_numpy(float))
        lt = np.log(series["time_s"].to_numpy(float))
        for i in range(len(lb)):
            others = np.delete(np.arange(len(lb)), i)
            if len(others) < 2:
                continue
            dist = np.abs(lb[others] - lb[i])
            near = others[np.argsort(dist, kind="stable")[:k]]
            d = np.abs(lb[near] - lb[i])
            w = (1 - (d / (d.max() * 1.01 + 1e-12)) ** 3) ** 3
            if np.ptp(lb[near]) == 0:
                pred = float(np.average(lt[near], weights=w))
            else:
                slope, icpt = np.polyfit(lb[near], lt[near], 1, w=np.sqrt(w))
                pred = slope * lb[i] + icpt
            errs.append((net, series["local_batch_size"].iloc[i], abs(np.exp(pred - lt[i]) - 1)))
    frame = pd.DataFrame(errs, columns=["network", "local_batch_size", "err"])
    rows = []
    for net, part in frame.groupby("network"):
        per_value = part.groupby("local_batch_size")["err"].mean()
        sizes = sorted(table.loc[table["network"] == net, "local_batch_size"].unique())
        is_end = per_value.index.isin([sizes[0], sizes[-1]])
        rows.append({"network": net, "interior": float(per_value[~is_end].mean()),
                     "end": float(per_value[is_end].mean())})
    return pd.DataFrame(rows).set_index("network")


def repeat_floor(frame: pd.DataFrame) -> float:
    """Error of predicting each run by the median of its configuration's other repeats.

    A configuration is one value of every feature column (all but the time and the labels);
    rows without a repeat are skipped. No model of those features can beat the repeat noise.
    """
    labels = {"time_s", "status", "source", "file", "network", "framework"}
    feats = [c for c in frame.columns if c not in labels]
    key = frame[feats].apply(lambda row: "|".join(map(str, row)), axis=1)  # NaN included
    errs = []
    for _, times in frame["time_s"].groupby(key):
        y = times.to_numpy(float)
        errs += [abs(np.median(np.delete(y, i)) / y[i] - 1) for i in range(len(y)) if len(y) > 1]
    return float(np.mean(errs)) if errs else float("nan")


def transfer_floor(table: pd.DataFrame, config_cols: list[str], rank: int = 0,
                   held_out: str | None = None) -> pd.Series:
    """In-sample error of the best GPU factors of a given rank: what moving GPUs can reach.

    Fits, by least squares in log(time per iteration) over the configurations measured on at
    least two GPUs, ``log t = a[configuration] + c[gpu] + sum_k u_k[network] * v_k[gpu]`` with
    ``rank`` network-specific terms, knowing every GPU's times (the held-out one's included).
    ``rank=0`` is the best any method can do whose speed of a GPU is the same for all networks
    (a spec-sheet ratio, a learnt per-GPU efficiency); ``rank=1`` lets each network weigh one
    hidden GPU property (as ρ weighs bandwidth against FLOPS) chosen with hindsight. A method
    of that class cannot beat the figure out of sample.

    Returns
    -------
    Series
        MAPE (fraction) per network: the mean over GPUs of the mean error on that GPU's rows
        (as :func:`evaluate`'s leave-one-GPU-out averages), or on ``held_out``'s rows only.
    """
    d = table.assign(lt=np.log(table["time_s"] / table["iterations"]))
    d["cfg"] = d[["network", *config_cols]].astype(str).agg("|".join, axis=1)
    d = d[d.groupby("cfg")["gpu"].transform("nunique") >= 2].reset_index(drop=True)
    nets, gpus = sorted(d["network"].unique()), sorted(d["gpu"].unique())
    ni, gi = d["network"].map(nets.index).to_numpy(), d["gpu"].map(gpus.index).to_numpy()
    a = d.groupby("cfg")["lt"].transform("mean").to_numpy()
    effect = np.zeros((len(nets), len(gpus)))
    for _ in range(100):
        cells = pd.DataFrame({"n": ni, "g": gi, "r": d["lt"].to_numpy() - a})
        means = cells.groupby(["n", "g"])["r"].mean()
        m = effect.copy()  # cells never measured keep the current fit
        m[means.index.get_level_values(0), means.index.get_level_values(1)] = means.to_numpy()
        rows, cols = m.mean(axis=1, keepdims=True), m.mean(axis=0, keepdims=True)
        resid = m - rows - cols + m.mean()
        u, s, vt = np.linalg.svd(resid, full_matrices=False)
        effect = rows + cols - m.mean() + (u[:, :rank] * s[:rank]) @ vt[:rank]
        a = (d["lt"] - effect[ni, gi]).groupby(d["cfg"]).transform("mean").to_numpy()
    err = pd.DataFrame({"network": d["network"], "gpu": d["gpu"],
                        "ape": np.abs(np.exp(a + effect[ni, gi] - d["lt"]) - 1)})
    if held_out is not None:
        err = err[err["gpu"] == held_out]
    return err.groupby(["network", "gpu"])["ape"].mean().groupby(level=0).mean()


# ---------------------------------------------------------------------------- scenarios
def _mapes(model: object, frames: list[tuple[pd.DataFrame, dict]]) -> list[float]:
    values = []
    for frame, kwargs in frames:
        table = evaluate(model, frame.drop(columns="time_s"), frame["time_s"], **kwargs)
        values.append(100 * float(table["mape"].mean()))
    return values


def _other_campaign(frame: pd.DataFrame) -> pd.Series:
    """The 21 rows of extrapolation_N_resnet_1 from another campaign (README of the data)."""
    return (frame["file"] == "extrapolation_N_resnet_1") & (frame["iterations"] < 130)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one seed")
    parser.add_argument("--write", action="store_true",
                        help="store the default model's errors per kind in the package")
    args = parser.parse_args()
    seeds = [0] if args.quick else [0, 1, 2]
    files = ["alexnet_pt", "alexnet_tf", "deepspeech_tf", "resnet50_pt", "resnet50_tf",
             "vgg19_pt", "vgg19_tf"]
    p_files = ["extrapolation_P_" + f for f in files]
    n_files = [f"extrapolation_N_resnet_{g}" for g in (1, 2, 4)]
    sia = _sia()
    methods = {
        "line": LineBaseline("line"),
        "flops ratio": LineBaseline("flops"),
        "paper": TrainingTimeModel(method="paper"),
        "default": TrainingTimeModel(),
    }
    scenarios: dict[str, list[tuple[pd.DataFrame, dict]]] = {
        "lattuada interpolation, random rows": [
            (_lattuada(f), {"scenario": "random", "random_state": s}) for f in files
            for s in seeds
        ],
        "lattuada interpolation, grouped": [
            (_lattuada(f), {"scenario": "grouped", "random_state": s}) for f in files
            for s in seeds
        ],
        "lattuada GPU extrapolation (1080 Ti)": [
            (_lattuada(f), {"scenario": "threshold", "column": "gpu_fp32_tflops",
                            "threshold": 10.0}) for f in p_files
        ],
        "lattuada depth extrapolation": [
            (_lattuada(f), {"scenario": "threshold", "column": "depth", "threshold": t})
            for f in n_files for t in (4, 5, 6, 8)
        ],
    }
    rows = []
    detail: dict[str, list[float]] = {}
    for name, frames in scenarios.items():
        row = {"scenario": name}
        for label, model in methods.items():
            if label == "flops ratio" and "GPU" not in name:
                row[label] = float("nan")
                continue
            start = time.perf_counter()
            values = _mapes(model, frames)
            if label == "default":
                detail[name] = values
            row[label] = float(np.mean(values))
            print(f"  {name} / {label}: {row[label]:.1f}% ({time.perf_counter() - start:.0f} s)",
                  file=sys.stderr, flush=True)
        rows.append(row)
    nets = sorted(sia["network"].unique())
    for label, model in methods.items():
        start = time.perf_counter()
        interior, ends, gpus = [], [], []
        for net in nets:
            frame = sia[sia["network"] == net].reset_index(drop=True)
            x, y = frame.drop(columns="time_s"), frame["time_s"]
            if label != "flops ratio":
                lobo = evaluate(model, x, y, "leave_one_out", column="local_batch_size")
                interior.append(lobo.loc[lobo["position"] == "interior", "mape"].mean())
                ends.append(lobo.loc[lobo["position"] == "end", "mape"].mean())
            # ρ of the public prior is learnt on all of sia2023, the held-out GPU included: turn
            # it off so the held-out GPU is never seen (with 4 measured GPUs the model learns ρ
            # from its own training rows anyway; this only keeps the figure honest).
            mover = clone(model).set_params(public_data=False) if label == "default" else model
            gpus.append(evaluate(mover, x, y, "leave_one_out", column="gpu")["mape"].mean())
        results = {
            "sia2023 leave-one-batch-out, interior": interior,
            "sia2023 leave-one-batch-out, ends": ends,
            "sia2023 leave-one-GPU-out": gpus,
        }
        if label == "default":
            for name, values in results.items():
                detail[name] = [100 * v for v in values]
        for name, values in results.items():
            row = next((r for r in rows if r["scenario"] == name), None)
            if row is None:
                row = {"scenario": name}
                rows.append(row)
            row[label] = 100 * float(np.nanmean(values)) if values else float("nan")
        print(f"  sia2023 / {label}: {time.perf_counter() - start:.0f} s", file=sys.stderr,
              flush=True)
    table = pd.DataFrame(rows).set_index("scenario")
    table["target"] = [TARGETS[s] for s in table.index]
    print("| scenario | line | flops ratio | paper | default | target |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in table.iterrows():
        cells = ["—" if np.isnan(r[c]) else f"{r[c]:.1f}" for c in
                 ("line", "flops ratio", "paper", "default")]
        print(f"| {name} | " + " | ".join(cells) + f" | <= {r['target']:.0f} |")
    _print_exclusions(detail, files, nets, n_files, args.quick)
    _print_roughness(sia, nets, detail)
    _print_transfer_floor(sia, p_files, detail)
    if args.write:
        _write(detail)


def _print_exclusions(detail: dict[str, list[float]], files: list[str], nets: list[str],
                      n_files: list[str], quick: bool) -> None:
    """The default model's averages with and without data no model can be judged on."""
    seeds = 1 if quick else 3
    keep = [i for i, f in enumerate(np.repeat(files, seeds)) if f != "deepspeech_tf"]
    print("\ndefault model, all data vs without what no model can be judged on:")
    for name in ("lattuada interpolation, random rows", "lattuada interpolation, grouped"):
        values = detail[name]
        print(f"- {name}: {np.mean(values):.1f} all; "
              f"{np.mean([values[i] for i in keep]):.1f} without deepspeech_tf (14% repeat "
              "noise)")
    floors = {f: 100 * repeat_floor(_lattuada(f)) for f in files}
    print("- lattuada repeat noise (each run predicted by the median of its configuration's other "
          f"repeats): {np.mean(list(floors.values())):.1f} on average; " + ", ".join(
              f"{f} {v:.1f}" for f, v in floors.items()))
    frames = [
        (_lattuada(f).pipe(lambda t: t[~_other_campaign(t)]),
         {"scenario": "threshold", "column": "depth", "threshold": t})
        for f in n_files for t in (4, 5, 6, 8)
    ]
    name = "lattuada depth extrapolation"
    clean = _mapes(TrainingTimeModel(), frames)
    print(f"- {name}: {np.mean(detail[name]):.1f} all; {np.mean(clean):.1f} without the 21 "
          "rows of another campaign (resnet_1, N = 10)")
    name = "sia2023 leave-one-GPU-out"
    values = [v for n, v in zip(nets, detail[name], strict=True) if n != "ncf"]
    print(f"- {name}: {np.mean(detail[name]):.1f} all; {np.mean(values):.1f} without ncf "
          "(10x slower on the V100)")
    print("- per file / network (default): " + "; ".join(
        f"{k}: " + ", ".join(f"{v:.0f}" for v in vals) for k, vals in detail.items()))


def _print_roughness(sia: pd.DataFrame, nets: list[str], detail: dict[str, list[float]]) -> None:
    """sia2023 leave-one-batch-out beside the roughness floor of the data (per network)."""
    floor = roughness_floor(sia)
    print("\nsia2023 leave-one-batch-out: default vs the data's roughness floor (leave-one-out "
          "error of a local log-log line through the 4 nearest batch sizes of the same series), "
          "MAPE %:")
    print("| network | default interior | floor interior | default ends | floor ends |")
    print("| --- | ---: | ---: | ---: | ---: |")
    interior = detail["sia2023 leave-one-batch-out, interior"]
    ends = detail["sia2023 leave-one-batch-out, ends"]
    for net, di, de in zip(nets, interior, ends, strict=True):
        f = floor.loc[net]
        print(f"| {net} | {di:.1f} | {100 * f['interior']:.1f} | {de:.1f} | "
              f"{100 * f['end']:.1f} |")
    keep = [i for i, n in enumerate(nets) if n != "yolov3"]
    for label, rows in (("all", list(range(len(nets)))), ("without yolov3", keep)):
        print(f"| mean, {label} | {np.mean([interior[i] for i in rows]):.1f} | "
              f"{100 * floor['interior'].iloc[rows].mean():.1f} | "
              f"{np.mean([ends[i] for i in rows]):.1f} | "
              f"{100 * floor['end'].iloc[rows].mean():.1f} |")


def _print_transfer_floor(sia: pd.DataFrame, p_files: list[str],
                          detail: dict[str, list[float]]) -> None:
    """GPU moves beside :func:`transfer_floor` of rank 0 and 1 (per network / file)."""
    lattuada = pd.concat([_lattuada(f).assign(network=f) for f in p_files])
    cases = [
        ("lattuada GPU extrapolation (1080 Ti)", lattuada, ["gpu_count", "batch_size"],
         "NVIDIA GeForce GTX 1080 Ti"),
        ("sia2023 leave-one-GPU-out", sia, ["placement", "gpu_count", "local_batch_size"], None),
    ]
    print("\nGPU moves: default vs hindsight floors (transfer_floor: in-sample GPU factors fitted "
          "knowing the held-out GPU; rank 0 = one speed per GPU for all networks, rank 1 = plus "
          "one network-specific sensitivity), MAPE %:")
    print("| scenario | default | floor, rank 0 | floor, rank 1 |")
    print("| --- | ---: | ---: | ---: |")
    for name, table, cols, held in cases:
        floors = [100 * transfer_floor(table, cols, rank, held).mean() for rank in (0, 1)]
        print(f"| {name} | {np.mean(detail[name]):.1f} | {floors[0]:.1f} | {floors[1]:.1f} |")


def _write(detail: dict[str, list[float]]) -> None:
    """Store the measured error per kind of prediction (fractions) for the estimator."""
    kinds = {
        "interpolation": ["lattuada interpolation, grouped",
                          "sia2023 leave-one-batch-out, interior"],
        "extrapolation": ["lattuada depth extrapolation", "sia2023 leave-one-batch-out, ends"],
        "transfer": ["lattuada GPU extrapolation (1080 Ti)", "sia2023 leave-one-GPU-out"],
    }
    mape = {k: round(float(np.mean([np.mean(detail[s]) for s in v])) / 100, 4)
            for k, v in kinds.items()}
    path = ROOT / "gpuperf_magics" / "model" / "measured_mape.json"
    payload = {
        "about": "MAPE (fraction) of TrainingTimeModel() per kind of prediction on the public "
                 "data, written by benchmarks/accuracy.py --write; each kind averages the "
                 "scenarios listed (all rows, nothing excluded)",
        "scenarios": kinds,
        "mape": mape,
    }
    path.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"wrote {path.relative_to(ROOT)}: {mape}")


if __name__ == "__main__":
    main()
