"""How long a partly recorded job still needs, where it ran and moved to another GPU.

:func:`remaining_time` takes a run of a store that stopped before its end (``interrupted`` or
``failed``, with its job length known from ``--epochs`` or ``--total-iterations``) and
estimates the rest from the run's own steady iterations (their mean, warm-up left out, so that
evaluation and checkpoint pauses between steps count), blended with the store's model while
the run has few iterations. Moved to another GPU, the own estimate is scaled by the model's
ratio of that GPU to the run's device. Each choice is priced with the cheapest offer of the
price table for its GPU and GPU count.

The same rule weighs the live line of a running cell (:mod:`gpuperf_magics.capture.progress`):
:func:`blend` is the one place that says how the run's own rate and the store's model share
an estimate, and :class:`LivePrior` gives the live line the model's time per iteration for
the configuration the cell runs, fitted before the cell starts.

The :class:`~gpuperf_magics.run.Run` record stays free of the store and the model: this module
reads the run from the store and asks :mod:`gpuperf_magics.prediction.predict`.
"""

from __future__ import annotations

import html
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuperf_magics._checks import positive_number

# The one rule by which the store's model leads a young run lives beside the live line, below
# this layer (the capture may not import the prediction layer); re-exported here.
from gpuperf_magics.capture.progress import PRIOR_ITERATIONS, blend

# Moved to prediction_options with the other option checks (issue 11); importable from here.
from gpuperf_magics.prediction.options import (
    check_remaining_options as check_remaining_options,
)
from gpuperf_magics.prediction.predict import PredictionError
from gpuperf_magics.units import format_cost, format_duration, format_seconds

if TYPE_CHECKING:  # pragma: no cover
    import os

    import pandas as pd

__all__ = [
    "PRIOR_ITERATIONS",
    "LivePrior",
    "Remaining",
    "blend",
    "remaining_time",
]

#: Relative half-width of the interval when the store has no model to give one.
FALLBACK_ERROR = 0.1


@dataclass
class Remaining:
    """The rest of a job: on the run's own device and, if asked, on another GPU.

    Attributes
    ----------
    run_id : int
    network : str
    status : str
    done, total : int
        Optimizer steps recorded and steps of the whole job.
    elapsed_s : float
        Time of the recorded steps.
    frame : DataFrame
        One row per choice (``as recorded`` first): ``choice, gpu, gpus, remaining_s,
        remaining_low_s, remaining_high_s, per_iteration_s, basis, instance, usd_per_hour,
        cost_usd``.
    notes : list of str
    """

    run_id: int
    network: str
    status: str
    done: int
    total: int
    elapsed_s: float
    frame: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    def header(self) -> str:
        return (f"run {self.run_id} ({self.network}, {self.status}): {self.done:,} of "
                f"{self.total:,} iterations done in {format_duration(self.elapsed_s)}; "
                f"{self.total - self.done:,} left")

    def table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame([{
            "choice": r["choice"],
            "remaining": format_duration(r["remaining_s"]),
            "interval": f"{format_duration(r['remaining_low_s'])} – "
                        f"{format_duration(r['remaining_high_s'])}",
            "per iteration": format_seconds(r["per_iteration_s"]),
            "basis": r["basis"],
            "instance": r["instance"] or "—",
            "cost": format_cost(r["cost_usd"]),
        } for _, r in self.frame.iterrows()])

    def __str__(self) -> str:
        lines = [self.header(), self.table().to_string(index=False)]
        return "\n".join(lines + [f"note: {n}" for n in self.notes])

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text("Remaining(...)" if cycle else str(self))

    def _repr_html_(self) -> str:
        foot = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<div class='gpuperf-remaining'><p><b>{html.escape(self.header())}</b></p>"
                + self.table().to_html(index=False, escape=True, border=0)
                + (f"<ul>{foot}</ul>" if foot else "") + "</div>")


def _partial_run_id(store: Any) -> int:
    runs = store.runs(status=["interrupted", "failed"],
                      columns=["run_id", "status", "total_iterations"])
    runs = runs[runs["total_iterations"].notna()]
    if runs.empty:
        raise PredictionError(
            "no interrupted or failed run with a known job length in the store: profile the "
            "job with %%profile_training --epochs E (or --total-iterations N), or give a run id")
    return int(runs["run_id"].iloc[-1])


