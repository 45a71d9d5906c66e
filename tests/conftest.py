"""Shared fixtures: one thread for torch, a fresh store per test, the public data from ../shared."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import gpuperf_magics as gm

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def pytest_configure(config: pytest.Config) -> None:
    # Timings are never asserted, but a 2-core CI box thrashes with OpenMP contention
    # (notes/capture.md: 0.5 ms iterations became 85 ms with 2 threads under load).
    import torch

    torch.set_num_threads(1)
    if SHARED_DATA.is_dir():
        os.environ.setdefault("GPUPERF_DATA_HOME", str(SHARED_DATA))


@pytest.fixture(autouse=True)
def _isolated_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test writes to its own store: nothing lands in the user's data directory."""
    path = tmp_path / "store.sqlite"
    monkeypatch.setenv("GPUPERF_STORE", str(path))
    # Where runs a server could not take are kept: never the user's own data folder.
    monkeypatch.setenv("GPUPERF_FALLBACK_STORE", str(tmp_path / "unsynced.sqlite"))
    return path


@pytest.fixture(scope="session")
def ip():
    """A real IPython shell with the extension loaded (a process-wide singleton)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "gpuperf_magics")
    return shell


def _profile_mlp(store, batch_sizes, name="mlp", steps=10, samples=256):
    """Real training of a tiny MLP under the profiler at each batch size."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    for batch in batch_sizes:
        data = torch.utils.data.TensorDataset(torch.randn(samples, 32),
                                              torch.randint(0, 10, (samples,)))
        loader = torch.utils.data.DataLoader(data, batch_size=batch)
        with gm.profile_training(name=name, store=store):
            for _ in range(max(1, steps * batch // samples + 1)):
                for x, y in loader:
                    opt.zero_grad()
                    loss_fn(model(x), y).backward()
                    opt.step()


@pytest.fixture(scope="session")
def profile_mlp():
    """``profile_mlp(store, batch_sizes, name=...)``: real profiled CPU runs into a store."""
    return _profile_mlp


# --------------------------------------------------------------------------- PostgreSQL
# A throw-away cluster of Debian's postgresql package (initdb + pg_ctl on a temporary folder,
# a free localhost port), run as a non-root user since PostgreSQL refuses root. Under CI the
# tests that need it fail when it cannot start; elsewhere they are skipped with the reason.
import contextlib  # noqa: E402
import glob  # noqa: E402
import shutil  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import uuid  # noqa: E402

#: A role with a password (scram), for the tests of credentials.
PG_PASSWORD_USER = "alice"
PG_PASSWORD = "s3cret-Pw!"


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _pg_bin() -> Path:
    explicit = os.environ.get("GPUPERF_PG_BIN")
    candidates = [explicit] if explicit else []
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.append(str(Path(found).resolve().parent))
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "pg_ctl").is_file():
            return Path(folder)
    raise RuntimeError("initdb/pg_ctl not found: apt-get install postgresql (or set "
                       "GPUPERF_PG_BIN to the folder holding them)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer:
    """One PostgreSQL cluster for the test session; a fresh database per test."""

    def __init__(self, durable: bool = False) -> None:
        # fsync and synchronous commits off make the session's cluster fast; a test that
        # crashes its server on purpose wants every commit to survive the crash.
        self.durable = durable
        self.bin = _pg_bin()
        self.folder = Path(tempfile.mkdtemp(prefix="gpuperf-pg-"))
        self.data = self.folder / "data"
        self.port = 0
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            # PostgreSQL will not run as root: the cluster belongs to an unprivileged user.
            user = os.environ.get("GPUPERF_PG_USER", "nobody")
            runuser = shutil.which("runuser")
            self.as_user = [runuser, "-u", user, "--"] if runuser else ["su", user, "-s",
                                                                         "/bin/sh", "-c"]
            shutil.chown(self.folder, user=user)
            self.folder.chmod(0o700)
        self._run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A",
                   "trust", "--no-sync", "-E", "UTF8", "--locale=C"])
        hba = self.data / "pg_hba.conf"
        hba.write_text(
            "local all all trust\n"
            f"host all {PG_PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n"
            "host all all 127.0.0.1/32 trust\n"
        )

    def _run(self, argv: list[str], check: bool = True) -> subprocess.CompletedProcess:
        if self.as_user and self.as_user[0] == "su":
            argv = [*self.as_user, " ".join(argv)]
        else:
            argv = [*self.as_user, *argv]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120,
                              cwd=self.folder)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{argv[-1] if self.as_user else argv[0]} failed "
                               f"({proc.returncode}): {proc.stderr.strip() or proc.stdout}")
        return proc

    def start(self) -> None:
        last = ""
        for attempt in range(3):  # another process may take the free port meanwhile
            if attempt or not self.port:  # a restart keeps its port (and so its URLs)
                self.port = _free_port()
            options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
                       f"-c fsync=off -c synchronous_commit={'on' if self.durable else 'off'} "
                       "-c full_page_writes=off "
                       "-c max_connections=200 -c shared_buffers=32MB")
            proc = self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options,
                              "-l", str(self.folder / "server.log"), "-w", "-t", "60",
                              "start"], check=False)
            if proc.returncode == 0:
                return
            last = proc.stderr + proc.stdout
            with contextlib.suppress(OSError):
                last += (self.folder / "server.log").read_text()[-2000:]
        raise RuntimeError(f"pg_ctl start failed: {last.strip()}")

    def halt(self) -> None:
        """Stop the server as a crash would (clients see it go away); start() again later."""
        self._run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                   "stop"], check=False)

    def stop(self) -> None:
        self.halt()
        shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str = "postgres", user: str = "postgres",
            password: str | None = None) -> str:
        secret = f":{password}" if password is not None else ""
        return f"postgresql://{user}{secret}@127.0.0.1:{self.port}/{database}"

    def admin(self, sql: str, database: str = "postgres") -> list[tuple]:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else []

    def new_database(self) -> str:
        name = f"t_{uuid.uuid4().hex[:12]}"
        self.admin(f"CREATE DATABASE {name}")
        return name

    def drop_database(self, name: str) -> None:
        with contextlib.suppress(Exception):
            self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(scope="session")
