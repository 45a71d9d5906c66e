"""What-if predictions from a store: the API behind ``%predict_time`` and ``gpuperf predict``.

:func:`predict_time` fits a :class:`~gpuperf_magics.model.TrainingTimeModel` on a store's
completed runs (cached per store and refitted only when the store changed), builds the
configurations of a :class:`~.job.Job` (batch sizes × GPUs, with iterations from
``iterations``, ``epochs`` × samples, or what the runs recorded) and returns a
:class:`~.record.Prediction`: a table of total time, time per iteration, interval, kind of
prediction and its measured error, and the GPU memory each configuration needs
(:func:`~.memory.memory_columns`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gpuperf_magics.prediction.job import Job, spell
from gpuperf_magics.prediction.memory import memory_columns
from gpuperf_magics.prediction.record import Prediction
from gpuperf_magics.prediction.store_model import (
    BASE_FEATURES,
    PredictionError,
    StoreModel,
    fit_store,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_ITERATIONS",
    "predict_time",
    "resolve_gpus",
]

#: Iterations assumed when neither the user nor the runs say how long the job is.
DEFAULT_ITERATIONS = 1000
#: Batch size assumed when neither the user nor the runs give one.
DEFAULT_BATCH_SIZE = 32


def _default_batch_sizes(measured: list[int]) -> list[int]:
    """Measured batch sizes plus one power of two below and above the measured range."""
    lo, hi = min(measured), max(measured)
    below = 2 ** max(0, math.floor(math.log2(lo)) - (1 if lo & (lo - 1) == 0 else 0))
    above = 2 ** (math.floor(math.log2(hi)) + 1)
    return sorted({*measured, below, above} - {0})


def _iterations_for(batch: int, runs: pd.DataFrame, job: Job, notes: list[str]) -> int:
    """Iterations of the job at ``batch``: as given, epochs × steps per epoch, one epoch of
    ``samples``, the last run's recorded job size, else :data:`DEFAULT_ITERATIONS`."""
    if job.iterations is not None:
        return job.iterations
    samples = job.samples
    if job.epochs is not None:
        if samples is None:
            column = runs.get("dataset_size")
            sizes = column.dropna() if column is not None else None
            if sizes is None or sizes.empty:
                raise PredictionError(
                    f"{spell('epochs', value=False)} needs the dataset size: give "
                    f"{spell('samples')} (samples per epoch); the runs did not iterate a "
                    "DataLoader with a sized dataset")
            samples = int(sizes.iloc[-1])
            _note(notes, f"{samples:,} samples per epoch, as the profiled DataLoader visits")
        return max(1, math.ceil(job.epochs * _steps_per_epoch(samples, batch, runs, notes)))
    if samples is not None:
        return _steps_per_epoch(samples, batch, runs, notes)
    import pandas as pd

    latest = runs.iloc[-1]
    total = latest.get("total_iterations")
    if pd.notna(total) and pd.notna(latest["batch_size"]):
        job_samples = int(total) * int(latest["batch_size"])
        _note(notes, "the job's size is the last run's total iterations (profiled with "
                     f"{spell('total_iterations', value=False)} or "
                     f"{spell('epochs', value=False)}): {job_samples:,} samples")
        return max(1, math.ceil(job_samples / batch))
    _note(notes, f"{DEFAULT_ITERATIONS:,} iterations per configuration (give "
                 f"{spell('iterations')} or {spell('epochs')} for the job's size)")
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


def resolve_gpus(gpus: Sequence[str] | None, notes: list[str] | None = None) -> list[str]:
    """The catalog's names of ``gpus`` in order (``["t4"]`` → ``["Tesla T4"]``); an unknown
    name is a :class:`~.store_model.PredictionError` whose message lists close matches. A
    short name that fits several variants (``"A100"``) adds to ``notes`` which one it took."""
    from gpuperf_magics.hardware.catalog import UnknownGPUError, choice_note, lookup

    out = []
    for name in gpus or []:
        try:
            out.append(lookup(name)["gpu_name"])
            note = choice_note(name)
        except UnknownGPUError as exc:
            raise PredictionError(str(exc)) from exc
        if note is not None and notes is not None:
            _note(notes, note)
    return out


