"""What-if predictions from a store: the API behind ``%predict_time`` and ``gpuperf predict``.

:func:`predict_time` fits a :class:`~gpuperf_magics.model.TrainingTimeModel` on a store's
completed runs (cached per store and refitted only when the store changed), builds the
configurations asked for (batch sizes × GPUs, with iterations from ``iterations``, ``epochs`` ×
samples, or what the runs recorded) and returns a :class:`Prediction`: a table of total time,
time per iteration, interval, kind of prediction and its measured error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuperf_magics._checks import positive_number
from gpuperf_magics.prediction import display

# Fitting from a store moved to store_model, option parsing to prediction_options (issue 11);
# the names stay importable from here, where scripts and notebooks found them.
from gpuperf_magics.prediction.options import parse_batch_sizes as parse_batch_sizes
from gpuperf_magics.prediction.options import parse_gpus as parse_gpus
from gpuperf_magics.prediction.options import parse_settings as parse_settings
from gpuperf_magics.prediction.store_model import ARCH_FEATURES as ARCH_FEATURES
from gpuperf_magics.prediction.store_model import BASE_FEATURES, PredictionError, fit_store
from gpuperf_magics.prediction.store_model import TRIM as TRIM
from gpuperf_magics.prediction.store_model import StoreModel as StoreModel
from gpuperf_magics.prediction.store_model import per_iteration_table as per_iteration_table
from gpuperf_magics.prediction.store_model import resolve_network as resolve_network
from gpuperf_magics.prediction.store_model import robust_times as robust_times
from gpuperf_magics.prediction.store_model import steady_state as steady_state
from gpuperf_magics.units import format_duration as format_duration
from gpuperf_magics.units import format_seconds as format_seconds

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_ITERATIONS",
    "Prediction",
    "PredictionError",
    "predict_time",
    "resolve_gpus",
]

#: Iterations assumed when neither the user nor the runs say how long the job is.
DEFAULT_ITERATIONS = 1000
#: Batch size assumed when neither the user nor the runs give one.
DEFAULT_BATCH_SIZE = 32


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
        The model's cross-validated MAPE on the measured runs (fraction); NaN where too few
        runs could be validated.
    runs : int
        Runs the model was fitted on.
    measured : str
        What those runs measured, as the header says it: the batch sizes and the device
        (``"batch 16, 32 on Tesla T4"``).
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
        return display.table(self)

    def header(self) -> str:
        """One line: the network, what the model was fitted on and its cross-validated error."""
        return display.header(self)

    def __str__(self) -> str:
        return display.as_text(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("Prediction(...)" if cycle else str(self))

    def _repr_html_(self) -> str:
        return display.as_html(self)


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


def resolve_gpus(gpus: list[str] | None) -> list[str]:
    """The catalog's names of ``gpus`` in order (``["t4"]`` → ``["Tesla T4"]``); an unknown
    name is a :class:`PredictionError` whose message lists close matches."""
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
    # Whole numbers come back as int (a numpy integer too); a bool, NaN or 0 is refused.
    iterations, samples, gpu_count = (
        positive_number(value, name, whole=True, error=PredictionError)
        for name, value in (("iterations", iterations), ("samples", samples),
                            ("gpu_count", gpu_count)))
    epochs = positive_number(epochs, "epochs", error=PredictionError)
    _check_job(batch_sizes, iterations, epochs, samples)
    from gpuperf_magics.model.monotone import monotone_in_batch

    fit = fit_store(store, network)
    fitted, runs = fit.model, fit.runs
    model = fitted.model
    notes: list[str] = list(fitted.notes)
    measured_batches = sorted({int(b) for b in runs["batch_size"].dropna()})
    if batch_sizes is None:
        batch_sizes = (_default_batch_sizes(measured_batches) if measured_batches
                       else [DEFAULT_BATCH_SIZE])
    latest = runs.iloc[-1]
    measured_gpu = latest["gpu"] if isinstance(latest["gpu"], str) and latest["gpu"] else None
    devices: list[str | None] = [measured_gpu]
    devices += [g for g in resolve_gpus(gpus) if g != measured_gpu]
    features = [c for c in fitted.features if c not in BASE_FEATURES]
    settings = dict(settings or {})
    _check_settings(settings, features)
    if devices == [None] and gpu_count is not None:
        raise PredictionError("--gpu-count needs a GPU: the runs were measured on the CPU; "
                              "add --gpu NAME")
    job = _Job(iterations, epochs, samples)
    configs = _configurations(runs, devices, batch_sizes, gpu_count, features, settings, job,
                              notes)
    frame = _ask(fitted, runs, configs, measured_gpu, coverage)
    for note in monotone_in_batch(frame, ["gpu", "gpu_count", *features]):
        _note(notes, note)
    frame.attrs["set_columns"] = sorted(settings)
    device_label = measured_gpu or f"CPU {latest.get('cpu_model') or ''}".strip()
    measured = (f"batch {', '.join(map(str, measured_batches))} on {device_label}"
                if measured_batches else device_label)
    return Prediction(
        network=str(runs["network"].iloc[0]), frame=frame,
        cv_mape=float(model.cv_mape_),
        runs=len(runs), measured=measured, advice=list(model.advice_), notes=notes,
    )


def _check_job(batch_sizes: list[int] | None, iterations: int | None, epochs: float | None,
               samples: int | None) -> None:
    """Refuse a job size given twice, and batch sizes that are not positive."""
    if iterations is not None and (epochs is not None or samples is not None):
        raise PredictionError("give either --iterations or --epochs/--samples, not both")
    if batch_sizes is not None and (not batch_sizes or min(batch_sizes) <= 0):
        raise PredictionError(f"batch sizes must be positive integers, got {batch_sizes}")


def _check_settings(settings: dict[str, float], features: list[str]) -> None:
    unknown = sorted(set(settings) - set(features))
    if unknown:
        raise PredictionError(
            f"--set {unknown[0]}: the model has no feature {unknown[0]!r}; features it knows: "
            + (", ".join(features) or "none besides batch size, iterations and the GPU")
            + " (features come from numeric columns of imported tables)"
        )


@dataclass(frozen=True)
class _Job:
    """The job's size as asked: iterations, or epochs × samples, or neither."""

    iterations: int | None
    epochs: float | None
    samples: int | None


