"""Tests of gpuperf_magics.store.location: what a store path becomes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import psycopg.conninfo
import pytest
from IPython.core.error import UsageError
from made_runs import make_run
from pgcluster import PG_PASSWORD, PG_PASSWORD_USER

import gpuperf_magics as gm
from gpuperf_magics.store import Store, default_store_path
from gpuperf_magics.store.location import conninfo_spans


def test_relative_path_is_made_absolute(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    store = Store("sub/runs.sqlite")
    assert store.path == tmp_path / "sub" / "runs.sqlite"
    assert repr(store) == f"Store({str(tmp_path / 'sub' / 'runs.sqlite')!r})"
    assert Store(store).path == store.path  # a Store is path-like


def test_memory_path_is_refused() -> None:
    with pytest.raises(ValueError, match="file path"):
        Store(":memory:")


# --------------------------------------------------------------------------- server locations
# Passwords libpq accepts unencoded in a URL: up to the first "@", "#" and "?" included.
HASHED = "p#ss?w:rd"
LOCATIONS = [
    (f"postgresql://ann:{HASHED}@db.example:5432/team?sslmode=require",
     "postgresql://ann:***@db.example:5432/team?sslmode=require"),
    ("postgres://ann:p%23w@db/x", "postgresql://ann:***@db/x"),
    ("postgresql://ann@db/x?sslmode=disable&password=q%26r", "postgresql://ann@db/x?"
     "sslmode=disable&password=***"),
    (f"host=db.example port=5432 dbname=team user=ann password='{HASHED} x'",
     "host=db.example port=5432 dbname=team user=ann password=***"),
    ("dbname=team password=a\\ b#c sslmode=disable", "dbname=team password=*** sslmode=disable"),
]


@pytest.mark.parametrize(("text", "shown"), LOCATIONS)
def test_passwords_are_found_where_libpq_finds_them(text: str, shown: str) -> None:
    store = Store(text)
    assert store.kind == "postgresql" and store.path == shown
    password = psycopg.conninfo.conninfo_to_dict(text)["password"]
    for secret in (password, password[1:], password[-3:]):
        assert secret not in f"{store.path} {store!r}"
    # The masked name finds the store again (Store(run.store_path) in run.save()).
    assert Store(store.path)._location.url == store._location.url


SPANS = [
    "postgresql://ann:a@b@db/x", "postgresql://ann:pa/ss@db/x", "postgresql://:pw@db/x",
    "postgresql://ann:@db/x", "postgresql://ann:p:w#?@[::1]:5432,h2/x?password=z&sslmode=allow",
    "host=db password = 'it\\'s' user=ann", "password=x\\ y dbname=''", "host=db  password=",
]


@pytest.mark.parametrize("text", SPANS)
def test_the_fallback_grammar_reads_what_libpq_reads(text: str) -> None:
    # Without psycopg the spans alone find the passwords: they must agree with libpq.
    spans = {key: value for key, value, _start, _end in conninfo_spans(text) if value}
    libpq = {key: value for key, value in psycopg.conninfo.conninfo_to_dict(text).items()
             if value}
    assert spans.get("password") == libpq.get("password")
    assert spans.get("user") == libpq.get("user")


def test_a_connection_string_is_never_taken_for_a_file(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = "host=db.example dbname=team user=ann password=hunter2"
    monkeypatch.setenv("GPUPERF_STORE", text)
    assert default_store_path() == text  # kept as text, not folded by Path
    assert Store().kind == "postgresql" and "hunter2" not in str(Store().path)
    with pytest.raises(ValueError, match='invalid connection option "hots"') as info:
        Store("hots=db password=hunter2")  # a mistyped keyword: refused, not a file
    assert "hunter2" not in str(info.value)
    with pytest.raises(ValueError, match="percent-encoded") as bad:
        Store("postgresql://ann:hun%zzter@db/x")  # libpq quotes the token: masked
    assert "zzter" not in str(bad.value)
    assert Store("lr=0.1.sqlite").kind == "sqlite"  # a file name with "=" stays a file
    assert list(tmp_path.iterdir()) == []



def test_a_file_name_with_a_libpq_keyword_and_an_equals_sign_is_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``user=ann.sqlite`` is a file named after its owner, not a server string; a path that
    exists is the file it names; a password's key or two words stay a server string."""
    monkeypatch.chdir(tmp_path)
    for name in ("user=ann.sqlite", "dbname=team.db", "host=lab.SQLITE3"):
        store = Store(name)
        assert store.kind == "sqlite" and store.path == tmp_path / name
    store = Store("user=ann.sqlite")
    store.save_run(make_run())
    assert (tmp_path / "user=ann.sqlite").is_file() and len(store.runs()) == 1
    monkeypatch.setenv("GPUPERF_STORE", "user=ann.sqlite")
    assert Store().path == tmp_path / "user=ann.sqlite"
    (tmp_path / "runs").mkdir()
    existing = tmp_path / "runs" / "host=lab"
    Store(existing).save_run(make_run())  # any name, once it exists
    assert Store(str(existing)).kind == "sqlite"
    monkeypatch.chdir(tmp_path / "runs")
    assert Store("host=lab").path == existing
    for text in ("password=hunter2.db", "host=db dbname=team.db", "user=ann"):
        assert Store(text).kind == "postgresql", text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs", "user=ann.sqlite"]


