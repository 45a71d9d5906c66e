"""What-if predictions from a store: the API behind ``%predict_time`` and ``gpuperf predict``.

:func:`predict_time` fits a :class:`~gpuperf_magics.model.TrainingTimeModel` on a store's
completed runs (cached per store and refitted only when the store changed), builds the
configurations asked for (batch sizes × GPUs, with iterations from ``iterations``, ``epochs`` ×
samples, or what the runs recorded) and returns a :class:`Prediction`: a table of total time,
time per iteration, interval, kind of prediction and its measured error.
"""

from __future__ import annotations

import html
import math
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuperf_magics.units import format_duration, format_seconds

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from gpuperf_magics.model import TrainingTimeModel

__all__ = [
    "Prediction",
    "PredictionError",
    "StoreModel",
    "fit_store",
    "format_duration",
    "parse_batch_sizes",
    "parse_gpus",
    "parse_settings",
    "per_iteration_table",
    "predict_time",
    "robust_times",
    "steady_state",
]

#: Columns of a store's runs that the predictor uses besides the user's own features.
BASE_FEATURES = ("network", "batch_size", "iterations", "gpu", "gpu_count")
#: Iterations assumed when neither the user nor the runs say how long the job is.
DEFAULT_ITERATIONS = 1000


class PredictionError(ValueError):
    """A prediction cannot be made as asked; the message says what to do instead."""


def parse_batch_sizes(text: str | None) -> list[int] | None:
    """``"32,64,128"`` (or ``"32 64"``, ``"32, 64"``) → ``[32, 64, 128]`` (the
    ``--batch-size`` option of magic and CLI)."""
    if text is None:
        return None
    try:
        values = [int(v) for v in re.split(r"[,\s]+", text) if v]
    except ValueError:
        raise PredictionError(
            f"--batch-size expects integers separated by commas, e.g. 32,64,128; got {text!r}"
        ) from None
    if not values or min(values) <= 0:
        raise PredictionError(f"--batch-size expects positive integers, got {text!r}")
    return values


def parse_gpus(text: str | None) -> list[str] | None:
    """``"A100 80GB, H100"`` → ``["A100 80GB", "H100"]`` (the ``--gpu`` option)."""
    if text is None:
        return None
    names = [g.strip() for g in text.split(",") if g.strip()]
    if not names:
        raise PredictionError("--gpu expects GPU names separated by commas, e.g. 'A100 80GB,T4'")
    return names


def parse_settings(items: list[str] | None) -> dict[str, float]:
    """``["depth=50"]`` → ``{"depth": 50.0}`` (the repeatable ``--set`` option)."""
    out: dict[str, float] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        try:
            if not sep or not key.strip() or not math.isfinite(float(value)):
                raise ValueError
            out[key.strip()] = float(value)
        except ValueError:
            message = f"--set expects feature=finite number, e.g. depth=50; got {item!r}"
            raise PredictionError(message) from None
    return out


