"""Tests of gpuperf_magics.store.schema: a new store's schema and the migrations of older files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from made_runs import make_run
from store_sql import sql

from gpuperf_magics.store import Store, latest_version, schema


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
