"""GPU and precision moves of ``benchmarks/accuracy.py``: held out as a user would meet them.

Each scenario function returns :class:`Fold` objects; :func:`run` fits the default and the
two naive methods per fold and :func:`report` prints, per scenario, the MAPE of each, the
ratio of the default to the better naive method with a bootstrap interval over folds, and the
coverage and median width of the default's 80% interval per evidence bucket. Everything learnt
is rebuilt per fold: the evidence base (``build_evidence.build``, without the held-out GPU by
catalog name in every data set, or the held-out network's family with its aliases, or the
held-out data set) and the learnt GPU move (``gpu_transfer_params.build``, without the GPU).

Scenarios (:data:`SCENARIOS`; append one function to add a scenario):

- **unseen GPU**: one GPU of a data set left out of everything; its rows predicted from the
  data set's other GPUs.
- **new network**: one network measured on one GPU only, every other network on every GPU.
- **across data sets**: one network of one data set measured on one GPU, alone (the user's
  store holds nothing else), the evidence only from the other data sets; its other GPUs.
- **precision**: one lambda2025 workload measured on one GPU in FP32/TF32 asked in AMP/FP16,
  and back, the evidence without its network.

Naive methods: ``peak`` (the FP32/precision peak ratio, :class:`NaiveModel`), ``pairs`` (the
median ratio of other networks between the same two devices, unweighted: in the fold's own
training data for *new network*, else in the fold's evidence base; the peak ratio where no
pair exists).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

import build_evidence
import gpu_transfer_params
import numpy as np
import pandas as pd

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.evidence import EvidenceBase, family_of
from gpuperf_magics.model.naive import NaiveModel

COLUMNS = ["network", "gpu", "precision", "batch_size", "gpu_count", "iterations", "time_s"]
#: Sources the evidence base is built from while the design is developed (the protocol keeps
#: lattuada2022 out until the last look).
DEV_SOURCES = ("lambda2025", "sia2023", "gavel2020")
#: The sources every fold's base is built from (``--with-lattuada``: all four, the last look).
SOURCES = DEV_SOURCES


@dataclass
class Fold:
    scenario: str
    dataset: str
    train: pd.DataFrame
    test: pd.DataFrame
    exclude_gpus: tuple[str, ...] = ()
    exclude_families: tuple[str, ...] = ()
    sources: tuple[str, ...] = field(default_factory=lambda: SOURCES)
    pairs_from_train: bool = False  # the naive "pairs" method reads the training data


# ---------------------------------------------------------------------------- data
def sia() -> pd.DataFrame:
    from gpuperf_magics.datasets import fetch_sia2023

    t = fetch_sia2023(download_if_missing=False)
    t = t[(t["nodes"] == 1) & (t["gpu_count"] == 1)]
    return t.assign(precision=None, batch_size=t["local_batch_size"])[COLUMNS].reset_index(
        drop=True)


def gavel() -> pd.DataFrame:
    raw = pd.read_csv(gpu_transfer_params.data_home() / "gavel2020" / "gavel.csv")
    return raw.assign(iterations=1)[COLUMNS].reset_index(drop=True)


def lambda_() -> pd.DataFrame:
    """Single-GPU rows; a network is one workload and software version (``resnet50|v2``),
    the precision a column (a precision move is a move between devices)."""
    from gpuperf_magics.hardware import catalog

    raw = pd.read_csv(gpu_transfer_params.data_home() / "lambda2025" / "lambda_pytorch.csv")
    raw = raw[(raw["gpu_count"] == 1) & raw["gpu"].map(lambda g: catalog.match(g) is not None)]
    raw = raw.assign(network=raw["network"] + "|" + raw["benchmark_version"], iterations=1)
    # One row per (workload, GPU, precision): the median over Lambda's systems.
    agg = (raw.groupby(["network", "gpu", "precision"], as_index=False)
           .agg(batch_size=("batch_size", "median"), time_s=("time_s", "median")))
    return agg.assign(gpu_count=1, iterations=1)[COLUMNS]


def lattuada() -> pd.DataFrame:
    """One GPU, whole runs divided by their iterations (set-up included), the median per
    (file, GPU, batch size): the protocol's last look."""
    from gpuperf_magics.datasets import fetch_lattuada2022

    t = fetch_lattuada2022(download_if_missing=False)
    t = t[t["file"].str.match(r"^(alexnet|vgg19|resnet50|deepspeech)_(pt|tf)$")
          & (t["gpu_count"] == 1)]
    t = t.assign(network=t["file"], t=t["time_s"] / t["iterations"])
    agg = t.groupby(["network", "gpu", "batch_size"], as_index=False)["t"].median()
    return agg.assign(precision=None, gpu_count=1, iterations=1, time_s=agg["t"])[COLUMNS]


