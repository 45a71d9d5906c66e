"""Tests of gpuperf_magics.store.connection: opening a store file, and every failure of it as one
clear StoreError.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from made_runs import make_run
from store_sql import assert_clear as _assert_clear
from store_sql import sql

from gpuperf_magics.store import Store, StoreError, StoreVersionError, latest_version


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


def test_timeout_is_kept_through_every_way_in(
    file_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Store's lock timeout reaches SQLite whichever way the Store comes in.

    Checked on the busy timeout each connection is given and on the timeout the error
    quotes, not on wall time: a loaded machine makes any call slow (this test failed twice
    at a load average of 21 when it timed the calls).
    """
    import gpuperf_magics as gm
    from gpuperf_magics.store import backends

    store = file_store
    store.save_run(make_run())
    waits: list[float] = []
    real_set = backends.set_busy_timeout

    def set_and_note_the_timeout(conn: object, timeout: float) -> None:
        waits.append(timeout)
        real_set(conn, timeout)

    monkeypatch.setattr(backends, "set_busy_timeout", set_and_note_the_timeout)
    holder = sqlite3.connect(store.path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        impatient = Store(store.path, timeout=0.5)
        for attempt in (lambda: Store(impatient).save_run(make_run()),
                        lambda: make_run().save(impatient)):
            waits.clear()
            with pytest.raises(StoreError, match=r"stayed locked by another process for 0\.5 s"):
                attempt()
            assert waits and max(waits) <= 0.5  # not the default 30 s
        waits.clear()
        from gpuperf_magics.capture import UnsavedRunWarning

        with pytest.warns(UnsavedRunWarning, match="unsaved_runs"), \
                gm.profile_training(name="lin", store=impatient) as run:
            _train_tiny()
        assert waits and max(waits) <= 0.5
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


@pytest.mark.parametrize("version", [1, 2, -5])
def test_a_tampered_schema_version_is_damage_and_the_file_is_untouched(
        tmp_path: Path, version: int) -> None:
    path = tmp_path / "runs.sqlite"
    Store(path).save_run(make_run())
    sql(path, f"PRAGMA user_version = {version}")
    conn = sqlite3.connect(path)
    before = list(conn.iterdump())
    conn.close()
    for call in (lambda s: s.runs(), lambda s: s.save_run(make_run())):
        with pytest.raises(StoreError, match="is damaged") as info:
            call(Store(path))
        assert "Retry" not in str(info.value) and str(path) in str(info.value)
        assert "backup" in str(info.value) and f"version {'is' if version < 0 else 'says'}" \
            f" {version}" in str(info.value)
    conn = sqlite3.connect(path)
    assert list(conn.iterdump()) == before
    conn.close()
    assert sql(path, "PRAGMA user_version") == [(version,)]
