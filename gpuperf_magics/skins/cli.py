"""The ``gpuperf`` command line: the store and the predictor without a notebook::

    gpuperf runs [--network NAME] [--csv]
    gpuperf import FILE [--map COLUMN=CANONICAL ...] [--network NAME] [--gpu NAME] [--again]
    gpuperf predict [NAME] [--batch-size 32,64] [--iterations N | --epochs E [--samples N]]
                    [--gpu "A100 80GB,T4"] [--gpu-count N] [--set depth=50] [--deadline H:MM]
                    [--csv]
    gpuperf predict --remaining [RUN_ID] [--gpu NAME] [--gpu-count N] [--prices FILE] [--csv]
    gpuperf evaluate [--scenario grouped] [--column C] [--threshold T] [--network NAME]
    gpuperf migrate [URL]
    gpuperf sync SRC DST
    gpuperf demo

Every command takes ``--store PATH_OR_URL`` (default: ``$GPUPERF_STORE``, else the per-user
store); a ``postgresql://`` URL or a libpq ``key=value`` string names a server store. The
commands that only read (runs, predict, evaluate, sync's SRC) refuse a store file that does not
exist rather than read it as empty; import, migrate create it (demo writes a temporary store
unless given one).
The commands share the code of the magics: :mod:`gpuperf_magics.prediction.predict`,
:mod:`gpuperf_magics.prediction.options` (``predict`` takes the options of ``%predict_time``)
and :class:`gpuperf_magics.Store`. Errors print one line to stderr and exit with status 2; a
mistyped option prints its command's usage and the option it is closest to. What the commands
print shows a control character escaped (``\x1b``), never as a terminal would act on it; every
CSV goes through the store's formula escaping (:func:`write_csv`). Output cut short by its
reader (``gpuperf runs | head -1``) ends quietly with status 141, as a Unix tool killed by
SIGPIPE does.

``gpuperf import`` refuses a file the store already holds (its fingerprint: a SHA-256 of the
file's bytes and of ``--map``, ``--network`` and ``--gpu``; see
:meth:`gpuperf_magics.Store.import_table`'s ``skip_duplicates``) unless ``--again`` is given.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuperf_magics.prediction import options as prediction_options
from gpuperf_magics.prediction.options import number

__all__ = ["main", "printable", "write_csv"]

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

#: The store option's help, but for the demo, which never writes to the user's store.
STORE_HELP = ("SQLite file, postgresql:// URL or libpq 'host=... dbname=...' string "
              "(default: $GPUPERF_STORE, else the per-user store)")
DEMO_STORE_HELP = ("SQLite file to write the demo's runs to (default: a temporary store, "
                   "deleted when the demo ends: $GPUPERF_STORE and the per-user store are "
                   "never used, so the demo does not mix with your runs)")

#: Control characters (C0 but the newline, DEL, C1): what a terminal would act on.
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with each control character shown as its escape (``\\x1b``, ``\\t``).

    Names come from imported files and other people's stores: printed raw, an escape
    sequence in one would move the cursor, recolour or retitle the user's terminal, or hide
    the rows after it. Newlines stay (the tables are made of lines).
    """
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], text)


def _say(text: object = "", *, file: Any = None) -> None:
    """Print what a command shows, its control characters escaped (:func:`printable`)."""
    print(printable(str(text)), file=file or sys.stdout)