LOOP = """
import torch
from torch import nn
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(4):
    opt.zero_grad()
    model(torch.randn(2, 4)).sum().backward()
    opt.step()
"""


@pytest.fixture
def hash_role(postgres_server, pg_store_url: str) -> tuple[str, str, int]:
    """The one role the test server checks passwords of (scram), given a password holding
    "#", "?" and ":" for this test, with rights on a new store."""
    database = pg_store_url.rsplit("/", 1)[1]
    postgres_server.admin(f"ALTER ROLE {PG_PASSWORD_USER} PASSWORD '{HASHED}'")
    postgres_server.admin(f"GRANT ALL ON ALL TABLES IN SCHEMA public TO {PG_PASSWORD_USER}",
                          database)
    postgres_server.admin(f"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO {PG_PASSWORD_USER}",
                          database)
    yield PG_PASSWORD_USER, database, postgres_server.port
    postgres_server.admin(f"ALTER ROLE {PG_PASSWORD_USER} PASSWORD '{PG_PASSWORD}'")


def _secret_free(text: str) -> bool:
    return all(piece not in text for piece in (HASHED, "ss?w", "#ss", "w:rd"))


def test_a_hash_password_reaches_the_server_and_is_never_shown(
        hash_role: tuple[str, str, int], ip, capsys: pytest.CaptureFixture[str]) -> None:

    role, database, port = hash_role
    url = f"postgresql://{role}:{HASHED}@127.0.0.1:{port}/{database}"
    conninfo = f"host=127.0.0.1 port={port} dbname={database} user={role} password='{HASHED}'"
    for text in (url, conninfo):
        store = Store(text)
        run = make_run()
        store.save_run(run)  # libpq got the password whole
        assert _secret_free(f"{store.path} {store!r} {run.store_path} {run.details()} {run}")
        assert run.save(run.store_path) > 0  # the masked store_path finds the store again
    assert len(Store(url).runs()) == 2  # a save again is recognised: one row per run
    run = ip.run_cell_magic("profile_training", f"--verbose -o --store '{conninfo}'", LOOP)
    assert run.run_id == 3 and _secret_free(capsys.readouterr().out)

    wrong = url.replace(HASHED, "wr#ng?pw")
    with pytest.raises(gm.StoreError, match="cannot be reached or refused") as info:
        Store(wrong).runs()
    assert "wr#ng" not in str(info.value) and "ng?pw" not in str(info.value)


def test_a_hash_password_is_masked_when_the_server_is_away(
        ip, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    url = f"postgresql://ann:{HASHED}@127.0.0.1:{port}/team"
    conninfo = f"host=127.0.0.1 port={port} dbname=team user=ann password={HASHED}"
    monkeypatch.chdir(tmp_path)  # where a store taken for a file would appear
    for text in (url, conninfo):
        with pytest.raises(UsageError, match="cannot be reached") as cell:
            ip.run_cell_magic("profile_training", f"--store '{text}'", LOOP)
        assert _secret_free(str(cell.value))
        with pytest.raises(gm.StoreError, match="push it with") as save:
            Store(text).save_run(make_run())  # kept in the local fallback store
        assert _secret_free(str(save.value)) and "***" in str(save.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unsynced.sqlite"]  # no file named

    # From the repository root, so that -m imports this checkout.
    proc = subprocess.run([sys.executable, "-m", "gpuperf_magics.skins.cli", "runs"],
                          capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[1], env={**os.environ,
                                                               "GPUPERF_STORE": conninfo})
    assert proc.returncode == 2 and "cannot be reached" in proc.stderr
    assert _secret_free(proc.stdout + proc.stderr) and "Traceback" not in proc.stderr


def test_a_store_in_a_command_to_copy_survives_the_shell():
    """A libpq string holding quotes and spaces, shown in "gpuperf migrate ...", splits back to
    itself in a POSIX shell (it broke the command when wrapped in bare single quotes)."""
    import shlex

    from gpuperf_magics.store.location import shell_quote

    for text in ["/tmp/my store.sqlite", "host=db options='-c search_path=gm' password=***",
                 "postgresql://ann:***@db/runs?sslmode=require"]:
        assert shlex.split(f"gpuperf migrate {shell_quote(text)}") == ["gpuperf", "migrate", text]
