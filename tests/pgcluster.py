"""A throw-away PostgreSQL cluster for the tests and benchmarks/store_scale.py.

Debian's postgresql package (initdb + pg_ctl) on a temporary folder and a free localhost port,
run as an unprivileged user since PostgreSQL refuses to run as root (``nobody``, or
``$GPUPERF_PG_USER``). ``$GPUPERF_PG_BIN`` names the folder of initdb/pg_ctl when it is not
``/usr/lib/postgresql/*/bin`` or on PATH.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

#: A role with a password (scram), for the tests of credentials.
PG_PASSWORD_USER = "alice"
PG_PASSWORD = "s3cret-Pw!"

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


