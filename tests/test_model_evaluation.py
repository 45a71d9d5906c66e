"""evaluate(): scenarios, MAPE tables, clear errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics.model import TrainingTimeModel, evaluate


def _table() -> tuple[pd.DataFrame, np.ndarray]:
    rows = []
    for gpu, tflops in (("a", 8.0), ("b", 14.0), ("c", 19.0)):
        for b in (8, 16, 32, 64, 128):
            for _ in range(2):  # repeats
                rows.append({"network": "n", "gpu_name_given": gpu, "batch_size": b,
                             "iterations": 10, "gpu_fp32_tflops": tflops,
                             "time_s": 10 * (0.01 + b * 0.01 / tflops)})
    frame = pd.DataFrame(rows)
    return frame.drop(columns="time_s"), frame["time_s"].to_numpy()


@pytest.mark.parametrize("scenario", ["random", "grouped"])
def test_holdout_scenarios_return_a_mape_table(scenario: str) -> None:
    x, y = _table()
    table = evaluate(TrainingTimeModel(), x, y, scenario)
    assert list(table.columns) == ["scenario", "held_out", "position", "n_train", "n_test",
                                   "mape"]
    assert table["mape"].iloc[0] < 0.2


def test_threshold_extrapolation() -> None:
    x, y = _table()
    table = evaluate(TrainingTimeModel(), x, y, "threshold", column="batch_size", threshold=64)
    assert table["n_test"].iloc[0] == 6


def test_leave_one_out_marks_interior_and_ends() -> None:
    x, y = _table()
    table = evaluate(TrainingTimeModel(), x, y, "leave_one_out", column="batch_size")
    assert list(table["position"]) == ["end", "interior", "interior", "interior", "end"]
    gpus = evaluate(TrainingTimeModel(), x, y, "leave_one_out", column="gpu_name_given")
    assert len(gpus) == 3 and set(gpus["position"]) == {""}


def test_unknown_scenario_and_column_are_clear_errors() -> None:
    x, y = _table()
    with pytest.raises(ValueError, match="unknown scenario"):
        evaluate(TrainingTimeModel(), x, y, "sideways")
    with pytest.raises(ValueError, match="'depth' is not in X"):
        evaluate(TrainingTimeModel(), x, y, "threshold", column="depth", threshold=3)
    with pytest.raises(ValueError, match="needs threshold"):
        evaluate(TrainingTimeModel(), x, y, "threshold", column="batch_size")
    with pytest.raises(ValueError, match="empty"):
        evaluate(TrainingTimeModel(), x, y, "threshold", column="batch_size", threshold=1e9)
