"""Tests of gpuperf_magics.store.frame: the runs table's columns, types and order."""

from __future__ import annotations

import numpy as np
from made_runs import HARDWARE, make_run

from gpuperf_magics.run import Run
from gpuperf_magics.store import CANONICAL_COLUMNS, FIRST_COLUMNS, Store


def test_empty_store_has_canonical_columns(store: Store) -> None:
    df = store.runs()
    assert len(df) == 0
    assert tuple(df.columns) == CANONICAL_COLUMNS
    assert tuple(df.columns[:8]) == FIRST_COLUMNS
    assert df["time_s"].dtype == "float64"
    assert df["run_id"].dtype == "int64"
    assert df["batch_size"].dtype == "Int64"


def test_frame_is_regression_ready(store: Store) -> None:
    from sklearn.linear_model import LinearRegression

    for batch in (8, 16, 32, 64):
        store.save_run(make_run(batch=batch))
    df = store.runs(status="ok")
    X = df.drop(columns="time_s")
    y = df["time_s"]
    assert y.dtype == "float64" and y.notna().all()
    numeric = X.select_dtypes("number").dropna(axis=1, how="all")
    assert {"batch_size", "iterations", "gpu_count", "depth"} <= set(numeric.columns)
    model = LinearRegression().fit(numeric[["batch_size", "iterations"]].astype(float), y)
    assert np.isfinite(model.coef_).all()


def test_numpy_values_and_failed_run_without_iterations(store: Store) -> None:
    run = make_run(features={"depth": np.float32(2.5), "width": np.int64(64)},
                   hardware={"cpu_model": "x", "cpu_threads": np.int64(4)})
    store.save_run(run)
    failed = Run(network="mlp", status="failed", error="RuntimeError: boom")
    failed_id = store.save_run(failed)
    df = store.runs()
    assert df.loc[0, "width"] == 64.0 and df.loc[0, "cpu_threads"] == 4
    row = df[df.run_id == failed_id].iloc[0]
    assert row["status"] == "failed" and row["time_s"] == 0.0 and row["iterations"] == 0
    assert row["error"] == "RuntimeError: boom"
    assert store.iterations(failed_id).empty
    assert store.get_run(failed_id).iterations == []


def test_extra_keys_and_name_collisions(store: Store) -> None:
    run = make_run(
        hardware={**HARDWARE, "gpu_pcie_gen": 4, "gpu_count": 7},
        hyper={"optimizer": "Adam", "momentum": 0.9},
        features={"batch_size": 1.0, "image_size": 224.0},
    )
    store.save_run(run)
    df = store.runs()
    columns = list(df.columns)
    # An extra hardware key follows the canonical hardware columns.
    assert columns.index("gpu_pcie_gen") > columns.index("sw_platform")
    assert columns.index("gpu_pcie_gen") < columns.index("arch_params")
    assert columns.index("momentum") < columns.index("torch_threads")
    # Keys that would shadow another column keep their value under a prefix.
    assert df.loc[0, "gpu_count"] == 0 and df.loc[0, "hardware_gpu_count"] == 7
    assert df.loc[0, "batch_size"] == 32 and df.loc[0, "feature_batch_size"] == 1.0
    assert columns[-2:] == ["feature_batch_size", "image_size"]