def postgres_server():
    """The session's PostgreSQL cluster (skipped without PostgreSQL, except under CI)."""
    try:
        import psycopg  # noqa: F401

        server = PostgresServer()
        server.start()
    except Exception as exc:
        message = f"PostgreSQL test server could not start: {exc}"
        if _in_ci():
            pytest.fail(message + " (CI=true: the PostgreSQL tests must run)", pytrace=False)
        pytest.skip(message)
    server.admin(f"CREATE ROLE {PG_PASSWORD_USER} LOGIN PASSWORD '{PG_PASSWORD}'")
    server.admin("CREATE ROLE reader LOGIN")
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres_server) -> str:
    """A new, empty database on the test server (no store in it yet); dropped afterwards."""
    name = postgres_server.new_database()
    yield postgres_server.url(name)
    postgres_server.drop_database(name)


@pytest.fixture
def pg_store_url(pg_url) -> str:
    """The URL of a new PostgreSQL store (``gpuperf migrate`` already run)."""
    gm.Store(pg_url).migrate()
    return pg_url


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request) -> str:
    return request.param


@pytest.fixture
def store_url(backend, tmp_path, request) -> str:
    """The location of a new store on each backend (a file path or a server URL)."""
    if backend == "sqlite":
        return str(tmp_path / "runs.sqlite")
    return request.getfixturevalue("pg_store_url")


def raw_sql(store, query: str, *args) -> list[tuple]:
    """Run SQL on a store's database directly (the tests' own look behind the API)."""
    if store.kind == "sqlite":
        import sqlite3

        conn = sqlite3.connect(store.path)
        try:
            return conn.execute(query, args).fetchall()
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(store._location.url, autocommit=True) as conn:
        cursor = conn.execute(query.replace("?", "%s"), args or None)
        return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