DATA: dict[str, Callable[[], pd.DataFrame]] = {"lambda2025": lambda_, "sia2023": sia,
                                               "gavel2020": gavel}
#: Added by ``--with-lattuada`` (the last look).
LAST_LOOK = {"lattuada2022": lattuada}


@functools.lru_cache(maxsize=4)
def table(name: str) -> pd.DataFrame:
    return DATA[name]()


def _fam(network: str) -> str:
    return family_of(network)[0]


# ---------------------------------------------------------------------------- scenarios
#: GPUs of one data set held out together, at most: lambda2025's 33 GPUs in groups, each
#: fold rebuilding the learnt move and the evidence base without its group.
GPU_GROUPS = 8


def unseen_gpu() -> list[Fold]:
    out = []
    for name in DATA:
        t = table(name)
        gpus = sorted(t["gpu"].unique())
        for group in (gpus[i::GPU_GROUPS] for i in range(min(GPU_GROUPS, len(gpus)))):
            on = t["gpu"].isin(group)
            test = t[on & t["network"].isin(t.loc[~on, "network"])]
            if len(test):
                out.append(Fold("unseen GPU", name, t[~on], test, exclude_gpus=tuple(group)))
    return out


def new_network() -> list[Fold]:
    out = []
    for name in DATA:
        t = table(name)
        for net in sorted(t["network"].unique()):
            mine = t["network"] == net
            for gpu in _spread(sorted(t.loc[mine, "gpu"].unique())):
                keep = ~mine | (t["gpu"] == gpu)
                test = t[mine & (t["gpu"] != gpu)]
                if len(test):
                    out.append(Fold("new network", name, t[keep], test,
                                    exclude_families=(_fam(net),), pairs_from_train=True))
    return out


#: GPUs a network is measured on alone in turn, at most (spread over the sorted names).
SOURCE_GPUS = 5


def _spread(gpus: list[str]) -> list[str]:
    if len(gpus) <= SOURCE_GPUS:
        return gpus
    return [gpus[round(k * (len(gpus) - 1) / (SOURCE_GPUS - 1))] for k in range(SOURCE_GPUS)]


def across_datasets() -> list[Fold]:
    out = []
    for name in DATA:
        t = table(name)
        others = tuple(s for s in SOURCES if s != name)
        for net in sorted(t["network"].unique()):
            mine = t[t["network"] == net]
            for gpu in _spread(sorted(mine["gpu"].unique())):
                test = mine[mine["gpu"] != gpu]
                if len(test):
                    out.append(Fold("across data sets", name, mine[mine["gpu"] == gpu], test,
                                    sources=others))
    return out


def precision() -> list[Fold]:
    t = table("lambda2025")
    half = t["precision"].isin(["amp", "fp16"])
    out = []
    gpus = set(_spread(sorted(t["gpu"].unique())))
    for (net, gpu), part in t.groupby(["network", "gpu"]):
        if gpu not in gpus:
            continue
        lo, hi = part[~half.loc[part.index]], part[half.loc[part.index]]
        if len(lo) and len(hi):
            fam = (_fam(net),)
            out.append(Fold("precision FP32/TF32 → AMP", "lambda2025", lo, hi,
                            exclude_families=fam))
            out.append(Fold("precision AMP → FP32/TF32", "lambda2025", hi, lo,
                            exclude_families=fam))
    return out


#: The scenario functions, in the order they are reported.
SCENARIOS: list[Callable[[], list[Fold]]] = [unseen_gpu, new_network, across_datasets,
                                             precision]


# ---------------------------------------------------------------------------- running
#: ``--cross-var``: the factor on other hosts' evidence variance every fold's base takes, in
#: place of the one it measures (None: measured). A fold's base of two data sets has too few
#: moves between sources to measure it (``build_evidence.CROSS_MOVES``) and takes 1.
CROSS_VAR: float | None = None


@functools.lru_cache(maxsize=128)
def evidence(sources: tuple[str, ...], gpus: tuple[str, ...],
             families: tuple[str, ...]) -> EvidenceBase:
    base = build_evidence.build(sources, gpus, families, moves=400)
    if CROSS_VAR is not None:
        base.settings = {**base.settings, "cross_var": CROSS_VAR}
    return base


