"""IPython skin: ``%%profile_training`` (and the settings ``%config GpuPerf.*``).

Magics parse, call the Python API and display; nothing here that a script cannot reach through
:func:`gpuperf_magics.profile_training` and :class:`gpuperf_magics.Store`.
"""

from __future__ import annotations

import keyword
import shlex
import warnings
from argparse import ArgumentTypeError
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from traitlets import Unicode

from gpuperf_magics._checks import positive_number
from gpuperf_magics.prediction import options as prediction_options

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import InteractiveShell

    from gpuperf_magics.prediction.options import PredictionOptions
    from gpuperf_magics.prediction.record import Prediction
    from gpuperf_magics.prediction.remaining import Remaining
    from gpuperf_magics.run import Run
    from gpuperf_magics.skins.widgets import WhatIfPanel
    from gpuperf_magics.store import Store

__all__ = ["GpuPerf", "load", "unload"]


@dataclass
class _ProfileOptions:
    name: str | None = None
    store: str | None = None
    warmup: int | None = None
    tags: dict[str, str] = field(default_factory=dict)
    epochs: float | None = None
    total_iterations: int | None = None
    sync: bool = False
    phases: bool = False
    stop_after: int | str | None = None
    quiet: bool = False
    verbose: bool = False
    output: bool = False
    variable: str | None = None


def _parse_tags(items: list[str] | None) -> dict[str, str]:
    tags: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--tag expects key=value, got {item!r} (e.g. --tag lr=0.1)")
        tags[key.strip()] = value.strip()
    return tags


def _parse(magic: Any, line: str) -> Any:
    """Parse a magic's options with shell-like quoting (``--tag note="two words"``).

    IPython's own splitter keeps quotes that start mid-word; backslashes stay literal so
    Windows paths survive.
    """
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split = True
    lexer.escape = ""
    lexer.commenters = ""
    try:
        argv = list(lexer)
    except ValueError as exc:
        raise UsageError(f"cannot read the options ({exc}): check the quotes") from None
    return magic.parser.parse_args(argv)


def _variable(name: str | None) -> str | None:
    """The ``-v VAR`` option: a name a result can be stored under in the user's namespace."""
    if name is not None and (not name.isidentifier() or keyword.iskeyword(name)):
        raise UsageError(f"-v expects a Python variable name, got {name!r}")
    return name


def _check_store(path: str | None) -> None:
    """A store that cannot take the run is a usage error, before the cell trains.

    A folder, a corrupt or foreign file, a store of a newer version, a server that cannot be
    reached or holds no store: one read says so (a missing file is fine: the first save
    creates it).
    """
    # The store is imported when a magic first runs, not when the extension loads. The check
    # is the one ``profile_training`` makes on entry in a script.
    from gpuperf_magics.capture import check_store
    from gpuperf_magics.store import StoreError

    try:
        check_store(path)
    except (ValueError, StoreError) as exc:
        raise UsageError(str(exc)) from None


def _positive(kind: type) -> Any:
    """An argparse type: a finite number > 0 (``nan`` and ``inf`` parse as floats), whole
    for ``int`` (argparse names the option in front of the message)."""

    def parse(text: str) -> Any:
        return positive_number(text, "the value", whole=kind is int, error=ArgumentTypeError)

    parse.__name__ = kind.__name__
    return parse


def _stop_after(text: str) -> int | str | None:
    """The argparse type of ``--stop-after``: a whole number > 0 or ``auto``."""
    from gpuperf_magics.capture.stopping import stop_after_value

    return stop_after_value(text, "the value", error=ArgumentTypeError)


@contextmanager
def _quiet_stop(shell: Any) -> Iterator[None]:
    """While the nested cell runs, IPython hands the stop of ``--stop-after`` to us instead
    of printing it as a traceback (the cell did what was asked); other exceptions, and any
    custom handler set before, are left as they were."""
    from gpuperf_magics.capture.stopping import StopTraining

    exceptions, handler = shell.custom_exceptions, shell.CustomTB

    def quiet(etype: Any, value: Any, tb: Any, tb_offset: Any = None) -> Any:
        if isinstance(value, StopTraining):
            return None
        return handler(etype, value, tb, tb_offset=tb_offset)

    shell.custom_exceptions = (*exceptions, StopTraining)
    shell.CustomTB = quiet
    try:
        yield
    finally:
        shell.custom_exceptions, shell.CustomTB = exceptions, handler


