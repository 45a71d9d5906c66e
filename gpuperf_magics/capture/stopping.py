"""Runs that stop by themselves: ``stop_after=N`` and ``stop_after="auto"``.

A profile of a training job rarely needs the whole job: the time per iteration settles after a
few dozen steps. A :class:`StopRule` watches the primary optimizer's steps (a global
optimizer step post-hook registered *after* the recorder's, so every step is logged before it
is judged) and, once the rule is met, raises :class:`StopTraining` out of ``optimizer.step()``.
The exception travels up through the user's loop (or a framework's) to the
``profile_training`` block or the ``%%profile_training`` cell, which catch it: the run is a
normal, complete measurement marked ``stopped_by``.

Why an exception, and why a :class:`BaseException`: it is the one way to leave unchanged user
code from inside a hook. Derived from ``Exception``, a loop's own ``except Exception`` (a
retry, a logging wrapper) would swallow it; derived from ``KeyboardInterrupt``, Lightning would
take it for a Ctrl-C (it ignores SIGINT from then on and exits the process). Lightning re-raises
any other ``BaseException`` after its teardown, the Hugging Face Trainer and accelerate do not
catch it at all.

What the state is afterwards: the N-th optimizer update has been applied (the hook runs after
``step()``'s work); whatever the loop does after ``opt.step()`` in that iteration (a scheduler
step, ``zero_grad``, logging) and everything after the loop do not run.

The ``auto`` rule (:class:`MedianPrecision`) stops once the median time per iteration is
known within :data:`AUTO_PRECISION` (the half-width of its 95% interval,
:func:`series_median_interval`), never before :data:`AUTO_FLOOR` and always at
:data:`AUTO_CEILING`. The iterations of a training loop are a time series, not independent
draws: on a shared machine the load comes and goes (a run of slow iterations while another
process holds the core), so neighbours are alike and the level wanders. An interval that takes
them as independent (the order statistics of all iterations, :func:`median_interval`) is then
too narrow: on simulated autocorrelated times (log-AR(1), ρ = 0.9) the rule stopped claiming
±0.8% and covered the true median in 42% of runs (``benchmarks/stop_after.py --synthetic``).
The interval it judges is the wider of that one and the t-interval of the medians of
consecutive blocks of iterations (the method of batch means of simulation output analysis:
block medians are nearly independent once blocks are longer than the times' memory, and a
block median ignores a spike; blocks are merged while neighbouring block medians still
correlate, and a load that comes and goes moves them apart). It does not judge at every step:
a check costs O(n) (a partial sort, a sort of the blocks) and falls inside an iteration's time,
so it judges at the floor and then where the interval's 1/sqrt(n) shrinking says the target
can be reached (never sooner than n/32 later); peeking at every step would also stop on the
first lucky dip below the target.
"""

from __future__ import annotations

import math
import statistics
from array import array
from collections import deque
from collections.abc import Callable
from typing import Any, NamedTuple

# The rule's numbers live at the bottom of the package, where the model prices a run by them.
from gpuperf_magics.auto_stop import AUTO_CEILING, AUTO_FLOOR, AUTO_PRECISION
from gpuperf_magics.auto_stop import MEDIAN_Z as _Z

#: Between two checks of the auto rule at n iterations there are at least n/32 iterations:
#: the checks cost O(n) each, so O(n) per doubling of the run and over the whole run (not
#: O(n²)). Where the interval is still wide the next check waits longer: the half-width h
#: shrinks as 1/sqrt(n), so the target is not reached before about n·(h / target)²
#: iterations; the check comes at 90% of that.
_CHECK_SPACING = 32
_EARLY = 0.9
#: Block medians of :func:`series_median_interval`: at most this many blocks, each of at least
#: :data:`_BLOCK_LENGTH` iterations; halved (blocks twice as long) while the lag-1 correlation
#: of neighbouring block medians is above one standard error (1/sqrt(B) for B independent
#: values) and at least :data:`_FEWEST_BLOCKS` remain. On simulated log-AR(1) times (ρ = 0.9)
#: 16 blocks merged at one standard error covered the true median in 84/90/96% of samples of
#: 100/300/1000 (32 blocks merged at 1.645 standard errors: 79/88/92%), and on independent
#: times the order statistics' interval is mostly the wider one (the stop moves 282 → 304 on
#: 5% lognormal noise, median of 200 series).
_MOST_BLOCKS = 16
_BLOCK_LENGTH = 5
_FEWEST_BLOCKS = 4

__all__ = ["AUTO_CEILING", "AUTO_FLOOR", "AUTO_PRECISION", "MedianPrecision", "StopRule",
           "StopTraining", "auto_warmup", "median_interval", "series_median_interval",
           "stop_after_value"]


