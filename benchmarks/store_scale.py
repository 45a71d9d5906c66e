"""The store at 100,000 runs, SQLite and PostgreSQL side by side.

Run: ``.venv/bin/python benchmarks/store_scale.py [--runs 100000] [--postgres URL]
[--baseline OLD.md] [--write docs/figures/store_scale.md] [--repeat N] [--warm-imports]``

``--baseline`` names what an earlier run printed (of this script, or of the one of another
commit): the table then shows ``old → new`` per backend and the ratio of the slower backend.
``--write`` saves the table (with the machine's load average before and after, since a loaded
machine moves these times by several times) to a file as well as printing it. ``--repeat N``
makes N whole passes on new stores and shows each figure's best; ``--warm-imports`` fits a
small store before the timed ``predict_time``, which then leaves out importing scikit-learn
and SciPy (seconds on a busy machine, and no work of the store).

Without ``--postgres`` a throw-away PostgreSQL cluster is started (tests/pgcluster.py: Debian's
postgresql package, run as ``nobody`` when root; fsync off, as a test server). Timed, best of
3 where cheap:

- ``import_table`` of a 100,000-row DataFrame (validation, run uids, one transaction);
- ``runs()`` with every column; ``runs(network=..., columns=[...])`` of one network;
- ``sync_to`` the other backend (every run copied), and a second sync (nothing to copy);
- the memory ``runs()`` allocates at its peak (tracemalloc, a separate call);
- ``predict_time`` on a store of 2,000 profiled runs of one network (20 iterations each):
  the fit reads every run's iterations, in one query.

Targets (issue 9): ``runs(network=..., columns=[...])`` under 1 s, all runs with all columns
under 3 s, importing 100,000 rows under 10 s.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from gpuperf_magics.run import IterationRecord, Run  # noqa: E402
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
    out["import_table, all rows"], ids = timed(lambda: store.import_table(frame))
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
    tracemalloc.start()
    store.runs()
    out["runs() peak memory, MB"] = tracemalloc.get_traced_memory()[1] / 1e6
    tracemalloc.stop()
    return out


def profiled_runs(n: int = 2000, seed: int = 0) -> list[Run]:
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(n):
        batch = int(rng.choice([8, 16, 32, 64, 128]))
        per_it = 0.002 + batch * 1e-4
        its = [IterationRecord(k, per_it * (1 + 0.05 * rng.standard_normal()) * (3 if k == 0
               else 1), batch, warmup=k == 0) for k in range(20)]
        runs.append(Run(network="cnn", iterations=its, batch_size=batch, source="profile",
                        hardware={"cpu_model": "bench"}, created_at=f"2025-01-01T00:00:{i % 60:02d}"
                        f".{i:06d}+00:00", quality={"torch_threads": 1}))
    return runs


def predict_speed(store: Store, runs: list[Run] | None, source: Store | None
                  ) -> dict[str, float]:
    import gpuperf_magics as gm

    if runs is not None:
        for run in runs:
            store.save_run(run)
    else:
        assert source is not None
        source.sync_to(store)
    ids = store.runs(columns=["run_id"])["run_id"].tolist()
    out = {}
    # The first call fits (later ones hit the cache): timed once.
    out["predict_time, 2,000 profiled runs"], _ = timed(
        lambda: gm.predict_time(store, batch_sizes=[256], iterations=100))
    out["iterations(), 2,000 runs: one query"], _ = timed(lambda: store.iterations(ids), 3)
    out["iterations(), 2,000 runs: a query each (before)"], _ = timed(
        lambda: [store.iterations(i) for i in ids])
    return out


def warm_up(folder: Path) -> None:
    """A fit on a separate small store, so that the timed first fit pays for the store and
    the model, not for importing scikit-learn and SciPy (seconds on a busy machine, the same
    for every commit)."""
    import gpuperf_magics as gm

    warm = Store(folder / "warm-up.sqlite")
    for run in profiled_runs(20, seed=1):
        warm.save_run(run)
    gm.predict_time(warm, batch_sizes=[256], iterations=100)


def one_pass(frame: pd.DataFrame, postgres: str | None, warm: bool) -> dict[str, dict[str, float]]:
    """Every figure once, on new stores (and a new throw-away cluster without ``postgres``)."""
    server = None
    folder = Path(tempfile.mkdtemp(prefix="store-scale-"))
    try:
        if postgres:
            urls = [postgres, postgres]
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
        if warm:
            warm_up(folder)
        small = Store(folder / "profiled.sqlite")
        results["sqlite"].update(predict_speed(small, profiled_runs(), None))
        url = server.url(server.new_database()) if server is not None else urls[0]
        if server is not None:
            Store(url).migrate()
        results["postgresql"].update(predict_speed(Store(url), None, small))
    finally:
        if server is not None:
            server.stop()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--postgres", help="URL of an empty database to use (default: a "
                        "throw-away cluster)")
    parser.add_argument("--baseline", help="a table an earlier run printed: shown old → new")
    parser.add_argument("--write", help="also write the table to this file")
    parser.add_argument("--repeat", type=int, default=1, help="whole passes, each on new "
                        "stores: the best time of each figure is shown (a busy machine)")
    parser.add_argument("--warm-imports", action="store_true", help="fit a small store "
                        "first, so that predict_time's figure leaves out importing "
                        "scikit-learn and SciPy")
    args = parser.parse_args(argv)
    if args.repeat < 1 or (args.repeat > 1 and args.postgres):
        parser.error("--repeat takes a number >= 1, and more than 1 only without --postgres "
                     "(each pass needs empty databases)")
    load = os.getloadavg()
    frame = table(args.runs)
    passes = [one_pass(frame, args.postgres, args.warm_imports) for _ in range(args.repeat)]
    results = {kind: {name: min(p[kind][name] for p in passes) for name in passes[0][kind]}
               for kind in passes[0]}
    text = report(args.runs, results, load, os.getloadavg(), args.baseline)
    print(text)
    if args.write:
        Path(args.write).write_text(text + "\n")


def baseline_rows(path: str) -> dict[str, tuple[float, float]]:
    """The (SQLite, PostgreSQL) figures of a table an earlier run printed, by operation."""
    out = {}
    for line in Path(path).read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3:
            try:
                out[cells[0]] = (float(cells[1]), float(cells[2]))
            except ValueError:
                continue
    return out


def report(n: int, results: dict[str, dict[str, float]], before: tuple[float, ...],
           after: tuple[float, ...], baseline: str | None) -> str:
    """The markdown table of one run (old → new and the worse ratio with a baseline)."""
    targets = {"import_table, all rows": "< 10 s", "runs() all columns": "< 3 s",
               "runs(network=, columns=[4])": "< 1 s"}
    old = baseline_rows(baseline) if baseline else {}
    loads = "load average (1, 5, 15 min) {} before, {} after".format(
        *(", ".join(f"{x:.1f}" for x in load) for load in (before, after)))
    lines = [f"{n:,} runs (sync: into the other backend); {loads}", ""]
    if old:
        lines += ["| operation | SQLite s, old → new | PostgreSQL s, old → new | worse ratio |",
                  "| --- | ---: | ---: | ---: |"]
    else:
        lines += ["| operation | SQLite s | PostgreSQL s | target |", "| --- | ---: | ---: | ---: |"]
    for name in results["sqlite"]:
        new = (results["sqlite"][name], results["postgresql"][name])
        if not old:
            lines.append(f"| {name} | {new[0]:.2f} | {new[1]:.2f} | {targets.get(name, '')} |")
        elif name in old:
            # The baseline has two decimals: a time it shows as 0.00 gives no ratio.
            ratios = [b / a for a, b in zip(old[name], new, strict=True) if a]
            worse = f"{max(ratios):.2f}" if ratios else "-"
            lines.append(f"| {name} | {old[name][0]:.2f} → {new[0]:.2f} | "
                         f"{old[name][1]:.2f} → {new[1]:.2f} | {worse} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
