"""Tests of gpuperf_magics.store.schema: a new store's schema and the migrations of older files."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from made_runs import make_run
from store_sql import sql
from store_versions import (
    CREATED_AT,
    ITERATIONS,
    PEAK_MEMORY_GB,
    UIDS,
    make_store_file,
)

from gpuperf_magics.store import Store, latest_version, migrations, schema


def test_new_store_schema(file_store: Store) -> None:
    store = file_store
    store.save_run(make_run())
    assert sql(store.path, "PRAGMA user_version") == [(latest_version(),)]
    assert sql(store.path, "PRAGMA application_id") == [(schema.APPLICATION_ID,)]
    assert sql(store.path, "PRAGMA journal_mode") == [("wal",)]
    tables = {name for (name,) in sql(store.path, "SELECT name FROM sqlite_master")}
    assert {"meta", "hardware", "runs", "iterations", "runs_network"} <= tables


def test_migrations_are_consecutive_and_end_at_the_latest_version() -> None:
    """Alembic's revisions are the schema versions 1..N in order, and N is what a store is
    checked against without reading them (``schema.LATEST_VERSION``)."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(migrations.HERE))
    steps = list(reversed(list(script.walk_revisions())))
    assert [s.revision for s in steps] == [str(v) for v in range(1, latest_version() + 1)]
    assert [s.down_revision for s in steps] == [None, *(s.revision for s in steps[:-1])]
    assert all(s.doc for s in steps)
    assert migrations.head() == latest_version() == schema.LATEST_VERSION


def test_the_migrations_build_the_tables_the_statements_use(tmp_path: Path) -> None:
    """A store made by the Alembic steps holds exactly the columns of ``tables.py`` (the
    tables every statement is built on), with the same types and nullability."""
    import sqlalchemy as sa

    from gpuperf_magics.store import tables

    store = Store(tmp_path / "runs.sqlite")
    store.save_run(make_run())
    engine = sa.create_engine(f"sqlite:///{store.path}")
    try:
        inspector = sa.inspect(engine)
        for table in tables.metadata.sorted_tables:
            found = {c["name"]: c for c in inspector.get_columns(table.name)}
            assert list(found) == [c.name for c in table.columns], table.name
            for column in table.columns:
                if table.name == "meta" and column.name == "value":
                    continue  # untyped in SQLite on purpose
                assert found[column.name]["nullable"] == column.nullable, column
                assert (type(found[column.name]["type"]).__name__ in
                        {"INTEGER", "FLOAT", "REAL", "TEXT", "BIGINT"}), column
            indexes = {i["name"]: i["unique"] for i in inspector.get_indexes(table.name)}
            assert indexes == {i.name: bool(i.unique) for i in table.indexes}, table.name
    finally:
        engine.dispose()
    assert sql(store.path, "SELECT version_num FROM alembic_version") == [
        (str(latest_version()),)]


def test_empty_file_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite"
    path.touch()  # a v0 store: zero bytes
    store = Store(path)
    assert store.runs().empty
    assert sql(path, "PRAGMA user_version") == [(latest_version(),)]
    assert store.save_run(make_run()) == 1


def test_a_new_step_is_one_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What the schema docstring says a release does: one more Alembic file (and the latest
    version), and every store upgrades on open keeping its data."""
    path = tmp_path / "runs.sqlite"
    run_id = Store(path).save_run(make_run())
    current = latest_version()
    scripts = tmp_path / "migrations"
    shutil.copytree(migrations.HERE, scripts, ignore=shutil.ignore_patterns("__pycache__"))
    (scripts / "versions" / f"{current + 1:04d}_energy.py").write_text(
        f'''"""Version {current + 1}: energy per run."""
import sqlalchemy as sa
from alembic import op

revision = "{current + 1}"
down_revision = "{current}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("energy_j", sa.Float))
    op.execute("UPDATE runs SET energy_j = 1.5")
''')
    monkeypatch.setattr(migrations, "HERE", scripts)
    monkeypatch.setattr(schema, "LATEST_VERSION", current + 1)
    store = Store(path)
    assert store.runs()["run_id"].tolist() == [run_id]
    assert sql(path, "PRAGMA user_version") == [(current + 1,)]
    assert sql(path, "SELECT energy_j FROM runs") == [(1.5,)]
    assert sql(path, "SELECT version_num FROM alembic_version") == [(str(current + 1),)]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_store_of_each_older_version_upgrades_in_place(tmp_path: Path, version: int) -> None:
    """Files of versions 1-3 as 0.1.0 wrote them (tests/store_versions.py) are upgraded on
    open: rows, ids (and the gap a deletion left), iterations, revision and creation time are
    kept; a version 1 file gets the uids 0.1.0's own step gave, so a sync still knows them."""
    path = make_store_file(tmp_path / f"v{version}.sqlite", version)
    before = sql(path, "SELECT id, network, time_s, tags, hardware_id FROM runs ORDER BY id")
    store = Store(path)
    assert store.migrate() == (version, latest_version())
    assert sql(path, "PRAGMA user_version") == [(latest_version(),)]
    assert sql(path, "PRAGMA application_id") == [(schema.APPLICATION_ID,)]
    assert sql(path, "PRAGMA journal_mode") == [("wal",)]
    assert sql(path, "SELECT id, network, time_s, tags, hardware_id FROM runs ORDER BY id") \
        == before
    runs = store.runs()
    assert runs["run_id"].tolist() == [1, 3]
    assert runs["run_uid"].tolist() == [UIDS[1], UIDS[3]]
    assert runs["tags"][0] == {"who": "fixture"}
    assert runs["peak_memory_gb"].tolist()[0] == (PEAK_MEMORY_GB if version == 3 else None) or (
        version < 3 and pd.isna(runs["peak_memory_gb"][0]))
    assert runs["stopped_by"].isna().all()  # no run of an older store was stopped early
    assert store.get_run(1).stopped_by is None
    assert [it.duration_s for it in store.get_run(1).iterations] == [
        d for _, d, _, _ in ITERATIONS]
    assert store.token() == (CREATED_AT, 3)
    assert store.save_run(make_run()) == 4  # AUTOINCREMENT: the deleted id 2 stays unused
    assert store.revision() == 4
    assert store.migrate() == (latest_version(), latest_version())