@dataclass
class Prediction:
    """Predicted training times for a set of configurations.

    Attributes
    ----------
    network : str
    frame : DataFrame
        One row per configuration: ``batch_size``, ``gpu``, ``gpu_count``, ``iterations``,
        ``time_s``, ``time_low_s``, ``time_high_s``, ``per_iteration_s``, ``kind``, ``detail``,
        ``expected_mape``, plus any ``--set`` features.
    cv_mape : float
        The model's cross-validated MAPE on the measured runs (fraction).
    runs : int
        Runs the model was fitted on.
    advice : list of str
        What to profile next for better predictions.
    notes : list of str
        Assumptions made (iterations, default batch sizes...).
    """

    network: str
    frame: pd.DataFrame
    cv_mape: float
    runs: int
    measured: str
    advice: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def table(self) -> pd.DataFrame:
        """The human table: configuration, total (h:mm:ss), per iteration, interval, kind."""
        import pandas as pd

        f = self.frame
        rows = []
        for _, r in f.iterrows():
            device = r["gpu"] if isinstance(r["gpu"], str) and r["gpu"] else "CPU"
            count = 0 if pd.isna(r["gpu_count"]) else int(r["gpu_count"])
            if count > 1:
                device = f"{count}× {device}"
            extra = "".join(f" · {c}={r[c]:g}" for c in self._set_columns())
            kind = r["kind"] + (f" ({r['detail']})" if r["detail"] else "")
            rows.append({
                "configuration": f"batch {int(r['batch_size'])} · {device}{extra}",
                "iterations": f"{int(r['iterations']):,}",
                "predicted time": format_duration(r["time_s"]),
                "per iteration": format_seconds(r["per_iteration_s"]),
                "interval": f"{format_duration(r['time_low_s'])} – "
                            f"{format_duration(r['time_high_s'])}",
                "kind": kind,
                "expected error": f"±{100 * r['expected_mape']:.0f}%",
            })
        return pd.DataFrame(rows)

    def _set_columns(self) -> list[str]:
        return list(self.frame.attrs.get("set_columns", []))

    def header(self) -> str:
        cv = "n/a" if not math.isfinite(self.cv_mape) else f"{100 * self.cv_mape:.1f}%"
        return (f"{self.network}: fitted on {self.runs} run(s) ({self.measured}); "
                f"cross-validated error (MAPE) {cv}")

    def __str__(self) -> str:
        lines = [self.header(), self.table().to_string(index=False)]
        lines += [f"note: {n}" for n in self.notes]
        lines += [f"advice: {a}" for a in self.advice]
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("Prediction(...)" if cycle else str(self))

    def _repr_html_(self) -> str:
        foot = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        foot += "".join(f"<li><b>advice:</b> {html.escape(a)}</li>" for a in self.advice)
        return (
            f"<div class='gpuperf-prediction'><p><b>{html.escape(self.header())}</b></p>"
            + self.table().to_html(index=False, escape=True, border=0)
            + (f"<ul>{foot}</ul>" if foot else "")
            + "</div>"
        )


# --------------------------------------------------------------------------- fitting
_CACHE: dict[tuple[str, tuple[str, int], str | None], Any] = {}
_LOCK = threading.Lock()


def _feature_columns(runs: pd.DataFrame, notes: list[str] | None = None) -> list[str]:
    """The base columns and the features every run has; a feature some runs lack is left
    out (with a note), as a model cannot learn from a value that is not there."""
    features = []
    for col in runs.attrs.get("feature_columns", []):
        have = int(runs[col].notna().sum())
        if have == len(runs):
            features.append(col)
        elif have and notes is not None:
            notes.append(f"feature {col!r} left out: {len(runs) - have} of {len(runs)} runs "
                         "lack it")
    return [*BASE_FEATURES, *features]


def steady_state(runs: pd.DataFrame) -> bool:
    """Whether every run's time covers steady iterations only (no set-up to amortise).

    True for profiled runs (warm-up is left out of ``time_s``) and for per-step imports
    (``iterations`` = 1). Imported whole-run times with varying iteration counts (set-up
    included, as in the paper's data) are not: the model then learns the set-up too.
    """
    return bool(((runs["source"] == "profile") | (runs["iterations"] == 1)).all())


#: Share of the slowest and of the fastest steady iterations left out of a profiled run's
#: per-iteration time (a trimmed mean).
TRIM = 0.1


def robust_times(store: Any, runs: pd.DataFrame) -> pd.Series:
    """Seconds per run to learn from: profiled runs' steady time as a robust mean × count.

    A short profiling run can hold one stall (another process, a page-fault storm, a
    checkpoint) that is most of its total; the mean of the middle 80 % of its iterations keeps
    regular costs (data loading every iteration) and drops such rare events. On a run flagged
    busy (other processes took CPU time while it ran) the stalls are not rare, and the median
    iteration stands for the run. Imported rows are taken as they are.
    """
    import numpy as np
    import pandas as pd

    times = runs["time_s"].astype(float).copy()
    profiled = np.flatnonzero((runs["source"] == "profile").to_numpy())
    # One query for every run's iterations (not one per run).
    every = store.iterations([int(runs["run_id"].iloc[i]) for i in profiled])
    per_run = dict(iter(every.groupby("run_id", sort=False)))
    for i in profiled:
        durations = per_run.get(int(runs["run_id"].iloc[i]), every.iloc[:0])
        steady = np.sort(durations.loc[~durations["warmup"].astype(bool), "duration_s"].to_numpy())
        k = int(len(steady) * TRIM)
        if len(steady) - 2 * k < 3:
            continue
        busy = runs["busy"].iloc[i] if "busy" in runs else None
        if busy is not None and not pd.isna(busy) and bool(busy):
            per_iteration = float(np.median(steady))
        else:
            per_iteration = float(steady[k : len(steady) - k].mean())
        times.iloc[i] = per_iteration * int(runs["iterations"].iloc[i])
    return times


