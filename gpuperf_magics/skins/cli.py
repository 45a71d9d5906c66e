"""The ``gpuperf`` command line: the store and the predictor without a notebook::

    gpuperf runs [--network NAME] [--csv]
    gpuperf import FILE [--map COLUMN=CANONICAL ...] [--network NAME] [--gpu NAME] [--again]
    gpuperf predict [NAME] [--batch-size 32,64] [--iterations N | --epochs E [--samples N]]
                    [--gpu "A100 80GB,T4"] [--gpu-count N] [--set depth=50] [--csv]
    gpuperf predict --remaining [RUN_ID] [--gpu NAME] [--gpu-count N] [--prices FILE] [--csv]
    gpuperf evaluate [--scenario grouped] [--column C] [--threshold T] [--network NAME]
    gpuperf migrate [URL]
    gpuperf sync SRC DST
    gpuperf demo

Every command takes ``--store PATH_OR_URL`` (default: ``$GPUPERF_STORE``, else the per-user
store); a ``postgresql://`` URL names a server store. The commands that only read (runs,
predict, evaluate, sync's SRC) refuse a store file that does not exist rather than read it as
empty; import, migrate and demo create it.
The commands share the code of the magics: :mod:`gpuperf_magics.prediction.predict`,
:mod:`gpuperf_magics.prediction.options` (``predict`` takes the options of ``%predict_time``)
and :class:`gpuperf_magics.Store`. Errors print one line to stderr and exit with status 2.

``gpuperf import`` tags every row with a SHA-256 of the file's bytes and of ``--map``,
``--network`` and ``--gpu`` (:data:`IMPORT_TAG`), and refuses a file whose fingerprint is
already in the store unless ``--again`` is given.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuperf_magics.prediction import options as prediction_options
from gpuperf_magics.prediction.options import number

__all__ = ["main"]

#: Columns of ``Store.runs()`` that ``gpuperf runs`` shows (all columns with --csv).
RUN_COLUMNS = ["run_id", "network", "batch_size", "iterations", "time_s", "it_median_s",
               "status", "gpu", "gpu_count", "source", "created_at"]
#: What it prints: the canonical ``iterations`` renamed for what they are, the device in words.
RUN_DISPLAY = ["run_id", "network", "batch_size", "timed_it", "warmup_it", "time_s",
               "it_median_s", "status", "device", "source", "created_at"]
#: Printed under the table: why a cell's "20 it (4 warm-up)" is 16 timed iterations here.
RUN_LEGEND = ("timed_it: the iterations time_s covers (it_median_s: their median); "
              "warmup_it: recorded before them, left out.\n"
              "A profiled cell's line counts both: '20 it (4 warm-up)' is 16 timed_it "
              "and 4 warmup_it.")

#: Tag of imported rows: SHA-256 of the file's bytes and of the options that change the rows.
#: Two files of one name are different imports; one file under two names is the same one.
IMPORT_TAG = "import_sha256"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuperf", description="Profiled training runs and training-time predictions."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--store", metavar="PATH_OR_URL", help="SQLite file or postgresql:// URL "
                       "(default: $GPUPERF_STORE, else the per-user store)")
        return p

    runs = command("runs", "List the runs of the store.")
    runs.add_argument("--network", help="only this network")
    runs.add_argument("--csv", action="store_true", help="all columns, as CSV")

    imp = command("import", "Import measurements made elsewhere (CSV or Parquet).")
    imp.add_argument("file", help="a .csv or .parquet table, one row per configuration")
    imp.add_argument("--map", action="append", metavar="COLUMN=CANONICAL", default=[],
                     help="rename a column to a canonical name, e.g. step_time=time_s; "
                     "COLUMN= drops a column (repeatable)")
    imp.add_argument("--network", help="network of every row (if the table has no column)")
    imp.add_argument("--gpu", help="GPU of every row (if the table has no column)")
    imp.add_argument("--again", action="store_true",
                     help="import a file whose rows (same content, same --map/--network/"
                     "--gpu) are already in the store")

    pred = command("predict", "Predict training time for other configurations (the options "
                   "of the notebook's predict_time magic).")
    prediction_options.add_to(pred)
    pred.add_argument("--prices", metavar="FILE", help="CSV of your own instance prices, "
                      "merged over the built-in ones (for --remaining's cost)")
    pred.add_argument("--csv", action="store_true", help="the full table as CSV")

    ev = command("evaluate", "Measure the predictor's error on the store's runs.")
    ev.add_argument("--scenario", default="grouped",
                    help="random, grouped (default), threshold or leave_one_out")
    ev.add_argument("--column", help="column for threshold / leave_one_out (e.g. batch_size)")
    ev.add_argument("--threshold", help="train on column <= threshold")
    ev.add_argument("--network", help="network to evaluate (default: the latest run's)")

    mig = command("migrate", "Create or upgrade a store's schema (a server store is only ever "
                  "upgraded this way).")
    mig.add_argument("url", nargs="?", metavar="URL",
                     help="postgresql:// URL or SQLite file (default: --store)")

    syn = command("sync", "Copy the runs DST lacks from SRC into DST (either way between "
                  "SQLite and PostgreSQL). Adds runs; never deletes or overwrites.")
    syn.add_argument("src", metavar="SRC", help="store to copy from (path or URL)")
    syn.add_argument("dst", metavar="DST", help="store to copy into (path or URL)")
    syn.add_argument("-q", "--quiet", action="store_true", help="no progress bar")

    command("demo", "Profile a small CNN on the CPU at a few batch sizes and predict.")
    return parser


def _device(row: Any) -> str:
    """The device of a row of ``Store.runs()``: GPUs, the CPU, or unknown (an imported row
    that gave no GPU)."""
    from gpuperf_magics.run import device_label

    if isinstance(row["gpu"], str) and row["gpu"]:
        return device_label(row["gpu"], row["gpu_count"])
    if row.get("device") != "cpu":
        return "unknown"
    return device_label(None, threads=row.get("torch_threads"))


def _runs(args: argparse.Namespace) -> int:
    import pandas as pd

    from gpuperf_magics.store import Store

    store = Store(args.store, must_exist=True)
    frame = store.runs(**({"network": args.network} if args.network else {}))
    if args.csv:
        frame.to_csv(sys.stdout, index=False)
        return 0
    if frame.empty:
        if args.network:
            known = sorted(set(store.runs(columns=["network"])["network"].astype(str)))
            print(f"no runs of network {args.network!r} in {store.path}"
                  + (f"; its networks: {', '.join(known)}" if known else ""))
        else:
            print(f"no runs in {store.path}")
        return 0
    shown = frame.reindex(columns=[*RUN_COLUMNS, "warmup_iterations", "device",
                                   "torch_threads"]).copy()
    shown["device"] = shown.apply(_device, axis=1)
    # Imported rows have no warm-up count; pandas prints a missing integer as <NA>.
    shown["warmup_iterations"] = ["-" if pd.isna(v) else int(v)
                                  for v in shown["warmup_iterations"]]
    shown = shown.rename(columns={"iterations": "timed_it", "warmup_iterations": "warmup_it"})
    print(shown[RUN_DISPLAY].to_string(index=False, na_rep="-"))
    print(RUN_LEGEND)
    return 0


def _fingerprint(path: Path, mapping: Mapping[str, str | None], network: str | None,
                 gpu: str | None) -> str:
    """SHA-256 of a file's bytes and of the import options that change the stored rows."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    options = {"map": sorted(mapping.items()), "network": network, "gpu": gpu}
    digest.update(b"\0" + json.dumps(options, sort_keys=True).encode())
    return digest.hexdigest()