def test_opening_a_current_store_imports_no_alembic(tmp_path: Path) -> None:
    """Alembic (and its scripts) are for stores whose schema must change: a process that
    opens, reads and writes a current store never imports it."""
    path = tmp_path / "runs.sqlite"
    Store(path).save_run(make_run())
    code = (
        "import sys\n"
        "from gpuperf_magics.store import Store\n"
        "assert 'sqlalchemy' not in sys.modules, 'imported by the package'\n"
        f"store = Store({str(path)!r})\n"
        "assert 'sqlalchemy' not in sys.modules, 'imported by Store()'\n"
        "assert store.revision() == 1\n"
        "store.runs(); store.get_run(1); store.iterations(1)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'alembic', 'mako'}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_version_2_file_gains_the_peak_memory_column_and_keeps_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / "v2.sqlite"
    store = Store(path)
    run_id = store.save_run(make_run())
    # Make it a file of schema version 2, as the previous release left it.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("ALTER TABLE runs DROP COLUMN stopped_by")
    conn.execute("ALTER TABLE runs DROP COLUMN peak_memory_gb")
    conn.execute("PRAGMA user_version = 2")
    conn.close()
    before = sql(path, "SELECT * FROM runs")
    uid = sql(path, "SELECT run_uid FROM runs")[0][0]
    assert Store(path).migrate() == (2, latest_version())
    assert sql(path, "SELECT * FROM runs") == [(*before[0], None, None)]  # new columns, empty
    runs = Store(path).runs()
    assert runs["run_uid"].tolist() == [uid] and pd.isna(runs["peak_memory_gb"]).all()
    assert Store(path).get_run(run_id).peak_memory_gb is None
    # Runs without a peak hash as they did in version 2: a re-import is still recognised.
    again = Store(path).save_run(make_run(peak_memory_gb=2.25))
    assert sql(path, "SELECT peak_memory_gb FROM runs WHERE id = ?", again) == [(2.25,)]


def test_a_version_3_file_gains_the_stopped_by_column_and_keeps_everything(
    tmp_path: Path,
) -> None:
    """Schema step 4 adds ``stopped_by`` (why ``--stop-after`` ended a loop): a version 3 file
    keeps its rows and uids, its runs read back as not stopped, and a stopped run is saved with
    the reason, hashing it into its uid (a run that was not stopped keeps its version 3 uid)."""
    path = make_store_file(tmp_path / "v3.sqlite", 3)
    before = sql(path, "SELECT * FROM runs ORDER BY id")
    assert Store(path).migrate() == (3, latest_version())
    assert sql(path, "SELECT * FROM runs ORDER BY id") == [(*row, None) for row in before]
    store = Store(path)
    assert store.runs()["run_uid"].tolist() == [UIDS[1], UIDS[3]]
    plain, stopped = make_run(), make_run(stopped_by="count")
    plain_id, stopped_id = store.save_run(plain), store.save_run(stopped)
    assert sql(path, "SELECT id, stopped_by FROM runs WHERE id >= 4 ORDER BY id") == [
        (plain_id, None), (stopped_id, "count")]
    uids = dict(sql(path, "SELECT id, run_uid FROM runs"))
    assert uids[plain_id] != uids[stopped_id]
    assert store.get_run(stopped_id).stopped_by == "count"
    assert store.runs(stopped_by="count")["run_id"].tolist() == [stopped_id]
