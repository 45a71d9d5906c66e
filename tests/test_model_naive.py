"""The naive methods (gpuperf_magics.model.naive) as the baseline the default must beat."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from model_data import floor_series

from gpuperf_magics.model import TrainingTimeModel, mape
from gpuperf_magics.model.naive import NaiveModel


def _hold(frame: pd.DataFrame, mask: np.ndarray) -> tuple[pd.DataFrame, np.ndarray,
                                                           pd.DataFrame, np.ndarray]:
    x, y = frame.drop(columns="time_s"), frame["time_s"].to_numpy()
    return x[~mask], y[~mask], x[mask], y[mask]


def test_a_series_with_a_floor_is_predicted_better_than_by_a_line() -> None:
    frame = floor_series()
    for held in (8, 32, 512):
        xt, yt, xq, yq = _hold(frame, (frame["batch_size"] == held).to_numpy())
        ours = TrainingTimeModel().fit(xt, yt).predict(xq)
        line = NaiveModel().fit(xt, yt).predict(xq)
        assert mape(yq, ours) < mape(yq, line), held
    # The smallest batch sits on the floor: the local move keeps it there.
    xt, yt, xq, yq = _hold(frame, (frame["batch_size"] == 8).to_numpy())
    table = TrainingTimeModel().fit(xt, yt).predict_table(xq)
    assert table["time_s"].iloc[0] == pytest.approx(1.0, rel=1e-6)
    assert table["kind"].iloc[0] == "extrapolation"
    assert "batch_size 8 < measured min 16" in table["detail"].iloc[0]