def _own_per_iteration(durations: list[float]) -> float | None:
    """Mean of the steady iterations' durations (None with fewer than 3).

    An iteration lasts from one optimizer step to the next, so an evaluation or a checkpoint
    between steps is inside the iteration after it: a plain mean counts such pauses as often
    as they happened, where a trimmed mean would drop them. Warm-up is already left out.
    """
    return sum(durations) / len(durations) if len(durations) >= 3 else None


def _price(table: pd.DataFrame, gpu: str | None, count: int) -> tuple[str, float]:
    """The cheapest offer for ``count`` × ``gpu``: its label and price (NaN if none)."""
    if gpu is None:
        return "", math.nan
    rows = table[(table["gpu"] == gpu) & (table["gpus"] == count)]
    if rows.empty:
        return "", math.nan
    best = rows.loc[rows["usd_per_hour"].idxmin()]
    return (f"{best['provider']} {best['instance']} ({best['pricing']})",
            float(best["usd_per_hour"]))


def remaining_time(
    store: Any = None,
    run_id: int | None = None,
    *,
    gpu: str | None = None,
    gpu_count: int | None = None,
    prices: str | os.PathLike[str] | pd.DataFrame | None = None,
) -> Remaining:
    """The remaining time (and cost) of a partly recorded run.

    Parameters
    ----------
    store : path or Store, optional
        The store holding the run (default: ``$GPUPERF_STORE`` or the per-user store).
    run_id : int, optional
        The run (default: the latest interrupted or failed run with a known job length).
    gpu : str, optional
        Another GPU to move the rest of the job to (any catalog name).
    gpu_count : int, optional
        GPUs on that other device (default: as the run had, at least 1).
    prices : path or DataFrame, optional
        A price file merged over the built-in prices, to cost each choice.

    Returns
    -------
    Remaining

    Raises
    ------
    PredictionError
        No such run, a completed run, a job length that was not recorded, too few steady
        iterations and no model to fall back on, or another GPU the model cannot place.
    """
    from gpuperf_magics.hardware.prices import prices as load_prices
    from gpuperf_magics.prediction.predict import resolve_gpus
    from gpuperf_magics.store import Store

    st = store if isinstance(store, Store) else Store(store)
    gpu_count = positive_number(gpu_count, "gpu_count", whole=True, error=PredictionError)
    target = resolve_gpus([gpu])[0] if gpu is not None else None
    rid = _partial_run_id(st) if run_id is None else int(run_id)
    run, total = _partial_run(st, rid)
    done = len(run.iterations)
    left = max(0, total - done)
    elapsed = sum(i.duration_s for i in run.iterations)
    steady = [i.duration_s for i in run.iterations if not i.warmup]
    own = _own_per_iteration(steady)
    notes: list[str] = []

    device = run.gpu or None
    count = max(1, int(run.gpu_count or 0)) if device else 0
    model_row, other = _model_rows(st, run, rid, device, count, target, gpu_count, notes)
    if own is None and model_row is None:
        raise PredictionError(
            f"run {rid} has fewer than 3 steady iterations and the store has no model of "
            f"{run.network!r} to estimate from: profile one complete run of {run.network!r} "
            "with %%profile_training (or let a run go 3 iterations past its warm-up), then ask "
            "again")
    estimate = _estimate(own, len(steady), model_row)
    out = _choices(estimate, left, device, count, target, other, model_row,
                   load_prices(prices))
    if out["usd_per_hour"].isna().any():
        missing = ", ".join(f"{r.gpus}× {r.gpu}" if r.gpu else "this CPU"
                            for r in out.itertuples()
                            if math.isnan(r.usd_per_hour))
        notes.append(f"no price for {missing}: add one with prices= or %config GpuPerf.prices")
    notes.append("pauses between steps (evaluation, checkpoints) count as often as they "
                 "happened in the recorded part")
    return Remaining(run_id=rid, network=run.network, status=run.status, done=done,
                     total=total, elapsed_s=elapsed, frame=out, notes=notes)