class StopTraining(BaseException):
    """Raised from ``optimizer.step()`` when a run's stop rule is met; caught by the
    ``profile_training`` block or the ``%%profile_training`` cell that set the rule.

    Attributes
    ----------
    reason : str
        ``"count"`` (``stop_after=N`` reached), ``"precision"`` (``auto``: the median is
        known within :data:`AUTO_PRECISION`) or ``"ceiling"`` (``auto``: :data:`AUTO_CEILING`
        reached first).
    owner : object
        The session whose rule raised it (an outer block's stop passes through an inner one).
    """

    def __init__(self, reason: str, owner: Any, steps: int) -> None:
        super().__init__(f"profile_training stopped the loop after {steps} iterations "
                         f"({reason})")
        self.reason = reason
        self.owner = owner
        self.steps = steps


def stop_after_value(value: Any, name: str = "stop_after",
                     error: type[Exception] = ValueError) -> int | str | None:
    """``value`` as a stop rule's limit: a whole number > 0, ``"auto"``, or None (no rule).

    Raises
    ------
    error
        Anything else (0, a fraction, a boolean, other text), naming ``name``.
    """
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    from gpuperf_magics._checks import positive_number

    try:
        return int(positive_number(value, name, whole=True))
    except ValueError:
        raise error(f"{name} must be a whole number of iterations > 0 or 'auto', got "
                    f"{value!r}") from None


