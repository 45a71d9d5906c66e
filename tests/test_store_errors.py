"""Tampered or damaged stores: every way in (API, CLI, magics) ends in one clear StoreError."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from IPython.core.error import UsageError
from made_runs import make_run
from store_sql import raw_sql

import gpuperf_magics as gm
from gpuperf_magics.store import Store, StoreError


def _populated(url: str) -> Store:
    store = Store(url)
    for batch in (8, 16, 32):
        store.save_run(make_run(batch=batch))
    return store


#: Damage to the schema itself: no operation can go on.
SCHEMA_DAMAGE = {
    "version reset": "PRAGMA user_version = 0",
    "runs dropped": "DROP TABLE runs",
    "iterations dropped": "DROP TABLE iterations",
    "hardware dropped": "DROP TABLE hardware",
    "meta dropped": "DROP TABLE meta",
    "meta row deleted": "DELETE FROM meta WHERE key = 'revision'",
}
#: Damage to one run's cells: reading runs fails clearly; writing still works.
CELL_DAMAGE = {
    "arch JSON": "UPDATE runs SET arch = '{\"arch_params\": ' WHERE id = 2",
    "hyper not an object": "UPDATE runs SET hyper = '[1, 2]' WHERE id = 2",
    "tags JSON": "UPDATE runs SET tags = 'owner=ann' WHERE id = 2",
    "features JSON": "UPDATE runs SET features = '{' WHERE id = 2",
    "hardware JSON": "UPDATE hardware SET info = 'not json'",
    "text in time_s": "UPDATE runs SET time_s = 'fast' WHERE id = 2",
    "text in batch_size": "UPDATE runs SET batch_size = 'big' WHERE id = 2",
}


def _assert_clear(err: StoreError, store: Store) -> None:
    assert str(store.path) in str(err)
    assert "damaged" in str(err) or "another program" in str(err), str(err)
    assert err.__cause__ is None and (err.__context__ is None or err.__suppress_context__)


def _cli(store: Store, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuperf_magics.skins.cli", *args, "--store",
                           str(store.path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("damage", sorted(SCHEMA_DAMAGE))
def test_damaged_schema_is_a_store_error_everywhere(damage: str, tmp_path: Path, ip) -> None:
    store = _populated(str(tmp_path / "runs.sqlite"))
    raw_sql(store, SCHEMA_DAMAGE[damage])
    calls: list[Callable[[Store], object]] = [
        lambda s: s.runs(), lambda s: s.revision(), lambda s: s.token(),
        lambda s: s.get_run(1), lambda s: s.iterations(1), lambda s: s.delete(1),
        lambda s: s.save_run(make_run()),
        lambda s: gm.predict_time(s, batch_sizes=[64], iterations=10),
    ]
    for call in calls:
        with pytest.raises(StoreError) as info:
            call(Store(store.path))
        _assert_clear(info.value, store)
    proc = _cli(store, "runs")
    assert proc.returncode == 2 and "damaged" in proc.stderr and "Traceback" not in proc.stderr
    # The cell is stopped before it trains (no "table meta already exists" after training).
    ip.user_ns.pop("trained", None)
    with pytest.raises(UsageError, match="damaged"):
        ip.run_cell_magic("profile_training", f"--store {store.path}", "trained = True\n")
    assert "trained" not in ip.user_ns
    with pytest.raises(UsageError, match="damaged"):
        ip.run_line_magic("predict_time", f"--store {store.path}")


@pytest.mark.parametrize("damage", sorted(CELL_DAMAGE))
def test_damaged_cells_are_a_store_error_naming_the_run(damage: str, store_url: str, ip) -> None:
    store = _populated(store_url)
    if store.kind == "postgresql" and "text in" in damage:
        import psycopg

        # A server's typed columns refuse this damage in the first place.
        with pytest.raises(psycopg.errors.InvalidTextRepresentation):
            raw_sql(store, CELL_DAMAGE[damage])
        assert len(store.runs()) == 3
        return
    raw_sql(store, CELL_DAMAGE[damage])
    calls = [lambda: store.runs(), lambda: gm.predict_time(store, batch_sizes=[64],
                                                           iterations=10)]
    if "JSON" in damage or "object" in damage:
        calls.append(lambda: store.get_run(2))
    for call in calls:
        with pytest.raises(StoreError, match="damaged") as info:
            call()
        _assert_clear(info.value, store)
        assert "run 2" in str(info.value) or "hardware" in damage
    proc = _cli(store, "runs")
    assert proc.returncode == 2 and "damaged" in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(UsageError, match="damaged"):
        ip.run_line_magic("predict_time", f"--store {store.path}")
    # The store still takes runs, and the damaged one can be removed.
    assert store.save_run(make_run()) == 4
    store.delete(2)
    if "hardware" not in damage:
        assert store.runs()["run_id"].tolist() == [1, 3, 4]


def test_damaged_iteration_phases(store_url: str) -> None:
    store = _populated(store_url)
    raw_sql(store, "UPDATE iterations SET phases = '{oops' WHERE run_id = 1 AND idx = 1")
    for call in (lambda: store.iterations(1), lambda: store.get_run(1)):
        with pytest.raises(StoreError, match="run 1") as info:
            call()
        _assert_clear(info.value, store)
    assert len(store.iterations(2)) == 6


def test_damaged_server_schema(pg_store_url: str) -> None:
    store = _populated(pg_store_url)
    raw_sql(store, "DELETE FROM meta WHERE key = 'revision'")
    with pytest.raises(StoreError, match="revision row"):
        Store(pg_store_url).runs()
    raw_sql(store, "INSERT INTO meta (key, value) VALUES ('revision', '3')")
    raw_sql(store, "DROP TABLE iterations")
    for call in (lambda s: s.runs(), lambda s: s.save_run(make_run())):
        with pytest.raises(StoreError, match="damaged") as info:
            call(Store(pg_store_url))
        assert "iterations" in str(info.value)