def _partial_run(store: Any, rid: int) -> tuple[Any, int]:
    """Run ``rid`` of the store and its job length; refused when it completed or does not
    know how long its job is."""
    from gpuperf_magics.store import RunNotFoundError

    try:
        run = store.get_run(rid)
    except RunNotFoundError as exc:
        raise PredictionError(f"no run {rid} in the store {store.path}") from exc
    if run.status == "ok":
        raise PredictionError(f"run {rid} completed: nothing remains (--remaining is for an "
                              "interrupted or failed run)")
    total = run.hyper.get("total_iterations")
    if not total:
        raise PredictionError(
            f"run {rid} does not know its job length: profile with --total-iterations N, "
            "or --epochs E over a DataLoader the profiler can see")
    return run, int(total)


def _model_rows(store: Any, run: Any, rid: int, device: str | None, count: int,
                target: str | None, gpu_count: int | None,
                notes: list[str]) -> tuple[Any, Any]:
    """The store model's rows for one iteration of the run's configuration on its own device
    and on ``target``: ``(here, there)``, each None where the model gives none."""
    from gpuperf_magics.prediction.predict import predict_time

    batch = int(run.batch_size) if run.batch_size else None
    model_row = None

    def ask(gpu: str | None, gpus: int | None) -> pd.DataFrame:
        return predict_time(store, run.network, batch_sizes=[batch] if batch else None,
                            iterations=1, gpus=[gpu] if gpu else None, gpu_count=gpus).frame

    try:
        # The run's own device is asked for by name, at the count it ran on (the store's
        # latest run may be on another one), and the target apart at its own count: one
        # count for both would compare N× target with N× the run's device.
        frame = ask(device, count or None)
        here = frame[frame["gpu"].isna()] if device is None else frame[frame["gpu"] == device]
        model_row = here.iloc[0] if len(here) else None
        other = None
        if target is not None:
            there = ask(target, gpu_count or max(1, count))
            other = there[there["gpu"] == target].iloc[0]
    except PredictionError as exc:
        if target is not None:
            raise PredictionError(f"cannot place run {rid} on {target}: {exc}") from exc
        notes.append(f"no model of {run.network!r} to blend with ({exc}); the run's own "
                     "iterations only")
        other = None
    if target is not None and (model_row is None or other is None):
        raise PredictionError(
            f"cannot place run {rid} on {target}: the store's model of {run.network!r} gives "
            f"no time on {device or 'this CPU'} to compare with; profile a complete run of "
            f"{run.network!r} on {device or 'this CPU'} with %%profile_training, then ask again")
    return model_row, other


@dataclass(frozen=True)
class _Estimate:
    """Seconds per iteration on the run's device, its interval as ratios, and what it rests
    on."""

    per_iteration_s: float
    low_ratio: float
    high_ratio: float
    basis: str


def _estimate(own: float | None, steady: int, model_row: Any) -> _Estimate:
    if model_row is None:
        assert own is not None  # the caller refused neither
        return _Estimate(own, 1 - FALLBACK_ERROR, 1 + FALLBACK_ERROR,
                         f"{steady} steady iterations of the run")
    blended, weight = blend(own, steady, float(model_row["time_s"]))
    assert blended is not None  # the model gave a time
    return _Estimate(
        blended, float(model_row["time_low_s"] / model_row["time_s"]),
        float(model_row["time_high_s"] / model_row["time_s"]),
        f"{steady} steady iterations of the run ({100 * weight:.0f}%) and the store's model "
        f"({100 * (1 - weight):.0f}%)")


def _choices(estimate: _Estimate, left: int, device: str | None, count: int,
             target: str | None, other: Any, model_row: Any,
             table: pd.DataFrame) -> pd.DataFrame:
    """One row per choice (as recorded; moved to ``target``) with time, interval and cost."""
    import pandas as pd

    per_it = estimate.per_iteration_s
    where = f"as recorded: {f'{count}× {device}' if device else 'this CPU'}"
    rows = [{"choice": where, "gpu": device or "", "gpus": count,
             "remaining_s": per_it * left,
             "remaining_low_s": per_it * left * estimate.low_ratio,
             "remaining_high_s": per_it * left * estimate.high_ratio,
             "per_iteration_s": per_it, "basis": estimate.basis,
             **dict(zip(("instance", "usd_per_hour"), _price(table, device, count),
                        strict=True))}]
    if target is not None and other is not None and model_row is not None:
        ratio = float(other["time_s"]) / float(model_row["time_s"])
        moved = per_it * ratio
        n = int(other["gpu_count"])
        rows.append({
            "choice": f"moved to {n}× {target}", "gpu": target, "gpus": n,
            "remaining_s": moved * left,
            "remaining_low_s": moved * left * float(other["time_low_s"] / other["time_s"]),
            "remaining_high_s": moved * left * float(other["time_high_s"] / other["time_s"]),
            "per_iteration_s": moved,
            "basis": f"the run's estimate × the model's {target} / {device or 'CPU'} ratio "
                     f"({other['kind']}, ±{100 * other['expected_mape']:.0f}%)",
            **dict(zip(("instance", "usd_per_hour"), _price(table, target, n), strict=True)),
        })
    out = pd.DataFrame(rows)
    out["cost_usd"] = out["remaining_s"] / 3600 * out["usd_per_hour"]
    return out


