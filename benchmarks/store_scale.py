"""The store at 100,000 runs, SQLite and PostgreSQL side by side.

Run: ``.venv/bin/python benchmarks/store_scale.py [--runs 100000] [--postgres URL]``

Without ``--postgres`` a throw-away PostgreSQL cluster is started (tests/pgcluster.py: Debian's
postgresql package, run as ``nobody`` when root; fsync off, as a test server). Timed, best of
3 where cheap:

- ``import_table`` of a 100,000-row DataFrame (validation, run uids, one transaction);
- ``runs()`` with every column; ``runs(network=..., columns=[...])`` of one network;
- ``sync_to`` the other backend (every run copied), and a second sync (nothing to copy).

Targets (issue 9): ``runs(network=..., columns=[...])`` under 1 s, all runs with all columns
under 3 s, importing 100,000 rows under 10 s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from gpuperf_magics.store import Store  # noqa: E402

GPUS = {"Tesla T4": (8.1, 320.0), "NVIDIA A100-SXM4-40GB": (19.5, 1555.0),
        "Tesla V100-SXM2-16GB": (15.7, 900.0), "NVIDIA H100 80GB HBM3": (67.0, 3350.0)}


def table(n: int, seed: int = 0) -> pd.DataFrame:
    """n runs as a team's store would hold them: 50 networks, 4 GPUs, hyper and arch figures."""
    rng = np.random.default_rng(seed)
    gpu = rng.choice(list(GPUS), n)
    batch = rng.choice([8, 16, 32, 64, 128, 256], n)
    net = rng.integers(0, 50, n)
    params = (net + 1) * 1_000_003
    fp32 = np.array([GPUS[g][0] for g in gpu])
    return pd.DataFrame({
        "network": [f"net{i:02d}" for i in net],
        "batch_size": batch,
        "iterations": rng.choice([50, 100, 200], n),
        "time_s": batch * params * 6e-12 / fp32 * (1 + 0.05 * rng.standard_normal(n)) + 0.01,
        "gpu": gpu,
        "gpu_count": rng.choice([1, 2, 4, 8], n),
        "arch_params": params,
        "arch_flops_fwd_bwd": params * 6.0,
        "optimizer": rng.choice(["SGD", "Adam", "AdamW"], n),
        "lr": rng.choice([1e-3, 1e-2, 0.1], n),
        "image_size": rng.choice([32.0, 224.0], n),
        "cluster": rng.choice(["aws", "lab"], n),
    })


def timed(call: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = call()
        best = min(best, time.perf_counter() - start)
    return best, result


def measure(store: Store, frame: pd.DataFrame, other: Store) -> dict[str, float]:
    out: dict[str, float] = {}
    out["import_table (100k rows)"], ids = timed(lambda: store.import_table(frame))
    assert len(ids) == len(frame)  # type: ignore[arg-type]
    out["runs() all columns"], runs = timed(store.runs, 3)
    assert len(runs) == len(frame)  # type: ignore[arg-type]
    out["runs(network=, columns=[4])"], one = timed(
        lambda: store.runs(network="net07", columns=["run_id", "batch_size", "gpu", "time_s"]),
        3)
    assert 0 < len(one) < len(frame)  # type: ignore[arg-type]
    out["iterations() query, 2,000 run ids"], _ = timed(
        lambda: store.iterations(list(range(1, 2001))), 3)
    out["sync_to other backend"], result = timed(lambda: store.sync_to(other))
    assert result.copied == len(frame)  # type: ignore[attr-defined]
    out["sync_to again (nothing new)"], again = timed(lambda: store.sync_to(other))
    assert again.copied == 0  # type: ignore[attr-defined]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--postgres", help="URL of an empty database to use (default: a "
                        "throw-away cluster)")
    args = parser.parse_args(argv)
    frame = table(args.runs)
    server = None
    folder = Path(tempfile.mkdtemp(prefix="store-scale-"))
    try:
        if args.postgres:
            urls = [args.postgres, args.postgres]
        else:
            from pgcluster import PostgresServer

            server = PostgresServer()
            server.start()
            urls = [server.url(server.new_database()), server.url(server.new_database())]
        for url in urls:
            Store(url).migrate()
        results = {
            "sqlite": measure(Store(folder / "a.sqlite"), frame, Store(urls[0])),
            "postgresql": measure(Store(urls[1]), frame, Store(folder / "b.sqlite")),
        }
    finally:
        if server is not None:
            server.stop()
    targets = {"import_table (100k rows)": "< 10 s", "runs() all columns": "< 3 s",
               "runs(network=, columns=[4])": "< 1 s"}
    print(f"{args.runs:,} runs (sync: into the other backend)\n")
    print("| operation | SQLite s | PostgreSQL s | target |")
    print("| --- | ---: | ---: | ---: |")
    for name in results["sqlite"]:
        print(f"| {name} | {results['sqlite'][name]:.2f} | {results['postgresql'][name]:.2f} | "
              f"{targets.get(name, '')} |")


if __name__ == "__main__":
    main()