def _configurations(
    runs: pd.DataFrame, devices: list[str | None], batch_sizes: list[int],
    gpu_count: int | None, features: list[str], settings: dict[str, float], job: _Job,
    notes: list[str],
) -> pd.DataFrame:
    """One row per device × batch size: what the model is asked about."""
    import pandas as pd

    latest = runs.iloc[-1]
    net = str(runs["network"].iloc[0])
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
                "iterations": _iterations_for(int(batch), runs, job.iterations, job.epochs,
                                              job.samples, notes),
                "gpu": device, "gpu_count": 0 if device is None else count,
            }
            for feat in features:
                row[feat] = settings.get(feat, latest.get(feat))
            rows.append(row)
    return pd.DataFrame(rows)


def _ask(fitted: StoreModel, runs: pd.DataFrame, configs: pd.DataFrame,
         measured_gpu: str | None, coverage: float) -> pd.DataFrame:
    """The configurations with their predicted times: from the fitted model on the measured
    kind of device, from the FLOPs estimate for GPUs when only the CPU was measured."""
    import pandas as pd

    from gpuperf_magics.model.cpu_to_gpu import cpu_to_gpu_table

    on_model = configs["gpu"].isna() if measured_gpu is None else configs["gpu"].notna()
    parts = []
    if on_model.any():
        asked = configs.loc[on_model, fitted.features]
        if fitted.precision is not None:
            asked = asked.assign(precision=fitted.precision)
        try:
            if fitted.steady_state:
                one = fitted.model.predict_table(asked.assign(iterations=1), coverage=coverage)
                for col in ("time_s", "time_low_s", "time_high_s"):
                    one[col] = one[col] * asked["iterations"]
            else:
                one = fitted.model.predict_table(asked, coverage=coverage)
        except ValueError as exc:
            raise PredictionError(str(exc)) from exc
        parts.append(one)
    if (~on_model).any():
        try:
            parts.append(cpu_to_gpu_table(configs.loc[~on_model], runs.iloc[-1]))
        except ValueError as exc:
            raise PredictionError(str(exc)) from exc
    table = pd.concat(parts).loc[configs.index]
    return pd.concat([configs.drop(columns=["network"]), table], axis=1)
