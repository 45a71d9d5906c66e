"""Tests of gpuperf_magics.store.queries: the filters and columns of runs(), iterations, run ids.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from made_runs import make_run

from gpuperf_magics.store import RunNotFoundError, Store


def test_runs_filters(store: Store) -> None:
    a = store.save_run(make_run("mlp", batch=16, tags={"exp": "x", "user": "ann"}))
    b = store.save_run(make_run("mlp", batch=32, status="interrupted", tags={"exp": "y"}))
    c = store.save_run(make_run("cnn", batch=32, gpu="NVIDIA A100", gpu_count=1,
                                device="cuda:0", tags={"exp": "x"}))
    d = store.save_run(make_run("cnn", batch=64, status="failed", source="notebook"))

    def ids(df: pd.DataFrame) -> list[int]:
        return df["run_id"].tolist()

    assert ids(store.runs()) == [a, b, c, d]  # every status by default
    assert ids(store.runs(status="ok")) == [a, c]
    assert ids(store.runs(status=["ok", "interrupted"])) == [a, b, c]
    assert ids(store.runs(network="cnn")) == [c, d]
    assert ids(store.runs(network=["cnn", "mlp"], status="ok")) == [a, c]
    assert ids(store.runs(network=[])) == []
    assert ids(store.runs(gpu="NVIDIA A100")) == [c]
    assert ids(store.runs(source="notebook")) == [d]
    assert ids(store.runs(tags={"exp": "x"})) == [a, c]
    assert ids(store.runs(tags={"exp": "x", "user": "ann"})) == [a]
    assert ids(store.runs(batch_size=32)) == [b, c]
    assert ids(store.runs(batch_size=[16, 64])) == [a, d]
    assert ids(store.runs(gpu_count=1, network="cnn")) == [c]
    assert ids(store.runs(error=None)) == [a, b, c, d]
    assert ids(store.runs(optimizer="SGD", depth=3.0)) == [a, b, c, d]
    assert ids(store.runs(since=timedelta(hours=1))) == [a, b, c, d]
    assert ids(store.runs(since=datetime.now(timezone.utc) + timedelta(minutes=5))) == []
    assert ids(store.runs(since="2000-01-01")) == [a, b, c, d]
    with pytest.raises(ValueError, match="netwrok"):
        store.runs(netwrok="mlp")
    with pytest.raises(ValueError, match="ISO-8601"):
        store.runs(since="last tuesday")
    with pytest.raises(TypeError, match="since"):
        store.runs(since=3)


def test_runs_reads_only_the_columns_asked(store: Store) -> None:
    a = store.save_run(make_run("mlp", batch=16))
    b = store.save_run(make_run("cnn", batch=32, hyper={"optimizer": "Adam"}))
    df = store.runs(network="cnn", columns=["run_id", "batch_size", "time_s", "optimizer"])
    assert list(df.columns) == ["run_id", "batch_size", "time_s", "optimizer"]
    assert df["run_id"].tolist() == [b] and df["optimizer"].tolist() == ["Adam"]
    assert df["batch_size"].dtype == "Int64" and df["time_s"].dtype == "float64"
    # Canonical columns no run has come back empty and typed; unknown ones are refused.
    empty = store.runs(columns=["gpu_fp32_tflops", "depth", "tags"])
    assert empty["gpu_fp32_tflops"].isna().all() and empty["depth"].tolist() == [3.0, 3.0]
    assert empty["tags"].tolist() == [{"experiment": "a"}] * 2
    with pytest.raises(ValueError, match="no column 'bogus'"):
        store.runs(columns=["network", "bogus"])
    with pytest.raises(ValueError, match="list of column names"):
        store.runs(columns=[])
    assert store.runs(columns="network")["network"].tolist() == ["mlp", "cnn"]
    assert store.runs(network="none", columns=["bogus"]).empty
    assert store.runs(run_uid=store.runs()["run_uid"].iloc[0])["run_id"].tolist() == [a]


def test_iterations_of_many_runs_in_one_query(store: Store) -> None:
    ids = [store.save_run(make_run(n=3 + i, warmup=0)) for i in range(3)]
    its = store.iterations(ids)
    assert its["run_id"].tolist() == [ids[0]] * 3 + [ids[1]] * 4 + [ids[2]] * 5
    assert store.iterations([]).empty
    with pytest.raises(RunNotFoundError, match="no run with id 99"):
        store.iterations([ids[0], 99])


def test_prediction_reads_all_iterations_in_one_query(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gpuperf_magics as gm

    for batch in (8, 16, 32, 64) * 3:
        store.save_run(make_run(batch=batch, n=8, warmup=1))
    calls = []
    original = Store.iterations

    def counted(self: Store, run_id: object) -> pd.DataFrame:
        calls.append(run_id)
        return original(self, run_id)

    monkeypatch.setattr(Store, "iterations", counted)
    prediction = gm.predict_time(store, batch_sizes=[128], iterations=100)
    assert len(prediction.frame) >= 1
    assert len(calls) == 1 and len(calls[0]) == 12


def test_since_compares_times_not_text(store: Store) -> None:
    old = store.save_run(make_run(created_at="2024-01-01T00:00:00Z"))
    new = store.save_run(make_run(created_at="2024-06-01T12:00:00.5+02:00"))
    assert store.get_run(new).created_at == "2024-06-01T10:00:00.500000+00:00"
    assert store.runs(since="2024-03-01T00:00:00+00:00")["run_id"].tolist() == [new]
    assert store.runs(since=datetime(2023, 12, 31, tzinfo=timezone.utc))["run_id"].tolist() == [
        old, new,
    ]


def test_unknown_run_ids(store: Store) -> None:
    for method in (store.get_run, store.iterations, store.delete):
        with pytest.raises(RunNotFoundError, match="no run with id 5"):
            method(5)  # the file does not exist yet
    store.save_run(make_run())
    for method in (store.get_run, store.iterations, store.delete):
        with pytest.raises(KeyError) as info:
            method(5)
        assert str(store.path) in str(info.value)
    with pytest.raises(TypeError, match="integers"):
        store.get_run("1")  # type: ignore[arg-type]
    assert store.get_run(np.int64(1)).run_id == 1  # type: ignore[arg-type]
