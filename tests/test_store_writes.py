"""Tests of gpuperf_magics.store.writes: saving runs once, refusing bad ones, deleting."""

from __future__ import annotations

from pathlib import Path

import pytest
from made_runs import make_run
from store_sql import raw_sql

from gpuperf_magics.store import RunNotFoundError, Store


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
