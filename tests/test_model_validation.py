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


def test_spec_sheet_moves_are_calibrated_by_the_spec_sheet_errors_on_the_users_gpus() -> None:
    """Five networks on three GPUs whose measured ratios miss the spec sheet by a known
    factor: the own residuals of the ``gpu:spec`` bucket are the spec-sheet move's errors
    (scored on every validated GPU move), not those of the evidence moves, which are exact
    here (every network speeds up alike)."""
    from gpuperf_magics.model.evidence import empty_base

    # Measured speed relative to the T4 (FP32 peaks 8.1, 15.7, 19.5 TFLOPS): the V100 and
    # the A100 gain 1.3x and 0.8x what their peaks promise.
    speed = {"Tesla T4": 1.0, "Tesla V100-SXM2-16GB": 1.3 * 15.7 / 8.1,
             "NVIDIA A100-SXM4-40GB": 0.8 * 19.5 / 8.1}
    rows = [{"network": f"net{k}", "gpu": gpu, "batch_size": b, "iterations": 10,
             "time_s": 10 * 0.002 * (k + 1) * b / s}
            for k in range(5) for gpu, s in speed.items() for b in (16, 32, 64)]
    store = pd.DataFrame(rows)
    model = TrainingTimeModel(evidence=empty_base()).fit(store.drop(columns="time_s"),
                                                         store["time_s"])
    res = model.evidence_residuals_
    spec = res["gpu:spec"]
    # Each GPU held out is moved from the other two, the median (here: the mean in log) of
    # their spec-sheet moves: its error is the mean of log(factor held out / factor source).
    factor = (1.0, 1.3, 0.8)
    known = {round(abs(np.mean([np.log(factor[g] / factor[o]) for o in range(3) if o != g])),
                   2) for g in range(3)}
    assert {round(abs(float(x)), 2) for x in spec} == known
    assert len(spec) >= 20  # enough to set the bucket's interval (OWN_CALIBRATION)
    # The evidence moves (other networks measured on both) are exact here.
    direct = res["gpu:direct"]
    assert np.abs(direct).max() < 0.05