def predict_time(store: Any = None, job: Job | str | None = None, *,
                 also: Sequence[tuple[str, int, int]] = (), **fields: Any) -> Prediction:
    """Predict training time for configurations of a measured network.

    Parameters
    ----------
    store : path or Store, optional
        The store to learn from (default: ``$GPUPERF_STORE`` or the per-user store).
    job : Job or str, optional
        The job to answer for (:class:`~gpuperf_magics.prediction.job.Job`), or a network
        name; default: the latest completed run's network, its measured batch sizes and one
        power of two beyond each end, the runs' recorded job size (else 1,000 iterations),
        on the measured device and the GPUs asked for.
    **fields
        Fields of a :class:`~gpuperf_magics.prediction.job.Job` (``batch_sizes``,
        ``iterations``, ``epochs``, ``samples``, ``gpus``, ``gpu_count``, ``settings``,
        ``coverage``, ``precision``), over those of ``job``.
    also : sequence of (gpu, gpu_count, batch_size), optional
        More configurations answered in the same call, after the job's rows (their number is
        ``frame.attrs["also_rows"]``): what the what-if panel asks for its offers, so that
        one change predicts once (:func:`~.offers.offers` takes the result as
        ``prediction=``).

    Returns
    -------
    Prediction

    Raises
    ------
    PredictionError
        A job the store cannot answer (no run of the network, a feature the model does not
        know, a GPU count without a GPU...), with what to do instead.

    Examples
    --------
    >>> gm.predict_time("runs.sqlite", batch_sizes=[64, 256], epochs=90,
    ...                 gpus=["A100 80GB"])  # doctest: +SKIP
    >>> gm.predict_time("runs.sqlite", precision="amp")  # in AMP  # doctest: +SKIP
    """
    job = Job.of(job, **fields)
    from gpuperf_magics.model.monotone import monotone_in_batch

    fit = fit_store(store, job.network)
    fitted, runs = fit.model, fit.runs
    model = fitted.model
    notes: list[str] = list(fitted.notes)
    measured_batches = sorted({int(b) for b in runs["batch_size"].dropna()})
    batch_sizes = list(job.batch_sizes) if job.batch_sizes is not None else (
        _default_batch_sizes(measured_batches) if measured_batches else [DEFAULT_BATCH_SIZE])
    latest = runs.iloc[-1]
    measured_gpu = latest["gpu"] if isinstance(latest["gpu"], str) and latest["gpu"] else None
    devices: list[str | None] = [measured_gpu]
    devices += [g for g in resolve_gpus(job.gpus, notes) if g != measured_gpu]
    features = [c for c in fitted.features if c not in BASE_FEATURES]
    _check_settings(job.settings, features)
    if devices == [None] and job.gpu_count is not None:
        raise PredictionError(f"{spell('gpu_count', value=False)} needs a GPU: the runs were "
                              f"measured on the CPU; add {spell('gpus')}")
    configs = _configurations(runs, devices, batch_sizes, job, features, notes)
    if also:
        configs = _also(configs, runs, also, job, features, notes)
    frame = memory_columns(_ask(fitted, runs, configs, measured_gpu, job.interval_coverage,
                                job.precision), runs)
    for note in monotone_in_batch(frame, ["gpu", "gpu_count", *features]):
        _note(notes, note)
    frame.attrs["set_columns"] = sorted(job.settings)
    frame.attrs["also_rows"] = len(configs) - len(devices) * len(batch_sizes)
    # The precision asked (None: as measured), which --suggest's targets are asked in.
    frame.attrs["precision"] = job.precision
    cpu = latest.get("cpu_model")
    device_label = measured_gpu or f"CPU {cpu if isinstance(cpu, str) else ''}".strip()
    measured = (f"batch {', '.join(map(str, measured_batches))} on {device_label}"
                if measured_batches else device_label)
    return Prediction(
        network=str(runs["network"].iloc[0]), frame=frame,
        cv_mape=float(model.cv_mape_),
        runs=len(runs), measured=measured, advice=list(model.advice_), notes=notes,
        public_errors=_public_errors(model, str(runs["network"].iloc[0])),
    )