def _import(args: argparse.Namespace) -> int:
    from gpuperf_magics.store import Store
    from gpuperf_magics.store.importer import COMMAND_LINE, spelled

    mapping: dict[str, str | None] = {}
    for item in args.map:
        source, sep, target = item.partition("=")
        if not sep or not source:
            raise ValueError(f"--map expects COLUMN=CANONICAL, e.g. step_time=time_s (or "
                             f"COLUMN= to drop a column); got {item!r}")
        mapping[source] = target or None
    store = Store(args.store)
    path = Path(args.file).expanduser()
    tags, note = None, ""
    if path.is_file():  # else import_table says what is wrong with the path
        tags = {IMPORT_TAG: _fingerprint(path, mapping, args.network, args.gpu)}
        runs = store.runs(columns=["run_id", "source", "tags"])  # not every column
        marks = runs["tags"].map(lambda t: t.get(IMPORT_TAG) if isinstance(t, dict) else None)
        already = runs[marks == tags[IMPORT_TAG]]
        if len(already) and not args.again:
            names = ", ".join(sorted(set(already["source"].dropna().astype(str))))
            raise ValueError(
                f"{len(already)} row(s) of a file with the same content, imported with the "
                f"same --map/--network/--gpu, are already in {store.path} (source {names}, "
                f"run ids {already['run_id'].min()}–{already['run_id'].max()}); pass --again "
                "to import them once more"
            )
        # Stores written before fingerprints know imports by file name only.
        older = runs[(runs["source"] == f"import:{path.name}") & marks.isna()]
        if len(older) and not args.again:
            note = (f"gpuperf import: note: {len(older)} row(s) imported earlier from a file "
                    f"named {path.name} (run ids {older['run_id'].min()}–"
                    f"{older['run_id'].max()}) carry no content fingerprint, so they may be "
                    "these rows again")
    known = set(store.runs(columns=["run_id"])["run_id"])
    with spelled(COMMAND_LINE):  # errors say --map, not mapping={...}
        ids = store.import_table(args.file, mapping=mapping or None, network=args.network,
                                 gpu=args.gpu, tags=tags)
    if note:
        print(note, file=sys.stderr)
    new = [i for i in ids if i not in known]  # a row whose run_uid is stored keeps its id
    if new:
        print(f"imported {len(new)} row(s) into {store.path} (run ids {min(new)}–{max(new)})")
    if len(new) < len(ids):
        print(f"{len(ids) - len(new)} row(s) already in the store (same run_uid): not imported "
              "again")
    if not ids:
        print("nothing to import")
    return 0


