"""What only a server store has: URLs, migrations on purpose, credentials, roles, a lost server.

Against a real PostgreSQL cluster started by the ``postgres_server`` fixture (conftest).
"""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest
from IPython.core.error import UsageError
from made_runs import make_run
from pgcluster import PG_PASSWORD, PG_PASSWORD_USER, PostgresServer
from store_sql import raw_sql
from store_versions import RUNS, UIDS, make_server_store

import gpuperf_magics as gm
from gpuperf_magics.store import Store, StoreError, StoreVersionError, latest_version

LOOP = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(8, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(6):
    opt.zero_grad()
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
"""


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    # This checkout's CLI (the installed script may import another checkout's package).
    command = [sys.executable, "-m", "gpuperf_magics.skins.cli"]
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": path, **(env or {})})


# --------------------------------------------------------------------------- URLs
def test_a_url_is_never_taken_for_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    store = Store("postgresql://alice:hunter2@db.example:5432/team")
    assert store.kind == "postgresql"
    assert store.path == "postgresql://alice:***@db.example:5432/team"
    assert "hunter2" not in repr(store)
    assert Store("postgres://bob@db/x?sslmode=require").path == (
        "postgresql://bob@db/x?sslmode=require")
    with pytest.raises(ValueError, match="unknown store URL") as info:
        Store("mysql://carol:pw123@db/x")
    assert "pw123" not in str(info.value)
    with pytest.raises(TypeError, match="no file path"):
        os.fspath(store)
    assert Store(f"sqlite:///{tmp_path}/a.sqlite").path == tmp_path / "a.sqlite"
    assert list(tmp_path.iterdir()) == []  # no folder named "postgresql:" appeared


def test_store_url_from_the_environment(monkeypatch: pytest.MonkeyPatch, pg_store_url: str) -> None:
    monkeypatch.setenv("GPUPERF_STORE", pg_store_url)
    assert gm.store.default_store_path() == pg_store_url  # not folded by Path
    store = Store()
    assert store.kind == "postgresql"
    store.save_run(make_run())
    assert len(Store(pg_store_url).runs()) == 1


# --------------------------------------------------------------------------- schema
def test_a_server_store_is_created_only_by_migrate(pg_url: str) -> None:
    store = Store(pg_url)
    for call in (store.runs, store.revision, lambda: store.save_run(make_run())):
        with pytest.raises(StoreError, match="gpuperf migrate"):
            call()
    assert raw_sql(store, "SELECT count(*) FROM information_schema.tables "
                          "WHERE table_schema = 'public'") == [(0,)]
    proc = cli("migrate", pg_url)
    assert proc.returncode == 0, proc.stderr
    assert f"schema version {latest_version()}" in proc.stdout
    again = cli("migrate", pg_url)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert store.save_run(make_run()) == 1
    assert raw_sql(store, "SELECT value FROM meta WHERE key = 'schema_version'") == [
        (str(latest_version()),)]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_server_store_is_upgraded_only_on_purpose(pg_url: str, version: int) -> None:
    """A server store of each version 0.1.0 wrote keeps its rows, ids and uids, and the
    identity goes on after the highest id; version 1 stores get the uids 0.1.0 gave them."""
    make_server_store(pg_url, version)
    store = Store(pg_url)
    if version < latest_version():
        with pytest.raises(StoreError, match=r"older schema.*gpuperf migrate") as info:
            store.runs()
        assert "teammates" in str(info.value)
        assert raw_sql(store, "SELECT value FROM meta WHERE key = 'schema_version'") == [
            (str(version),)]
    assert store.migrate() == (version, latest_version())
    runs = store.runs()
    assert runs["run_id"].tolist() == [1, 3]
    assert runs["network"].tolist() == [RUNS[1]["network"], RUNS[3]["network"]]
    assert runs["run_uid"].tolist() == [UIDS[1], UIDS[3]]
    assert runs["stopped_by"].isna().all()  # step 4's column, empty for older runs
    assert store.get_run(1).iterations[0].warmup
    assert raw_sql(store, "SELECT value FROM meta WHERE key = 'revision'") == [("3",)]
    if version < latest_version():  # Alembic ran (and was stamped with the version first)
        assert raw_sql(store, "SELECT version_num FROM alembic_version") == [
            (str(latest_version()),)]
    assert store.save_run(make_run()) == 4
    assert store.migrate() == (latest_version(), latest_version())  # nothing to do


def test_a_newer_server_store_asks_to_upgrade_the_package(pg_store_url: str) -> None:
    store = Store(pg_store_url)
    store.save_run(make_run())
    raw_sql(store, "UPDATE meta SET value = ? WHERE key = 'schema_version'",
            str(latest_version() + 1))
    for call in (Store(pg_store_url).runs, lambda: Store(pg_store_url).migrate()):
        with pytest.raises(StoreVersionError, match="pip install -U gpuperf-magics"):
            call()


@pytest.mark.parametrize(("value", "says"), [
    ("abc", "is 'abc', not a version number"), ("4.0", "is '4.0', not a version number"),
    ("", "is '', not a version number"), ("-5", "is -5, which no store has"),
    ("0", "reset to 0 although it holds tables"),
    ("1", "says 1, but its tables already hold what a later version adds"),
])
def test_a_tampered_server_schema_version_is_damage_and_nothing_changes(
        pg_store_url: str, value: str, says: str) -> None:
    """As a tampered SQLite file: 'damaged', what to do, and the database left as it was."""
    store = Store(pg_store_url)
    store.save_run(make_run())
    raw_sql(store, "UPDATE meta SET value = ? WHERE key = 'schema_version'", value)
    columns = "SELECT count(*) FROM information_schema.columns WHERE table_name = 'runs'"
    before = raw_sql(store, columns)
    calls = [Store(pg_store_url).runs, lambda: Store(pg_store_url).save_run(make_run()),
             lambda: Store(pg_store_url).migrate()]
    if value == "1":  # opening says to migrate; migrating finds the later columns there
        calls = calls[2:]
    for call in calls:
        with pytest.raises(StoreError, match="is damaged") as info:
            call()
        message = str(info.value)
        assert says in message and "Nothing was changed" in message and "backup" in message
        assert "Retry" not in message and "gpuperf sync" in message
    assert raw_sql(store, "SELECT value FROM meta WHERE key = 'schema_version'") == [(value,)]
    assert raw_sql(store, columns) == before
    assert raw_sql(store, "SELECT count(*) FROM runs") == [(1,)]


def test_another_programs_tables_are_left_alone(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE runs (id int)")
    with pytest.raises(StoreError, match="not one; they were left untouched"):
        Store(pg_url).migrate()
    with pytest.raises(StoreError, match="left untouched"):
        Store(pg_url).runs()


def test_concurrent_migrations_create_one_schema(pg_url: str) -> None:
    results: list[object] = []

    def migrate() -> None:
        try:
            results.append(Store(pg_url).migrate())
        except Exception as exc:  # pragma: no cover - reported below
            results.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == [(0, latest_version())] + [(latest_version(),) * 2] * 3


# --------------------------------------------------------------------------- credentials
def test_passwords_are_never_shown_or_stored(postgres_server: PostgresServer, pg_store_url: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    database = pg_store_url.rsplit("/", 1)[1]
    postgres_server.admin(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {PG_PASSWORD_USER}",
                          database)
    good = postgres_server.url(database, PG_PASSWORD_USER, PG_PASSWORD)
    bad = postgres_server.url(database, PG_PASSWORD_USER, "wrong-Secret-42")
    with pytest.raises(StoreError, match="cannot be reached or refused") as info:
        Store(bad).runs()
    assert "wrong-Secret-42" not in str(info.value) and "***" in str(info.value)
    proc = cli("runs", "--store", bad)
    assert proc.returncode == 2 and "wrong-Secret-42" not in proc.stderr + proc.stdout
    assert "Traceback" not in proc.stderr

    store = Store(good)
    run = make_run()
    store.save_run(run)
    assert PG_PASSWORD not in f"{store!r} {store.path} {run.store_path} {run}"
    dump = raw_sql(store, "SELECT r::text FROM runs AS r UNION ALL SELECT m::text FROM meta AS m "
                          "UNION ALL SELECT h::text FROM hardware AS h")
    assert dump and not any(PG_PASSWORD in text for (text,) in dump)
    # run.save() finds the store again from the masked store_path (kept in memory only).
    run.run_id = None
    run.notes.append("again")
    assert run.save(run.store_path) == 2

    # libpq's own sources of passwords: PGPASSWORD (and ~/.pgpass, PGSERVICE alike).
    monkeypatch.setenv("PGPASSWORD", PG_PASSWORD)
    assert len(Store(postgres_server.url(database, PG_PASSWORD_USER)).runs()) == 2


def test_each_run_records_host_and_user(pg_store_url: str) -> None:
    store = Store(pg_store_url)
    store.save_run(make_run())
    store.import_table(gm.Store(pg_store_url).runs().drop(columns=["run_uid"]))
    runs = store.runs(columns=["recorded_host", "recorded_user"])
    assert runs["recorded_host"].tolist() == [socket.gethostname()] * 2
    assert runs["recorded_user"].tolist() == [getpass.getuser()] * 2


# --------------------------------------------------------------------------- roles
def test_a_read_only_role_browses_and_predicts_but_cannot_write(
    postgres_server: PostgresServer, pg_store_url: str, profile_mlp, ip
) -> None:
    profile_mlp(pg_store_url, [8, 16, 32])
    database = pg_store_url.rsplit("/", 1)[1]
    postgres_server.admin("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader", database)
    reader = postgres_server.url(database, "reader")
    assert len(Store(reader).runs(status="ok")) == 3
    prediction = gm.predict_time(reader, batch_sizes=[64], iterations=100)
    assert len(prediction.frame) == 1

    run = make_run()
    with pytest.raises(StoreError, match="may read but not write") as info:
        Store(reader).save_run(run)
    assert info.value.kind == "denied" and info.value.run is run and run.run_id is None
    with pytest.raises(StoreError, match="may read but not write"):
        Store(reader).delete(1)
    # A profiled cell: trains, keeps the run in memory, says why and how to save it.
    cell = ip.run_cell_magic("profile_training", f"-q -o --store {reader}", LOOP)
    assert cell.run_id is None
    assert any("may read but not write" in n and "run.save()" in n for n in cell.notes)
    assert cell in gm.capture.unsaved_runs()
    assert cell.save(pg_store_url) == 4


# --------------------------------------------------------------------------- server away
def test_an_unreachable_server_stops_the_cell_before_it_trains(ip) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    url = f"postgresql://ann:topsecret@127.0.0.1:{port}/team"
    ip.user_ns.pop("trained", None)
    # How long it takes to say so: benchmarks/store_postgres.py.
    with pytest.raises(UsageError, match="cannot be reached") as info:
        ip.run_cell_magic("profile_training", f"--store {url}", "trained = True\n" + LOOP)
    assert "topsecret" not in str(info.value)
    assert "trained" not in ip.user_ns


@pytest.fixture
def own_server(postgres_server):
    """A cluster of this test's own, which it may stop (the session's one stays up)."""
    server = PostgresServer(durable=True)
    server.start()
    yield server
    server.stop()


def test_a_server_lost_during_the_cell_keeps_the_run(own_server: PostgresServer, ip, capsys,
                                                     tmp_path: Path) -> None:
    database = own_server.new_database()
    url = own_server.url(database)
    Store(url).migrate()
    ip.user_ns["server"] = own_server
    run = ip.run_cell_magic("profile_training", f"-o --store {url}", LOOP + "server.halt()\n")
    out = " ".join(capsys.readouterr().out.split())  # the note is wrapped between words
    assert run.run_id is None and len(run.iterations) == 6  # training was not disturbed
    fallback = tmp_path / "unsynced.sqlite"
    assert f"kept in memory and in the local store {fallback}" in out
    assert f"gpuperf sync '{fallback}' '{url}'" in out
    kept = Store(fallback).runs()
    assert len(kept) == 1 and kept["recorded_iterations"].tolist() == [6]

    # The server comes back: pushing the fallback, then run.save(), store the run once.
    own_server.start()
    proc = cli("sync", str(fallback), url)
    assert proc.returncode == 0, proc.stderr
    assert "1 run(s) copied" in proc.stdout
    assert run.save() == 1  # same content, same uid: recognised, not duplicated
    assert len(Store(url).runs()) == 1


def test_lock_timeout_is_honoured(pg_store_url: str) -> None:
    Store(pg_store_url).save_run(make_run())
    with psycopg.connect(pg_store_url, autocommit=True) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT * FROM meta WHERE key = 'revision' FOR UPDATE")
        # The wait is the store's timeout, not the driver's: timed by
        # benchmarks/store_postgres.py; here the message quotes the timeout it waited.
        with pytest.raises(StoreError, match=r"stayed locked by another writer for 1 s"):
            Store(pg_store_url, timeout=1).save_run(make_run())
        assert len(Store(pg_store_url).runs()) == 1  # readers are not blocked
        holder.execute("ROLLBACK")
    assert Store(pg_store_url).save_run(make_run()) >= 2


# ------------------------------------------------------------ the team recipe of docs/store.md
def _readme_sql() -> list[str]:
    text = (Path(__file__).resolve().parents[1] / "docs" / "store.md").read_text()
    section = text.split("## Team store", 1)[1]
    block = section.split("```psql\n", 1)[1].split("```", 1)[0]
    statements, current = [], []
    for line in block.splitlines():
        line = line.split("--", 1)[0].rstrip()
        if line:
            current.append(line)
        if line.endswith(";") or line.startswith("\\c"):
            statements.append(" ".join(current))
            current = []
    return statements


def test_the_readme_team_recipe_works(postgres_server: PostgresServer) -> None:
    """The roles of docs/store.md: owner migrates, writers profile, readers only read."""
    database = "postgres"
    for statement in _readme_sql():
        if statement.startswith("\\c"):
            database = statement.split()[1]
            continue
        postgres_server.admin(statement.replace("'...'", "'pw'"), database)
    owner = postgres_server.url("gpuperf", "gpuperf_owner")
    proc = cli("migrate", owner + "?sslmode=disable")
    assert proc.returncode == 0, proc.stderr
    writer = Store(postgres_server.url("gpuperf", "ann"))
    assert writer.save_run(make_run()) == 1
    writer.delete(1)
    assert writer.save_run(make_run()) == 2
    guest = Store(postgres_server.url("gpuperf", "guest"))
    assert guest.runs()["run_id"].tolist() == [2]
    with pytest.raises(StoreError, match="may read but not write"):
        guest.save_run(make_run())
    # A writer's migrate of an up-to-date store changes nothing (and needs no DDL rights).
    assert writer.migrate() == (latest_version(), latest_version())


def test_config_setting_and_missing_driver(pg_store_url: str, ip,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ip.run_line_magic("config", f"GpuPerf.store = {pg_store_url!r}")
    try:
        ip.run_cell_magic("profile_training", "-q -n cfg", LOOP)
    finally:
        ip.run_line_magic("config", "GpuPerf.store = None")
    assert Store(pg_store_url).runs()["network"].tolist() == ["cfg"]
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now fails
    with pytest.raises(StoreError, match=r"pip install 'gpuperf-magics\[postgres\]'"):
        Store(pg_store_url).runs()
