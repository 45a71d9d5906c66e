"""Tests of gpuperf_magics.store.store: a run saved and read back whole; the revision."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from made_runs import make_run

from gpuperf_magics.store import FIRST_COLUMNS, RunNotFoundError, Store


def test_save_run_round_trip(store: Store) -> None:
    run = make_run()
    run_id = store.save_run(run)
    assert run_id == run.run_id == 1
    assert run.store_path == str(store.path)
    assert run.created_at is not None and run.created_at.endswith("+00:00")

    df = store.runs()
    assert list(df.columns[:8]) == list(FIRST_COLUMNS)
    row = df.iloc[0]
    assert row["run_id"] == run_id
    assert row["network"] == "mlp"
    assert row["batch_size"] == 32
    assert row["iterations"] == 4  # steady iterations only
    assert row["time_s"] == pytest.approx(run.time_s) == pytest.approx(0.03 + 0.04 + 0.05 + 0.06)
    assert row["status"] == "ok"
    assert pd.isna(row["gpu"])
    assert row["gpu_count"] == 0
    assert row["source"] == "profile"
    assert row["device"] == "cpu"
    assert row["it_median_s"] == pytest.approx(run.median_s)
    assert row["it_p90_s"] == pytest.approx(run.p90_s)
    assert row["samples_per_s"] == pytest.approx(run.samples_per_s)
    assert row["warmup_iterations"] == 2
    assert row["recorded_iterations"] == 6
    assert row["cpu_model"] == "Intel Xeon"
    assert row["cpu_threads"] == 1
    assert row["sw_torch"] == "2.13.0"
    assert row["arch_params"] == 6922
    assert not row["arch_amp"]
    assert row["optimizer"] == "SGD"
    assert row["lr"] == 0.1
    assert row["torch_threads"] == 1
    assert row["timing_method"] == "perf_counter"
    assert row["tags"] == {"experiment": "a"}
    assert row["depth"] == 3.0
    assert df.columns[-1] == "depth"  # features come last

    its = store.iterations(run_id)
    assert list(its.columns) == [
        "run_id", "index", "duration_s", "samples", "warmup", "skipped_step", "micro_batches",
        "phase_forward", "phase_backward",
    ]
    assert pd.isna(its["micro_batches"][0]) and its["micro_batches"][1] == 2
    assert its["duration_s"].tolist() == pytest.approx([0.01 * (i + 1) for i in range(6)])
    assert its["warmup"].tolist() == [True, True, False, False, False, False]
    assert its["skipped_step"].tolist() == [False] * 5 + [True]
    assert its["samples"].tolist() == [32] * 6
    assert pd.isna(its["phase_forward"][0]) and its["phase_backward"][1] == 0.004

    back = store.get_run(run_id)
    for name in ("network", "status", "iterations", "batch_size", "device", "gpu", "gpu_count",
                 "architecture", "hyper", "quality", "tags", "features", "notes", "error",
                 "created_at", "source", "run_id", "store_path"):
        assert getattr(back, name) == getattr(run, name), name
    assert back.hardware == run.hardware
    assert back.to_record() == run.to_record()


def test_revision_counts_writes(store: Store, tmp_path: Path) -> None:
    assert store.revision() == 0
    run_id = store.save_run(make_run())
    assert store.revision() == 1
    store.import_table(pd.DataFrame({"time_s": [1.0, 2.0], "batch_size": [4, 8]}),
                       network="mlp")
    assert store.revision() == 2
    store.delete(run_id)
    assert store.revision() == 3
    with pytest.raises(RunNotFoundError):
        store.delete(run_id)
    assert store.revision() == 3
    # Another Store object (another notebook) sees the same counter.
    assert Store(store.path).revision() == 3