def _remaining(args: argparse.Namespace, opts: prediction_options.PredictionOptions) -> int:
    from gpuperf_magics.prediction.remaining import remaining_time
    from gpuperf_magics.store import Store

    result = remaining_time(Store(args.store, must_exist=True), opts.run_id, opts.job,
                            prices=args.prices)
    if args.csv:
        result.frame.to_csv(sys.stdout, index=False)
    else:
        print(result)
    return 0


def _predict(args: argparse.Namespace) -> int:
    from gpuperf_magics.prediction import predict
    from gpuperf_magics.prediction.job import flag_spelling
    from gpuperf_magics.prediction.store_model import PredictionError
    from gpuperf_magics.store import Store

    opts = prediction_options.read(args)
    with flag_spelling():  # messages name this command's flags
        if opts.remaining:
            return _remaining(args, opts)
        if args.prices is not None:
            raise PredictionError(
                "--prices only applies with --remaining RUN_ID (e.g. gpuperf predict "
                "--remaining 12 --prices my_prices.csv); offers with prices for a new job are "
                "in gpuperf_magics.offers() or the notebook panel (%predict_time -w)")
        result = predict.predict_time(Store(args.store, must_exist=True), opts.job)
    if args.csv:
        result.frame.to_csv(sys.stdout, index=False)
    else:
        print(result)
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from gpuperf_magics.model import evaluate
    from gpuperf_magics.prediction.store_model import fit_store, per_iteration_table, robust_times
    from gpuperf_magics.store import Store

    threshold = number("--threshold", args.threshold, positive=False)
    store = Store(args.store, must_exist=True)
    fit = fit_store(store, args.network)
    runs = fit.runs
    x, y = per_iteration_table(runs, fit.model.features, robust_times(store, runs))
    table = evaluate(fit.model.model, x, y, args.scenario, column=args.column, threshold=threshold)
    # The error in percent, as every other error the package prints.
    table["mape"] = table["mape"].map(lambda v: f"{100 * v:.1f}%")
    print(f"network {runs['network'].iloc[0]}: {len(runs)} run(s) in {store.path}; mape: "
          "error of the model refitted without the held-out runs, in % of the measured time")
    print(table.to_string(index=False))
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from gpuperf_magics.store import Store

    store = Store(args.url or args.store)
    before, after = store.migrate()
    if before == after:
        print(f"{store.path}: schema version {after}, nothing to do")
    elif before == 0:
        print(f"{store.path}: store created (schema version {after})")
    else:
        print(f"{store.path}: schema upgraded from version {before} to {after}")
    return 0


class SyncBar:
    """``progress(done, total)`` for :meth:`Store.sync_to`, drawn by ``tqdm.auto`` on stderr.

    On a terminal the bar is redrawn in place; into a pipe or a log only a copy large enough
    to wait for (1,000 runs) shows one; ``quiet`` draws nothing.
    """

    def __init__(self, quiet: bool, stream: Any = None) -> None:
        self.quiet, self.stream, self.bar = quiet, stream or sys.stderr, None

    def __call__(self, done: int, total: int) -> None:
        if self.quiet or total == 0 or (total < 1000 and not self.stream.isatty()):
            return
        if self.bar is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc="sync", unit=" runs", file=self.stream)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _sync(args: argparse.Namespace) -> int:
    from gpuperf_magics.store import Store

    source = Store(args.src, must_exist=True)  # a mistyped SRC is not an empty store
    bar = SyncBar(args.quiet)
    try:
        result = source.sync_to(Store(args.dst), progress=bar)
    finally:
        bar.close()
    print(result)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gpuperf_magics.skins.demo import main as demo_main

    return demo_main(["--store", args.store] if args.store else [])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpuperf`` command."""
    args = _parser().parse_args(argv)
    handlers = {"runs": _runs, "import": _import, "predict": _predict,
                "evaluate": _evaluate, "migrate": _migrate, "sync": _sync, "demo": _demo}
    from gpuperf_magics.store import StoreError

    try:
        return handlers[args.command](args)
    except (ValueError, KeyError, StoreError, FileNotFoundError) as exc:
        print(f"gpuperf {args.command}: error: {_message(args.command, exc)}", file=sys.stderr)
        return 2


def _message(command: str, exc: Exception) -> str:
    """The line an error prints; a missing store says how to name another on this command."""
    from gpuperf_magics.store import StoreNotFoundError

    if isinstance(exc, StoreNotFoundError):
        return str(exc.reworded("gpuperf sync SRC DST" if command == "sync" else "--store PATH"))
    # A plain KeyError's str() quotes its key; a subclass with its own words (RunNotFoundError)
    # says them.
    plain_key = isinstance(exc, KeyError) and type(exc).__str__ is KeyError.__str__
    return str(exc.args[0] if plain_key and exc.args else exc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
