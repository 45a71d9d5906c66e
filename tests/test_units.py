"""Tests of gpuperf_magics.units: durations and prices as every table and line shows them."""

from __future__ import annotations

import math

import pytest

from gpuperf_magics.units import format_cost, format_duration, format_seconds


@pytest.mark.parametrize(("seconds", "text"), [
    (2.314, "2.31 s"), (1.0, "1.00 s"), (0.0382, "38.2 ms"), (0.001, "1.0 ms"),
    (0.00074, "740 µs"), (0.0, "0 µs"),
])
def test_format_seconds(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


@pytest.mark.parametrize(("seconds", "text"), [
    (0.25, "250 ms"), (12.34, "12.3 s"), (59.94, "59.9 s"), (60, "0:01:00"),
    (3725, "1:02:05"), (86399.6, "1d 0:00:00"), (2 * 86400 + 61, "2d 0:01:01"),
    (math.inf, "—"), (math.nan, "—"),
])
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.parametrize(("usd", "text"), [
    (1234.5, "$1,234.50"), (100, "$100.00"), (12.345, "$12.35"), (1, "$1.00"),
    (0.3, "$0.30"), (0.01, "$0.01"), (0.0042, "$0.0042"), (0.123456, "$0.1235"),
    (4.9e-05, "$0.000049"), (1.23456e-07, "$0.00000012"), (0.80484, "$0.8048"), (0, "$0.00"),
    (math.nan, "—"), (math.inf, "—"),
])
def test_format_cost(usd: float, text: str) -> None:
    assert format_cost(usd) == text