#: What the live line needs to ask the model: network, batch size, GPU name (None on the
#: CPU) and GPU count of the running loop, or None while the loop has not shown them yet.
Configuration = tuple[str, int, str | None, int]


class LivePrior:
    """The store's model of one network, fitted before a profiled cell runs, answering the
    time per iteration of the configuration the cell turns out to run.

    The live line calls it from its thread at each update until it answers: the first call
    that finds the configuration known asks the model once (a prediction from the model
    fitted before the cell, a few milliseconds) and keeps the answer. A cell of another
    network than the one fitted gets None: fitting during the loop would compete with it.
    Nothing here raises: a model that cannot answer leaves the line to the run's own steps.

    Parameters
    ----------
    store : Store
    network : str
        The network the model was fitted for.
    configuration : callable
        Returns the running loop's :data:`Configuration`, or None while it is not known.
    """

    def __init__(self, store: Any, network: str,
                 configuration: Callable[[], Configuration | None]) -> None:
        self.store = store
        self.network = network
        self._configuration = configuration
        self._answered = False
        self._value: float | None = None
        self._lock = threading.Lock()

    @classmethod
    def fit(cls, store: Any, network: str | None,
            configuration: Callable[[], Configuration | None]) -> LivePrior | None:
        """The prior of ``network`` (default: the store's latest network), its model fitted
        now (or taken from the cache of this store revision); None when the store has no
        model of it, for whatever reason."""
        try:
            from gpuperf_magics.prediction.store_model import fit_store
            from gpuperf_magics.store import Store

            st = store if isinstance(store, Store) else Store(store)
            runs = fit_store(st, network).runs
            net = str(runs["network"].iloc[0])
        except Exception:  # no store, no run, no model: the cell runs all the same
            return None
        try:
            # One answer now, at the latest run's batch: what the model prepares lazily on
            # its first prediction is done here, not in the thread beside the loop.
            from gpuperf_magics.prediction.predict import predict_time

            batch = runs["batch_size"].dropna()
            predict_time(st, net, iterations=1,
                         batch_sizes=[int(batch.iloc[-1])] if len(batch) else None)
        except Exception:
            pass
        return cls(st, net, configuration)

    def __call__(self) -> float | None:
        """Seconds per iteration the model gives the running configuration; None until the
        configuration is known, and for good when the model cannot answer it."""
        with self._lock:
            if self._answered:
                return self._value
            try:
                config = self._configuration()
            except Exception:
                config = None
            if config is None:
                return None
            self._answered = True
            try:
                self._value = self._ask(*config)
            except Exception:
                self._value = None
            return self._value

    def _ask(self, network: str, batch_size: int, gpu: str | None, gpu_count: int) -> float | None:
        from gpuperf_magics.hardware.catalog import UnknownGPUError, lookup
        from gpuperf_magics.prediction.predict import predict_time

        if network.lower() != self.network.lower():
            return None
        frame = predict_time(self.store, self.network, batch_sizes=[int(batch_size)],
                             iterations=1, gpus=[gpu] if gpu else None,
                             gpu_count=max(1, gpu_count) if gpu else None).frame
        if gpu is None:
            rows = frame[frame["gpu"].isna()]
        else:
            try:
                names = {gpu, str(lookup(gpu)["gpu_name"])}
            except UnknownGPUError:
                names = {gpu}
            rows = frame[frame["gpu"].isin(names)]
        if rows.empty:
            return None
        value = float(rows["time_s"].iloc[0])
        return value if math.isfinite(value) and value > 0 else None
