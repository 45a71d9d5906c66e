"""Tests of gpuperf_magics.store.records: hardware rows, run uids across versions (the uid itself
is gpuperf_magics.store.rows'), named records.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from made_runs import HARDWARE, make_run
from store_sql import raw_sql, sql

from gpuperf_magics.store import Store, latest_version


def test_hardware_is_deduplicated(store: Store) -> None:
    store.save_run(make_run())
    store.save_run(make_run())
    other = store.save_run(make_run(hardware={**HARDWARE, "cpu_threads": 2}))
    assert raw_sql(store, "SELECT count(*) FROM hardware") == [(2,)]
    assert raw_sql(store, "SELECT count(DISTINCT hardware_id) FROM runs") == [(2,)]
    store.delete(other)
    assert raw_sql(store, "SELECT count(*) FROM hardware") == [(1,)]


#: The columns a run's uid hashed in schema version 2, in order (hardware_id excluded).
V2_UID_COLUMNS = (
    "created_at", "network", "batch_size", "iterations", "time_s", "status", "source", "gpu",
    "gpu_count", "device", "it_median_s", "it_p90_s", "it_mean_s", "it_std_s",
    "samples_per_s", "warmup_iterations", "recorded_iterations", "error", "arch", "hyper",
    "quality", "tags", "features", "notes",
)


def _v2_uid(path: Path, run_id: int) -> str:
    """The uid schema version 2 gave this stored run."""
    from gpuperf_magics.store.rows import ITERATION_FIELDS, content_uid

    names = ", ".join("r." + n for n in V2_UID_COLUMNS)
    row = sql(path, f"SELECT {names}, h.info FROM runs AS r LEFT JOIN hardware AS h "
                    "ON h.id = r.hardware_id WHERE r.id = ?", run_id)[0]
    its = sql(path, f"SELECT {', '.join(ITERATION_FIELDS)} FROM iterations WHERE run_id = ? "
                    "ORDER BY idx", run_id)
    return content_uid(list(row[:-1]), row[-1], its)


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


def test_results_are_named_records_that_still_unpack(tmp_path: Path) -> None:
    from gpuperf_magics.store.records import insert_runs
    from gpuperf_magics.store.rows import IterationRow, recorder

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


def test_driver_rows_expand_each_list_length_like_sqlalchemy(tmp_path: Path) -> None:
    """The driver's rows of an expanding IN equal SQLAlchemy's, for several list lengths in a
    row (each length has its own compiled SQL) and beyond one chunk of bound values."""
    from gpuperf_magics.store.queries import ITERATIONS_IN
    from gpuperf_magics.store.records import driver_rows
    from gpuperf_magics.store.rows import MAX_BOUND

    store = Store(tmp_path / "driver.sqlite")
    ids = [store.save_run(make_run(n=3, warmup=1)) for _ in range(4)]

    def work(conn: object) -> list[tuple[list[tuple[object, ...]], list[tuple[object, ...]]]]:
        out = []
        for wanted in ([ids[0]], ids[:3], [ids[1]], [*ids, *range(10_000, 10_000 + MAX_BOUND)]):
            mine = driver_rows(conn, ITERATIONS_IN, {"ids": wanted})
            theirs = [tuple(r) for r in conn.execute(  # type: ignore[attr-defined]
                ITERATIONS_IN, {"ids": wanted}).all()]
            out.append((mine, theirs))
        return out

    for mine, theirs in store._execute(work, write=False, action="read"):
        assert mine == theirs
        assert mine and all(isinstance(row, tuple) for row in mine)
