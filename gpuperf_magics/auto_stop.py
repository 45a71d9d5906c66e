"""The ``--stop-after auto`` rule's numbers, and how many iterations it needs at a given noise.

Two layers use one rule: the capture stops a profiled loop by it
(:class:`gpuperf_magics.capture.stopping.MedianPrecision`) and the model prices a profiling
run by it (:func:`gpuperf_magics.model.suggest.suggest`'s ``cost_s``). The capture sits above
the model, and the model may not import the capture (a fit would pull in the hooks), so the
numbers live here, at the bottom, in plain Python (no numpy: the capture imports this at a
cell's first line).

How many iterations ``auto`` needs follows from the interval it stops by. The number of
iteration times below the true median is Binomial(n, 1/2), so the interval's ends sit
``z·√n / 2`` ranks either side of the middle; at a density ``f`` of the times at their
median that is ``z / (2 f √n)`` seconds, and for times spread about the median with a
relative standard deviation ``σ`` (``f = 1 / (σ·m·√(2π))``) the half-width is
``z·√(π/2)·σ / √n`` of the median. It reaches :data:`AUTO_PRECISION` at
``n = (z·√(π/2)·σ / precision)²`` steady iterations, clipped to the floor and the ceiling.
"""

from __future__ import annotations

import math

#: ``auto`` stops once the median is known within this fraction (half-width of its interval).
AUTO_PRECISION = 0.01
#: ``auto`` never stops before this many iterations. The warm-up is decided afterwards from
#: the whole run and may be up to a fifth of it: at 50 that is 10 iterations (first call,
#: compilation, autotuning of a few shapes), and at least 40 steady ones are left, enough for
#: slow events that recur every few dozen steps (a DataLoader refill, garbage collection) to
#: show up in the sample at all.
AUTO_FLOOR = 50
#: ``auto`` always stops here. The interval's half-width shrinks as 1/sqrt(n): about
#: 2.5 × (spread of the iteration times) / sqrt(n), so 1000 iterations reach 1% for a spread
#: up to about 12%. Noisier timings are the machine's (other processes, a loop with periodic
#: evaluation) and more iterations would cost the user's time for little; the run then says
#: how well its median is known.
AUTO_CEILING = 1000
#: 95% two-sided normal quantile of the binomial approximation of the median's ranks.
MEDIAN_Z = 1.959963984540054
#: The median's standard error over the mean's for normally spread times: √(π/2).
MEDIAN_EFFICIENCY = math.sqrt(math.pi / 2)
#: How many more iterations the capture's rule runs than the order-statistic count: it stops
#: by the wider of that interval and a t-interval of block medians (robust to the
#: autocorrelation of real loops), judged on a schedule of checks. Simulated on independent
#: normal times, 15 seeds per spread, its median stop was 2.06× the count at 4%, 1.81× at 5%
#: and 2.17× at 7% (`benchmarks/stop_after.py --overshoot`; tests/test_auto_stop.py holds
#: the capture to it).
RULE_OVERSHOOT = 2.0

__all__ = ["AUTO_CEILING", "AUTO_FLOOR", "AUTO_PRECISION", "MEDIAN_EFFICIENCY", "MEDIAN_Z",
           "RULE_OVERSHOOT", "auto_iterations"]


def auto_iterations(noise: float, *, precision: float = AUTO_PRECISION,
                    floor: int = AUTO_FLOOR, ceiling: int = AUTO_CEILING) -> int:
    """Iterations in all a ``--stop-after auto`` run needs when its iteration times spread by
    ``noise`` (relative standard deviation, 0.05 for 5%).

    Steady iterations ``(z·√(π/2)·noise / precision)²`` (see the module docstring) times
    :data:`RULE_OVERSHOOT` (what the capture's rule runs beyond that count) plus the first
    one, which is always warm-up, clipped to ``[floor, ceiling]``: a run never stops before
    the floor and always at the ceiling.

    Raises
    ------
    ValueError
        For a negative or not-a-number ``noise`` or a ``precision`` that is not > 0: the
        noise is a spread (0 or more), the precision the interval's half-width.
    """
    if not noise >= 0:  # NaN too
        raise ValueError(f"noise must be a relative spread of 0 or more (0.05 for 5%), "
                         f"got {noise!r}")
    if not precision > 0:
        raise ValueError(f"precision must be a fraction > 0 (0.01 for 1%), got {precision!r}")
    if math.isinf(noise):
        return ceiling
    steady = RULE_OVERSHOOT * (MEDIAN_Z * MEDIAN_EFFICIENCY * noise / precision) ** 2
    return int(min(max(math.ceil(steady) + 1, floor), ceiling))
