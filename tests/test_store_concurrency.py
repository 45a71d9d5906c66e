"""Many writers at once, a reader meanwhile, writers killed mid-write: on both backends."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

from conftest import raw_sql
from test_store import make_run

from gpuperf_magics.store import Store

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
