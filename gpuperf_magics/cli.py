"""The ``gpuperf`` command line: the store and the predictor without a notebook.

    gpuperf runs [--network NAME] [--csv]
    gpuperf import FILE [--map COLUMN=CANONICAL ...] [--network NAME] [--gpu NAME]
    gpuperf predict [NAME] [--batch-size 32,64] [--iterations N | --epochs E [--samples N]]
                    [--gpu "A100 80GB,T4"] [--gpu-count N] [--set depth=50] [--csv]
    gpuperf evaluate [--scenario grouped] [--column C] [--threshold T] [--network NAME]
    gpuperf demo

Every command takes ``--store PATH`` (default: ``$GPUPERF_STORE``, else the per-user store).
The commands share the code of the magics: :mod:`gpuperf_magics.predict` and
:class:`gpuperf_magics.Store`. Errors print one line to stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]

#: Columns ``gpuperf runs`` prints (all columns with --csv).
RUN_COLUMNS = ["run_id", "network", "batch_size", "iterations", "time_s", "it_median_s",
               "status", "gpu", "gpu_count", "source", "created_at"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuperf", description="Profiled training runs and training-time predictions."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--store", metavar="PATH", help="SQLite store (default: $GPUPERF_STORE, "
                       "else the per-user store)")
        return p

    runs = command("runs", "List the runs of the store.")
    runs.add_argument("--network", help="only this network")
    runs.add_argument("--csv", action="store_true", help="all columns, as CSV")

    imp = command("import", "Import measurements made elsewhere (CSV or Parquet).")
    imp.add_argument("file", help="a .csv or .parquet table, one row per configuration")
    imp.add_argument("--map", action="append", metavar="COLUMN=CANONICAL", default=[],
                     help="rename a column to a canonical name, e.g. step_time=time_s "
                     "(repeatable)")
    imp.add_argument("--network", help="network of every row (if the table has no column)")
    imp.add_argument("--gpu", help="GPU of every row (if the table has no column)")
    imp.add_argument("--again", action="store_true",
                     help="import a file whose rows are already in the store")

    pred = command("predict", "Predict training time for other configurations.")
    pred.add_argument("name", nargs="?", help="network (default: the latest run's)")
    pred.add_argument("--batch-size", metavar="B[,B...]", help="batch sizes, e.g. 32,64,128")
    pred.add_argument("--iterations", type=int, metavar="N", help="iterations of the job")
    pred.add_argument("--epochs", type=float, metavar="E", help="epochs of the job")
    pred.add_argument("--samples", type=int, metavar="N", help="samples per epoch")
    pred.add_argument("--gpu", metavar="NAME[,NAME...]", help="GPUs to predict for")
    pred.add_argument("--gpu-count", type=int, metavar="N", help="GPUs per job")
    pred.add_argument("--set", action="append", metavar="FEATURE=VALUE",
                      help="value of another feature, e.g. depth=50 (repeatable)")
    pred.add_argument("--csv", action="store_true", help="the full table as CSV")

    ev = command("evaluate", "Measure the predictor's error on the store's runs.")
    ev.add_argument("--scenario", default="grouped",
                    help="random, grouped (default), threshold or leave_one_out")
    ev.add_argument("--column", help="column for threshold / leave_one_out (e.g. batch_size)")
    ev.add_argument("--threshold", type=float, help="train on column <= threshold")
    ev.add_argument("--network", help="network to evaluate (default: the latest run's)")

    command("demo", "Profile a small CNN on the CPU at a few batch sizes and predict.")
    return parser


def _runs(args: argparse.Namespace) -> int:
    from gpuperf_magics.store import Store

    frame = Store(args.store).runs(**({"network": args.network} if args.network else {}))
    if args.csv:
        frame.to_csv(sys.stdout, index=False)
    elif frame.empty:
        print(f"no runs in {Store(args.store).path}")
    else:
        print(frame[RUN_COLUMNS].to_string(index=False))
    return 0


def _import(args: argparse.Namespace) -> int:
    from gpuperf_magics.store import Store

    mapping = {}
    for item in args.map:
        source, sep, target = item.partition("=")
        if not sep or not source or not target:
            raise ValueError(f"--map expects COLUMN=CANONICAL, e.g. step_time=time_s; got {item!r}")
        mapping[source] = target
    store = Store(args.store)
    source = f"import:{Path(args.file).name}"
    already = store.runs(source=source)
    if len(already) and not args.again:
        raise ValueError(
            f"{len(already)} row(s) of {Path(args.file).name} are already in {store.path} "
            f"(run ids {already['run_id'].min()}–{already['run_id'].max()}); pass --again to "
            "import them once more"
        )
    ids = store.import_table(args.file, mapping=mapping or None, network=args.network,
                             gpu=args.gpu)
    print(f"imported {len(ids)} row(s) into {store.path} (run ids {ids[0]}–{ids[-1]})"
          if ids else "nothing to import")
    return 0


def _predict(args: argparse.Namespace) -> int:
    from gpuperf_magics import predict

    result = predict.predict_time(
        args.store, args.name,
        batch_sizes=predict.parse_batch_sizes(args.batch_size),
        iterations=args.iterations, epochs=args.epochs, samples=args.samples,
        gpus=predict.parse_gpus(args.gpu), gpu_count=args.gpu_count,
        settings=predict.parse_settings(args.set),
    )
    if args.csv:
        result.frame.to_csv(sys.stdout, index=False)
    else:
        print(result)
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from gpuperf_magics.model import evaluate
    from gpuperf_magics.predict import fit_store, per_iteration_table, robust_times
    from gpuperf_magics.store import Store

    model, runs = fit_store(args.store, args.network)
    x, y = per_iteration_table(runs, model.store_features_, robust_times(Store(args.store), runs))
    table = evaluate(model, x, y, args.scenario, column=args.column, threshold=args.threshold)
    print(table.to_string(index=False))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from gpuperf_magics.demo import main as demo_main

    return demo_main(["--store", args.store] if args.store else [])


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``gpuperf`` command."""
    args = _parser().parse_args(argv)
    handlers = {"runs": _runs, "import": _import, "predict": _predict,
                "evaluate": _evaluate, "demo": _demo}
    from gpuperf_magics.store import StoreError

    try:
        return handlers[args.command](args)
    except (ValueError, KeyError, StoreError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"gpuperf {args.command}: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
