"""Tests of gpuperf_magics.store.backends: one unit of work per transaction on each backend.

The store file's folder and permissions, retries while another writer holds the lock, many
writers (threads, processes, killed mid-write) at once, connections closed after each call.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import random
import signal
import sqlite3
import threading
import time
import warnings
from pathlib import Path

import pytest
from made_runs import make_run
from store_sql import assert_clear as _assert_clear
from store_sql import raw_sql, sql

from gpuperf_magics.store import Store, StoreError

WRITERS = 8
RUNS_EACH = 50


def _context() -> multiprocessing.context.BaseContext:
    return multiprocessing.get_context(
        "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")


def _profile_many(url: str, worker: int, count: int, report: str) -> None:
    """A training script: `count` profiled cells, each its own run, into one store."""
    import torch

    import gpuperf_magics as gm

    torch.set_num_threads(1)
    torch.manual_seed(worker)
    model = torch.nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    problems = []
    for i in range(count):
        with gm.profile_training(name=f"worker{worker}", store=url,
                                 tags={"i": str(i)}) as run:
            for _ in range(3):
                opt.zero_grad()
                model(torch.randn(4, 8)).sum().backward()
                opt.step()
        if run.run_id is None or any(n.startswith("not saved") for n in run.notes):
            problems.append(run.notes)
    Path(report).write_text(json.dumps(problems))


def _read_while_writing(url: str, report: str, stop: str) -> None:
    counts, problems = [], []
    while not Path(stop).exists():
        try:
            counts.append(len(Store(url).runs(columns=["run_id", "network"])))
        except Exception as exc:  # pragma: no cover - reported below
            problems.append(repr(exc))
        time.sleep(0.05)
    Path(report).write_text(json.dumps({"counts": counts, "problems": problems}))


def test_eight_writers_and_a_reader_lose_nothing(store_url: str, tmp_path: Path) -> None:
    context = _context()
    stop = tmp_path / "stop"
    reader = context.Process(target=_read_while_writing,
                             args=(store_url, str(tmp_path / "reader.json"), str(stop)))
    reader.start()
    writers = [
        context.Process(target=_profile_many,
                        args=(store_url, w, RUNS_EACH, str(tmp_path / f"w{w}.json")))
        for w in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(300)
    stop.touch()
    reader.join(60)
    assert [w.exitcode for w in writers] == [0] * WRITERS
    assert reader.exitcode == 0
    for w in range(WRITERS):  # no error ever reached a training cell
        assert json.loads((tmp_path / f"w{w}.json").read_text()) == []
    seen = json.loads((tmp_path / "reader.json").read_text())
    assert seen["problems"] == [] and len(seen["counts"]) > 0
    assert seen["counts"] == sorted(seen["counts"])  # the reader never saw runs vanish

    store = Store(store_url)
    runs = store.runs()
    assert len(runs) == WRITERS * RUNS_EACH  # 0 lost
    assert runs["run_uid"].is_unique  # 0 duplicated
    per_worker = runs.groupby("network")["tags"].apply(lambda t: sorted(int(x["i"]) for x in t))
    assert per_worker.tolist() == [list(range(RUNS_EACH))] * WRITERS
    _assert_consistent(store)
    assert store.revision() == WRITERS * RUNS_EACH


def _assert_consistent(store: Store) -> None:
    """Every run with all its iterations, no orphan rows; SQLite's own integrity check."""
    if store.kind == "sqlite":
        assert raw_sql(store, "PRAGMA integrity_check") == [("ok",)]
        assert raw_sql(store, "PRAGMA foreign_key_check") == []
    assert raw_sql(store, "SELECT count(*) FROM iterations WHERE run_id NOT IN "
                          "(SELECT id FROM runs)") == [(0,)]
    assert raw_sql(store, "SELECT count(*) FROM runs AS r WHERE r.recorded_iterations != "
                          "(SELECT count(*) FROM iterations AS i WHERE i.run_id = r.id)") == [(0,)]
    assert raw_sql(store, "SELECT count(*) FROM runs WHERE hardware_id IS NOT NULL AND "
                          "hardware_id NOT IN (SELECT id FROM hardware)") == [(0,)]


def _write_until_killed(url: str, report: str) -> None:
    store = Store(url)
    with open(report, "a") as done:
        for i in range(10_000):
            run = make_run(f"victim{os.getpid()}", n=400, batch=i + 1)
            store.save_run(run)
            done.write(store.runs(run_id=run.run_id, columns=["run_uid"])["run_uid"].iloc[0]
                       + "\n")
            done.flush()


def test_writers_killed_mid_write_leave_a_consistent_store(store_url: str,
                                                          tmp_path: Path) -> None:
    context = _context()
    report = tmp_path / "finished.txt"
    report.touch()
    rng = random.Random(9)
    for _ in range(10):
        writer = context.Process(target=_write_until_killed, args=(store_url, str(report)))
        writer.start()
        time.sleep(rng.uniform(0.2, 0.6))
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(30)
        assert writer.exitcode == -signal.SIGKILL
        store = Store(store_url)
        _assert_consistent(store)
        uids = set(store.runs(columns=["run_uid"])["run_uid"])
        finished = set(report.read_text().split())
        assert finished <= uids  # every run whose save returned is there
    store = Store(store_url)
    assert len(finished) > 0
    assert store.revision() == len(store.runs())  # each committed save counted once
    assert store.save_run(make_run("after")) > 0  # no lock left behind


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


def test_directory_path(tmp_path: Path) -> None:
    for call in (lambda s: s.runs(), lambda s: s.save_run(make_run())):
        with pytest.raises(StoreError, match="is a folder") as info:
            call(Store(tmp_path))
        _assert_clear(info.value, tmp_path)


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


def test_store_survives_file_replacement(file_store: Store) -> None:
    store = file_store
    store.save_run(make_run())
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store.path}{suffix}").unlink(missing_ok=True)
    assert store.runs().empty
    assert store.save_run(make_run()) == 1  # the Store notices the new file and creates it


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
