"""The options of a prediction, declared and checked once for ``%predict_time`` and
``gpuperf predict``, read into one :class:`~.job.Job`.

Both skins used to declare these options each in their own way (typed in the magic, read as
text in the CLI) and to check ``--remaining`` each on their own, so the two said different
things about the same mistake. Here each option is declared once (:data:`OPTIONS`, added to an
``argparse`` parser by :func:`add_to` or to a magic by :func:`magic_options`) and read once
(:func:`read`) into a :class:`~.job.Job`, with one message per mistake, in the words of
flags (:func:`~.job.flag_spelling`); the skins add only what is theirs (the magic's
``-w``/``--deadline``/``-q``/``-o``/``-v``, the CLI's ``--csv`` and ``--prices``).

Numbers are read as text and checked by :func:`number`, so that ``inf``, ``nan`` and ``0``
get the same one-line error as every other mistake. In the magic, ``--gpu`` and
``--batch-size`` take several words (``--gpu A100 80GB --gpu T4``, ``--batch-size 32, 64``), as
people type them in a notebook without quotes (put the network name before them); on the
command line they take one word each, since the shell's quotes group words
(``--gpu "A100 80GB"``), so that ``gpuperf predict --gpu T4 resnet`` keeps its network name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from gpuperf_magics._checks import positive_number
from gpuperf_magics.prediction.job import REMAINING_FIELDS, Job, flag_spelling
from gpuperf_magics.prediction.store_model import PredictionError

if TYPE_CHECKING:  # pragma: no cover
    import argparse

__all__ = [
    "OPTIONS",
    "SUGGEST_PER",
    "PredictionOptions",
    "add_to",
    "check_suggest_per",
    "magic_options",
    "number",
    "parse_batch_sizes",
    "parse_deadline",
    "parse_gpus",
    "parse_settings",
    "read",
]

F = TypeVar("F", bound=Callable[..., Any])

#: ``(flags, argparse keywords)`` of each option, in the order the help lists them.
OPTIONS: tuple[tuple[tuple[str, ...], dict[str, Any]], ...] = (
    (("name",), {"nargs": "?", "help": "Network to predict (default: the latest run's)."}),
    (("--batch-size",), {
        "metavar": "B[,B...]", "nargs": "+", "action": "append",
        "help": "Batch sizes, e.g. 32,64,128. Default: the measured ones and one power of "
                "two beyond each end."}),
    (("--iterations",), {"metavar": "N", "help": "Iterations of the job."}),
    (("--epochs",), {"metavar": "E",
                     "help": "Epochs of the job (iterations = E × samples ÷ batch size)."}),
    (("--samples",), {"metavar": "N", "help": "Samples per epoch (default: what the "
                      "profiled DataLoader visited)."}),
    (("--gpu",), {
        "metavar": "NAME[,NAME...]", "nargs": "+", "action": "append",
        "help": "GPUs to predict for besides the measured device, e.g. \"A100 80GB,H100\" "
                "(names of gpuperf_magics.gpus(); repeatable). In the magic, put NAME "
                "before it."}),
    (("--gpu-count",), {"metavar": "N", "help": "GPUs per job (data parallel)."}),
    (("--precision",), {
        "metavar": "P", "help": "Precision of the job's matrix products if not the measured "
        "one: fp32 (TF32 off), tf32, or amp (autocast; fp16 and bf16 run alike)."}),
    (("--set",), {"action": "append", "metavar": "FEATURE=VALUE",
                  "help": "Value of another feature, e.g. depth=50 (repeatable)."}),
    (("--remaining",), {
        "nargs": "?", "const": "latest", "metavar": "RUN_ID",
        "help": "Remaining time and cost of an interrupted or failed run with a known job "
                "length (default: the latest such run); with --gpu NAME, also moved to that "
                "GPU."}),
    (("--suggest",), {
        "action": "store_true",
        "help": "Also say what to profile next: the batch sizes and depths (powers of two "
                "between the measured and the asked ones, on the measured device, within its "
                "memory where the runs recorded their peak) whose run would narrow the answer "
                "most per second of profiling."}),
    (("--suggest-per",), {
        "metavar": "second|run",
        "help": "What --suggest counts the profiling budget in: second (default: the most "
                "narrowing per second of profiling, for a time budget) or run (the most "
                "narrowing per run, whatever it takes, for a budget of a few more cells). "
                "Implies --suggest; with -w, the panel's 'measure next' line ranks so."}),
)

#: Values of ``--suggest-per``: :data:`gpuperf_magics.model.suggest.PER`, repeated here so
#: that declaring the options (at ``%load_ext``) does not import the model (a test keeps the
#: two equal).
SUGGEST_PER = ("second", "run")


def check_suggest_per(value: str, name: str = "--suggest-per") -> str:
    """``value`` if it is one of :data:`SUGGEST_PER`; else a :class:`PredictionError` that
    names the option or argument ``name`` and says what each value means."""
    if value not in SUGGEST_PER:
        raise PredictionError(f"{name} is 'second' (a time budget) or 'run' (a budget of "
                              f"runs), got {value!r}")
    return value


@dataclass(frozen=True)
class PredictionOptions:
    """The options of one prediction, checked and typed: the job, and whether the question
    is the remaining time of a stopped run.

    ``remaining`` is set for ``--remaining``; ``run_id`` is then the run asked for, or None
    for the latest interrupted or failed run.
    """

    job: Job
    remaining: bool = False
    run_id: int | None = None
    suggest: bool = False
    suggest_per: str = "second"


def add_to(parser: argparse.ArgumentParser) -> None:
    """Declare the options on an ``argparse`` parser (the ``gpuperf predict`` command), one
    shell word per value."""
    for flags, keywords in OPTIONS:
        one_word = {k: v for k, v in keywords.items() if (k, v) != ("nargs", "+")}
        parser.add_argument(*flags, **one_word)


def magic_options(func: F) -> F:
    """Declare the options on a magic, as stacked ``@argument`` decorators would, in
    :data:`OPTIONS` order (put it below ``@magic_arguments()`` and the magic's own
    ``@argument`` lines that the help should list first)."""
    from IPython.core.magic_arguments import argument

    for flags, keywords in reversed(OPTIONS):
        func = argument(*flags, **keywords)(func)
    return func


def number(option: str, text: str | None, *, whole: bool = False,
           positive: bool = True) -> Any:
    """An option's value as a finite (positive, whole) number; None when not given.

    A positive value is checked by :func:`~gpuperf_magics._checks.positive_number`, the
    rule every layer applies; ``positive=False`` (``--threshold``) takes any finite number.

    Raises
    ------
    ValueError
        The text is not such a number; the message names the option.
    """
    if positive:
        return positive_number(text, option, whole=whole)
    if text is None:
        return None
    kind = "a whole number" if whole else "a number"
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{option} must be {kind}, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{option} must be a finite {kind[2:]}, got {text!r}")
    if whole:
        if value != int(value):
            raise ValueError(f"{option} must be a whole number, got {text!r}")
        return int(value)
    return value


def parse_batch_sizes(text: str | None) -> list[int] | None:
    """``"32,64,128"`` (or ``"32 64"``, ``"32, 64"``) → ``[32, 64, 128]`` (the
    ``--batch-size`` option of magic and CLI)."""
    if text is None:
        return None
    try:
        values = [int(v) for v in re.split(r"[,\s]+", text) if v]
    except ValueError:
        raise PredictionError(
            f"--batch-size expects integers separated by commas, e.g. 32,64,128; got {text!r}"
        ) from None
    if not values or min(values) <= 0:
        raise PredictionError(f"--batch-size expects positive integers, got {text!r}")
    return values


def parse_gpus(text: str | None) -> list[str] | None:
    """``"A100 80GB, H100"`` → ``["A100 80GB", "H100"]`` (the ``--gpu`` option)."""
    if text is None:
        return None
    names = [g.strip() for g in text.split(",") if g.strip()]
    if not names:
        raise PredictionError("--gpu expects GPU names separated by commas, e.g. 'A100 80GB,T4'")
    return names


def parse_settings(items: list[str] | None) -> dict[str, float]:
    """``["depth=50"]`` → ``{"depth": 50.0}`` (the repeatable ``--set`` option)."""
    out: dict[str, float] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        try:
            if not sep or not key.strip() or not math.isfinite(float(value)):
                raise ValueError
            out[key.strip()] = float(value)
        except ValueError:
            message = f"--set expects feature=finite number, e.g. depth=50; got {item!r}"
            raise PredictionError(message) from None
    return out


def parse_deadline(text: str | None) -> float | None:
    """A deadline as people type it, in seconds: hours (``"2.5"``) or ``H:MM``
    (``"2:30"``); None when not given.

    Raises
    ------
    PredictionError
        Text that is neither, or a deadline that is not > 0.
    """
    if text is None:
        return None
    hours, sep, minutes = text.strip().partition(":")
    try:
        if sep:
            if not (hours.isdigit() and minutes.isdigit() and len(minutes) == 2
                    and int(minutes) < 60):
                raise ValueError
            seconds = float(int(hours) * 3600 + int(minutes) * 60)
        else:
            seconds = float(hours) * 3600
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError
    except ValueError:
        raise PredictionError(f"--deadline takes hours (2.5) or H:MM (2:30) > 0, got "
                              f"{text!r}") from None
    return float(seconds)


def _joined(groups: list[list[str]] | list[str] | None) -> str | None:
    """A repeatable option's values as one comma-separated list: the magic's ``--gpu A100
    80GB --gpu T4`` (lists of words) and the command's ``--gpu "A100 80GB" --gpu T4`` read as
    the user meant them."""
    if not groups:
        return None
    return ",".join(g if isinstance(g, str) else " ".join(g) for g in groups)


def read(args: argparse.Namespace) -> PredictionOptions:
    """The options parsed by a parser that :func:`add_to` or :func:`magic_options` built,
    as one :class:`~.job.Job` (a skin's own ``deadline`` option is read into it too).

    Raises
    ------
    PredictionError
        A value that is not what its option takes, or an option ``--remaining`` does not
        go with; one line that names the option.
    """
    with flag_spelling():
        try:
            iterations = number("--iterations", args.iterations, whole=True)
            epochs = number("--epochs", args.epochs)
            samples = number("--samples", args.samples, whole=True)
            gpu_count = number("--gpu-count", args.gpu_count, whole=True)
        except ValueError as exc:
            raise PredictionError(str(exc)) from None
        job = Job(network=args.name, batch_sizes=parse_batch_sizes(_joined(args.batch_size)),
                  iterations=iterations, epochs=epochs, samples=samples,
                  gpus=parse_gpus(_joined(args.gpu)), gpu_count=gpu_count,
                  settings=parse_settings(args.set),
                  deadline_s=parse_deadline(getattr(args, "deadline", None)),
                  precision=args.precision)
        per = getattr(args, "suggest_per", None)
        if per is not None:
            check_suggest_per(per)
        suggest = bool(getattr(args, "suggest", False)) or per is not None
        if args.remaining is None:
            return PredictionOptions(job, suggest=suggest, suggest_per=per or "second")
        if suggest:
            flag = "--suggest" if getattr(args, "suggest", False) else "--suggest-per"
            raise PredictionError(f"{flag} ranks what to profile next for a prediction, not "
                                  "for --remaining: drop one of the two")
        job.refuse_but(REMAINING_FIELDS, "--remaining", why="the run says its network, "
                       "batch size, precision and job length (give --gpu NAME to move it)")
        run_id = None
        if args.remaining != "latest":
            try:
                run_id = number("--remaining", args.remaining, whole=True)
            except ValueError:
                raise PredictionError(f"--remaining expects a run id (a positive whole "
                                      f"number, as gpuperf runs lists them), got "
                                      f"{args.remaining!r}") from None
        if job.gpus is not None and len(job.gpus) > 1:
            raise PredictionError("--remaining moves the job to one GPU: give one --gpu")
        return PredictionOptions(job, remaining=True, run_id=run_id)