def auto_warmup(durations: list[float]) -> int:
    """How many leading iterations are warm-up when the user did not say.

    The first iteration always is (allocations, lazy init, autotuning, compilation). After it,
    leading iterations stay warm-up while they are more than 1.5× the median of the second
    half of the run; at most a fifth of the run is flagged.
    """
    n = len(durations)
    if n <= 1:
        return n
    reference = statistics.median(durations[n // 2 :])
    k = 1
    while k < max(1, n // 5) and durations[k] > 1.5 * reference:
        k += 1
    return k


class MedianInterval(NamedTuple):
    """The median of a sample and its 95% distribution-free interval."""

    median: float
    low: float
    high: float

    @property
    def half_width(self) -> float:
        """The larger distance from the median to an end, as a fraction of the median."""
        if self.median <= 0:
            return math.inf
        return max(self.median - self.low, self.high - self.median) / self.median


def median_interval(values: Any) -> MedianInterval | None:
    """The median of ``values`` (a sequence or array of floats) and the order statistics that
    bound it with 95% confidence.

    The number of values below the true median is Binomial(n, 1/2), whatever the
    distribution of the times (skewed, with outliers): the j-th and k-th smallest values, with
    j and k at n/2 ∓ 1.96·√n/2 (the normal approximation, fine from about 20 values), cover it
    with 95% probability. None for fewer than 20 values.
    """
    import numpy as np

    a = np.asarray(values, dtype=float)
    n = int(a.size)
    if n < 20:
        return None
    spread = _Z * math.sqrt(n) / 2
    lo = max(math.floor(n / 2 - spread), 1)  # 1-based ranks
    hi = min(math.ceil(n / 2 + spread) + 1, n)
    mid = n // 2
    # Four order statistics in O(n), not a sort.
    part = np.partition(a, sorted({lo - 1, hi - 1, mid, mid - 1}))
    median = float(part[mid]) if n % 2 else (float(part[mid - 1]) + float(part[mid])) / 2
    return MedianInterval(median, float(part[lo - 1]), float(part[hi - 1]))


def series_median_interval(values: Any) -> MedianInterval | None:
    """The median of ``values`` (iteration times in the order they ran) and a 95% interval
    that still holds when neighbouring times are alike (the load comes and goes).

    The wider of :func:`median_interval` (right for independent times) and the median ±
    t(B−1)·s/√B, s the standard deviation of the medians of B consecutive blocks (the method
    of batch means: at most 16 blocks of at least 5 iterations, halved while the lag-1
    correlation of the block medians says the blocks are shorter than the times' memory,
    down to 4). A level that wanders during the run moves the block medians apart and
    correlates neighbours, so it widens the interval too; a steady trend leaves the run's
    median a fair middle and widens it only as far as the blocks disagree. None for fewer
    than 20 values.
    """
    import numpy as np

    a = np.asarray(values, dtype=float)
    iid = median_interval(a)
    if iid is None:
        return None
    n, m = int(a.size), iid.median
    blocks = min(_MOST_BLOCKS, n // _BLOCK_LENGTH)  # n >= 20: at least 4
    centred, ss = _block_medians(a, blocks)
    while blocks >= 2 * _FEWEST_BLOCKS and ss > 0 and (
            float(centred[1:] @ centred[:-1]) / ss > 1 / math.sqrt(blocks)):
        blocks //= 2  # neighbouring block medians correlate: the blocks are too short
        centred, ss = _block_medians(a, blocks)
    delta = _t975(blocks - 1) * math.sqrt(ss / (blocks - 1) / blocks)
    return MedianInterval(m, min(iid.low, m - delta), max(iid.high, m + delta))


def _block_medians(a: Any, blocks: int) -> tuple[Any, float]:
    """The medians of ``blocks`` consecutive blocks of equal length, less their mean, and
    their sum of squares (the oldest few values, nearest the warm-up, left out when
    ``len(a)`` is not a multiple). One sort of n values: no ``np.median`` overhead per call."""
    import numpy as np

    length = a.size // blocks
    rows = np.sort(a[a.size - blocks * length:].reshape(blocks, length), axis=1)
    mid = length // 2
    medians = rows[:, mid] if length % 2 else (rows[:, mid - 1] + rows[:, mid]) / 2
    if medians.min() == medians.max():  # no spread: no rounding noise either
        return np.zeros(blocks), 0.0
    centred = medians - medians.mean()
    return centred, float(centred @ centred)


def _t975(df: int) -> float:
    """Student's t 97.5% quantile (Cornish-Fisher from the normal's: within 0.7% of the exact
    value from 3 degrees of freedom, 0.04% from 7; no scipy import inside a training loop)."""
    z = _Z
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


class MedianPrecision:
    """The ``auto`` rule: stop once the median iteration time is known within ``precision``.

    Fed one duration per iteration (the first iteration has none: it is always warm-up), it
    judges the sample on a geometric schedule (every n/32 iterations or later, when the
    interval is still far from the target), each time leaving out the iterations
    :func:`auto_warmup` (or the user's ``warmup``) would flag at that length, by
    :func:`series_median_interval` (which holds for times that are autocorrelated or drift).

    Parameters
    ----------
    warmup : int, optional
        The user's warm-up count; default: :func:`auto_warmup` at each check.
    precision, floor, ceiling
        See :data:`AUTO_PRECISION`, :data:`AUTO_FLOOR`, :data:`AUTO_CEILING`.
    """

    def __init__(self, warmup: int | None = None, *, precision: float = AUTO_PRECISION,
                 floor: int = AUTO_FLOOR, ceiling: int = AUTO_CEILING) -> None:
        self.warmup = warmup
        self.precision = precision
        self.floor = floor
        self.ceiling = ceiling
        #: Seconds of iterations 2, 3, ... (a C array: appending stays ~50 ns a step).
        self.durations = array("d")
        self._next_check = floor
        #: The interval at the last check (None before one).
        self.interval: MedianInterval | None = None

    def add(self, duration: float) -> None:
        self.durations.append(duration)

    def reason(self, steps: int) -> str | None:
        """Why to stop after ``steps`` iterations: ``"precision"``, ``"ceiling"`` or None."""
        if steps >= self.ceiling:
            self.judge()
            return "ceiling"
        if steps < self._next_check:
            return None
        interval = self.judge()
        if interval is not None and interval.half_width <= self.precision:
            return "precision"
        soonest = steps + max(1, steps // _CHECK_SPACING)
        if interval is None or self.precision <= 0:
            self._next_check = soonest if interval is None else self.ceiling
            return None
        expected = steps * (interval.half_width / self.precision) ** 2
        self._next_check = max(soonest, min(int(_EARLY * expected), self.ceiling))
        return None

    def judge(self) -> MedianInterval | None:
        """The interval (:func:`series_median_interval`) of the steady durations so far
        (warm-up left out)."""
        import numpy as np

        d = np.array(self.durations)  # a copy: the array keeps growing afterwards
        # The first iteration has no duration here: the user's warm-up counts one fewer.
        skip = max(self.warmup - 1, 0) if self.warmup is not None else self._auto_skip(d)
        self.interval = series_median_interval(d[skip:])
        return self.interval

    @staticmethod
    def _auto_skip(d: Any) -> int:
        """``auto_warmup([inf, *d]) - 1`` (the first iteration always is warm-up), with the
        reference median taken in O(n): the warm-up the run will be given at this length."""
        import numpy as np

        n = int(d.size) + 1
        if n <= 1:
            return 0
        reference = float(np.median(d[n // 2 - 1:]))
        k = 1
        while k < max(1, n // 5) and d[k - 1] > 1.5 * reference:
            k += 1
        return k - 1


class StopRule:
    """A stop rule watching a :class:`~gpuperf_magics.capture.recorder.Recorder`'s steps.

    Parameters
    ----------
    limit : int or "auto"
        Stop after this many iterations in all (warm-up included), or by :class:`MedianPrecision`.
    owner : object
        The session the :class:`StopTraining` names (so that only it catches the stop).
    warmup : int, optional
        The user's warm-up count (for ``auto``).
    """

    def __init__(self, limit: int | str, owner: Any, warmup: int | None = None) -> None:
        self.limit = limit
        self.owner = owner
        self.auto = MedianPrecision(warmup) if limit == "auto" else None
        #: Why the loop was stopped (None while it was not).
        self.stopped_by: str | None = None
        self._recorder: Any = None
        self._handle: Any = None
        self._last_steps = 0
        self._last_token: int | None = None
        self._timer: _CudaTimer | None = None
        self._untraced: Callable[..., None] | None = None
        self._is_compiling: Callable[[], bool] = lambda: False

    # ------------------------------------------------------------------ hooks
    def install(self, recorder: Any) -> StopRule:
        """Watch ``recorder``'s steps: a global step post-hook, registered after its own."""
        from torch.optim import optimizer as optim_mod

        from gpuperf_magics.capture.recorder import _is_compiling

        self._is_compiling = _is_compiling
        self._recorder = recorder
        self._handle = optim_mod.register_optimizer_step_post_hook(self._post_hook)
        return self

    def remove(self) -> None:
        """Remove the hook (safe to call twice)."""
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        self._timer = None

    def _post_hook(self, opt: Any, args: Any, kwargs: Any) -> None:
        if self._is_compiling():  # a step compiled by the user: Dynamo must not trace the raise
            if self._untraced is None:
                from gpuperf_magics.capture.probes import dynamo_disabled

                self._untraced = dynamo_disabled(self._after_step)
            return self._untraced(opt)
        self._after_step(opt)

    def _after_step(self, opt: Any) -> None:
        rec = self._recorder
        steps = rec.steps_seen
        if steps == self._last_steps:
            return  # a nested super().step() or another optimizer: not an iteration
        self._last_steps = steps
        if self.auto is not None:
            self._time_step(rec)
            reason = self.auto.reason(steps)
        else:
            reason = "count" if steps >= int(self.limit) else None
        if reason is not None:
            self.stopped_by = reason
            raise StopTraining(reason, self.owner, steps)

    def _time_step(self, rec: Any) -> None:
        """The auto rule's duration of the step just ended: from the recorder's clock mark
        on the host clocks, from an event of our own on CUDA (read once it has completed,
        never waited for)."""
        clock = rec.clock
        if getattr(clock, "method", None) == "cuda_events":
            if self._timer is None:
                from gpuperf_magics.capture.probes import device_of

                self._timer = _CudaTimer(device_of(rec.model))
            for duration in self._timer.mark():
                self.auto.add(duration)  # type: ignore[union-attr]
            return
        token = rec.events[-1][1] if rec.events else None  # the STEP_END just logged
        if token is not None and self._last_token is not None:
            self.auto.add((token - self._last_token) * 1e-9)  # type: ignore[union-attr]
        self._last_token = token

    # ------------------------------------------------------------------ the run's words
    def note(self, steps: int, status: str) -> str | None:
        """What the run says about its stop rule (None when nothing needs saying); ``status``:
        how the block ended."""
        interval = self.auto.judge() if self.auto is not None else None
        known = (f"; its median is known within ±{100 * interval.half_width:.1f}%"
                 if interval is not None else "")
        if self.stopped_by == "ceiling":
            return (f"stopped at the ceiling of {AUTO_CEILING} iterations (--stop-after auto) "
                    f"before the median was known within {100 * AUTO_PRECISION:g}%{known}: "
                    "the timings are noisy")
        if self.stopped_by is None and steps and status == "ok":
            return (f"the loop ended by itself after {steps} iterations, before --stop-after "
                    f"{self.limit} stopped it{known}")
        return None


class _CudaTimer:
    """Durations between this rule's CUDA events, as the GPU completes them; ``cuda`` is
    ``torch.cuda`` (or a fake with its API)."""

    def __init__(self, device: Any, cuda: Any = None) -> None:
        if cuda is None:
            import torch

            cuda = torch.cuda
        self._cuda = cuda
        self._device = device
        self._pending: deque[Any] = deque()
        self._last: Any = None

    def mark(self) -> list[float]:
        """Record an event now; the durations (s) of the steps completed since the last call."""
        cuda = self._cuda
        event = cuda.Event(enable_timing=True)
        event.record(cuda.current_stream(self._device))
        self._pending.append(event)
        done: list[float] = []
        while self._pending and self._pending[0].query():
            ready = self._pending.popleft()
            if self._last is not None:
                done.append(self._last.elapsed_time(ready) * 1e-3)
            self._last = ready
        return done
