"""How the default validates and chooses each kind of move on the user's own data
(gpuperf_magics.model.validation)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from model_data import floor_series

from gpuperf_magics.model import TrainingTimeModel


def test_validation_picks_the_naive_line_where_it_is_best() -> None:
    # A straight line with 6% noise and many batch sizes: a line through every point averages
    # the noise out, piecewise interpolation follows it.
    rng = np.random.default_rng(3)
    rows = [{"network": "net", "batch_size": b, "iterations": 1, "gpu": "Tesla T4",
             "time_s": (0.2 + 0.01 * b) * (1 + 0.06 * rng.standard_normal())}
            for b in range(8, 8 * 31, 8)]
    frame = pd.DataFrame(rows)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    chosen = model.moves_["net"]["batch:inside"]
    errors = chosen["candidates"]
    assert errors["line"] < min(errors["lin"], errors["log"])  # the naive line is best here
    assert not chosen["public"] and chosen["validated"] >= 20
    # The default picks it, or the cross-series model where that validated at least as well
    # (on a straight line it is one).
    assert chosen["method"] in ("line", "global")
    assert errors[chosen["method"]] <= errors["line"]


def test_validation_keeps_the_local_move_on_a_series_with_a_floor() -> None:
    rows = [{"network": "net", "batch_size": b, "iterations": 1, "gpu": "Tesla T4",
             "time_s": max(1.0, 0.01 * b)} for b in range(8, 8 * 41, 8)]
    frame = pd.DataFrame(rows)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    assert model.moves_["net"]["batch:inside"]["method"] in ("lin", "log")


def test_intervals_and_expected_error_come_from_one_distribution() -> None:
    frame = floor_series(noise=0.03)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    report = model.report()
    moves = report[report["item"] == "move"]
    assert len(moves) and (moves["min"] <= 1).all() and (moves["max"] >= 1).all()
    query = frame.drop(columns="time_s").assign(batch_size=[12, 24, 48, 96, 192, 384, 1024])
    table = model.predict_table(query)
    for _, row in table.iterrows():
        key = "batch:inside" if row["kind"] == "interpolation" else "batch:beyond"
        assert row["expected_mape"] == pytest.approx(model.moves_["net"][key]["mape"])