def per_iteration_table(
    runs: pd.DataFrame, columns: list[str], times: pd.Series | None = None
) -> tuple[pd.DataFrame, Any]:
    """``X, y`` the store's model learns from (``times`` default to ``runs["time_s"]``).

    Steady-state runs (see :func:`steady_state`) become one iteration each, so the time of a
    job is the time of one iteration × its iterations and a longer job is no extrapolation;
    whole-run times are kept as they are.
    """
    from gpuperf_magics.model.inputs import precision_of

    y = runs["time_s"] if times is None else times
    x = runs[columns]
    precision = precision_of(runs)
    if any(p is not None for p in precision):  # which peak a GPU move follows (not a feature)
        x = x.assign(precision=precision)
    if steady_state(runs):
        return x.assign(iterations=1), y / runs["iterations"]
    return x, y


def _monotone_in_batch(frame: pd.DataFrame, keys: list[str], notes: list[str]) -> None:
    """An iteration never gets slower with fewer samples: cap a smaller batch's time per
    iteration at the time of the next larger one (same device and features), in place."""
    import numpy as np

    groups = frame.fillna({k: "" for k in keys if frame[k].dtype == object}).groupby(
        keys, dropna=False, sort=False).groups
    for rows in groups.values():
        order = frame.loc[rows].sort_values("batch_size").index
        per_it = frame.loc[order, "per_iteration_s"].to_numpy()
        capped = np.minimum.accumulate(per_it[::-1])[::-1]
        for idx, old, new in zip(order, per_it, capped, strict=True):
            if new < old * (1 - 1e-9):
                factor = new / old
                for col in ("time_s", "time_low_s", "time_high_s", "per_iteration_s"):
                    frame.loc[idx, col] *= factor
                _note(notes, f"batch {int(frame.loc[idx, 'batch_size'])}: capped at the time "
                             "per iteration of the next larger batch (an iteration does not "
                             "get slower with fewer samples)")


def _usable_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One network's runs a model can learn from, and notes on what was left out."""
    notes = []
    no_batch = runs["batch_size"].isna()
    if no_batch.any():
        ids = ", ".join(str(i) for i in runs.loc[no_batch, "run_id"])
        notes.append(f"left out run(s) {ids}: no batch size was recorded (was the model in "
                     "train() mode? gpuperf_magics.Store().delete(id) removes a run)")
        runs = runs[~no_batch]
    on_gpu = runs["gpu"].notna()
    if on_gpu.any() and not on_gpu.all() and len(runs):
        # CPU and GPU times cannot share one model; follow the device of the latest run.
        keep = on_gpu if bool(on_gpu.iloc[-1]) else ~on_gpu
        kind, other = ("GPU", "CPU") if bool(on_gpu.iloc[-1]) else ("CPU", "GPU")
        notes.append(f"learnt from the {kind} runs (the latest run's device); "
                     f"{int((~keep).sum())} {other} run(s) left out")
        runs = runs[keep]
    return runs.reset_index(drop=True), notes


#: Architecture figures that become features when runs of one name differ in them (a depth
#: or width study named as one network).
ARCH_FEATURES = ("arch_depth", "arch_params", "arch_flops_fwd_bwd")


def _architecture_features(runs: pd.DataFrame, notes: list[str]) -> list[str]:
    """The ``arch_*`` figures that vary among one network's runs, as features.

    Runs named alike but built differently (``--name resnet`` over ResNet-18/34/50) are one
    study: the model learns how time follows depth, parameters and FLOPs, and predicts for the
    latest run's architecture unless ``--set arch_depth=...`` says otherwise.
    """
    varying = [c for c in ARCH_FEATURES if c in runs.columns and runs[c].notna().all()
               and runs[c].nunique() > 1]
    if varying:
        notes.append(f"runs of {runs['network'].iloc[0]!r} differ in architecture: learnt with "
                     f"{', '.join(varying)} as features, predicted for the latest run's "
                     "(--set arch_depth=N for another; separate networks need their own --name)")
    return varying


