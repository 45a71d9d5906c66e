"""The evidence move inside the default model (gpuperf_magics.model.evidence_query)."""

from __future__ import annotations

import pandas as pd
import pytest

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.evidence import empty_base


def _store(ratio: float) -> pd.DataFrame:
    """Five networks on a T4 and an A100 (the A100 ``ratio`` × the T4's time), one new
    network on the T4 only."""
    rows = []
    for k in range(5):
        for b in (16, 32, 64):
            t = 0.002 * (k + 1) * b
            rows += [{"network": f"net{k}", "gpu": "Tesla T4", "batch_size": b,
                      "iterations": 10, "time_s": 10 * t},
                     {"network": f"net{k}", "gpu": "NVIDIA A100-SXM4-40GB", "batch_size": b,
                      "iterations": 10, "time_s": 10 * t * ratio}]
    rows += [{"network": "new", "gpu": "Tesla T4", "batch_size": b, "iterations": 10,
              "time_s": 10 * 0.004 * b} for b in (16, 32, 64)]
    return pd.DataFrame(rows)


def test_a_new_network_moves_by_the_ratio_of_the_users_other_networks() -> None:
    store = _store(ratio=0.6)  # the spec sheet (FP32 8.1 → 19.5 TFLOPS) would say 0.42
    model = TrainingTimeModel(evidence=empty_base()).fit(store.drop(columns="time_s"),
                                                         store["time_s"])
    query = pd.DataFrame({"network": ["new"] * 3, "gpu": "NVIDIA A100-SXM4-40GB",
                          "batch_size": [16, 32, 64], "iterations": 10})
    table = model.predict_table(query)
    per_it = table["per_iteration_s"].to_numpy()
    assert per_it == pytest.approx([0.6 * 0.004 * b for b in (16, 32, 64)], rel=0.05)
    assert table["detail"].str.contains("workloads measured on both").all()
    assert (table["time_low_s"] < table["time_s"]).all()
    assert (table["time_s"] < table["time_high_s"]).all()


def test_without_any_evidence_the_move_is_the_spec_sheet_and_says_so() -> None:
    store = _store(ratio=0.6)
    alone = store[store["network"] == "new"]
    model = TrainingTimeModel(evidence=empty_base()).fit(alone.drop(columns="time_s"),
                                                         alone["time_s"])
    query = pd.DataFrame({"network": ["new"], "gpu": "NVIDIA A100-SXM4-40GB",
                          "batch_size": [32], "iterations": 10})
    table = model.predict_table(query)
    assert "spec sheet only" in table["detail"].iloc[0]
    assert table["per_iteration_s"].iloc[0] == pytest.approx(0.004 * 32 * 8.1 / 19.5,
                                                             rel=0.02)
