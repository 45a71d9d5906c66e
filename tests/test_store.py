"""Tests of gpuperf_magics.store: saving, reading, deleting, schema, concurrency, failures."""

from __future__ import annotations

import gc
import multiprocessing
import os
import sqlite3
import threading
import warnings
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import raw_sql

from gpuperf_magics.run import IterationRecord, Run
from gpuperf_magics.store import (
    CANONICAL_COLUMNS,
    FIRST_COLUMNS,
    RunNotFoundError,
    Store,
    StoreError,
    StoreNotFoundError,
    StoreVersionError,
    default_store_path,
    latest_version,
    schema,
    user_data_dir,
)

HARDWARE = {
    "gpu_name": None,
    "cpu_model": "Intel Xeon",
    "cpu_physical_cores": 2,
    "cpu_threads": 1,
    "cpu_memory_gb": 7.7,
    "sw_python": "3.11.7",
    "sw_torch": "2.13.0",
    "sw_cuda": None,
}


def make_run(
    network: str = "mlp",
    *,
    n: int = 6,
    warmup: int = 2,
    batch: int | None = 32,
    status: str = "ok",
    hardware: dict | None = None,
    **fields,
) -> Run:
    """A run as the capture layer builds it, with made-up but consistent numbers."""
    iterations = [
        IterationRecord(
            index=i,
            duration_s=0.01 * (i + 1),
            samples=batch,
            warmup=i < warmup,
            phases={"forward": 0.002, "backward": 0.004} if i % 2 else None,
            skipped_step=(i == n - 1),
            micro_batches=2 if i else None,
        )
        for i in range(n)
    ]
    defaults = {
        "hardware": dict(HARDWARE) if hardware is None else hardware,
        "architecture": {"arch_params": 6922, "arch_layers_linear": 3, "arch_amp": False,
                         "arch_flops_fwd": 13600.0, "arch_class": "MLP"},
        "hyper": {"optimizer": "SGD", "lr": 0.1, "micro_batches": 1},
        "quality": {"torch_threads": 1, "busy": False, "timing_method": "perf_counter"},
        "tags": {"experiment": "a"},
        "features": {"depth": 3.0},
        "notes": ["machine was idle"],
    }
    defaults.update(fields)
    return Run(network=network, status=status, iterations=iterations, batch_size=batch,
               **defaults)


@pytest.fixture
def store(store_url: str) -> Store:
    """A new store on each backend: an SQLite file, a PostgreSQL database."""
    return Store(store_url)


@pytest.fixture
def file_store(tmp_path: Path) -> Store:
    """A new SQLite store, for what only a file has (pragmas, permissions, file damage)."""
    return Store(tmp_path / "runs.sqlite")


def sql(path: Path, query: str, *args: object) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(query, args).fetchall()
    finally:
        conn.close()


# --------------------------------------------------------------------------- default path
def test_default_path_from_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GPUPERF_STORE", str(tmp_path / "team.sqlite"))
    assert default_store_path() == tmp_path / "team.sqlite"
    assert Store().path == tmp_path / "team.sqlite"


def test_default_path_per_platform(tmp_path: Path) -> None:
    home = tmp_path / "home"
    linux = default_store_path(platform="linux", environ={}, home=home)
    assert linux == home / ".local/share/gpuperf_magics/runs.sqlite"
    xdg = default_store_path(platform="linux", environ={"XDG_DATA_HOME": "/data/x"}, home=home)
    assert xdg == Path("/data/x/gpuperf_magics/runs.sqlite")
    # A relative XDG_DATA_HOME is ignored, as the XDG spec says.
    assert user_data_dir(platform="linux", environ={"XDG_DATA_HOME": "rel"}, home=home) == (
        home / ".local/share/gpuperf_magics"
    )
    mac = default_store_path(platform="darwin", environ={}, home=home)
    assert mac == home / "Library/Application Support/gpuperf_magics/runs.sqlite"
    win = user_data_dir(platform="win32", environ={"LOCALAPPDATA": str(tmp_path / "L")},
                        home=home)
    assert win == tmp_path / "L" / "gpuperf_magics"
    assert user_data_dir(platform="win32", environ={}, home=home) == (
        home / "AppData/Local/gpuperf_magics"
    )
    # An empty GPUPERF_STORE counts as unset.
    assert default_store_path(platform="linux", environ={"GPUPERF_STORE": " "}, home=home) == (
        linux
    )


