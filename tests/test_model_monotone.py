"""Predictions that never fall as the batch grows (gpuperf_magics.model.monotone)."""

from __future__ import annotations

import pandas as pd
import pytest


def test_a_smaller_batch_is_capped_at_the_next_larger_batchs_iteration() -> None:
    from gpuperf_magics.model.monotone import monotone_in_batch

    frame = pd.DataFrame({"batch_size": [64, 32, 128], "gpu": ["T4"] * 3, "gpu_count": 1,
                          "per_iteration_s": [0.2, 0.3, 0.4], "time_s": [2.0, 3.0, 4.0],
                          "time_low_s": [1.0, 1.5, 2.0], "time_high_s": [4.0, 6.0, 8.0]})
    notes = monotone_in_batch(frame, ["gpu", "gpu_count"])
    assert list(frame["per_iteration_s"]) == pytest.approx([0.2, 0.2, 0.4])
    assert list(frame["time_high_s"]) == pytest.approx([4.0, 4.0, 8.0])
    assert len(notes) == 1 and notes[0].startswith("batch 32: predicted time capped")


def test_a_measured_batch_keeps_its_own_time_and_a_contradiction_is_flagged() -> None:
    """Batch 32 measured at 152 ms is not capped at batch 64's one fast 21.2 ms run: both rows
    say they contradict each other, and the predicted batch 16 below is capped at 32's own."""
    from gpuperf_magics.model.monotone import MEASURED, monotone_in_batch

    measured = f"{MEASURED} (median of its runs)"
    frame = pd.DataFrame({
        "batch_size": [16, 32, 64], "gpu": ["T4"] * 3, "gpu_count": 1,
        "per_iteration_s": [0.2, 0.152, 0.0212], "time_s": [20.0, 15.2, 2.12],
        "time_low_s": [18.0, 14.0, 2.0], "time_high_s": [22.0, 16.0, 2.3],
        "detail": ["batch_size 16 < measured min 32", measured, measured]})
    notes = monotone_in_batch(frame, ["gpu", "gpu_count"])
    assert list(frame["per_iteration_s"]) == pytest.approx([0.152, 0.152, 0.0212])
    assert frame["time_s"].iloc[1] == pytest.approx(15.2)  # its own runs, untouched
    assert "contradicts batch 64, faster per iteration at 21.2 ms" in frame["detail"].iloc[1]
    assert "contradicts slower smaller batch 32" in frame["detail"].iloc[2]
    assert any(n.startswith("batch 32: measured at 152.0 ms") for n in notes)
    assert any(n.startswith("batch 16: predicted time capped") for n in notes)


def test_measured_repeats_within_noise_are_not_a_contradiction() -> None:
    from gpuperf_magics.model.monotone import MEASURED, monotone_in_batch

    frame = pd.DataFrame({"batch_size": [8, 16], "gpu": ["T4"] * 2, "gpu_count": 1,
                          "per_iteration_s": [0.105, 0.100], "time_s": [1.05, 1.0],
                          "time_low_s": [1.0, 0.9], "time_high_s": [1.1, 1.1],
                          "detail": [MEASURED] * 2})
    assert monotone_in_batch(frame, ["gpu", "gpu_count"]) == []
    assert list(frame["per_iteration_s"]) == pytest.approx([0.105, 0.100])
    assert list(frame["detail"]) == [MEASURED] * 2
