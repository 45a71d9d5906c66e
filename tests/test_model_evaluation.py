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


def test_grouped_split_groups_by_what_the_model_sees(tmp_path):
    """Store tables carry ids and timings per run: repeats must still fall on one side."""
    import gpuperf_magics as gm
    from gpuperf_magics.model import TrainingTimeModel, evaluate
    from gpuperf_magics.model.evaluation import _configurations

    rows = [{"network": "n", "batch_size": b, "time_s": 0.01 * b * (1 + 0.01 * r)}
            for b in (8, 16, 32, 64, 128) for r in range(3)]
    path = tmp_path / "runs.sqlite"
    gm.Store(path).import_table(pd.DataFrame(rows))
    runs = gm.Store(path).runs(status="ok")
    x = runs.drop(columns="time_s")
    groups = _configurations(x, ())
    assert len(set(groups)) == 5  # run_id, created_at, it_* differ per run; features do not
    table = evaluate(TrainingTimeModel(), x, runs["time_s"], "grouped", test_size=0.4)
    assert int(table["n_test"].iloc[0]) % 3 == 0


@pytest.mark.parametrize("size", [-0.5, 0.0, 1.0, 1.5])
def test_test_size_must_be_a_fraction(size):
    from gpuperf_magics.model import TrainingTimeModel, evaluate

    x = pd.DataFrame({"batch_size": [8, 16, 32, 64]})
    with pytest.raises(ValueError, match="test_size must be a fraction"):
        evaluate(TrainingTimeModel(), x, [1.0, 2.0, 3.0, 4.0], "random", test_size=size)