def _public_errors(model: Any, network: str) -> bool | None:
    """Whether a kind of prediction of ``network`` takes the public figure as its expected
    error (too few of its moves validated on these runs); None where the model says not."""
    moves = getattr(model, "moves_", {}).get(network)
    if not moves:
        return None
    return any(bool(m.get("public")) for m in moves.values())


def _check_settings(settings: dict[str, float], features: list[str]) -> None:
    unknown = sorted(set(settings) - set(features))
    if unknown:
        raise PredictionError(
            f"{spell('settings', value=False)} {unknown[0]}: the model has no feature "
            f"{unknown[0]!r}; features it knows: "
            + (", ".join(features) or "none besides batch size, iterations and the GPU")
            + " (features come from numeric columns of imported tables)"
        )


def _configurations(
    runs: pd.DataFrame, devices: list[str | None], batch_sizes: list[int], job: Job,
    features: list[str], notes: list[str],
) -> pd.DataFrame:
    """One row per device × batch size: what the model is asked about."""
    import pandas as pd

    latest = runs.iloc[-1]
    net = str(runs["network"].iloc[0])
    rows = []
    for device in devices:
        if device is None:
            count = 0
        elif job.gpu_count is not None:
            count = job.gpu_count
        else:
            count = max(1, int(latest["gpu_count"]))
        for batch in batch_sizes:
            row: dict[str, Any] = {
                "network": net, "batch_size": int(batch),
                "iterations": _iterations_for(int(batch), runs, job, notes),
                "gpu": device, "gpu_count": count,
            }
            for feat in features:
                row[feat] = job.settings.get(feat, latest.get(feat))
            rows.append(row)
    return pd.DataFrame(rows)


def _also(configs: pd.DataFrame, runs: pd.DataFrame, also: Sequence[tuple[str, int, int]],
          job: Job, features: list[str], notes: list[str]) -> pd.DataFrame:
    """``configs`` followed by one row per ``(gpu, gpu_count, batch_size)`` of ``also``."""
    import pandas as pd

    rows = []
    for gpu, count, batch in also:
        # The measured device keeps the name its runs carry (the model knows it by that).
        name = gpu if gpu == runs["gpu"].iloc[-1] else resolve_gpus([gpu])[0]
        one = _configurations(runs, [name], [int(batch)], job.with_(gpu_count=int(count)),
                              features, notes)
        rows.append(one)
    return pd.concat([configs, *rows], ignore_index=True)


def _ask(fitted: StoreModel, runs: pd.DataFrame, configs: pd.DataFrame,
         measured_gpu: str | None, coverage: float, precision: str | None = None
         ) -> pd.DataFrame:
    """The configurations with their predicted times: from the fitted model on the measured
    kind of device, from the FLOPs estimate for GPUs when only the CPU was measured;
    ``precision`` (a class of :data:`~.job.PRECISIONS`): the job's, where not as measured
    (a move between precisions on one GPU is a move between devices to the model)."""
    import pandas as pd

    from gpuperf_magics.model.cpu_to_gpu import cpu_to_gpu_table
    from gpuperf_magics.model.host_bound import apply_host_floor

    on_model = configs["gpu"].isna() if measured_gpu is None else configs["gpu"].notna()
    parts = []
    if on_model.any():
        asked = configs.loc[on_model, fitted.features]
        # Not features (every run of the network has the same), but what a move to more GPUs
        # needs: the gradients an all-reduce carries are the latest run's parameters.
        for col in ("arch_params", "arch_dtype"):
            if col not in asked.columns and col in runs.columns and pd.notna(runs[col].iloc[-1]):
                asked = asked.assign(**{col: runs[col].iloc[-1]})
        if precision is not None or fitted.precision is not None:
            asked = asked.assign(precision=precision or fitted.precision)
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
            parts.append(cpu_to_gpu_table(configs.loc[~on_model], runs.iloc[-1], precision))
        except ValueError as exc:
            raise PredictionError(str(exc)) from exc
    table = pd.concat(parts).loc[configs.index]
    # A network that waits for its host on the GPU it was measured on waits as long on any.
    return apply_host_floor(pd.concat([configs.drop(columns=["network"]), table], axis=1),
                            runs, precision=precision)
