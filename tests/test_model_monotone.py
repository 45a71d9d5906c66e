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
    assert len(notes) == 1 and notes[0].startswith("batch 32: capped")
