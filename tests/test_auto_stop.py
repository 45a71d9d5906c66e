"""Tests of gpuperf_magics.auto_stop: the ``--stop-after auto`` numbers and the iterations the
rule needs at a given noise, the one rule the capture stops by and the model prices a run by."""

from __future__ import annotations

import math
import random

import pytest

from gpuperf_magics import auto_stop
from gpuperf_magics.auto_stop import AUTO_CEILING, AUTO_FLOOR, AUTO_PRECISION, auto_iterations
from gpuperf_magics.capture import stopping


def test_a_noisier_series_needs_more_iterations_within_the_floor_and_the_ceiling() -> None:
    quiet, middling, noisy = (auto_iterations(s) for s in (0.01, 0.05, 0.09))
    assert quiet == AUTO_FLOOR  # 1% spread: 6 steady iterations would do; the floor holds
    assert AUTO_FLOOR < middling < noisy < AUTO_CEILING
    # The half-width shrinks as 1/√n: twice the spread, four times the steady iterations.
    assert auto_iterations(0.08) - 1 == pytest.approx(4 * (auto_iterations(0.04) - 1), rel=0.01)
    assert auto_iterations(0.5) == auto_iterations(math.inf) == AUTO_CEILING
    assert auto_iterations(0.0) == AUTO_FLOOR


def test_the_count_is_the_interval_reaching_the_precision() -> None:
    # z·√(π/2)·σ/√m = precision at m steady iterations; the rule runs RULE_OVERSHOOT × m, plus
    # the first (warm-up) iteration.
    sigma = 0.06
    n = (auto_iterations(sigma) - 1) / auto_stop.RULE_OVERSHOOT
    width = auto_stop.MEDIAN_Z * auto_stop.MEDIAN_EFFICIENCY * sigma
    assert width / math.sqrt(n) <= AUTO_PRECISION < width / math.sqrt(n - 1 / auto_stop.RULE_OVERSHOOT)
    # A looser precision, a custom floor and ceiling.
    assert auto_iterations(sigma, precision=0.02) < auto_iterations(sigma)
    assert auto_iterations(0.01, floor=5, ceiling=20) == 14  # ⌈2 × 6.03⌉ + 1
    assert auto_iterations(1.0, floor=5, ceiling=20) == 20


def test_the_capture_stops_where_the_count_says() -> None:
    """The capture's rule, fed times of a known spread, stops near the predicted count."""
    assert (stopping.AUTO_FLOOR, stopping.AUTO_CEILING, stopping.AUTO_PRECISION) == (
        AUTO_FLOOR, AUTO_CEILING, AUTO_PRECISION)
    for sigma in (0.04, 0.07):
        stops = []
        for seed in range(5):
            rng = random.Random(seed)
            rule = stopping.MedianPrecision()
            for steps in range(1, AUTO_CEILING + 1):
                if steps > 1:
                    rule.add(0.01 * (1 + rng.gauss(0.0, sigma)))
                if rule.reason(steps) is not None:
                    break
            stops.append(steps)
        predicted = auto_iterations(sigma)
        assert 0.6 * predicted <= sorted(stops)[2] <= 1.6 * predicted, (sigma, stops, predicted)


def test_bad_input_says_what_it_should_be() -> None:
    with pytest.raises(ValueError, match="0 or more"):
        auto_iterations(-0.1)
    with pytest.raises(ValueError, match="0 or more"):
        auto_iterations(float("nan"))
    with pytest.raises(ValueError, match="precision must be a fraction > 0"):
        auto_iterations(0.05, precision=0)