@dataclass(frozen=True)
class StoreModel:
    """A model fitted on one network's runs of a store, and how the store's runs feed it.

    Attributes
    ----------
    model : TrainingTimeModel
    features : list of str
        The store's columns the model was fitted on.
    precision : str or None
        The latest run's precision (predictions run as it did).
    steady_state : bool
        The model learnt the time of one iteration (profiled runs), not whole runs.
    notes : list of str
        Runs left out and why.
    """

    model: TrainingTimeModel
    features: list[str]
    precision: str | None
    steady_state: bool
    notes: list[str]


def fit_store(
    store: Any = None, network: str | None = None
) -> tuple[StoreModel, pd.DataFrame]:
    """The model of one network fitted on a store's completed runs, and those runs.

    Each network gets its own model, on the features its own runs have; a run no model can use
    (no batch size; a CPU run among GPU runs) is left out with a note (``StoreModel.notes``).
    Cached per store file and network: a second call refits only if the store was written in
    between (its :meth:`~gpuperf_magics.Store.token` changed).

    Raises
    ------
    PredictionError
        The store has no completed run of the network, or the network is unknown.
    """
    from gpuperf_magics.model import TrainingTimeModel
    from gpuperf_magics.store import Store

    st = store if isinstance(store, Store) else Store(store)
    token = st.token()
    with _LOCK:
        for stale in [k for k in _CACHE if k[0] == str(st.path) and k[1] != token]:
            del _CACHE[stale]  # the file changed: its models and runs are history
        cached_runs = _CACHE.get((str(st.path), token, None))
    if cached_runs is None:
        all_runs = st.runs(status="ok")
        all_runs = all_runs[all_runs["time_s"] > 0].reset_index(drop=True)
        with _LOCK:
            _CACHE[(str(st.path), token, None)] = all_runs
    else:
        all_runs = cached_runs
    if all_runs.empty:
        raise PredictionError(
            f"the store {st.path} has no completed run to learn from: profile a training cell "
            "with %%profile_training (or gpuperf_magics.profile_training) first, or import "
            "measurements with Store.import_table"
        )
    net = _resolve_network(all_runs, network)
    key = (str(st.path), token, net)
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        return cached
    mine = all_runs[all_runs["network"] == net]
    mine.attrs = dict(all_runs.attrs)
    runs, notes = _usable_runs(mine)
    runs.attrs = dict(all_runs.attrs)
    if runs.empty:
        raise PredictionError(f"no usable run of {net!r}: " + "; ".join(notes))
    columns = _feature_columns(runs, notes) + _architecture_features(runs, notes)
    try:
        model = TrainingTimeModel().fit(
            *per_iteration_table(runs, columns, robust_times(st, runs))
        )
    except ValueError as exc:
        raise PredictionError(f"cannot fit a model for {net!r} on {st.path}: {exc}") from exc
    from gpuperf_magics.model.inputs import precision_of

    fitted = StoreModel(model, columns, precision_of(runs.tail(1))[0], steady_state(runs),
                        notes)
    with _LOCK:
        _CACHE[key] = (fitted, runs)
    return fitted, runs


def _from_cpu(configs: pd.DataFrame, latest: pd.Series) -> pd.DataFrame:
    """Rows for GPUs when the network was only measured on the CPU: the FLOPs estimate."""
    import pandas as pd

    from gpuperf_magics.hardware.catalog import lookup
    from gpuperf_magics.model.roofline import EXPECTED_MAPE, cpu_to_gpu_seconds

    arch = {k: latest[k] for k in latest.index if str(k).startswith("arch_")}
    out = []
    for idx, row in configs.iterrows():
        per_it = cpu_to_gpu_seconds(arch, lookup(row["gpu"]), int(row["batch_size"]),
                                    int(row["gpu_count"]))
        if per_it is None:
            raise PredictionError(
                f"cannot estimate {row['gpu']} from CPU runs: the runs have no FLOPs count "
                "(arch_flops_fwd_bwd); profile one run on a GPU instead"
            )
        total = per_it * int(row["iterations"])
        out.append(pd.Series({
            "network": row["network"], "time_s": total,
            "time_low_s": total * (1 - EXPECTED_MAPE),
            "time_high_s": total * (1 + 2 * EXPECTED_MAPE),
            "per_iteration_s": per_it, "kind": "transfer",
            "detail": "from CPU runs by FLOPs, rough",
            "expected_mape": EXPECTED_MAPE,
        }, name=idx))
    return pd.DataFrame(out)


