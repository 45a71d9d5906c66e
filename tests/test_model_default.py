"""The local-first default (gpuperf_magics.model.default): noisy repeats and busy runs,
offline fits."""

from __future__ import annotations

import socket

import numpy as np
import pandas as pd
import pytest
from model_data import floor_series

from gpuperf_magics.model import TrainingTimeModel


def test_one_outlier_run_does_not_flatten_the_curve_and_is_reported() -> None:
    # Three runs per batch size; one run of batch 64 on a busy machine took 8x longer.
    rows = []
    for b in (16, 32, 64, 128):
        for k in range(3):
            slow = 8.0 if (b == 64 and k == 0) else 1.0
            rows.append({"network": "net", "batch_size": b, "iterations": 10,
                         "gpu": "Tesla T4", "busy": slow > 1,
                         "time_s": 10 * 0.01 * b * slow * (1 + 0.01 * k)})
    frame = pd.DataFrame(rows)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    query = pd.DataFrame({"network": ["net"] * 4, "batch_size": [16, 32, 64, 128],
                          "iterations": [10] * 4, "gpu": ["Tesla T4"] * 4})
    table = model.predict_table(query)
    per_it = table["per_iteration_s"].to_numpy()
    assert np.all(np.diff(per_it) > 0)  # still grows with the batch
    assert per_it[2] == pytest.approx(0.64 * 1.02, rel=1e-6)  # the median, not the outlier
    assert "repeats differ" in table["detail"].iloc[2]
    assert "flagged busy" in table["detail"].iloc[2]


def test_fit_and_predict_never_open_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network access refused by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    frame = floor_series(noise=0.02)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    table = model.predict_table(frame.drop(columns="time_s").assign(gpu="A100 80GB"))
    assert set(table["kind"]) == {"transfer"}
    assert model.transfer_prior_.source.startswith("public data")


def test_no_cross_validated_error_is_claimed_where_public_figures_stand_in() -> None:
    def fitted(batches: list[int]) -> TrainingTimeModel:
        frame = pd.DataFrame([{"network": "net", "batch_size": b, "iterations": 10,
                               "gpu": "Tesla T4", "time_s": 10 * (0.01 + 0.001 * b)}
                              for b in batches])
        return TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])

    tiny = fitted([8, 16, 32])
    moves = tiny.moves_["net"]
    assert moves["batch:inside"]["public"] and moves["batch:beyond"]["public"]
    assert np.isnan(tiny.cv_mape_)
    # Enough batch sizes to validate moves inside them: their error is the model's.
    wide = fitted([2 ** k for k in range(3, 15)])
    inside = wide.moves_["net"]["batch:inside"]
    assert not inside["public"] and wide.moves_["net"]["batch:beyond"]["public"]
    assert wide.cv_mape_ == pytest.approx(inside["mape"])


def test_a_batch_far_beyond_the_measured_ones_widens_without_a_cap_up_to_physics() -> None:
    """Two batch sizes measured, asked one and nine doublings beyond: the validated interval
    of the move one spacing beyond, widened by the reach to the power BATCH_WIDER_POWER (it
    once stopped at 4 times, and covered 32-44% of the rows 6 or more spacings beyond on
    public data), each side at most ``|log(asked / measured end)|``: a time per iteration
    neither falls with the batch nor grows faster than it, so no answer errs by more."""
    from gpuperf_magics.model.default import BATCH_WIDER_POWER

    x = pd.DataFrame({"network": "ncf", "batch_size": [8, 8, 16, 16], "iterations": 100,
                      "gpu": "Tesla T4"})
    y = 100 * np.array([0.010, 0.0101, 0.0104, 0.0103])
    model = TrainingTimeModel(public_data=False).fit(x, y)
    near, far = model.predict_table(x.iloc[[0, 0]].assign(batch_size=[32, 8192])).to_dict(
        "records")
    lo, hi = np.log(near["time_low_s"] / near["time_s"]), np.log(near["time_high_s"] /
                                                                  near["time_s"])
    wider = 9 ** BATCH_WIDER_POWER  # 8192 is 9 doublings beyond 16, the validated reach 1
    assert np.log(far["time_low_s"] / far["time_s"]) == pytest.approx(lo * wider)
    assert np.log(far["time_high_s"] / far["time_s"]) == pytest.approx(hi * wider)
    assert far["expected_mape"] == pytest.approx(near["expected_mape"] * wider)
    # Batch 100 and 101 measured, 274 asked: a hundred spacings beyond, the widening would
    # pass the physical bound (log(274 / 101) = 1.0); it stops there.
    fine = x.assign(batch_size=[100, 100, 101, 101])
    model = TrainingTimeModel(public_data=False).fit(fine, y)
    (absurd,) = model.predict_table(fine.iloc[[0]].assign(batch_size=274)).to_dict("records")
    distance = np.log(274 / 101)
    assert np.log(absurd["time_high_s"] / absurd["time_s"]) == pytest.approx(distance)
    assert np.log(absurd["time_s"] / absurd["time_low_s"]) == pytest.approx(distance)
    assert absurd["expected_mape"] == pytest.approx(np.expm1(distance))


def test_a_move_to_another_precision_holds_the_source_batch_move_it_starts_from() -> None:
    """Measured in FP32 at batch 16 and 32 on an A100 and asked 512 in AMP: the answer is the
    FP32 batch move to 512 moved to AMP, so its expected error and interval hold both moves
    (the validated moves between precisions compare configurations measured both ways, which
    hold no batch move). Asked at a measured batch, the AMP answer is the precision move's
    alone. Until 2026-12-06 the far AMP answer claimed 33% where the FP32 one claimed 42%."""
    x = pd.DataFrame({"network": "resnet", "batch_size": [16, 32], "iterations": 100,
                      "gpu": "NVIDIA A100-SXM4-80GB", "precision": "fp32"})
    model = TrainingTimeModel(public_data=False).fit(x, np.array([2.6, 4.2]))
    asked = x.iloc[[0, 0, 0]].assign(batch_size=[16, 512, 512],
                                      precision=["fp16", "fp16", "fp32"])
    amp_near, amp_far, fp32_far = model.predict_table(asked).to_dict("records")
    assert amp_far["kind"] == amp_near["kind"] == "transfer"
    assert amp_far["expected_mape"] > fp32_far["expected_mape"]
    assert amp_far["expected_mape"] > amp_near["expected_mape"]
    # In quadrature: the precision move's error and the batch move's.
    precision_alone = amp_near["expected_mape"]
    assert amp_far["expected_mape"] == pytest.approx(
        np.hypot(precision_alone, fp32_far["expected_mape"]), rel=0.05)

    def width(row: dict) -> float:
        return float(np.log(row["time_high_s"] / row["time_low_s"]))

    assert width(amp_far) > max(width(amp_near), width(fp32_far))
