"""The live line of a profiled cell: steps done, ms/it, elapsed, remaining, finish time.

A daemon thread wakes a few times a second (never on the timed path: the hooks only count
steps), reads how many optimizer steps the cell has made, and redraws one progress bar in
place (``tqdm.auto``: a widget in a notebook, a line rewritten on a terminal; one bar per
cell, updated, never one per iteration). The time per step is measured from the end of
warm-up to now, so that pauses between steps (evaluation, checkpoints) count as they happen
and warm-up does not.

While the run is young a *prior* may lead its estimate: the store's model of the network,
blended with the run's own steps. The capture may not import the prediction layer, which
knows the model and the rule that blends it
(:func:`gpuperf_magics.prediction.live.blend`), so the prior comes in as a callable
(:class:`Prior`) that the prediction layer builds
(:func:`gpuperf_magics.prediction.live.live_prior`); without one the line is the run's own.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from gpuperf_magics.units import format_duration

__all__ = ["Configuration", "LiveLine", "Prior", "RemainingEstimator"]

_log = logging.getLogger(__name__)

#: Steps left out at the start (compilation, allocator and cache warm-up).
WARMUP_STEPS = 2
#: Seconds between updates of the line.
INTERVAL_S = 0.5
#: How the bar reads: the share done, the bar, then the estimate's own words.
BAR_FORMAT = "{percentage:3.0f}%|{bar}| {desc}"

#: The running loop's network, batch size, GPU name (None on the CPU) and GPU count.
Configuration = tuple[str, int, str | None, int]


class Prior(Protocol):
    """What leads the estimate while the run is young (built by the prediction layer).

    Called at each update with the run's own mean time per steady step (None before the
    first), the number of those steps, and a callable that returns the running loop's
    :data:`Configuration` (None while the loop has not shown it); returns the seconds per
    step to estimate with (None: nothing to say yet).
    """

    def __call__(self, own_s: float | None, steady: int,
                 configuration: Callable[[], Configuration | None]) -> float | None: ...


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
    own_s: float | None = None  # the run's own mean per step since warm-up (no prior)

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

    def final_line(self, outcome: str) -> str:
        """The line's last state once the block ended: no time left or finish time (the
        loop stopped), the run's own mean labelled as such (the run's summary then gives its
        median, a figure of its own), and ``interrupted``/``failed`` when it did not end well:
        ``120/1,000 it · 41.3 ms/it mean so far · elapsed 5.0 s · interrupted``."""
        parts = [f"{self.steps:,}/{self.total:,} it"]
        if self.own_s is not None:
            parts.append(f"{1e3 * self.own_s:.1f} ms/it mean so far")
        parts.append(f"elapsed {format_duration(self.elapsed_s)}")
        if outcome != "ok":
            parts.append(outcome)
        return " · ".join(parts)


class RemainingEstimator:
    """Remaining time from (time, steps) samples of a running job.

    Parameters
    ----------
    total : int
        Steps of the whole job.
    start : float
        Clock reading when the job started.
    per_step : callable, optional
        ``(own mean, steady steps) -> seconds per step``: the prior's blend of the run's own
        steps (see :class:`Prior`); default: the run's own mean alone.
    """

    def __init__(self, total: int, start: float,
                 per_step: Callable[[float | None, int], float | None] | None = None) -> None:
        self.total = total
        self.start = start
        self.per_step = per_step
        self._base: _Baseline | None = None

    def update(self, now: float, steps: int, wall: _dt.datetime) -> Estimate:
        if self._base is None and steps >= WARMUP_STEPS:
            self._base = _Baseline(now, steps)
        own = None
        n = 0
        if self._base is not None and steps > self._base.steps:
            n = steps - self._base.steps
            own = (now - self._base.time_s) / n
        per_step = own if self.per_step is None else self.per_step(own, n)
        remaining = finish = None
        if per_step is not None:
            remaining = per_step * max(0, self.total - steps)
            finish = wall + _dt.timedelta(seconds=remaining)
        return Estimate(steps, self.total, now - self.start, per_step, remaining, finish, own)


def _tqdm(**keywords: Any) -> Any:
    """A ``tqdm.auto`` bar: a widget in a notebook, a redrawn line on a terminal."""
    from tqdm.auto import tqdm

    return tqdm(**keywords)


class LiveLine:
    """One progress bar, redrawn in place while a cell trains.

    Parameters
    ----------
    steps : callable
        Returns ``(steps done, steps of the job or None)``; called from the thread.
    configuration : callable, optional
        Returns the running loop's :data:`Configuration` or None; handed to ``prior``.
    prior : Prior, optional
        Leads the estimate while the run is young (see :class:`Prior`); a prior that raises
        is dropped (and logged), and the line goes on with the run's own steps.
    bar : callable, optional
        Makes the bar from ``tqdm`` keywords (default: ``tqdm.auto.tqdm``); tests pass a
        ``tqdm`` that writes to a buffer.
    clock, wall : callable
        Monotonic seconds and the local time of day (injected in tests).
    interval : float, optional
        Seconds between updates (a few a second at most; default :data:`INTERVAL_S`).
    """

    def __init__(
        self,
        steps: Callable[[], tuple[int, int | None]],
        *,
        configuration: Callable[[], Configuration | None] | None = None,
        prior: Prior | None = None,
        bar: Callable[..., Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], _dt.datetime] = _dt.datetime.now,
        interval: float | None = None,
    ) -> None:
        self._steps, self._clock, self._wall = steps, clock, wall
        self._configuration = configuration or (lambda: None)
        self._make_bar = bar or _tqdm
        self.interval = INTERVAL_S if interval is None else interval
        self._prior = prior
        self._start = clock()
        self._estimator: RemainingEstimator | None = None
        self._bar: Any = None
        self._last: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _per_step(self, own: float | None, steady: int) -> float | None:
        if self._prior is None:
            return own
        try:
            return self._prior(own, steady, self._configuration)
        except Exception:  # the line goes on with the run's own steps
            _log.warning("the live line's prior failed; the run's own steps from now on",
                         exc_info=True)
            self._prior = None
            return own

    def tick(self, outcome: str | None = None) -> str | None:
        """One update: the line shown, or None when the job length is not known (yet) or
        the line did not change; with ``outcome`` (``ok``, ``interrupted``, ``failed``) the
        final state (:meth:`Estimate.final_line`)."""
        steps, total = self._steps()
        if not total:
            return None
        if self._estimator is None or self._estimator.total != total:
            self._estimator = RemainingEstimator(total, self._start, self._per_step)
        estimate = self._estimator.update(self._clock(), steps, self._wall())
        text = estimate.line() if outcome is None else estimate.final_line(outcome)
        if text == self._last:
            return None
        self._last = text
        self._draw(steps, total, text)
        return text

    def _draw(self, steps: int, total: int, text: str) -> None:
        """The bar at ``steps`` of ``total`` with ``text`` beside it (made at the first
        draw, when the job length is known: a bar without a total has no share to show)."""
        if self._bar is None:
            self._bar = self._make_bar(total=total, bar_format=BAR_FORMAT, unit="it",
                                       leave=True, dynamic_ncols=True)
        elif self._bar.total != total:
            self._bar.reset(total=total)
        self._bar.n = min(steps, total)
        self._bar.set_description_str(text, refresh=False)
        self._bar.refresh()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception as exc:  # a line that cannot be drawn must never stop training
                _log.warning("the live line stopped", exc_info=True)
                with contextlib.suppress(Exception):  # say why it froze, if it still can
                    self._bar.set_description_str(
                        f"{self._last or ''} · live line stopped: {exc}".lstrip(" ·"))
                return

    def start(self) -> LiveLine:
        self._thread = threading.Thread(target=self._run, name="gpuperf-live-line",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self, outcome: str = "ok") -> None:
        """Stop the thread, draw the final state once and close the bar.

        ``outcome`` is how the block ended (``ok``, ``interrupted``, ``failed``): the final
        state says it instead of a time left and a finish time, which would otherwise stay
        above the traceback of an interrupted cell as if the job were still running.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        # The run matters more than its progress line: a failing last draw is logged only.
        try:
            self.tick(outcome)
            if self._bar is not None:
                self._bar.close()
        except Exception:
            _log.warning("the live line's last draw failed", exc_info=True)