# --------------------------------------------------------------------------- configurations
def _default_batch_sizes(measured: list[int]) -> list[int]:
    """Measured batch sizes plus one power of two below and above the measured range."""
    lo, hi = min(measured), max(measured)
    below = 2 ** max(0, math.floor(math.log2(lo)) - (1 if lo & (lo - 1) == 0 else 0))
    above = 2 ** (math.floor(math.log2(hi)) + 1)
    return sorted({*measured, below, above} - {0})


def _iterations_for(
    batch: int, runs: pd.DataFrame, iterations: int | None, epochs: float | None,
    samples: int | None, notes: list[str],
) -> int:
    if iterations is not None:
        return iterations
    if epochs is not None:
        if samples is None:
            column = runs.get("dataset_size")
            sizes = column.dropna() if column is not None else None
            if sizes is None or sizes.empty:
                raise PredictionError(
                    "--epochs needs the dataset size: give --samples N (samples per epoch); "
                    "the runs did not iterate a DataLoader with a sized dataset"
                )
            samples = int(sizes.iloc[-1])
            _note(notes, f"{samples:,} samples per epoch, as the profiled DataLoader visits")
        return max(1, math.ceil(epochs * _steps_per_epoch(samples, batch, runs, notes)))
    if samples is not None:
        return _steps_per_epoch(samples, batch, runs, notes)
    import pandas as pd

    latest = runs.iloc[-1]
    total = latest.get("total_iterations")
    if pd.notna(total) and pd.notna(latest["batch_size"]):
        job_samples = int(total) * int(latest["batch_size"])
        _note(notes, f"the job's size is the last run's --total-iterations/--epochs: "
                     f"{job_samples:,} samples")
        return max(1, math.ceil(job_samples / batch))
    _note(notes, f"{DEFAULT_ITERATIONS:,} iterations per configuration (give --iterations or "
                 "--epochs for the job's size)")
    return DEFAULT_ITERATIONS


def _steps_per_epoch(samples: int, batch: int, runs: pd.DataFrame, notes: list[str]) -> int:
    """Optimizer steps in one pass over ``samples``: the last partial batch counts unless the
    profiled DataLoader dropped it (``drop_last=True``)."""
    import pandas as pd

    drop = runs["drop_last"].iloc[-1] if "drop_last" in runs else None
    if drop is not None and not pd.isna(drop) and bool(drop) and samples >= batch:
        if samples % batch:
            _note(notes, "the last partial batch of each epoch is dropped, as the profiled "
                         "DataLoader did (drop_last=True)")
        return samples // batch
    return max(1, math.ceil(samples / batch))


def _note(notes: list[str], text: str) -> None:
    if text not in notes:
        notes.append(text)


def _resolve_network(runs: pd.DataFrame, network: str | None) -> str:
    known = list(dict.fromkeys(runs["network"].tolist()))
    if network is None:
        return str(runs["network"].iloc[-1])
    if network in known:
        return network
    lowered = {k.lower(): k for k in known}
    if network.lower() in lowered:
        return lowered[network.lower()]
    raise PredictionError(
        f"no completed runs of network {network!r} in the store; known networks: "
        + ", ".join(repr(k) for k in known)
    )


def _resolve_gpus(gpus: list[str] | None) -> list[str]:
    from gpuperf_magics.hardware.catalog import UnknownGPUError, lookup

    out = []
    for name in gpus or []:
        try:
            out.append(lookup(name)["gpu_name"])
        except UnknownGPUError as exc:
            raise PredictionError(str(exc)) from exc
    return out