@magics_class
class GpuPerf(Magics):
    """Magics of gpuperf_magics; settings with ``%config GpuPerf.<name> = value``."""

    store = Unicode(
        None,
        allow_none=True,
        help="SQLite file, postgresql:// URL or libpq key=value string of the store used when "
        "--store is not given (default: $GPUPERF_STORE, else a per-user data directory).",
    ).tag(config=True)

    prices = Unicode(
        None,
        allow_none=True,
        help="CSV file of your own cloud instance prices, merged over the built-in ones in "
        "the what-if panel's offers table (columns: provider, region, instance, gpu, gpus, "
        "pricing, usd_per_hour, date, source).",
    ).tag(config=True)

    def __init__(self, shell: InteractiveShell) -> None:
        super().__init__(shell=shell)
        if self not in shell.configurables:
            shell.configurables.append(self)  # type: ignore[arg-type]  # any Configurable

    # ------------------------------------------------------------------ %%profile_training
    def _profile_options(self, line: str) -> _ProfileOptions:
        args = _parse(self.profile_training, line)
        if args.warmup is not None and args.warmup < 0:
            raise UsageError(f"--warmup must be >= 0, got {args.warmup}")
        if args.epochs is not None and args.total_iterations is not None:
            raise UsageError("give --epochs or --total-iterations, not both")
        var = _variable(args.variable)
        _check_store(args.store or self.store)
        return _ProfileOptions(
            name=args.name,
            store=args.store or self.store,
            warmup=args.warmup,
            tags=_parse_tags(args.tag),
            epochs=args.epochs,
            total_iterations=args.total_iterations,
            sync=args.sync,
            phases=args.phases,
            stop_after=args.stop_after,
            quiet=args.quiet,
            verbose=args.verbose,
            output=args.output,
            variable=var,
        )

    @magic_arguments()
    @argument("-n", "--name", help="Network/workload label. Default: the model's class and "
              "parameter count, e.g. ResNet-25.6M (runs of one name are learnt as one network).")
    @argument("--store", metavar="PATH_OR_URL", help="Store to write the run to: an SQLite "
              "file, a postgresql://user@host/db URL or a libpq 'host=... dbname=...' string. "
              "Default: %%config GpuPerf.store, else $GPUPERF_STORE, else the per-user store.")
    @argument("--warmup", type=int, metavar="K", help="Flag the first K iterations as warm-up "
              "(kept, but left out of the statistics). Default: the first iteration plus any "
              "leading iterations still much slower than the rest.")
    @argument("--tag", action="append", metavar="KEY=VALUE",
              help="Label kept with the run; repeatable (--tag lr=0.1 --tag data=cifar10).")
    @argument("--epochs", type=_positive(float), metavar="E",
              help="Epochs of the full job, kept with the run for predictions.")
    @argument("--total-iterations", type=_positive(int), metavar="N",
              help="Iterations of the full job, kept with the run for predictions.")
    @argument("--sync", action="store_true", help="Synchronise the GPU at every iteration: "
              "exact wall time per iteration, at the price of CPU/GPU overlap.")
    @argument("--phases", action="store_true", help="Split each iteration into data, "
              "forward, loss, backward and optimizer time (about 35 µs per iteration).")
    @argument("--stop-after", type=_stop_after, metavar="N|auto", help="End the loop after N "
              "iterations in all (warm-up included, still decided afterwards), or with auto "
              "once the median time per iteration is known within 1%% (a 95%% interval "
              "that allows for timings that come in runs or wander; 50 to 1000 "
              "iterations). The cell does not fail, but code after the loop in this cell does "
              "not run (the stop is raised from optimizer.step()); the model and optimizer keep "
              "the state those iterations left. --epochs/--total-iterations stay the whole "
              "job's, for predictions and --remaining.")
    @argument("-q", "--quiet", action="store_true", help="Print nothing.")
    @argument("--verbose", action="store_true", help="Print every figure of the run below "
              "its line: throughput, p90 and mean time, device, architecture, settings.")
    @argument("-o", "--output", action="store_true", help="Return the Run object.")
    @argument("-v", "--variable", metavar="VAR", help="Store the Run object in variable VAR.")
    @cell_magic
    def profile_training(self, line: str, cell: str) -> Run | None:
        """Profile the PyTorch training loop of this cell; the cell runs unchanged.

        Iterations are found by themselves (optimizer steps; else backward passes; else
        forward calls of the model), timed (with CUDA events on a GPU), and recorded with the
        batch size, the network's features and the hardware into the store. One line
        summarises the run (``--verbose``: every figure); a failed or interrupted cell keeps
        its partial run with its status. With ``--stop-after`` the loop ends early and the
        code after it in the cell does not run.
        """
        opts = self._profile_options(line)
        from gpuperf_magics.capture import (
            NestedProfileWarning,
            UnsavedRunWarning,
            profile_training,
        )
        from gpuperf_magics.capture.stopping import StopTraining

        shell = self.shell
        assert shell is not None
        live: Any = False
        if not opts.quiet and _live_wanted(shell):
            live = True
            if opts.epochs is not None or opts.total_iterations is not None:
                # The store's model, fitted now rather than on the timed path; the line asks
                # it once the loop has shown its batch and device.
                from gpuperf_magics.prediction.live import live_prior

                live = live_prior(opts.store, opts.name)
        session = profile_training(
            opts.name, opts.store, warmup=opts.warmup, tags=opts.tags, epochs=opts.epochs,
            total_iterations=opts.total_iterations, sync=opts.sync, phases=opts.phases,
            live=live, stop_after=opts.stop_after,
        )
        # The nested run_cell shows errors exactly as IPython does; we then hand its outcome
        # to the outer cell so that a failed training cell fails in the notebook too.
        outer = shell.displayhook.exec_result
        with warnings.catch_warnings():  # a nested cell: its line shows the run's note
            warnings.simplefilter("ignore", NestedProfileWarning)
            run = session.__enter__()
        error: BaseException | None = KeyboardInterrupt("interrupted outside the cell's code")
        late: BaseException | None = None
        try:
            with _quiet_stop(shell):
                inner = shell.run_cell(cell, store_history=False)
            error = inner.error_before_exec or inner.error_in_exec
            if isinstance(error, StopTraining) and error.owner is session:
                error = None  # --stop-after did what it was asked: the cell succeeded
        finally:
            shell.displayhook.exec_result = outer
            try:
                with warnings.catch_warnings():  # the cell's line shows the run's note
                    warnings.simplefilter("ignore", UnsavedRunWarning)
                    session.stop(error)
            except BaseException as exc:  # e.g. a second Ctrl-C while the run is described
                late = exc  # the run is saved or in unsaved_runs(); show it, then this
            if error is not None and outer is not None:
                outer.error_in_exec = error
        if not opts.quiet:
            print(run.details() if opts.verbose else run.summary_line())
        if opts.variable:
            shell.user_ns[opts.variable] = run
        if late is not None:
            raise late
        if error is not None and outer is None and not isinstance(error, SyntaxError):
            # Called from code (run_cell_magic), not from a cell: the caller must see it.
            raise error
        return run if opts.output else None


    # ------------------------------------------------------------------ %predict_time
    @magic_arguments()
    @prediction_options.magic_options
    @argument("--store", metavar="PATH_OR_URL", help="Store to learn from (default as "
              "%%profile_training); it must exist.")
    @argument("-w", "--widget", action="store_true", help="Show the what-if panel: "
              "controls for batch size, epochs, GPU and features, answered as you change "
              "them, a plot against batch size and the offers table (job time and cost per "
              "cloud instance, %%config GpuPerf.prices adds yours).")
    @argument("--deadline", metavar="H:MM", help="With -w: the time the job may take, in "
              "hours (2.5) or H:MM (2:30); the offers table marks the cheapest offer that "
              "meets it.")
    @argument("--csv", action="store_true", help="Print the full table as CSV instead "
              "(every column, the GPU memory of each row among them; as gpuperf predict "
              "--csv).")
    @argument("-q", "--quiet", action="store_true", help="Display nothing.")
    @argument("-o", "--output", action="store_true", help="Return the Prediction object.")
    @argument("-v", "--variable", metavar="VAR", help="Store the Prediction in variable VAR.")
    @line_magic
    def predict_time(self, line: str) -> Prediction | WhatIfPanel | Remaining | None:
        """Predict training time for other batch sizes, job lengths, GPUs or features.

        Fits a regression model on the store's completed runs (cached; refitted only when
        the store changed) and shows, per configuration, the predicted total time (h:mm:ss),
        the time per iteration, an interval, the kind of prediction (interpolation,
        extrapolation, transfer to a GPU never measured) and the model's measured error.
        ``--remaining`` answers how long a stopped run still needs, where it ran and on
        another GPU, with the cost of both. The options are those of ``gpuperf predict``.
        """
        from gpuperf_magics.prediction import predict, suggestions
        from gpuperf_magics.prediction.job import flag_spelling
        from gpuperf_magics.prediction.store_model import PredictionError
        from gpuperf_magics.store import Store, StoreError, StoreNotFoundError

        args = _parse(self.predict_time, line)
        var = _variable(args.variable)
        if args.remaining is not None and args.widget:
            raise UsageError("--remaining and -w do not go together")
        if args.suggest and args.widget:
            raise UsageError("--suggest and -w do not go together: the panel shows its own "
                             "'measure next' line (--suggest-per run ranks it per run); "
                             "--suggest lists under the table of %predict_time without -w")
        if args.csv and args.widget:
            raise UsageError("--csv and -w do not go together: --csv prints the table of "
                             "%predict_time without -w")
        if args.deadline is not None and not args.widget:
            raise UsageError("--deadline goes with -w (the panel's offers table)")
        try:
            opts = prediction_options.read(args)
            # Only read here: a mistyped path is named as such, not taken for an empty store.
            store = Store(args.store or self.store, must_exist=True)
        except StoreNotFoundError as exc:  # named in the words a magic takes a store in
            raise UsageError(str(exc.reworded(
                '--store PATH or %config GpuPerf.store = "PATH"'))) from None
        except (ValueError, StoreError) as exc:  # PredictionError is a ValueError
            raise UsageError(str(exc)) from None
        try:
            with flag_spelling():  # messages name this magic's flags
                if opts.remaining:
                    result: Prediction | WhatIfPanel | Remaining = self._remaining(opts, store)
                elif args.widget:
                    result = self._panel(opts, store)
                else:
                    result = predict.predict_time(store, opts.job)
                    if opts.suggest:  # what to profile next, under the answer
                        result = suggestions.with_suggestions(result, store,
                                                              per=opts.suggest_per)
        except (PredictionError, StoreError) as exc:
            raise UsageError(str(exc)) from None
        except ValueError as exc:  # a price file that cannot be read (PriceError)
            from gpuperf_magics.hardware.prices import PriceError

            if isinstance(exc, PriceError):
                raise UsageError(str(exc)) from None
            raise
        if args.csv and not args.quiet:
            from gpuperf_magics.store.files import write_csv

            write_csv(result.frame)  # type: ignore[union-attr]
        elif not args.quiet:
            from IPython.display import display

            display(result)
        if var:
            self.shell.user_ns[var] = result  # type: ignore[union-attr]
        return result if args.output else None

    def _remaining(self, opts: PredictionOptions, store: Store) -> Remaining:
        """``--remaining [RUN_ID]``: the rest of a partly recorded run."""
        from gpuperf_magics.prediction.remaining import remaining_time

        return remaining_time(store, opts.run_id, opts.job, prices=self.prices)

    def _panel(self, opts: PredictionOptions, store: Store) -> WhatIfPanel:
        """The what-if panel opened at the line's job (``-w``)."""
        from gpuperf_magics.prediction.store_model import PredictionError
        from gpuperf_magics.skins.widgets import what_if

        if opts.job.settings:
            raise UsageError("-w does not take --set: the panel has a control per feature")
        try:
            return what_if(store, opts.job, prices=self.prices, suggest_per=opts.suggest_per)
        except ValueError as exc:  # a starting value or a price file the panel cannot take
            if isinstance(exc, PredictionError):
                raise
            raise UsageError(str(exc)) from None


def _live_wanted(shell: Any) -> bool:
    """The live line needs a front end that updates an output in place: a Jupyter kernel.
    A terminal would print every update as a new line."""
    return getattr(shell, "kernel", None) is not None


def load(shell: InteractiveShell) -> None:
    """Register the magics on ``shell`` (idempotent)."""
    if "GpuPerf" not in shell.magics_manager.registry:
        shell.register_magics(GpuPerf(shell))


def unload(shell: InteractiveShell) -> None:
    """Remove every magic and configurable the extension registered."""
    instance = shell.magics_manager.registry.pop("GpuPerf", None)
    if instance is None:
        return
    for kind, names in instance.magics.items():
        table: dict[str, Any] = shell.magics_manager.magics[kind]
        for name in names:
            table.pop(name, None)
    if instance in shell.configurables:
        shell.configurables.remove(instance)