@functools.lru_cache(maxsize=64)
def gpu_moves(gpus: tuple[str, ...], families: tuple[str, ...] = (),
              sources: tuple[str, ...] = ()) -> dict:
    """The learnt GPU move without the fold's GPUs, network families and data sets (one
    learning per distinct set of pairs: a family the pairs lack changes nothing)."""
    present = {family_of(c.split("|")[0])[0] for p in gpu_transfer_params._all_pairs().values()
               for c in p["config"].unique()}
    return _learnt(gpus, tuple(f for f in families if f in present), sources)


@functools.lru_cache(maxsize=64)
def _learnt(gpus: tuple[str, ...], families: tuple[str, ...], sources: tuple[str, ...]) -> dict:
    return gpu_transfer_params.build(gpus, families, sources)


def _pairs_naive(fold: Fold, base: EvidenceBase, peak: np.ndarray) -> np.ndarray:
    """The median per-sample ratio of other networks between the same two devices."""
    from gpuperf_magics.model.inputs import prepare

    ref = (EvidenceBase(_as_rows(fold.train)) if fold.pairs_from_train else base)
    tr, te = prepare(fold.train, prefer_catalog=True), prepare(fold.test, prefer_catalog=True)
    out = peak.copy()
    for k, (net, dst) in enumerate(zip(fold.test["network"], te.device, strict=True)):
        src_rows = np.flatnonzero((fold.train["network"] == net).to_numpy())
        preds = []
        for i in src_rows:
            a, b = ref.pairs(str(tr.device[i]), str(dst))
            keep = ref.family[a] != _fam(net)
            if not keep.any():
                continue
            r = ((ref.log_t[b] - ref.log_b[b]) - (ref.log_t[a] - ref.log_b[a]))[keep]
            per_sample = fold.train["time_s"].iloc[i] / fold.train["batch_size"].iloc[i]
            preds.append(np.log(per_sample * fold.test["batch_size"].iloc[k])
                         + float(np.median(r)))
        if preds:
            out[k] = float(np.exp(np.median(preds)))
    return out


def _as_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """A training frame as evidence rows (workload: network and batch size)."""
    from gpuperf_magics.model.inputs import prepare

    prep = prepare(frame, prefer_catalog=True)
    fam = [family_of(n) for n in frame["network"]]
    return pd.DataFrame({
        "source": "own", "workload": frame["network"].astype(str).to_numpy() + "|"
        + frame["batch_size"].astype(str).to_numpy(), "network": frame["network"].to_numpy(),
        "family": [f for f, _ in fam], "kind": [k for _, k in fam],
        "gpu": [str(d).rpartition("|")[0] for d in prep.device],
        "precision": [str(d).rpartition("|")[2] for d in prep.device],
        "batch_size": frame["batch_size"].to_numpy(float),
        "t": frame["time_s"].to_numpy(float) / frame["iterations"].to_numpy(float),
        "quality": 1.0}).drop_duplicates(["workload", "gpu", "precision"])


def fit_fold(fold: Fold, k: int = 0) -> pd.DataFrame:
    """The fold's held-out rows with the three methods' predictions and the interval."""
    base = evidence(fold.sources, fold.exclude_gpus, fold.exclude_families)
    # The learnt move too is rebuilt without what the fold holds out: its GPUs, its network's
    # family, and the data sets its evidence may not read (across data sets).
    left_out = tuple(s for s in DATA if s not in fold.sources)
    moves = gpu_moves(fold.exclude_gpus, fold.exclude_families, left_out)
    x, y = fold.train.drop(columns="time_s"), fold.train["time_s"].to_numpy(float)
    xt = fold.test.drop(columns="time_s")
    table_ = TrainingTimeModel(gpu_moves=moves, evidence=base).fit(x, y).predict_table(xt)
    peak = NaiveModel().fit(x, y).predict(xt)
    return pd.DataFrame({
        "scenario": fold.scenario, "dataset": fold.dataset,
        "unit": k, "network": fold.test["network"].to_numpy(),
        "gpu": fold.test["gpu"].to_numpy(),
        "actual": fold.test["time_s"].to_numpy(float), "default": table_["time_s"].to_numpy(),
        "peak": peak, "pairs": _pairs_naive(fold, base, peak),
        "low": table_["time_low_s"].to_numpy(), "high": table_["time_high_s"].to_numpy(),
        "bucket": [bucket_of(d) for d in table_["detail"]],
        "detail": table_["detail"].to_numpy()})


def bucket_of(detail: object) -> str:
    """The evidence bucket a prediction's ``detail`` names."""
    text = str(detail)
    if "spec sheet only" in text:
        return "spec"
    if " via " in text:
        return "chain"
    if "few alike" in text:
        return "weak"
    if "measured on both" in text:
        return "direct"
    return "other"