def test_default_store_created_on_first_write_never_in_cwd(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cwd = tmp_path / "notebooks"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.delenv("GPUPERF_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    store = Store()
    expected = tmp_path / "xdg" / "gpuperf_magics" / "runs.sqlite"
    assert store.path == expected
    # Reading a store that does not exist yet creates nothing.
    assert store.runs().empty
    assert store.revision() == 0
    assert not (tmp_path / "xdg").exists()
    store.save_run(make_run())
    assert expected.is_file()
    assert list(cwd.iterdir()) == []


def test_new_stores_are_private(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GPUPERF_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    old = os.umask(0o022)  # a usual umask: files 644, folders 755 unless asked otherwise
    try:
        store = Store()
        store.save_run(make_run())
        explicit = Store(tmp_path / "deep" / "er" / "runs.sqlite")
        explicit.save_run(make_run())
    finally:
        os.umask(old)
    assert (store.path.parent.stat().st_mode & 0o777) == 0o700
    for path in (store.path, explicit.path):
        for suffix in ("", "-wal", "-shm"):
            file = Path(f"{path}{suffix}")
            if file.exists():
                assert (file.stat().st_mode & 0o777) == 0o600, file
    assert (explicit.path.parent.stat().st_mode & 0o777) == 0o700


def test_relative_path_is_made_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    store = Store("sub/runs.sqlite")
    assert store.path == tmp_path / "sub" / "runs.sqlite"
    assert repr(store) == f"Store({str(tmp_path / 'sub' / 'runs.sqlite')!r})"
    assert Store(store).path == store.path  # a Store is path-like


def test_a_store_that_must_exist_names_a_missing_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    typo = tmp_path / "typo.sqlite"
    with pytest.raises(StoreNotFoundError, match=r"no store at .*typo\.sqlite: the file does "
                       r"not exist; check the path") as caught:
        Store(typo, must_exist=True)
    assert caught.value.path == str(typo) and isinstance(caught.value, StoreError)
    assert not typo.exists()
    monkeypatch.setenv("GPUPERF_STORE", str(typo))
    with pytest.raises(StoreNotFoundError, match=r"\(from \$GPUPERF_STORE\)"):
        Store(must_exist=True)
    monkeypatch.delenv("GPUPERF_STORE")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    with pytest.raises(StoreNotFoundError, match=r"\(the default store\).*nothing has been "
                       "profiled or imported"):
        Store(must_exist=True)
    assert not (tmp_path / "xdg").exists()
    # Once written, it opens; a Store of a Store was checked already.
    Store(typo).save_run(make_run())
    assert len(Store(Store(typo, must_exist=True)).runs()) == 1


def test_memory_path_is_refused() -> None:
    with pytest.raises(ValueError, match="file path"):
        Store(":memory:")


# --------------------------------------------------------------------------- round trip
def test_empty_store_has_canonical_columns(store: Store) -> None:
    df = store.runs()
    assert len(df) == 0
    assert tuple(df.columns) == CANONICAL_COLUMNS
    assert tuple(df.columns[:8]) == FIRST_COLUMNS
    assert df["time_s"].dtype == "float64"
    assert df["run_id"].dtype == "int64"
    assert df["batch_size"].dtype == "Int64"


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


def test_hardware_is_deduplicated(store: Store) -> None:
    store.save_run(make_run())
    store.save_run(make_run())
    other = store.save_run(make_run(hardware={**HARDWARE, "cpu_threads": 2}))
    assert raw_sql(store, "SELECT count(*) FROM hardware") == [(2,)]
    assert raw_sql(store, "SELECT count(DISTINCT hardware_id) FROM runs") == [(2,)]
    store.delete(other)
    assert raw_sql(store, "SELECT count(*) FROM hardware") == [(1,)]


def test_saving_twice_returns_the_same_id(store: Store, tmp_path: Path) -> None:
    run = make_run()
    first = store.save_run(run)
    revision = store.revision()
    assert store.save_run(run) == first
    assert len(store.runs()) == 1 and store.revision() == revision
    other = Store(tmp_path / "other.sqlite")
    assert other.save_run(run) == 1 and run.store_path == str(other.path)
    assert len(store.runs()) == 1


def test_save_run_rejects_bad_input(store: Store) -> None:
    with pytest.raises(TypeError, match="Run"):
        store.save_run({"network": "x"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="network"):
        store.save_run(make_run(network=" "))
    with pytest.raises(ValueError, match="created_at"):
        store.save_run(make_run(created_at="yesterday"))


# --------------------------------------------------------------------------- filters
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


# --------------------------------------------------------------------------- delete
def test_delete(store: Store) -> None:
    first = store.save_run(make_run())
    second = store.save_run(make_run())
    store.delete(first)
    assert store.runs()["run_id"].tolist() == [second]
    assert raw_sql(store, "SELECT count(*) FROM iterations WHERE run_id = ?", first) == [(0,)]
    with pytest.raises(KeyError, match=f"no run with id {first}"):
        store.delete(first)
    with pytest.raises(RunNotFoundError):
        store.delete([second, 99])
    assert store.runs()["run_id"].tolist() == [second]  # all or nothing
    # Ids of deleted runs are not handed out again.
    assert store.save_run(make_run()) == second + 1


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


# --------------------------------------------------------------------------- revision
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


def _save_in_child(path: str) -> None:
    Store(path).save_run(make_run("child"))


def test_revision_sees_other_processes(store: Store) -> None:
    store.save_run(make_run())
    before = store.revision()
    child = multiprocessing.get_context(_start_method()).Process(
        target=_save_in_child, args=(str(store.path),)
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert store.revision() == before + 1
    assert store.runs()["network"].tolist() == ["mlp", "child"]


# --------------------------------------------------------------------------- schema
def test_new_store_schema(file_store: Store) -> None:
    store = file_store
    store.save_run(make_run())
    assert sql(store.path, "PRAGMA user_version") == [(latest_version(),)]
    assert sql(store.path, "PRAGMA application_id") == [(schema.APPLICATION_ID,)]
    assert sql(store.path, "PRAGMA journal_mode") == [("wal",)]
    tables = {name for (name,) in sql(store.path, "SELECT name FROM sqlite_master")}
    assert {"meta", "hardware", "runs", "iterations", "runs_network"} <= tables


def test_migrations_are_consecutive() -> None:
    assert [m.version for m in schema.MIGRATIONS] == list(range(1, latest_version() + 1))
    assert all(m.description for m in schema.MIGRATIONS)


def test_empty_file_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.touch()  # a v0 store: zero bytes
    store = Store(path)
    assert store.runs().empty
    assert sql(path, "PRAGMA user_version") == [(latest_version(),)]
    assert store.save_run(make_run()) == 1


def test_older_store_is_migrated_keeping_its_data(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "runs.sqlite"
    run_id = Store(path).save_run(make_run())
    current = latest_version()

    def add_column(conn: sqlite3.Connection, dialect: schema.Dialect) -> None:
        conn.execute("ALTER TABLE runs ADD COLUMN energy_j REAL")
        conn.execute("UPDATE runs SET energy_j = 1.5")

    monkeypatch.setattr(
        schema, "MIGRATIONS",
        [*schema.MIGRATIONS, schema.Migration(current + 1, "energy per run", add_column)],
    )
    store = Store(path)
    assert store.runs()["run_id"].tolist() == [run_id]
    assert sql(path, "PRAGMA user_version") == [(current + 1,)]
    assert sql(path, "SELECT energy_j FROM runs") == [(1.5,)]


def test_a_version_1_file_gains_run_uids(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    schema.MIGRATIONS[0].apply(conn, schema.SQLITE)
    conn.execute("PRAGMA user_version = 1")
    conn.execute(f"PRAGMA application_id = {schema.APPLICATION_ID}")
    for network in ("a", "a", "b"):  # two identical rows: repeats, kept apart
        conn.execute("INSERT INTO runs (created_at, network, iterations, time_s, status, source) "
                     "VALUES ('2024-01-01T00:00:00.000000+00:00', ?, 2, 0.5, 'ok', 'profile')",
                     (network,))
    conn.execute("INSERT INTO iterations (run_id, idx, duration_s) VALUES (3, 0, 0.25)")
    conn.execute("COMMIT")
    conn.close()
    store = Store(path)
    assert store.migrate() == (1, latest_version())
    runs = store.runs()
    assert runs["network"].tolist() == ["a", "a", "b"]
    assert runs["run_uid"].str.fullmatch("[0-9a-f]{32}").all() and runs["run_uid"].is_unique
    assert sql(path, "PRAGMA user_version") == [(latest_version(),)]
    assert store.migrate() == (latest_version(), latest_version())


#: The columns a run's uid hashed in schema version 2, in order (hardware_id excluded).
V2_UID_COLUMNS = (
    "created_at", "network", "batch_size", "iterations", "time_s", "status", "source", "gpu",
    "gpu_count", "device", "it_median_s", "it_p90_s", "it_mean_s", "it_std_s",
    "samples_per_s", "warmup_iterations", "recorded_iterations", "error", "arch", "hyper",
    "quality", "tags", "features", "notes",
)


def _v2_uid(path: Path, run_id: int) -> str:
    """The uid schema version 2 gave this stored run."""
    from gpuperf_magics.store.records import ITERATION_FIELDS, content_uid

    names = ", ".join("r." + n for n in V2_UID_COLUMNS)
    row = sql(path, f"SELECT {names}, h.info FROM runs AS r LEFT JOIN hardware AS h "
                    "ON h.id = r.hardware_id WHERE r.id = ?", run_id)[0]
    its = sql(path, f"SELECT {', '.join(ITERATION_FIELDS)} FROM iterations WHERE run_id = ? "
                    "ORDER BY idx", run_id)
    return content_uid(list(row[:-1]), row[-1], its)


def test_a_version_2_file_gains_the_peak_memory_column_and_keeps_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v2.sqlite"
    store = Store(path)
    run_id = store.save_run(make_run())
    # Make it a file of schema version 2, as the previous release left it.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("ALTER TABLE runs DROP COLUMN peak_memory_gb")
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    before = sql(path, "SELECT * FROM runs")
    uid = sql(path, "SELECT run_uid FROM runs")[0][0]
    assert Store(path).migrate() == (2, latest_version())
    assert sql(path, "SELECT * FROM runs") == [(*before[0], None)]  # the new column, empty
    runs = Store(path).runs()
    assert runs["run_uid"].tolist() == [uid] and pd.isna(runs["peak_memory_gb"]).all()
    assert Store(path).get_run(run_id).peak_memory_gb is None
    # Runs without a peak hash as they did in version 2: a re-import is still recognised.
    again = Store(path).save_run(make_run(peak_memory_gb=2.25))
    assert sql(path, "SELECT peak_memory_gb FROM runs WHERE id = ?", again) == [(2.25,)]


def test_a_run_without_peak_memory_keeps_its_version_2_uid(file_store: Store) -> None:
    table = pd.DataFrame({"network": ["n", "n"], "batch_size": [8, 16], "time_s": [1.0, 1.5],
                          "created_at": ["2026-11-01T00:00:00+00:00"] * 2, "gpu": "T4"})
    ids = file_store.import_table(table)
    uids = file_store.runs()["run_uid"].tolist()
    assert uids == [_v2_uid(file_store.path, i) for i in ids]
    assert file_store.import_table(table) == ids  # the same rows again: nothing new
    assert len(file_store.runs()) == 2


def test_peak_memory_travels_through_export_import_and_its_uid(tmp_path: Path) -> None:
    first = Store(tmp_path / "a.sqlite")
    with_peak = first.save_run(make_run(peak_memory_gb=3.5))
    without = first.save_run(make_run())
    uids = first.runs()["run_uid"].tolist()
    assert uids[1] == _v2_uid(first.path, without)
    assert uids[0] != _v2_uid(first.path, with_peak)  # the peak is part of what is hashed
    exported = first.export(tmp_path / "runs.csv")
    second = Store(tmp_path / "b.sqlite")
    second.import_table(exported)
    copied = second.runs()
    assert copied["peak_memory_gb"].tolist()[0] == pytest.approx(3.5)
    assert pd.isna(copied["peak_memory_gb"].iloc[1])
    assert copied["run_uid"].tolist() == uids
    with pytest.raises(ValueError, match=r"peak_memory_gb.*not a number >= 0"):
        second.import_table(pd.DataFrame({"time_s": [1.0], "batch_size": [4],
                                          "peak_memory_gb": [-1.0]}), network="x")


def test_newer_store_asks_to_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    Store(path).save_run(make_run())
    newer = latest_version() + 1
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {newer}")
    conn.close()
    store = Store(path)
    for call in (store.runs, store.revision, lambda: store.save_run(make_run())):
        with pytest.raises(StoreVersionError, match="pip install -U gpuperf-magics") as info:
            call()
        assert str(path) in str(info.value)
        assert "newer gpuperf-magics" in str(info.value)
    assert sql(path, "PRAGMA user_version") == [(newer,)]
    assert sql(path, "SELECT count(*) FROM runs") == [(1,)]


def test_other_programs_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "photos.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE photos (id INTEGER)")
    conn.close()
    with pytest.raises(StoreError, match="another program"):
        Store(path).save_run(make_run())
    assert {n for (n,) in sql(path, "SELECT name FROM sqlite_master")} == {"photos"}


# --------------------------------------------------------------------------- failures
def _assert_clear(err: StoreError, path: Path) -> None:
    text = str(err)
    assert str(path) in text
    assert "GPUPERF_STORE" in text  # says how to use another store
    # No sqlite3 traceback chained under the message.
    assert err.__cause__ is None
    assert err.__context__ is None or err.__suppress_context__


def test_garbage_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.write_bytes(b"this is not a database, just some bytes\x00\xff" * 100)
    store = Store(path)
    with pytest.raises(StoreError, match="Move the file aside") as info:
        store.runs()
    _assert_clear(info.value, path)
    assert isinstance(info.value.cause, sqlite3.DatabaseError)
    run = make_run()
    with pytest.raises(StoreError) as info:
        store.save_run(run)
    _assert_clear(info.value, path)
    assert info.value.run is run and run.run_id is None and run.store_path is None


def test_damaged_pages(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    store = Store(path)
    for _ in range(30):
        store.save_run(make_run(n=40))
    data = bytearray(path.read_bytes())
    page = sql(path, "PRAGMA page_size")[0][0]
    data[page:] = b"\xa5" * (len(data) - page)  # keep the header, destroy every other page
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as info:
        Store(path).runs()
    _assert_clear(info.value, path)


def test_directory_path(tmp_path: Path) -> None:
    for call in (lambda s: s.runs(), lambda s: s.save_run(make_run())):
        with pytest.raises(StoreError, match="is a folder") as info:
            call(Store(tmp_path))
        _assert_clear(info.value, tmp_path)


def test_unwritable_locations(tmp_path: Path) -> None:
    blocker = tmp_path / "file.txt"
    blocker.write_text("a file, not a folder")
    # Tests run as root, which ignores chmod: a path below a regular file (or in /proc) cannot
    # be created by anyone.
    for path in (blocker / "sub" / "runs.sqlite", Path("/proc/gpuperf-test/runs.sqlite")):
        store = Store(path)
        assert store.runs().empty  # nothing to read yet
        run = make_run()
        with pytest.raises(StoreError, match="cannot be opened or written") as info:
            store.save_run(run)
        _assert_clear(info.value, path)
        assert info.value.run is run and run.run_id is None


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root ignores file permissions")
def test_read_only_folder(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(StoreError) as info:
            Store(folder / "runs.sqlite").save_run(make_run())
        _assert_clear(info.value, folder / "runs.sqlite")
    finally:
        folder.chmod(0o755)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="root ignores file permissions")
def test_store_in_read_only_folder_can_be_read(tmp_path: Path) -> None:
    folder = tmp_path / "share"
    folder.mkdir()
    Store(folder / "runs.sqlite").save_run(make_run())
    (folder / "runs.sqlite").chmod(0o444)
    folder.chmod(0o555)
    try:
        store = Store(folder / "runs.sqlite")
        assert store.runs()["network"].tolist() == ["mlp"]  # WAL file read as immutable
        assert store.revision() == 1
        with pytest.raises(StoreError, match="cannot be opened or written"):
            store.save_run(make_run())
    finally:
        folder.chmod(0o755)


def test_lock_held_too_long_and_retry(file_store: Store) -> None:
    store = file_store
    store.save_run(make_run())
    holder = sqlite3.connect(store.path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another process writing
    try:
        impatient = Store(store.path, timeout=0.3)
        with pytest.raises(StoreError, match="stayed locked") as info:
            impatient.save_run(make_run())
        _assert_clear(info.value, store.path)
        assert len(store.runs()) == 1  # readers are not blocked by a writer (WAL)
        releaser = threading.Timer(0.3, lambda: holder.execute("COMMIT"))
        releaser.start()
        assert Store(store.path, timeout=20).save_run(make_run()) == 2
        releaser.join()
    finally:
        if holder.in_transaction:
            holder.execute("ROLLBACK")
        holder.close()


def test_timeout_is_kept_through_every_way_in(file_store: Store) -> None:
    import time

    import gpuperf_magics as gm

    store = file_store
    store.save_run(make_run())
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        impatient = Store(store.path, timeout=0.5)
        for attempt in (lambda: Store(impatient).save_run(make_run()),
                        lambda: make_run().save(impatient)):
            start = time.monotonic()
            with pytest.raises(StoreError, match="stayed locked"):
                attempt()
            assert time.monotonic() - start < 5
        start = time.monotonic()
        with gm.profile_training(name="lin", store=impatient) as run:
            _train_tiny()
        assert time.monotonic() - start < 10
        assert run.run_id is None and any("for 0.5 s" in n for n in run.notes)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with pytest.raises(ValueError, match="timeout"):
        Store(store.path, timeout=float("nan"))


def _train_tiny() -> None:
    import torch

    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(4):
        opt.zero_grad()
        model(torch.randn(2, 4)).sum().backward()
        opt.step()


# --------------------------------------------------------------------------- concurrency
def _start_method() -> str:
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def _save_many(path: str, worker: int, count: int) -> None:
    store = Store(path, timeout=120)
    for i in range(count):
        store.save_run(make_run(f"net{worker}", n=5, warmup=1, batch=i + 1))


def test_processes_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "shared" / "runs.sqlite"  # created by the racing processes themselves
    context = multiprocessing.get_context(_start_method())
    workers = [context.Process(target=_save_many, args=(str(path), w, 25)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(300)
    assert [w.exitcode for w in workers] == [0, 0, 0, 0]
    store = Store(path)
    df = store.runs()
    assert len(df) == 100 and df["run_id"].is_unique
    assert df.groupby("network")["batch_size"].apply(sorted).tolist() == [
        list(range(1, 26))
    ] * 4
    assert sql(path, "SELECT count(*) FROM iterations") == [(500,)]
    assert sql(path, "SELECT count(*) FROM runs r WHERE (SELECT count(*) FROM iterations i "
                     "WHERE i.run_id = r.id) != 5") == [(0,)]
    assert store.revision() == 100


def test_one_store_shared_by_threads(store: Store) -> None:
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            for _ in range(15):
                store.save_run(make_run(f"thread{worker}", n=3, warmup=0))
                store.runs(network=f"thread{worker}")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(store.runs()) == 45
    assert store.revision() == 45


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc")
def test_connections_are_closed(store: Store) -> None:
    store.save_run(make_run())
    gc.collect()
    before = _open_fds()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResourceWarning)
        for _ in range(20):
            run_id = store.save_run(make_run())
            store.runs()
            store.iterations(run_id)
            store.get_run(run_id)
            store.revision()
        store.delete(run_id)
        gc.collect()
    assert _open_fds() <= before


def test_store_survives_file_replacement(file_store: Store) -> None:
    store = file_store
    store.save_run(make_run())
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store.path}{suffix}").unlink(missing_ok=True)
    assert store.runs().empty
    assert store.save_run(make_run()) == 1  # the Store notices the new file and creates it


def test_results_are_named_records_that_still_unpack(tmp_path: Path) -> None:
    from gpuperf_magics.store.records import IterationRow, insert_runs, recorder

    store = Store(tmp_path / "named.sqlite")
    migrated = store.migrate()
    assert (migrated.before, migrated.after) == (0, latest_version()) == tuple(migrated)
    run_id = store.save_run(make_run(n=2, warmup=0))
    token = store.token()
    created_at, revision = token
    assert (token.created_at, token.revision) == (created_at, revision) and revision >= 1
    host, user = recorder()
    assert (recorder().host, recorder().user) == (host, user)
    rows = store._read_iterations([run_id])
    assert all(isinstance(r, IterationRow) for r in rows)
    assert [r.idx for r in rows] == [0, 1] and rows[1].phases == {"forward": 0.002,
                                                                   "backward": 0.004}
    record = store.get_run(run_id).to_record()
    (inserted,) = store._execute(lambda conn: insert_runs(conn, [record]), write=True,
                                 action="insert")
    new_id, new = inserted
    assert (inserted.run_id, inserted.new) == (new_id, new)
