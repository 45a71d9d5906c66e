"""Store.sync_to and ``gpuperf sync``: either way between SQLite and PostgreSQL, idempotent."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from made_runs import make_run
from store_sql import raw_sql

from gpuperf_magics.store import Store

#: Columns that differ between two copies of one run: the per-store id.
PER_STORE = ["run_id"]


def _fill(store: Store) -> None:
    for batch in (8, 16):
        store.save_run(make_run("mlp", batch=batch))
    store.save_run(make_run("cnn", batch=4, status="failed", n=2))
    store.import_table(pd.DataFrame({"time_s": [1.0, 1.0], "batch_size": [4, 4],
                                     "cluster": ["aws", "aws"]}), network="bert", gpu="T4")


def _same_runs(a: Store, b: Store) -> None:
    left = a.runs().drop(columns=PER_STORE).sort_values("run_uid").reset_index(drop=True)
    right = b.runs().drop(columns=PER_STORE).sort_values("run_uid").reset_index(drop=True)
    pd.testing.assert_frame_equal(left, right, check_dtype=False)
    for uid in left["run_uid"]:
        one = a.runs(run_uid=uid)["run_id"].iloc[0]
        other = b.runs(run_uid=uid)["run_id"].iloc[0]
        pd.testing.assert_frame_equal(a.iterations(one).drop(columns="run_id"),
                                      b.iterations(other).drop(columns="run_id"))


@pytest.mark.parametrize("direction", ["sqlite->postgresql", "postgresql->sqlite"])
def test_sync_either_way_is_idempotent(direction: str, tmp_path: Path, pg_store_url: str) -> None:
    local, team = Store(tmp_path / "laptop.sqlite"), Store(pg_store_url)
    src, dst = (local, team) if direction.startswith("sqlite") else (team, local)
    _fill(src)
    dst.save_run(make_run("already-there"))
    calls: list[tuple[int, int]] = []
    first = src.sync_to(dst, progress=lambda done, total: calls.append((done, total)))
    assert (first.copied, first.already) == (5, 0)
    assert calls[0] == (0, 5) and calls[-1] == (5, 5)
    assert "never deletes or overwrites" in str(first)
    revision = dst.revision()
    second = src.sync_to(dst)
    assert (second.copied, second.already) == (0, 5)
    assert dst.revision() == revision  # nothing written
    # Back the other way: only the run src lacks travels.
    back = dst.sync_to(src)
    assert (back.copied, back.already) == (1, 5)
    _same_runs(src, dst)
    assert len(dst.runs()) == 6
    # Who recorded a run and when stays as it was.
    assert set(dst.runs()["recorded_user"]) == set(src.runs()["recorded_user"])


def test_two_machines_syncing_one_run_do_not_duplicate_it(tmp_path: Path,
                                                          pg_store_url: str) -> None:
    first, second = Store(tmp_path / "a.sqlite"), Store(tmp_path / "b.sqlite")
    _fill(first)
    first.sync_to(second)  # the same runs now live on two machines
    second.save_run(make_run("only-b"))
    team = Store(pg_store_url)
    assert first.sync_to(team).copied == 5
    result = second.sync_to(team)
    assert (result.copied, result.already) == (1, 5)
    assert team.runs()["run_uid"].is_unique and len(team.runs()) == 6


def _sync_in_child(src: str, dst: str) -> None:
    Store(src).sync_to(Store(dst), batch=2)


def test_concurrent_syncs_of_one_store_copy_each_run_once(tmp_path: Path,
                                                          pg_store_url: str) -> None:
    source = Store(tmp_path / "a.sqlite")
    for batch in range(1, 21):
        source.save_run(make_run(batch=batch, n=3))
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    workers = [context.Process(target=_sync_in_child, args=(str(source.path), pg_store_url))
               for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    team = Store(pg_store_url)
    assert len(team.runs()) == 20 and team.runs()["run_uid"].is_unique
    assert raw_sql(team, "SELECT count(*) FROM iterations") == [(60,)]


def test_sync_command(tmp_path: Path, pg_store_url: str) -> None:
    local = Store(tmp_path / "laptop.sqlite")
    _fill(local)
    # This checkout's CLI (the installed script may import another checkout's package).
    command = [sys.executable, "-m", "gpuperf_magics.skins.cli"]
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([*command, "sync", str(local.path), pg_store_url], text=True,
                          capture_output=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "5 run(s) copied, 0 already there" in proc.stdout
    again = subprocess.run([*command, "sync", str(local.path), pg_store_url], text=True,
                           capture_output=True, timeout=120, env=env)
    assert "0 run(s) copied, 5 already there" in again.stdout
    same = subprocess.run([*command, "sync", str(local.path), str(local.path)], text=True,
                          capture_output=True, timeout=120, env=env)
    assert same.returncode == 2 and "into itself" in same.stderr


def test_sync_into_a_new_file_creates_it(tmp_path: Path, pg_store_url: str) -> None:
    team = Store(pg_store_url)
    _fill(team)
    copy = Store(tmp_path / "new" / "copy.sqlite")
    assert team.sync_to(copy).copied == 5
    _same_runs(team, copy)


def test_a_batch_beyond_one_bound_list_reads_whole_from_a_server(tmp_path: Path,
                                                                  pg_store_url: str) -> None:
    """A sync from PostgreSQL reads a batch of 1,000 runs by one array parameter (not 900
    ids at a time): every run and its iterations arrive once, in order."""
    team = Store(pg_store_url)
    team.import_table(pd.DataFrame({"time_s": [float(i + 1) for i in range(990)],
                                    "batch_size": [4 + i for i in range(990)]}),
                      network="bert", gpu="T4")
    for batch in (8, 16):
        team.save_run(make_run("mlp", batch=batch))
    local = Store(tmp_path / "laptop.sqlite")
    result = team.sync_to(local, batch=1000)
    assert (result.copied, result.already) == (992, 0)
    left = team.runs().drop(columns=PER_STORE).sort_values("run_uid").reset_index(drop=True)
    right = local.runs().drop(columns=PER_STORE).sort_values("run_uid").reset_index(drop=True)
    pd.testing.assert_frame_equal(left, right, check_dtype=False)
    for uid in team.runs(network="mlp")["run_uid"]:  # the profiled runs' iterations, in order
        one, other = (s.runs(run_uid=uid)["run_id"].iloc[0] for s in (team, local))
        pd.testing.assert_frame_equal(team.iterations(one).drop(columns="run_id"),
                                      local.iterations(other).drop(columns="run_id"))