def run(folds: list[Fold], every: int = 1) -> pd.DataFrame:
    """Every fold's held-out rows (``every``: only each so-many-th fold, numbered as in the
    whole run, so that a quick run compares fold by fold with a whole one)."""
    rows = []
    for k, fold in enumerate(folds):
        if k % every:
            continue
        try:
            rows.append(fit_fold(fold, k))
        except ValueError as exc:
            print(f"  {fold.scenario} {fold.dataset} fold {k}: failed ({exc})", file=sys.stderr)
    return pd.concat(rows, ignore_index=True)


# ---------------------------------------------------------------------------- report
def _bootstrap(part: pd.DataFrame, better: str, n: int = 1000) -> tuple[float, float]:
    """90% bootstrap interval over folds of the ratio MAPE(default) / MAPE(better naive)."""
    rng = np.random.default_rng(0)
    units = part.groupby("unit")
    d = units["ape_default"].sum().to_numpy()
    b = units[f"ape_{better}"].sum().to_numpy()
    idx = rng.integers(0, len(d), (n, len(d)))
    ratios = d[idx].sum(axis=1) / b[idx].sum(axis=1)
    return float(np.quantile(ratios, 0.05)), float(np.quantile(ratios, 0.95))


def report(held: pd.DataFrame) -> None:
    for m in ("default", "peak", "pairs"):
        held[f"ape_{m}"] = np.abs(held[m] / held["actual"] - 1)
    held["inside"] = (held["actual"] >= held["low"]) & (held["actual"] <= held["high"])
    held["width"] = (held["high"] - held["low"]) / held["default"]
    print("| scenario | data set | folds | rows | naive: peak ratio | naive: pairs median | "
          "default | default / better naive (90% CI) | 80% interval covers | median width |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (sc, ds), part in held.groupby(["scenario", "dataset"], sort=False):
        mape = {m: 100 * part[f"ape_{m}"].mean() for m in ("default", "peak", "pairs")}
        better = min(("peak", "pairs"), key=mape.__getitem__)
        lo, hi = _bootstrap(part, better)
        print(f"| {sc} | {ds} | {part['unit'].nunique()} | {len(part)} | {mape['peak']:.1f} | "
              f"{mape['pairs']:.1f} | {mape['default']:.1f} | "
              f"{mape['default'] / mape[better]:.2f} ({lo:.2f}–{hi:.2f}) | "
              f"{100 * part['inside'].mean():.0f}% | {100 * part['width'].median():.0f}% |")
    print("\nper evidence bucket (80% interval):")
    print("| scenario | bucket | rows | naive: peak | naive: pairs | default | covers | "
          "median width |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for (sc, b), part in held.groupby(["scenario", "bucket"], sort=False):
        print(f"| {sc} | {b} | {len(part)} | {100 * part['ape_peak'].mean():.1f} | "
              f"{100 * part['ape_pairs'].mean():.1f} | {100 * part['ape_default'].mean():.1f} | "
              f"{100 * part['inside'].mean():.0f}% | {100 * part['width'].median():.0f}% |")


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="data sets whose name starts so")
    parser.add_argument("--scenarios", default="",
                        help="scenario functions, comma-separated (unseen_gpu, new_network, "
                             "across_datasets, precision; default: all)")
    parser.add_argument("--save", default="", help="write the held-out rows to this CSV")
    parser.add_argument("--every", type=int, default=1,
                        help="only every so-many-th fold (a quick look)")
    parser.add_argument("--last-look", action="store_true",
                        help="add lattuada2022's scenarios (the evidence still without it)")
    parser.add_argument("--with-lattuada", action="store_true",
                        help="let every fold's evidence base include lattuada2022")
    parser.add_argument("--cross-var", type=float, default=None,
                        help="the factor on other hosts' evidence variance for every fold "
                             "(default: the one each fold's base measures)")
    args = parser.parse_args()
    global CROSS_VAR
    CROSS_VAR = args.cross_var
    if args.last_look or args.with_lattuada:
        DATA.update(LAST_LOOK)
    if args.with_lattuada:
        global SOURCES
        SOURCES = tuple(build_evidence.SOURCES)
    chosen = [f for f in SCENARIOS if not args.scenarios or f.__name__ in args.scenarios]
    folds = [f for fn in chosen for f in fn()
             if not args.only or f.dataset.startswith(tuple(args.only.split(",")))]
    held = run(folds, args.every)
    report(held)
    if args.save:
        held.to_csv(args.save, index=False)


if __name__ == "__main__":
    main()