def predict_time(
    store: Any = None,
    network: str | None = None,
    *,
    batch_sizes: list[int] | None = None,
    iterations: int | None = None,
    epochs: float | None = None,
    samples: int | None = None,
    gpus: list[str] | None = None,
    gpu_count: int | None = None,
    settings: dict[str, float] | None = None,
    coverage: float = 0.9,
) -> Prediction:
    """Predict training time for configurations of a measured network.

    Parameters
    ----------
    store : path or Store, optional
        The store to learn from (default: ``$GPUPERF_STORE`` or the per-user store).
    network : str, optional
        Network to predict; default: the network of the latest completed run.
    batch_sizes : list of int, optional
        Default: the measured batch sizes and one power of two beyond each end.
    iterations : int, optional
        Iterations of the job. Alternatively ``epochs`` (× ``samples`` per epoch, default
        the profiled dataset's size); default: the runs' recorded job size, else 1,000.
    gpus : list of str, optional
        GPUs to predict for (catalog names, e.g. ``"A100 80GB"``), besides the measured device.
    gpu_count : int, optional
        GPUs per configuration (default: as measured).
    settings : dict, optional
        Values for other features, e.g. ``{"depth": 50}``.
    coverage : float
        Coverage of the intervals.

    Returns
    -------
    Prediction
    """
    import pandas as pd

    for name, value in (("iterations", iterations), ("samples", samples),
                        ("gpu_count", gpu_count)):
        if value is not None and value <= 0:
            raise PredictionError(f"{name} must be a positive integer, got {value}")
    if epochs is not None and not (math.isfinite(epochs) and epochs > 0):
        raise PredictionError(f"epochs must be a finite number > 0, got {epochs}")
    if iterations is not None and (epochs is not None or samples is not None):
        raise PredictionError("give either --iterations or --epochs/--samples, not both")
    if batch_sizes is not None and (not batch_sizes or min(batch_sizes) <= 0):
        raise PredictionError(f"batch sizes must be positive integers, got {batch_sizes}")

    fitted, runs = fit_store(store, network)
    model = fitted.model
    net = str(runs["network"].iloc[0])
    notes: list[str] = list(fitted.notes)
    measured_batches = sorted({int(b) for b in runs["batch_size"].dropna()})
    if batch_sizes is None:
        batch_sizes = _default_batch_sizes(measured_batches) if measured_batches else [32]
    latest = runs.iloc[-1]
    measured_gpu = latest["gpu"] if isinstance(latest["gpu"], str) and latest["gpu"] else None
    devices: list[str | None] = [measured_gpu]
    devices += [g for g in _resolve_gpus(gpus) if g != measured_gpu]
    features = [c for c in fitted.features if c not in BASE_FEATURES]
    settings = dict(settings or {})
    unknown = sorted(set(settings) - set(features))
    if unknown:
        raise PredictionError(
            f"--set {unknown[0]}: the model has no feature {unknown[0]!r}; features it knows: "
            + (", ".join(features) or "none besides batch size, iterations and the GPU")
            + " (features come from numeric columns of imported tables)"
        )
    if devices == [None] and gpu_count is not None:
        raise PredictionError("--gpu-count needs a GPU: the runs were measured on the CPU; "
                              "add --gpu NAME")
    rows = []
    for device in devices:
        if device is None:
            count = 0
        elif gpu_count is not None:
            count = gpu_count
        else:
            count = max(1, int(latest["gpu_count"]))
        for batch in batch_sizes:
            row: dict[str, Any] = {
                "network": net, "batch_size": int(batch),
                "iterations": _iterations_for(int(batch), runs, iterations, epochs, samples, notes),
                "gpu": device, "gpu_count": 0 if device is None else count,
            }
            for feat in features:
                row[feat] = settings.get(feat, latest.get(feat))
            rows.append(row)
    configs = pd.DataFrame(rows)
    on_model = configs["gpu"].isna() if measured_gpu is None else configs["gpu"].notna()
    parts = []
    if on_model.any():
        asked = configs.loc[on_model, fitted.features]
        if fitted.precision is not None:
            asked = asked.assign(precision=fitted.precision)
        try:
            if fitted.steady_state:
                one = model.predict_table(asked.assign(iterations=1), coverage=coverage)
                for col in ("time_s", "time_low_s", "time_high_s"):
                    one[col] = one[col] * asked["iterations"]
            else:
                one = model.predict_table(asked, coverage=coverage)
        except ValueError as exc:
            raise PredictionError(str(exc)) from exc
        parts.append(one)
    if (~on_model).any():
        parts.append(_from_cpu(configs.loc[~on_model], latest))
    table = pd.concat(parts).loc[configs.index]
    frame = pd.concat([configs.drop(columns=["network"]), table], axis=1)
    _monotone_in_batch(frame, ["gpu", "gpu_count", *features], notes)
    frame.attrs["set_columns"] = sorted(settings)
    device_label = measured_gpu or f"CPU {latest.get('cpu_model') or ''}".strip()
    measured = (f"batch {', '.join(map(str, measured_batches))} on {device_label}"
                if measured_batches else device_label)
    return Prediction(
        network=net, frame=frame,
        cv_mape=float(model.cv_mape_),
        runs=len(runs), measured=measured, advice=list(model.advice_), notes=notes,
    )
