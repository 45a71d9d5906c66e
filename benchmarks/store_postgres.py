"""How long a server store takes to say it cannot be used: the figures the tests do not time.

Run: ``.venv/bin/python benchmarks/store_postgres.py [--repeat 3]``

Starts a throw-away PostgreSQL cluster (tests/pgcluster.py: Debian's postgresql package) and
times, best and worst of ``--repeat``:

- a profiled cell whose ``--store`` names a server nobody listens on: from the magic's start
  to its ``UsageError``, before the cell trains (target: under 20 s, libpq's connect timeout
  being at least 2 s and the store's at most 10 s);
- ``Store(url, timeout=1).save_run(...)`` while another session holds the revision row: from
  the call to the "stayed locked" error (target: under 5 s, the store's timeout of 1 s plus
  a connection and a retry).

tests/test_store_postgres.py checks what happens in both cases (the error, the message, that
the cell did not run and that readers are not blocked); the seconds are measured here, on a
quiet machine, rather than asserted by a test that a loaded one makes fail.
"""

from __future__ import annotations

import argparse
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from gpuperf_magics.run import IterationRecord, Run  # noqa: E402
from gpuperf_magics.store import Store, StoreError  # noqa: E402

LOOP = "trained = True\n"


def _run() -> Run:
    return Run(network="bench", iterations=[IterationRecord(0, 0.01, 4)], batch_size=4)


def unreachable_cell() -> float:
    """Seconds from ``%%profile_training --store URL`` to its error, URL naming a dead port."""
    from IPython.core.error import UsageError
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    if "gpuperf_magics" not in ip.extension_manager.loaded:
        ip.run_line_magic("load_ext", "gpuperf_magics")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    url = f"postgresql://ann:topsecret@127.0.0.1:{port}/team"
    ip.user_ns.pop("trained", None)
    start = time.monotonic()
    try:
        ip.run_cell_magic("profile_training", f"--store {url}", LOOP)
    except UsageError:
        pass
    else:  # pragma: no cover - the benchmark measures the error
        raise AssertionError("the cell ran against an unreachable server")
    assert "trained" not in ip.user_ns
    return time.monotonic() - start


def locked_save(url: str) -> float:
    """Seconds from ``save_run`` with ``timeout=1`` to "stayed locked", the row held elsewhere."""
    import psycopg

    Store(url).save_run(_run())
    with psycopg.connect(url, autocommit=True) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT * FROM meta WHERE key = 'revision' FOR UPDATE")
        start = time.monotonic()
        try:
            Store(url, timeout=1).save_run(_run())
        except StoreError as err:
            assert "stayed locked" in str(err), err
        else:  # pragma: no cover
            raise AssertionError("the save went through a held lock")
        took = time.monotonic() - start
        holder.execute("ROLLBACK")
    return took


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    from pgcluster import PostgresServer

    server = PostgresServer()
    server.start()
    try:
        url = server.url(server.new_database())
        Store(url).migrate()
        cells = [unreachable_cell() for _ in range(args.repeat)]
        locks = [locked_save(url) for _ in range(args.repeat)]
    finally:
        server.stop()
    print("| what | best s | worst s | target |")
    print("| --- | ---: | ---: | ---: |")
    print(f"| profiled cell, server unreachable: error before training | {min(cells):.2f} | "
          f"{max(cells):.2f} | < 20 s |")
    print(f"| save_run, row locked, timeout=1: 'stayed locked' | {min(locks):.2f} | "
          f"{max(locks):.2f} | < 5 s |")


if __name__ == "__main__":
    main()
