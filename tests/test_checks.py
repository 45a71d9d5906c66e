"""Tests of gpuperf_magics._checks: a positive number, a missing cell, a plain value."""

from __future__ import annotations

import argparse
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics._checks import is_missing, plain, positive_number


# ----------------------------------------------------------------------- positive_number
@pytest.mark.parametrize(("value", "expected"), [
    (3, 3.0), (2.5, 2.5), ("3", 3.0), (" 2.5 ", 2.5), ("1e3", 1000.0), (np.int64(4), 4.0),
    (np.float32(0.5), 0.5), (Fraction(1, 4), 0.25), (Decimal("2"), 2.0), (1e-300, 1e-300),
])
def test_positive_number_gives_a_float(value, expected) -> None:
    result = positive_number(value, "x")
    assert result == expected and type(result) is float


@pytest.mark.parametrize(("value", "expected"), [
    (32, 32), (32.0, 32), ("32", 32), ("32.0", 32), (np.int64(7), 7), (np.float64(8.0), 8),
    (10**20, 10**20),
])
def test_positive_whole_number_gives_an_int(value, expected) -> None:
    result = positive_number(value, "x", whole=True)
    assert result == expected and type(result) is int


def test_none_is_not_given() -> None:
    assert positive_number(None, "x") is None
    assert positive_number(None, "x", whole=True) is None


@pytest.mark.parametrize(("value", "message"), [
    (0, "x must be a finite number > 0, got 0"),
    (-1.5, "x must be a finite number > 0, got -1.5"),
    (math.nan, "x must be a finite number > 0, got nan"),
    (math.inf, "x must be a finite number > 0, got inf"),
    ("nan", "x must be a finite number > 0, got 'nan'"),
    ("-2", "x must be a finite number > 0, got '-2'"),
    (10**400, "x must be a finite number > 0"),
    (True, "x must be a number, got True"),
    (np.bool_(True), "x must be a number, got np.True_"),
    ("", "x must be a number, got ''"),
    ("abc", "x must be a number, got 'abc'"),
    ("1_000", "x must be a number, got '1_000'"),  # float() would read 1000
    ([1], "x must be a number, got [1]"),
    (1j, "x must be a number, got 1j"),
])
def test_positive_number_refuses(value, message) -> None:
    with pytest.raises(ValueError) as info:
        positive_number(value, "x")
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("value", [2.5, "2.5", np.float64(0.5)])
def test_a_fraction_is_not_whole(value) -> None:
    with pytest.raises(ValueError, match=r"^batch_size must be a whole number, got"):
        positive_number(value, "batch_size", whole=True)


def test_each_interface_keeps_its_error() -> None:
    class PredictionError(ValueError):
        pass

    with pytest.raises(PredictionError, match="--epochs must be a finite number > 0"):
        positive_number("0", "--epochs", error=PredictionError)
    with pytest.raises(argparse.ArgumentTypeError, match="must be a whole number"):
        positive_number("1.5", "--iterations", whole=True, error=argparse.ArgumentTypeError)


# --------------------------------------------------------------------------- is_missing
@pytest.mark.parametrize("value", [
    None, math.nan, float("nan"), np.nan, np.float32("nan"), pd.NA, pd.NaT,
    np.datetime64("NaT"), np.timedelta64("NaT"), Decimal("NaN"), Decimal("sNaN"), "", "   ",
    "\t\n",
])
def test_missing_values(value) -> None:
    assert is_missing(value)


@pytest.mark.parametrize("value", [
    0, 0.0, -1, False, "x", " 0 ", "nan", [], {}, (), np.array([np.nan]), np.array([]),
    pd.Timestamp("2024-01-01"), np.int64(0), math.inf,
])
def test_values_that_are_not_missing(value) -> None:
    assert not is_missing(value)


def test_blank_text_is_a_value_when_asked() -> None:
    assert not is_missing("", blank_text=False)
    assert not is_missing("  ", blank_text=False)
    assert is_missing(None, blank_text=False) and is_missing(math.nan, blank_text=False)
    assert is_missing(pd.NA, blank_text=False)


# -------------------------------------------------------------------------------- plain
@pytest.mark.parametrize(("value", "expected", "kind"), [
    (np.int64(3), 3, int), (np.float32(1.5), 1.5, float), (np.bool_(True), True, bool),
    (np.str_("a"), "a", str), (3, 3, int), ("a", "a", str), (None, None, type(None)),
])
def test_plain_values(value, expected, kind) -> None:
    result = plain(value)
    assert result == expected and type(result) is kind


def test_plain_keeps_missing_values_and_containers() -> None:
    assert math.isnan(plain(np.float64("nan")))
    assert plain(pd.NA) is pd.NA
    items = [np.int64(1)]
    assert plain(items) is items
