"""Tests of gpuperf_magics.store.importer (through Store.import_table): mapping, validation, the
messages that name every bad cell."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from uuid import uuid4

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from made_runs import make_gpu_run as make_run
from shared_data import NO_DATA, SHARED_DATA

from gpuperf_magics.store import ImportValidationError, Store

DATA = Path(os.environ.get("GPUPERF_DATA_HOME", SHARED_DATA))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "runs.sqlite")


def write_csv(tmp_path: Path, text: str, name: str = "measurements.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_import_dataframe_with_mapping(store: Store) -> None:
    sia = pd.DataFrame({
        "placement": [1, 2, 11],
        "local_bsz": [4, 8, 8],
        "step_time": [0.45, 0.57, 0.70],
        "sync_time": [0.013, 0.014, 0.02],
    })
    ids = store.import_table(sia, {"step_time": "time_s", "local_bsz": "batch_size"},
                             network="bert", gpu="Tesla T4", tags={"dataset": "sia2023"})
    df = store.runs()
    assert df["run_id"].tolist() == ids == [1, 2, 3]
    assert df["network"].tolist() == ["bert"] * 3
    assert df["batch_size"].tolist() == [4, 8, 8]
    # Without an iterations column each row's time is the time of one iteration.
    assert df["iterations"].tolist() == [1, 1, 1]
    assert df["time_s"].tolist() == [0.45, 0.57, 0.70]
    assert df["gpu"].tolist() == ["Tesla T4"] * 3
    assert df["gpu_count"].tolist() == [1, 1, 1]
    assert df["status"].tolist() == ["ok"] * 3
    assert df["source"].tolist() == ["import"] * 3
    # Unknown numeric columns are features, at the end of the frame.
    assert df["placement"].tolist() == [1.0, 2.0, 11.0]
    assert df["sync_time"].tolist() == [0.013, 0.014, 0.02]
    assert list(df.columns[-2:]) == ["placement", "sync_time"]
    assert df["tags"].tolist() == [{"dataset": "sia2023"}] * 3
    assert df["it_mean_s"].tolist() == [0.45, 0.57, 0.70]
    assert df["samples_per_s"].tolist() == pytest.approx([4 / 0.45, 8 / 0.57, 8 / 0.70])
    assert store.iterations(ids[0]).empty
    assert store.get_run(ids[0]).network == "bert"


def test_import_csv_text_columns_become_tags(store: Store, tmp_path: Path) -> None:
    path = write_csv(tmp_path, (
        "net,bs,seconds,iters,cluster,image_size,comment,status\n"
        "resnet,32,12.5,100,aws,224,,ok\n"
        "resnet,64,20.0,100,azure,224,,failed\n"
        ",128,37.5,100,aws,256,,\n"
    ))
    ids = store.import_table(
        path,
        {"net": "network", "bs": "batch_size", "seconds": "time_s", "iters": "iterations"},
        network="vgg",
    )
    df = store.runs()
    assert df["run_id"].tolist() == ids
    assert df["network"].tolist() == ["resnet", "resnet", "vgg"]  # the argument fills gaps
    assert df["iterations"].tolist() == [100] * 3
    assert df["status"].tolist() == ["ok", "failed", "ok"]
    assert df["source"].tolist() == ["import:measurements.csv"] * 3
    assert df["tags"].tolist() == [{"cluster": "aws"}, {"cluster": "azure"}, {"cluster": "aws"}]
    assert df["image_size"].tolist() == [224.0, 224.0, 256.0]
    assert "comment" not in df.columns  # an empty column says nothing
    assert pd.isna(df["gpu"]).all() and df["gpu_count"].tolist() == [0, 0, 0]


def test_mapping_to_none_drops_a_column(store: Store) -> None:
    frame = pd.DataFrame({"t": [1.0], "b": [2], "junk": [3.0]})
    store.import_table(frame, {"t": "time_s", "b": "batch_size", "junk": None}, network="x")
    assert "junk" not in store.runs().columns


def test_canonical_columns_go_to_their_groups(store: Store) -> None:
    frame = pd.DataFrame({
        "time_s": [1.0], "batch_size": [8], "network": ["n"], "gpu_memory_gb": ["16"],
        "arch_params": [1000.0], "optimizer": ["SGD"], "busy": ["yes"], "epochs": [3.0],
        "run_id": [77], "tags": ['{"a": "b"}'], "created_at": ["2024-02-03T04:05:06Z"],
    })
    (run_id,) = store.import_table(frame)
    run = store.get_run(run_id)
    assert run_id == 1  # an exported run_id is not reused
    assert run.hardware == {"gpu_memory_gb": 16.0}
    assert run.architecture == {"arch_params": 1000}
    assert run.hyper == {"optimizer": "SGD", "epochs": 3}
    assert run.quality == {"busy": True}
    assert run.tags == {"a": "b"}
    assert run.created_at == "2024-02-03T04:05:06.000000+00:00"


def test_failed_rows_may_have_zero_time(store: Store) -> None:
    frame = pd.DataFrame({"time_s": [0.0, 3.0], "batch_size": [8, 8], "iterations": [0, 3],
                          "status": ["failed", "OK"]})
    assert store.import_table(frame, network="n") == [1, 2]
    assert store.runs()["status"].tolist() == ["failed", "ok"]


def test_empty_table_imports_nothing(store: Store) -> None:
    empty = pd.DataFrame({"time_s": pd.Series([], dtype=float), "batch_size": []})
    assert store.import_table(empty, network="n") == []
    assert store.revision() == 0 and not store.path.exists()


@pytest.mark.skipif(not (DATA / "lattuada2022").is_dir(), reason=NO_DATA)
def test_import_lattuada_measurements(store: Store) -> None:
    path = DATA / "lattuada2022" / "alexnet_pt.csv"
    mapping = {
        "overall execution time(31)": "time_s",
        "batch size(13)": "batch_size",
        "Real Iterations Number(15)": "iterations",
        "GPU number(9)": "gpu_count",
    }
    ids = store.import_table(path, mapping, network="alexnet", source="lattuada2022")
    raw = pd.read_csv(path)
    df = store.runs()
    assert len(ids) == len(raw) == len(df)
    assert df["time_s"].tolist() == raw["overall execution time(31)"].tolist()
    assert df["iterations"].tolist() == raw["Real Iterations Number(15)"].tolist()
    assert df["gpu_count"].tolist() == raw["GPU number(9)"].tolist()
    assert df["GFlops(7)"].tolist() == raw["GFlops(7)"].astype(float).tolist()
    assert {"disk speed(8)", "CPU threads(19)"} <= set(df.columns)
    assert set(df["source"]) == {"lattuada2022"}


@pytest.mark.skipif(not (DATA / "sia2023").is_dir(), reason=NO_DATA)
def test_import_sia_step_times(store: Store) -> None:
    path = DATA / "sia2023" / "bert" / "placements-aws.csv"
    ids = store.import_table(path, {"step_time": "time_s", "local_bsz": "batch_size"},
                             network="bert", gpu="Tesla T4")
    df = store.runs(network="bert", gpu="Tesla T4")
    assert len(df) == len(ids) == len(pd.read_csv(path))
    assert (df["iterations"] == 1).all()
    assert df["source"].iloc[0] == "import:placements-aws.csv"


HEADER = "network,batch_size,iterations,time_s\n"


@pytest.mark.parametrize(
    ("rows", "column", "where", "what"),
    [
        ("mlp,4,10,1.5\nmlp,8,10,\n", "time_s", "line 3", "empty cell"),
        ("mlp,4,10,-1.5\n", "time_s", "line 2", "not a positive number"),
        ("mlp,4,10,0\n", "time_s", "line 2", "not a positive number"),
        ("mlp,4,10,fast\n", "time_s", "line 2", "text where a number"),
        ("mlp,4,10,inf\n", "time_s", "line 2", "not a finite number"),
        ("mlp,2.5,10,1\n", "batch_size", "line 2", "not a whole number"),
        ("mlp,4,10,1\nmlp,0,10,1\n", "batch_size", "line 3", "not a positive whole number"),
        ("mlp,-8,10,1\n", "batch_size", "line 2", "not a positive whole number"),
        ("mlp,big,10,1\n", "batch_size", "line 2", "text where a number"),
        ("mlp,4,0,1\n", "iterations", "line 2", "not a positive whole number"),
        ("mlp,4,,1\n", "iterations", "line 2", "empty cell"),
        ("mlp,4,1.5,1\n", "iterations", "line 2", "not a whole number"),
        (",4,10,1\n", "network", "line 2", "empty cell"),
    ],
)
def test_invalid_cells(
    store: Store, tmp_path: Path, rows: str, column: str, where: str, what: str
) -> None:
    path = write_csv(tmp_path, HEADER + rows)
    with pytest.raises(ImportValidationError) as info:
        store.import_table(path)
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    assert f"column '{column}'" in message and where in message and what in message
    assert "measurements.csv" in message and "nothing was written" in message
    assert "header is line 1" in message
    assert not store.path.exists()  # validation happens before the store is even opened


@pytest.mark.parametrize(
    ("extra", "value", "what"),
    [
        ("status", "done", "not one of ok, failed, interrupted"),
        ("created_at", "yesterday", "not an ISO-8601 date/time"),
        ("tags", "owner=ann", "not a JSON object"),
        ("gpu_memory_gb", "lots", "text where a number"),
        ("gpu_mig", "maybe", "not true/false"),
        ("gpu_count", "-1", "not a count"),
        ("warmup_iterations", "-2", "not a count"),
    ],
)
def test_invalid_canonical_columns(
    store: Store, tmp_path: Path, extra: str, value: str, what: str
) -> None:
    path = write_csv(tmp_path, f"{HEADER.strip()},{extra}\nmlp,4,10,1.0,{value}\n")
    with pytest.raises(ImportValidationError, match=re.escape(what)) as info:
        store.import_table(path)
    assert f"column '{extra}'" in str(info.value) and "line 2" in str(info.value)
    assert store.revision() == 0


def test_missing_columns_and_all_problems_at_once(store: Store, tmp_path: Path) -> None:
    path = write_csv(tmp_path, "bsz,seconds,speed\n4,1.0,x\n8,-2,y\n")
    with pytest.raises(ImportValidationError) as info:
        store.import_table(path, {"seconds": "time_s"})
    message = str(info.value)
    assert "'batch_size': missing" in message and "'network': missing" in message
    assert "network=" in message and "'bsz'" in message  # lists the columns to map from
    assert "column 'time_s' (file column 'seconds'): not a positive number" in message
    assert "line 3" in message
    assert len(info.value.problems) == 3


def test_mapping_mistakes(store: Store) -> None:
    frame = pd.DataFrame({"t": [1.0], "time": [2.0], "b": [4]})
    with pytest.raises(ImportValidationError, match="mapping names 'tt'"):
        store.import_table(frame, {"tt": "time_s"}, network="n")
    with pytest.raises(ImportValidationError, match="would all become 'time_s'"):
        store.import_table(frame, {"t": "time_s", "time": "time_s", "b": "batch_size"},
                           network="n")
    assert store.revision() == 0


def test_rows_of_a_dataframe_are_named_by_index(store: Store) -> None:
    frame = pd.DataFrame({"time_s": [1.0, -1.0], "batch_size": [4, 4]}, index=["a", "b"])
    with pytest.raises(ImportValidationError, match=r"(?s)index 'b'.*df\.loc"):
        store.import_table(frame, network="n")


def test_numpy_index_labels_read_plainly(store: Store) -> None:
    frame = pd.DataFrame({"time_s": [1.0, -1.0, 2.0], "batch_size": [4, 4, 4]})
    with pytest.raises(ImportValidationError, match=r"at index 1 \(e\.g\. -1\.0\)"):
        store.import_table(frame[frame.time_s < 2], network="n")


def test_rows_of_a_parquet_file_are_numbered_from_one(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    pd.DataFrame({"time_s": [1.0, 2.0, float("nan")], "batch_size": [4, 4, 4]}).to_parquet(path)
    with pytest.raises(ImportValidationError, match="row 3"):
        store.import_table(path, network="n")


def test_many_bad_rows_are_summarised(store: Store) -> None:
    frame = pd.DataFrame({"time_s": [-1.0] * 20, "batch_size": [4] * 20})
    with pytest.raises(ImportValidationError, match="and 12 more"):
        store.import_table(frame, network="n")


def test_a_bad_row_keeps_every_row_out(store: Store) -> None:
    store.save_run(make_run())
    revision = store.revision()
    frame = pd.DataFrame({"time_s": [1.0, 2.0, "x"], "batch_size": [4, 8, 16]})
    with pytest.raises(ImportValidationError):
        store.import_table(frame, network="n")
    assert len(store.runs()) == 1 and store.revision() == revision


def test_unknown_gpu_is_rejected_with_line_and_close_matches(store: Store, tmp_path: Path) -> None:
    path = write_csv(tmp_path, (
        "network,batch_size,time_s,gpu\n"
        "mlp,4,1.0,Tesla T4\n"
        "mlp,8,1.5,Tesla T44\n"
        "mlp,8,1.5,FooGPU\n"
        "mlp,16,2.0,2080\n"
        "mlp,16,2.0,\n"
    ))
    with pytest.raises(ImportValidationError) as info:
        store.import_table(path)
    message = str(info.value)
    assert len(info.value.problems) == 3
    assert "unknown GPU 'Tesla T44' at line 3; close matches: Tesla T4" in message
    assert "unknown GPU 'FooGPU' at line 4; no close match" in message
    assert "'2080' is ambiguous at line 5; close matches: NVIDIA GeForce RTX 2080" in message
    assert "gpu_fp32_tflops and gpu_bandwidth_gbs" in message
    assert not store.path.exists()


def test_unknown_gpu_argument_is_rejected(store: Store) -> None:
    frame = pd.DataFrame({"time_s": [1.0, 2.0], "batch_size": [4, 8]})
    with pytest.raises(ImportValidationError,
                       match=r"column 'gpu' \(the gpu argument\): unknown GPU 'FooGPU' "
                       r"at index labels 0, 1"):
        store.import_table(frame, network="n", gpu="FooGPU")
    assert store.revision() == 0
    # Spellings the catalog resolves are kept as given.
    store.import_table(frame, network="n", gpu="a100 80gb")
    assert store.runs()["gpu"].tolist() == ["a100 80gb"] * 2


def test_unknown_gpu_with_its_own_figures_is_accepted(store: Store, tmp_path: Path) -> None:
    header = "network,batch_size,time_s,gpu,gpu_fp32_tflops,gpu_bandwidth_gbs\n"
    path = write_csv(tmp_path, header + "mlp,4,1.0,FooGPU,20.5,900\nmlp,8,1.5,FooGPU,,900\n")
    with pytest.raises(ImportValidationError) as info:
        store.import_table(path)
    assert len(info.value.problems) == 1  # only the row without both figures
    assert "unknown GPU 'FooGPU' at line 3;" in info.value.problems[0]
    path = write_csv(tmp_path, header + "mlp,4,1.0,FooGPU,20.5,900\nmlp,8,1.5,FooGPU,20.5,900\n")
    assert store.import_table(path) == [1, 2]
    runs = store.runs()
    assert runs["gpu"].tolist() == ["FooGPU"] * 2
    assert runs["gpu_fp32_tflops"].tolist() == [20.5, 20.5]


def test_gpu_added_to_the_catalog_is_accepted(store: Store) -> None:
    from gpuperf_magics.hardware import catalog

    frame = pd.DataFrame({"time_s": [1.0], "batch_size": [4]})
    catalog.add_gpus(pd.DataFrame({"name": ["Lab GPU X1"], "gpu_memory_gb": [24.0],
                                   "gpu_bandwidth_gbs": [700.0], "gpu_fp32_tflops": [30.0]}))
    try:
        assert store.import_table(frame, network="n", gpu="Lab GPU X1") == [1]
    finally:
        catalog.clear_user_gpus()
    with pytest.raises(ImportValidationError, match="unknown GPU 'Lab GPU X1'"):
        store.import_table(frame, network="n", gpu="Lab GPU X1")


BAD_CELLS = {
    "time_s": [None, "abc", -1.0, 0, "1,5", "inf", -1e-9],
    "batch_size": [0, -3, 2.5, "abc", "4x"],
    "iterations": [None, 0, -1, 1.5, "ten"],
}


settings_ = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _valid_frame(data: st.DataObject) -> pd.DataFrame:
    n = data.draw(st.integers(1, 8), label="rows")
    floats = st.floats(1e-4, 1e5, allow_nan=False, allow_infinity=False)
    return pd.DataFrame({
        "time_s": data.draw(st.lists(floats, min_size=n, max_size=n)),
        "batch_size": data.draw(st.lists(st.integers(1, 4096), min_size=n, max_size=n)),
        "iterations": data.draw(st.lists(st.integers(1, 10_000), min_size=n, max_size=n)),
    })


@settings_
@given(data=st.data())
def test_any_bad_cell_is_reported_and_nothing_written(tmp_path: Path, data: st.DataObject) -> None:
    frame = _valid_frame(data).astype(object)
    column = data.draw(st.sampled_from(sorted(BAD_CELLS)), label="column")
    bad = data.draw(st.sampled_from(BAD_CELLS[column]), label="bad value")
    row = data.draw(st.integers(0, len(frame) - 1), label="row")
    frame.loc[row, column] = bad
    path = tmp_path / f"{uuid4().hex}.csv"
    frame.to_csv(path, index=False)
    store = Store(tmp_path / f"{uuid4().hex}.sqlite")
    with pytest.raises(ImportValidationError) as info:
        store.import_table(path, network="mlp")
    message = str(info.value)
    assert f"column '{column}'" in message
    assert re.search(rf"\bline {row + 2}\b", message), message
    assert len(info.value.problems) == 1
    assert not store.path.exists()


@settings_
@given(data=st.data())
def test_valid_tables_import_exactly(tmp_path: Path, data: st.DataObject) -> None:
    frame = _valid_frame(data)
    path = tmp_path / f"{uuid4().hex}.csv"
    frame.to_csv(path, index=False)
    store = Store(tmp_path / f"{uuid4().hex}.sqlite")
    ids = store.import_table(path, network="mlp")
    df = store.runs()
    assert df["run_id"].tolist() == ids and len(ids) == len(frame)
    assert df["time_s"].tolist() == frame["time_s"].tolist()
    assert df["batch_size"].tolist() == frame["batch_size"].tolist()
    assert df["iterations"].tolist() == frame["iterations"].tolist()


def test_integers_beyond_64_bits_are_named(store: Store, tmp_path: Path) -> None:
    path = write_csv(tmp_path, HEADER + "mlp,4,10,1.0\nmlp,99999999999999999999,10,1.0\n")
    with pytest.raises(ImportValidationError, match="64-bit") as info:
        store.import_table(path)
    assert "column 'batch_size'" in str(info.value) and "line 3" in str(info.value)
    frame = pd.DataFrame({"time_s": [1.0], "batch_size": [4], "iterations": [2**64]},
                         dtype=object)
    with pytest.raises(ImportValidationError, match=r"column 'iterations'.*64-bit"):
        store.import_table(frame, network="mlp")
    assert store.revision() == 0


def test_durations_are_read_as_seconds(store: Store) -> None:
    frame = pd.DataFrame({"time_s": pd.to_timedelta([1.5, 0.25], unit="s"),
                          "batch_size": [4, 8]})
    store.import_table(frame, network="mlp")
    assert store.runs()["time_s"].tolist() == [1.5, 0.25]
    objects = pd.DataFrame({"time_s": [timedelta(milliseconds=20)], "batch_size": [4]})
    store.import_table(objects, network="mlp")
    assert store.runs()["time_s"].tolist()[-1] == pytest.approx(0.02)


@pytest.mark.parametrize("column", ["time_s", "batch_size", "iterations"])
def test_booleans_are_not_numbers(store: Store, column: str) -> None:
    frame = pd.DataFrame({"time_s": [1.0, 2.0], "batch_size": [4, 8], "iterations": [1, 1]})
    frame[column] = [True, False]
    with pytest.raises(ImportValidationError, match="true/false where a number") as info:
        store.import_table(frame, network="mlp")
    assert f"column '{column}'" in str(info.value)


def test_a_yes_no_column_of_ones_own_is_a_feature(store: Store) -> None:
    frame = pd.DataFrame({"time_s": [1.0, 2.0], "batch_size": [4, 8],
                          "pretrained": [True, False]})
    store.import_table(frame, network="mlp")
    assert store.runs()["pretrained"].tolist() == [1.0, 0.0]


@pytest.mark.parametrize(("column", "value", "what"), [
    ("gpu_fp32_tflops", -19.5, "not a positive number"),
    ("gpu_bandwidth_gbs", 0, "not a positive number"),
    ("arch_params", -5, "not a number >= 0"),
    ("lr", -0.1, "not a number >= 0"),
    ("it_median_s", -1.0, "not a number >= 0"),
])
def test_negative_figures_are_refused(store: Store, column: str, value: float,
                                      what: str) -> None:
    frame = pd.DataFrame({"time_s": [1.0], "batch_size": [4], "gpu_fp32_tflops": [19.5],
                          "gpu_bandwidth_gbs": [1555.0]})
    frame[column] = [value]
    with pytest.raises(ImportValidationError, match=what) as info:
        store.import_table(frame, network="mlp", gpu="Lab GPU")
    assert f"column '{column}'" in str(info.value)


def test_a_time_below_a_nanosecond_is_refused(store: Store, tmp_path: Path) -> None:
    frame = pd.DataFrame({"time_s": [5e-324], "batch_size": [4]})
    with pytest.raises(ImportValidationError, match="below 1e-09 s"):
        store.import_table(frame, network="mlp")
    store.import_table(frame.assign(time_s=1e-6), network="mlp")
    path = store.export(tmp_path / "tiny.csv")
    again = Store(tmp_path / "again.sqlite")
    assert len(again.import_table(path)) == 1  # every export can be imported again
    assert np.isfinite(again.runs()["samples_per_s"]).all()


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_stopped_by_travels_through_export_and_import(store: Store, tmp_path: Path,
                                                      suffix: str) -> None:
    """A run stopped early (schema 4's ``runs.stopped_by``) is still one once re-imported."""
    stopped = make_run()
    stopped.stopped_by = "precision"
    store.save_run(stopped)
    store.save_run(make_run(batch=32))
    exported = store.export(tmp_path / f"runs{suffix}")
    other = Store(tmp_path / "other.sqlite")
    other.import_table(exported)
    copied, original = other.runs(), store.runs()
    assert copied["stopped_by"].iloc[0] == "precision" and pd.isna(copied["stopped_by"].iloc[1])
    assert copied["run_uid"].tolist() == original["run_uid"].tolist()
    # Without the uid column the row still hashes to the uid of the run it was.
    again = Store(tmp_path / "again.sqlite")
    frame = pd.read_csv(exported) if suffix == ".csv" else pd.read_parquet(exported)
    again.import_table(frame.drop(columns=["run_uid"]))
    assert again.runs()["stopped_by"].tolist()[0] == "precision"
