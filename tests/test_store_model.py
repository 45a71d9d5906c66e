"""Which runs of a store a model learns from, and how (gpuperf_magics.store_model)."""

from __future__ import annotations

import pandas as pd
import pytest

from gpuperf_magics import predict, store_model
from gpuperf_magics.store_model import PredictionError


def _runs(**columns) -> pd.DataFrame:
    base = {"run_id": [1, 2, 3], "network": ["resnet", "ResNet-50", "resnet"],
            "batch_size": [32, 64, 128], "gpu": ["Tesla T4"] * 3, "iterations": [10, 10, 10],
            "source": ["profile"] * 3}
    base.update(columns)
    return pd.DataFrame(base)


def test_resolve_network_defaults_to_the_latest_and_ignores_case() -> None:
    runs = _runs()
    assert store_model.resolve_network(runs, None) == "resnet"
    assert store_model.resolve_network(runs, "resnet-50") == "ResNet-50"
    with pytest.raises(PredictionError, match="known networks: 'resnet', 'ResNet-50'"):
        store_model.resolve_network(runs, "vgg")


def test_usable_runs_leave_out_runs_without_batch_size_and_other_devices() -> None:
    runs, notes = store_model.usable_runs(_runs(batch_size=[None, 64, 128],
                                                gpu=["Tesla T4", None, "Tesla T4"]))
    assert list(runs["run_id"]) == [3]
    assert "left out run(s) 1" in notes[0] and "1 CPU run(s) left out" in notes[1]


def test_steady_state_is_profiled_or_per_step_runs_only() -> None:
    assert store_model.steady_state(_runs())
    assert store_model.steady_state(_runs(source=["import"] * 3, iterations=[1, 1, 1]))
    assert not store_model.steady_state(_runs(source=["import"] * 3))


def test_old_import_paths_are_the_moved_objects() -> None:
    for name in ("StoreModel", "fit_store", "robust_times", "steady_state",
                 "per_iteration_table", "resolve_network", "PredictionError", "BASE_FEATURES"):
        assert getattr(predict, name) is getattr(store_model, name), name