def write_csv(frame: Any, stream: Any = None) -> None:
    """``frame`` as CSV, formula-escaped (:func:`gpuperf_magics.store.files.write_csv`,
    imported only when a command writes CSV: pandas stays out of ``gpuperf --help``)."""
    from gpuperf_magics.store.files import write_csv as write

    write(frame, stream)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuperf", description="Profiled training runs and training-time predictions."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str,
                store_help: str = STORE_HELP) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--store", metavar="PATH_OR_URL", help=store_help)
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
    pred.add_argument("--deadline", metavar="H:MM", help="time the job may take, in hours "
                      "(2.5) or H:MM (2:30): each configuration is marked as meeting it or "
                      "not (a deadline column with --csv)")
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

    command("demo", "Profile a small CNN on the CPU at a few batch sizes and predict, in a "
            "temporary store unless --store is given.", store_help=DEMO_STORE_HELP)
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
    if frame.empty and args.network:  # a filter that matched nothing: a mistake, said so
        known = sorted(set(store.runs(columns=["network"])["network"].astype(str)))
        raise ValueError(f"no runs of network {args.network!r} in {store.path}; "
                         + (f"networks in the store: {', '.join(known)}" if known
                            else "the store has no runs"))
    if args.csv:
        write_csv(frame)
        return 0
    if frame.empty:
        _say(f"no runs in {store.path}")
        return 0
    shown = frame.reindex(columns=[*RUN_COLUMNS, "warmup_iterations", "device",
                                   "torch_threads"]).copy()
    shown["device"] = shown.apply(_device, axis=1)
    # Imported rows have no warm-up count; pandas prints a missing integer as <NA>.
    shown["warmup_iterations"] = ["-" if pd.isna(v) else int(v)
                                  for v in shown["warmup_iterations"]]
    shown = shown.rename(columns={"iterations": "timed_it", "warmup_iterations": "warmup_it"})
    _say(shown[RUN_DISPLAY].to_string(index=False, na_rep="-"))
    _say(RUN_LEGEND)
    return 0


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
    note, tags = "", None
    if path.is_file():  # else import_table says what is wrong with the path
        prior = store.imported_file(path, mapping, network=args.network, gpu=args.gpu)
        if prior and not args.again:
            raise ValueError(
                f"{len(prior.run_ids)} row(s) of a file with the same content, imported with "
                f"the same --map/--network/--gpu, are already in {store.path} (source "
                f"{', '.join(prior.sources)}, run ids {prior.run_ids[0]}–{prior.run_ids[-1]}); "
                "pass --again to import them once more")
        if prior.unmarked_ids and not args.again:
            note = (f"gpuperf import: note: {len(prior.unmarked_ids)} row(s) imported earlier "
                    f"from a file named {path.name} (run ids {prior.unmarked_ids[0]}–"
                    f"{prior.unmarked_ids[-1]}) carry no content fingerprint, so they may be "
                    "these rows again")
        if args.again:  # rows imported once more still carry the file's fingerprint
            from gpuperf_magics.store.fingerprints import IMPORT_TAG

            tags = {IMPORT_TAG: prior.fingerprint}
    known = set(store.runs(columns=["run_id"])["run_id"])
    with spelled(COMMAND_LINE):  # errors say --map, not mapping={...}
        ids = store.import_table(args.file, mapping=mapping or None, network=args.network,
                                 gpu=args.gpu, tags=tags, skip_duplicates=not args.again)
    if note:
        _say(note, file=sys.stderr)
    new = [i for i in ids if i not in known]  # a row whose run_uid is stored keeps its id
    if new:
        _say(f"imported {len(new)} row(s) into {store.path} (run ids {min(new)}–{max(new)})")
    if len(new) < len(ids):
        _say(f"{len(ids) - len(new)} row(s) already in the store (same run_uid): not imported "
             "again")
    if not ids:
        _say("nothing to import")
    return 0


def _remaining(args: argparse.Namespace, opts: prediction_options.PredictionOptions) -> int:
    from gpuperf_magics.prediction.remaining import remaining_time
    from gpuperf_magics.store import Store

    result = remaining_time(Store(args.store, must_exist=True), opts.run_id, opts.job,
                            prices=args.prices)
    if args.csv:
        write_csv(result.frame)
    else:
        _say(result)
    return 0


def _predict(args: argparse.Namespace) -> int:
    from gpuperf_magics.prediction import predict, suggestions
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
        store = Store(args.store, must_exist=True)
        result = predict.predict_time(store, opts.job)
        if opts.suggest:  # what to profile next, under the answer
            result = suggestions.with_suggestions(result, store, per=opts.suggest_per)
    frame = result.frame
    if opts.job.deadline_s is not None:
        frame = frame.assign(deadline=[_meets(row, opts.job.deadline_s)
                                       for _, row in frame.iterrows()])
    if args.csv:
        write_csv(frame)
        return 0
    _say(result)
    if opts.job.deadline_s is not None:
        _say(_deadline_lines(frame, opts.job.deadline_s))
    return 0


