"""How long a partly recorded job still needs, where it ran and moved to another GPU.

:func:`remaining_time` takes a run of a store that stopped before its end (``interrupted``,
``failed``, or ended early by ``--stop-after``, with its job length known from ``--epochs`` or
``--total-iterations``) and estimates the rest from the run's own steady iterations (warm-up
left out) by the one rule the job time learnt from a store takes too
(:func:`~.store_model.steady_per_iteration`: a trimmed mean, the median on a busy run), blended
with the store's model while
the run has few iterations. Moved to another GPU, the own estimate is scaled by the model's
ratio of that GPU to the run's device. Each choice is priced with the cheapest offer of the
price table for its GPU and GPU count.

The same rule (:func:`~.live.blend`) weighs the live line of a running cell: it is the one
place that says how the run's own rate and the store's model share an estimate.

The :class:`~gpuperf_magics.run.Run` record stays free of the store and the model: this module
reads the run from the store and asks :mod:`gpuperf_magics.prediction.predict`.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuperf_magics.prediction.job import REMAINING_FIELDS, Job, spell
from gpuperf_magics.prediction.live import blend
from gpuperf_magics.prediction.store_model import (
    PER_ITERATION_RULE,
    PredictionError,
    steady_per_iteration,
)
from gpuperf_magics.units import format_cost, format_duration, format_seconds

if TYPE_CHECKING:  # pragma: no cover
    import os

    import pandas as pd

__all__ = ["Remaining", "remaining_time"]

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
    runs = store.runs(columns=["run_id", "status", "stopped_by", "total_iterations"])
    partial = runs["status"].isin(["interrupted", "failed"]) | runs["stopped_by"].notna()
    runs = runs[partial & runs["total_iterations"].notna()]
    if runs.empty:
        raise PredictionError(
            "no interrupted, failed or stopped-early run with a known job length in the store: "
            f"profile the job with {spell('epochs')} (or {spell('total_iterations')}), or give "
            "a run id")
    return int(runs["run_id"].iloc[-1])


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
    job: Job | None = None,
    *,
    prices: str | os.PathLike[str] | pd.DataFrame | None = None,
    **fields: Any,
) -> Remaining:
    """The remaining time (and cost) of a partly recorded run.

    Parameters
    ----------
    store : path or Store, optional
        The store holding the run (default: ``$GPUPERF_STORE`` or the per-user store).
    run_id : int, optional
        The run (default: the latest interrupted, failed or stopped-early run with a known
        job length).
    job : Job, optional
        Where to move the rest of the job: one GPU in ``gpus`` (any catalog name) and its
        ``gpu_count`` (default: as the run had, at least 1), and the ``coverage`` of the
        intervals. The run says its network, batch size and length: a job that sets them
        is refused.
    prices : path or DataFrame, optional
        A price file merged over the built-in prices, to cost each choice.
    **fields
        Fields of a :class:`~gpuperf_magics.prediction.job.Job` (``gpus``, ``gpu_count``,
        ``coverage``), over those of ``job``.

    Returns
    -------
    Remaining

    Raises
    ------
    PredictionError
        No such run, a completed run, a job length that was not recorded, too few steady
        iterations and no model to fall back on, another GPU the model cannot place, or a
        job field the run says itself.

    Examples
    --------
    >>> gm.remaining_time("runs.sqlite", gpus=["A100 80GB"])  # doctest: +SKIP
    """
    from gpuperf_magics.hardware.prices import prices as load_prices
    from gpuperf_magics.prediction.predict import resolve_gpus
    from gpuperf_magics.store import Store

    job = Job.of(job, **fields)
    job.refuse_but(REMAINING_FIELDS, spell("remaining", value=False),
                   why=f"the run says its network, batch size, precision and job length "
                       f"(give {spell('gpus')} to move it)")
    if job.gpus is not None and len(job.gpus) > 1:
        raise PredictionError(f"{spell('remaining', value=False)} moves the job to one GPU: "
                              f"give one in {spell('gpus', value=False)}")
    st = store if isinstance(store, Store) else Store(store)
    target = resolve_gpus(job.gpus)[0] if job.gpus else None
    rid = _partial_run_id(st) if run_id is None else int(run_id)
    run, total = _partial_run(st, rid)
    done = len(run.iterations)
    left = max(0, total - done)
    elapsed = sum(i.duration_s for i in run.iterations)
    steady = [i.duration_s for i in run.iterations if not i.warmup]
    busy = run.quality.get("busy") if isinstance(run.quality, dict) else None
    own = steady_per_iteration(steady, busy=bool(busy))
    notes: list[str] = []

    device = run.gpu or None
    count = max(1, int(run.gpu_count or 0)) if device else 0
    model_row, other = _model_rows(st, run, rid, device, count, target, job, notes)
    if own is None and model_row is None:
        raise PredictionError(
            f"run {rid} has fewer than 3 steady iterations and the store has no model of "
            f"{run.network!r} to estimate from: profile one complete run of {run.network!r} "
            "(or let a run go 3 iterations past its warm-up), then ask again")
    estimate = _estimate(own, len(steady), model_row)
    out = _choices(estimate, left, device, count, target, other, model_row,
                   load_prices(prices))
    if out["usd_per_hour"].isna().any():
        missing = ", ".join(f"{r.gpus}× {r.gpu}" if r.gpu else "this CPU"
                            for r in out.itertuples()
                            if math.isnan(r.usd_per_hour))
        notes.append(f"no price for {missing}: add one with {spell('prices')}")
    notes.append("pauses between steps (evaluation, checkpoints) count as often as they "
                 "happened in the recorded part")
    status = "stopped early" if run.stopped_by and run.status == "ok" else run.status
    return Remaining(run_id=rid, network=run.network, status=status, done=done,
                     total=total, elapsed_s=elapsed, frame=out, notes=notes)


def _partial_run(store: Any, rid: int) -> tuple[Any, int]:
    """Run ``rid`` of the store and its job length; refused when it completed or does not
    know how long its job is."""
    from gpuperf_magics.store import RunNotFoundError

    try:
        run = store.get_run(rid)
    except RunNotFoundError as exc:
        raise PredictionError(f"no run {rid} in the store {store.path}") from exc
    if run.status == "ok" and not run.stopped_by:
        raise PredictionError(f"run {rid} completed: nothing remains "
                              f"({spell('remaining', value=False)} is for an interrupted, "
                              "failed or stopped-early run)")
    total = run.hyper.get("total_iterations")
    if not total:
        raise PredictionError(
            f"run {rid} does not know its job length: profile with "
            f"{spell('total_iterations')}, or {spell('epochs')} over a DataLoader the profiler "
            "can see")
    return run, int(total)


def _model_rows(store: Any, run: Any, rid: int, device: str | None, count: int,
                target: str | None, job: Job, notes: list[str]) -> tuple[Any, Any]:
    """The store model's rows for one iteration of the run's configuration on its own device
    and on ``target``: ``(here, there)``, each None where the model gives none."""
    from gpuperf_magics.prediction.predict import predict_time

    batch = int(run.batch_size) if run.batch_size else None
    model_row = None

    def ask(gpu: str | None, gpus: int | None) -> pd.DataFrame:
        return predict_time(store, Job(network=run.network,
                                       batch_sizes=[batch] if batch else None, iterations=1,
                                       gpus=[gpu] if gpu else None, gpu_count=gpus,
                                       coverage=job.coverage)).frame

    try:
        # The run's own device is asked for by name, at the count it ran on (the store's
        # latest run may be on another one), and the target apart at its own count: one
        # count for both would compare N× target with N× the run's device.
        frame = ask(device, count or None)
        here = frame[frame["gpu"].isna()] if device is None else frame[frame["gpu"] == device]
        model_row = here.iloc[0] if len(here) else None
        other = None
        if target is not None:
            there = ask(target, job.gpu_count or max(1, count))
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
            f"{run.network!r} on {device or 'this CPU'}, then ask again")
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
                         f"{steady} steady iterations of the run ({PER_ITERATION_RULE})")
    blended, weight = blend(own, steady, float(model_row["time_s"]))
    assert blended is not None  # the model gave a time
    return _Estimate(
        blended, float(model_row["time_low_s"] / model_row["time_s"]),
        float(model_row["time_high_s"] / model_row["time_s"]),
        f"{steady} steady iterations of the run ({PER_ITERATION_RULE}; {100 * weight:.0f}%) "
        "and the store's model "
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
