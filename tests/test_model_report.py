"""What a fitted model reports about itself (gpuperf_magics.model.report)."""

from __future__ import annotations

import numpy as np
from model_data import multi_gpu_rows, synthetic

from gpuperf_magics.model import TrainingTimeModel


def test_paper_method_runs_and_reports_terms() -> None:
    x, y = synthetic()
    model = TrainingTimeModel(method="paper").fit(x, y)
    report = model.report()
    assert {"term", "cv_mape", "range"} <= set(report["item"])
    assert len(report[report["item"] == "term"]) >= 2  # at least one term + intercept


def test_report_lists_terms_cv_and_ranges() -> None:
    x, y = synthetic()
    report = TrainingTimeModel().fit(x, y).report()
    ranges = report[report["item"] == "range"].set_index("name")
    assert ranges.loc["batch_size", "max"] == 256


def test_report_shows_efficiency_transfer_method_and_extrapolation_model() -> None:
    frame = multi_gpu_rows()
    report = TrainingTimeModel(public_data=False).fit(
        frame.drop(columns="time_s"), frame["time_s"]).report()
    items = set(report["item"])
    assert {"efficiency", "transfer method", "extrapolation", "physical term"} <= items
    eta = report[report["item"] == "efficiency"]
    assert len(eta) == 4 and np.all(eta["value"] > 0)
    method = report.loc[report["item"] == "transfer method", "name"].iloc[0]
    assert method in ("physical", "ratio", "both")