def _meets(row: Any, deadline_s: float) -> str:
    """``met`` (the interval's upper end within the deadline), ``likely`` (the predicted
    time within it, the upper end not) or ``missed``."""
    if row["time_high_s"] <= deadline_s:
        return "met"
    return "likely" if row["time_s"] <= deadline_s else "missed"


def _deadline_lines(frame: Any, deadline_s: float) -> str:
    """What ``--deadline`` adds under the table: the configurations by how they meet it."""
    from gpuperf_magics.units import format_duration

    words = {"met": "met (even the interval's upper end)",
             "likely": "likely (the predicted time, not the interval's upper end)",
             "missed": "missed"}
    lines = [f"deadline {format_duration(deadline_s)}:"]
    for state, said in words.items():
        rows = frame[frame["deadline"] == state]
        if len(rows):
            names = ", ".join(
                f"batch {int(r['batch_size'])} · {r['gpu']}"
                + (f" ×{int(r['gpu_count'])}" if r["gpu_count"] > 1 else "")
                for _, r in rows.iterrows())
            lines.append(f"  {said}: {names}")
    return "\n".join(lines)


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
    _say(f"network {runs['network'].iloc[0]}: {len(runs)} run(s) in {store.path}; mape: "
         "error of the model refitted without the held-out runs, in % of the measured time")
    _say(table.to_string(index=False))
    return 0


def _migrate(args: argparse.Namespace) -> int:
    from gpuperf_magics.store import Store

    store = Store(args.url or args.store)
    before, after = store.migrate()
    if before == after:
        _say(f"{store.path}: schema version {after}, nothing to do")
    elif before == 0:
        _say(f"{store.path}: store created (schema version {after})")
    else:
        _say(f"{store.path}: schema upgraded from version {before} to {after}")
    return 0


class SyncBar:
    """``progress(done, total)`` for :meth:`Store.sync_to`, drawn by ``tqdm.auto`` on stderr.

    On a terminal the bar is redrawn in place; into a pipe or a log only a copy large enough
    to wait for (1,000 runs) shows one; ``quiet`` draws nothing.
    """

    def __init__(self, quiet: bool, stream: Any = None) -> None:
        self.quiet, self.stream = quiet, stream or sys.stderr
        self.bar: Any = None

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
    _say(result)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gpuperf_magics.skins.demo import main as demo_main

    return demo_main(["--store", args.store] if args.store else [])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpuperf`` command."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit, where a closed pipe would print a traceback
    except BrokenPipeError:
        # The reader stopped reading (``| head -1``): end quietly as Unix tools do, with the
        # status of a process stopped by SIGPIPE. Python's own flush at exit would fail again,
        # so stdout is pointed at the null device first.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 141
    return code


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        _unknown(parser, args.command, extra)
    handlers = {"runs": _runs, "import": _import, "predict": _predict,
                "evaluate": _evaluate, "migrate": _migrate, "sync": _sync, "demo": _demo}
    from gpuperf_magics.store import StoreError

    try:
        return handlers[args.command](args)
    except (ValueError, KeyError, StoreError, FileNotFoundError) as exc:
        _say(f"gpuperf {args.command}: error: {_message(args.command, exc)}", file=sys.stderr)
        return 2


def _unknown(parser: argparse.ArgumentParser, command: str, extra: list[str]) -> None:
    """Words the command does not take: its own usage (not the top-level one) and the option
    a mistyped one is closest to (``--batchsize`` → ``--batch-size``); exits with status 2."""
    sub = _subparser(parser, command)
    options = sorted({s for action in sub._actions for s in action.option_strings
                      if s.startswith("--")})
    typed = next((w for w in extra if w.startswith("-")), extra[0]).split("=")[0]
    close = difflib.get_close_matches(typed, options, n=1, cutoff=0.6)
    hint = (f"did you mean {close[0]}?" if close else
            f"gpuperf {command} takes {', '.join(options)}")
    sub.error(f"unrecognized arguments: {printable(' '.join(extra))}; {hint} "
              f"(gpuperf {command} --help lists them)")


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[command]
    raise LookupError(command)  # pragma: no cover - every parser here has its commands


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
