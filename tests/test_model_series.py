"""A network's measured configurations as arrays (gpuperf_magics.model.series): set-up time
and time per iteration of each configuration."""

from __future__ import annotations

import numpy as np
import pytest

from gpuperf_magics.model.series import build_index


def test_set_up_time_is_only_told_apart_by_iteration_counts_far_apart() -> None:
    # 1201 and 1221 iterations in the same 220 s (one public file): no set-up time to tell.
    values = np.ones((2, 1))
    index = build_index(values, ["batch_size"], np.zeros((2, 0)), np.full(2, np.nan),
                        np.array([1201.0, 1221.0]), np.array([220.0, 220.5]))
    assert index.setup[0] == 0.0
    assert index.t[0] == pytest.approx(np.median([220 / 1201, 220.5 / 1221]))
    # 100 and 1000 iterations: 20 s of set-up and 0.2 s per iteration.
    index = build_index(values, ["batch_size"], np.zeros((2, 0)), np.full(2, np.nan),
                        np.array([100.0, 1000.0]), np.array([40.0, 220.0]))
    assert index.setup[0] == pytest.approx(20.0)
    assert index.t[0] == pytest.approx(0.2)
