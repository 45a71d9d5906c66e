"""The live line of a profiled cell: steps done, ms/it, elapsed, remaining, finish time.

A daemon thread wakes a few times a second (never on the timed path: the hooks only count
steps), reads how many optimizer steps the cell has made, and rewrites one line in place
through a display handle (one output per cell, updated, never one per iteration). The time per
step is measured from the end of warm-up to now, so pauses between steps (evaluation,
checkpoints) count as they happen and warm-up does not; while the run is young it is blended
with the store's model (a callable the magic passes in, a
:class:`~gpuperf_magics.prediction.remaining.LivePrior` fitted before the cell ran) by
:func:`blend`, the
rule the remaining time of a stopped run follows too. The rule lives here, below the
prediction layer, so that the capture never imports it: the model comes in as a callable.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from gpuperf_magics.units import format_duration

__all__ = ["LiveLine", "RemainingEstimator"]

#: Steps left out at the start (compilation, allocator and cache warm-up).
WARMUP_STEPS = 2
#: Seconds between updates of the line.
INTERVAL_S = 0.5
#: Weight of the store's model, in iterations: once a run has ``n`` steady iterations its own
#: mean weighs ``n / (n + PRIOR_ITERATIONS)``.
PRIOR_ITERATIONS = 20
#: The old name of :data:`PRIOR_ITERATIONS` (it was public as ``PRIOR_STEPS``); kept so that
#: code importing it goes on working.
PRIOR_STEPS = PRIOR_ITERATIONS


def blend(own: float | None, steady: int, model: float | None) -> tuple[float | None, float]:
    """Seconds per iteration from the run's own steady iterations and the store's model.

    While a run is young its own mean rests on few iterations and the model leads; as its
    steady iterations add up the run takes over: after ``steady`` of them its mean weighs
    ``steady / (steady + PRIOR_ITERATIONS)``. Either one alone where the other is missing.

    Returns
    -------
    (float or None, float)
        The estimate (None when neither is known) and the weight of the run's own mean.
    """
    if model is None or not math.isfinite(model):
        return own, (1.0 if own is not None else 0.0)
    if own is None or steady <= 0:
        return model, 0.0
    weight = steady / (steady + PRIOR_ITERATIONS)
    return weight * own + (1 - weight) * model, weight


class _Baseline(NamedTuple):
    """The first sample after warm-up: the clock reading and the steps done by then."""

    time_s: float
    steps: int


@dataclass(frozen=True)
class Estimate:
    """Where a running job stands."""

    steps: int
    total: int
    elapsed_s: float
    per_step_s: float | None
    remaining_s: float | None
    finish: _dt.datetime | None

    def line(self) -> str:
        """``120/1,000 it · 41.3 ms/it · elapsed 5.0 s · 36.4 s left · done at 14:02:31``."""
        parts = [f"{self.steps:,}/{self.total:,} it"]
        if self.per_step_s is not None:
            parts.append(f"{1e3 * self.per_step_s:.1f} ms/it")
        parts.append(f"elapsed {format_duration(self.elapsed_s)}")
        if self.remaining_s is not None and self.finish is not None:
            parts.append(f"{format_duration(self.remaining_s)} left")
            parts.append(f"done at {self.finish:%H:%M:%S}")
        else:
            parts.append("estimating…")
        return " · ".join(parts)


class RemainingEstimator:
    """Remaining time from (time, steps) samples of a running job.

    Parameters
    ----------
    total : int
        Steps of the whole job.
    start : float
        Clock reading when the job started.
    model_per_step : float, optional
        The store's prediction of one step, used while the run has few steps of its own; may
        be set later (the model answers once the loop showed its configuration).
    """

    def __init__(self, total: int, start: float, model_per_step: float | None = None) -> None:
        self.total = total
        self.start = start
        self.model_per_step = model_per_step
        self._base: _Baseline | None = None

    def update(self, now: float, steps: int, wall: _dt.datetime) -> Estimate:
        if self._base is None and steps >= WARMUP_STEPS:
            self._base = _Baseline(now, steps)
        own = None
        n = 0
        if self._base is not None and steps > self._base.steps:
            n = steps - self._base.steps
            own = (now - self._base.time_s) / n
        per_step, _ = blend(own, n, self.model_per_step)
        remaining = finish = None
        if per_step is not None:
            remaining = per_step * max(0, self.total - steps)
            finish = wall + _dt.timedelta(seconds=remaining)
        return Estimate(steps, self.total, now - self.start, per_step, remaining, finish)


class LiveLine:
    """One line, rewritten in place while a cell trains.

    Parameters
    ----------
    steps : callable
        Returns ``(steps done, steps of the job or None)``; called from the thread.
    show : callable
        Shows a line; the first call creates the output, later calls replace it.
    clock, wall : callable
        Monotonic seconds and the local time of day (injected in tests).
    interval : float, optional
        Seconds between updates (a few a second at most; default :data:`INTERVAL_S`).
    prior : callable, optional
        The store's prediction of one step (see :class:`RemainingEstimator`), or None while
        it cannot say yet: asked at each update until it answers (a
        :class:`~gpuperf_magics.prediction.remaining.LivePrior`).
    """

    def __init__(
        self,
        steps: Callable[[], tuple[int, int | None]],
        show: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], _dt.datetime] = _dt.datetime.now,
        interval: float | None = None,
        prior: Callable[[], float | None] | None = None,
    ) -> None:
        self._steps, self._show, self._clock, self._wall = steps, show, clock, wall
        self.interval = INTERVAL_S if interval is None else interval
        self._prior = prior
        #: The model's seconds per step once the prior answered (None until then).
        self.model_per_step: float | None = None
        self._start = clock()
        self._estimator: RemainingEstimator | None = None
        self._last: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> str | None:
        """One update: the line shown, or None when the job length is not known (yet) or
        the line did not change."""
        steps, total = self._steps()
        if self.model_per_step is None and self._prior is not None:
            try:
                self.model_per_step = self._prior()
            except Exception:  # the line goes on with the run's own steps
                self._prior = None
        if not total:
            return None
        if self._estimator is None or self._estimator.total != total:
            self._estimator = RemainingEstimator(total, self._start, self.model_per_step)
        self._estimator.model_per_step = self.model_per_step
        text = self._estimator.update(self._clock(), steps, self._wall()).line()
        if text == self._last:
            return None
        self._last = text
        self._show(text)
        return text

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception as exc:  # a line that cannot be drawn must never stop training
                with contextlib.suppress(Exception):  # say why it froze, if it still can
                    self._show(f"{self._last or ''} · live line stopped: {exc}".lstrip(" ·"))
                return

    def start(self) -> LiveLine:
        self._thread = threading.Thread(target=self._run, name="gpuperf-live-line",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and draw the final state once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        # The run matters more than its progress line: a failing last draw is dropped.
        with contextlib.suppress(Exception):
            self.tick()
