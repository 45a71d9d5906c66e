"""The job a what-if question is about: one value, checked once, taken by every answer.

A :class:`Job` says which network, at which batch sizes, for how long (iterations, or epochs ×
samples per epoch), on which GPUs and how many, with which other feature values, at which
interval coverage and by which deadline. :func:`~gpuperf_magics.prediction.predict.predict_time`,
:func:`~gpuperf_magics.prediction.offers.offers`,
:func:`~gpuperf_magics.prediction.remaining.remaining_time` and the what-if panel all take one,
so the job is described (and its defaults chosen) in one place; the options parser of the
magic and the command line (:mod:`~gpuperf_magics.prediction.options`) builds one from flags.

Messages name what the caller typed: a Python caller reads parameter names
(``gpu_count=N``), the magic and the command line read flags (``--gpu-count N``), because the
skins ask inside :func:`flag_spelling`. :func:`spell` gives the words of either.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from gpuperf_magics._checks import positive_number
from gpuperf_magics.prediction.store_model import PredictionError

__all__ = ["REMAINING_FIELDS", "Job", "flag_spelling", "spell", "spelt_as_flags"]

#: How a job's field (or an option that messages mention) is spelt: ``(Python, flag)``,
#: each as a name and as a name with a placeholder value.
SPELLING: dict[str, tuple[tuple[str, str], tuple[str, str]]] = {
    "network": (("network", "network=NAME"), ("the network name", "NAME")),
    "batch_sizes": (("batch_sizes", "batch_sizes=[B, ...]"),
                    ("--batch-size", "--batch-size B[,B...]")),
    "iterations": (("iterations", "iterations=N"), ("--iterations", "--iterations N")),
    "epochs": (("epochs", "epochs=E"), ("--epochs", "--epochs E")),
    "samples": (("samples", "samples=N"), ("--samples", "--samples N")),
    "gpus": (("gpus", "gpus=[NAME]"), ("--gpu", "--gpu NAME")),
    "gpu_count": (("gpu_count", "gpu_count=N"), ("--gpu-count", "--gpu-count N")),
    "settings": (("settings", "settings={FEATURE: VALUE}"),
                 ("--set", "--set FEATURE=VALUE")),
    "coverage": (("coverage", "coverage=C"), ("the coverage", "the coverage")),
    "precision": (("precision", "precision='amp'"), ("--precision", "--precision amp")),
    "deadline_s": (("deadline_s", "deadline_s=SECONDS"), ("--deadline", "--deadline H:MM")),
    "total_iterations": (("total_iterations", "total_iterations=N"),
                         ("--total-iterations", "--total-iterations N")),
    "remaining": (("remaining_time()", "remaining_time()"), ("--remaining", "--remaining")),
    "prices": (("prices", "prices=FILE"),
               ("--prices", "--prices FILE (in a notebook: %config GpuPerf.prices)")),
}

#: Most iterations, epochs, samples per epoch or samples in all a job may count: far beyond
#: any training (10^15 steps of 1 µs are 30 years), far below a float's overflow.
LONGEST = 1e15

#: The fields of a job that a remaining-time question takes: the run says the rest.
REMAINING_FIELDS = ("gpus", "gpu_count", "coverage")

_FLAGS: contextvars.ContextVar[bool] = contextvars.ContextVar("gpuperf_flags", default=False)


@contextlib.contextmanager
def flag_spelling() -> Iterator[None]:
    """Within the block, messages of the prediction layer name flags (the magic, the CLI)."""
    token = _FLAGS.set(True)
    try:
        yield
    finally:
        _FLAGS.reset(token)


def spell(name: str, *, value: bool = True) -> str:
    """How the caller writes option ``name``: ``gpu_count=N`` from Python, ``--gpu-count N``
    from a skin (:func:`flag_spelling`); ``value=False`` drops the placeholder."""
    python, flag = SPELLING[name]
    return (flag if _FLAGS.get() else python)[1 if value else 0]


def spelt_as_flags() -> bool:
    """Whether messages now name flags (inside :func:`flag_spelling`)."""
    return _FLAGS.get()


def _whole_list(name: str, values: Any) -> tuple[int, ...] | None:
    if values is None:
        return None
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | set | frozenset):
        values = [values]
    for v in values:
        if isinstance(v, str):
            raise PredictionError(f"{spell(name, value=False)} must be a number, got {v!r}")
    out = tuple(positive_number(v, spell(name, value=False), whole=True, error=PredictionError)
                for v in values)
    if not out:
        raise PredictionError(f"{spell(name, value=False)} is empty: give at least one, "
                              f"e.g. {spell(name)}")
    return out


def _names(values: Any) -> tuple[str, ...] | None:
    if values is None:
        return None
    if isinstance(values, str):
        values = [values]
    for v in values:
        if not isinstance(v, str):
            raise PredictionError(f"{spell('gpus', value=False)} takes GPU names (text), "
                                  f"e.g. {spell('gpus')}; got {v!r}")
    out = tuple(v.strip() for v in values if v.strip())
    if not out:
        raise PredictionError(f"{spell('gpus', value=False)} is empty: give GPU names, e.g. "
                              f"{spell('gpus')}")
    return out


def _settings(values: Mapping[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in (values or {}).items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not str(key).strip() or not math.isfinite(number):
            raise PredictionError(f"{spell('settings', value=False)} takes feature names and "
                                  f"finite numbers, e.g. {spell('settings')}; got "
                                  f"{key!r}: {value!r}")
        out[str(key).strip()] = number
    return out


#: What ``precision`` takes, as the caller may spell it, and the class each one runs as.
PRECISIONS = {"fp32": "fp32", "float32": "fp32", "tf32": "tf32", "amp": "fp16",
              "mixed": "fp16", "fp16": "fp16", "float16": "fp16", "half": "fp16",
              "bf16": "fp16", "bfloat16": "fp16"}


def _precision(value: Any) -> str | None:
    if value is None:
        return None
    cls = PRECISIONS.get(value.strip().lower()) if isinstance(value, str) else None
    if cls is None:
        raise PredictionError(f"{spell('precision', value=False)} takes fp32, tf32 or amp "
                              f"(fp16, bf16), e.g. {spell('precision')}; got {value!r}")
    return cls


@dataclass(frozen=True)
class Job:
    """A training job to answer for: what the what-if questions share.

    Every field may be left out; the answer then takes it from the store's runs (the latest
    run's network, the measured batch sizes, the recorded job length, the measured device).
    Values are checked when the job is made, with one message per mistake.

    Parameters
    ----------
    network : str, optional
        Network to answer for (default: the latest completed run's).
    batch_sizes : sequence of int, optional
        Batch sizes, kept as a tuple (one int is one batch size). A prediction takes
        several; offers, the remaining time and the panel take one.
    iterations : int, optional
        Iterations (optimizer steps) of the job. Not together with ``epochs``/``samples``.
    epochs : float, optional
        Epochs of the job: iterations = epochs × ⌈samples ÷ batch size⌉.
    samples : int, optional
        Samples per epoch (default: what the profiled DataLoader visited).
    gpus : sequence of str, optional
        GPUs to answer for besides the measured device, by any catalog name
        (:func:`gpuperf_magics.gpus`), kept as a tuple; one string is one name.
    gpu_count : int, optional
        GPUs per job, data parallel (default: as measured).
    settings : mapping, optional
        Values of the model's other features, e.g. ``{"depth": 50}``.
    coverage : float, optional
        Coverage of the intervals, in (0, 1); default: the model's
        (:data:`gpuperf_magics.model.DEFAULT_COVERAGE`), so that every answer agrees.
    deadline_s : float, optional
        Seconds the job may take (offers and the panel mark the cheapest offer meeting it).
        The skins take hours or H:MM (:func:`~gpuperf_magics.prediction.options.parse_deadline`).
    precision : str, optional
        The precision of the job's matrix products, if not the one the runs measured:
        ``"fp32"`` (TF32 off), ``"tf32"``, or ``"amp"`` (autocast to float16 or bfloat16; also
        spelt ``"fp16"``, ``"bf16"``). Kept as its class: ``"fp32"``, ``"tf32"`` or ``"fp16"``
        (bfloat16 runs at the FP16 tensor rate).

    Raises
    ------
    PredictionError
        A value that is not what its field takes, or a job length given twice.

    Examples
    --------
    >>> import gpuperf_magics as gm
    >>> job = gm.Job(batch_sizes=[64, 256], epochs=90, gpus=["A100 80GB"])
    >>> job.with_(gpu_count=4).gpu_count
    4
    """

    network: str | None = None
    batch_sizes: Sequence[int] | None = None
    iterations: int | None = None
    epochs: float | None = None
    samples: int | None = None
    gpus: Sequence[str] | None = None
    gpu_count: int | None = None
    settings: dict[str, float] = field(default_factory=dict, hash=False)
    coverage: float | None = None
    deadline_s: float | None = None
    precision: str | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        if self.network is not None and not isinstance(self.network, str):
            raise PredictionError(f"{spell('network', value=False)} must be a name, got "
                                  f"{self.network!r}")
        for name in ("iterations", "samples", "gpu_count", "epochs", "deadline_s", "coverage"):
            if isinstance(getattr(self, name), str):  # a parser's job, not a Python call's
                raise PredictionError(f"{spell(name, value=False)} must be a number, got "
                                      f"{getattr(self, name)!r}")
        put("batch_sizes", _whole_list("batch_sizes", self.batch_sizes))
        for name in ("iterations", "samples", "gpu_count"):
            put(name, positive_number(getattr(self, name), spell(name, value=False),
                                      whole=True, error=PredictionError))
        for name in ("epochs", "deadline_s"):
            put(name, positive_number(getattr(self, name), spell(name, value=False),
                                      error=PredictionError))
        put("gpus", _names(self.gpus))
        put("settings", _settings(self.settings))
        put("precision", _precision(self.precision))
        if self.coverage is not None:
            c = positive_number(self.coverage, spell("coverage", value=False),
                                error=PredictionError)
            if not c < 1:
                raise PredictionError(f"{spell('coverage', value=False)} is the share of "
                                      f"times an interval should hold, in (0, 1); got "
                                      f"{self.coverage!r}")
            put("coverage", c)
        if self.iterations is not None and (self.epochs is not None
                                            or self.samples is not None):
            raise PredictionError(f"give either {spell('iterations')} or {spell('epochs')} "
                                  f"(with {spell('samples')}), not both")
        self._check_length()

    def _check_length(self) -> None:
        """A job longer than any training (:data:`LONGEST`) is a typing slip, said by the
        option that holds it: counted on, ``1e300`` epochs of ``1e300`` samples would
        overflow into a traceback far from the option (``OverflowError``)."""
        for name in ("iterations", "epochs", "samples"):
            value = getattr(self, name)
            if value is not None and value > LONGEST:
                raise PredictionError(f"{spell(name, value=False)} {value:g} is more than "
                                      f"any training job counts (at most {LONGEST:.0e}): give "
                                      f"the job's real length")
        if (self.epochs is not None and self.samples is not None
                and self.epochs * self.samples > LONGEST):
            raise PredictionError(
                f"{spell('epochs', value=False)} {self.epochs:g} × "
                f"{spell('samples', value=False)} {self.samples:g} is "
                f"{self.epochs * self.samples:.3g} samples, more than any training job "
                f"(at most {LONGEST:.0e}): give the job's real length")

    @classmethod
    def of(cls, job: Job | str | None = None, **changes: Any) -> Job:
        """``job`` (a Job, a network name or None) with ``changes`` to its fields: how the
        answers read their arguments, so that ``predict_time(store, "resnet", epochs=3)``
        and ``predict_time(store, Job(network="resnet", epochs=3))`` are one question.

        Raises
        ------
        TypeError
            A change that is no field of a job (the message lists the fields).
        """
        unknown = sorted(set(changes) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"{unknown[0]!r} is not a field of a Job; its fields: "
                            + ", ".join(f.name for f in fields(cls)))
        if job is None or isinstance(job, str):
            return cls(**{"network": job, **changes})
        if not isinstance(job, Job):
            raise TypeError(f"job must be a Job or a network name, got {job!r}")
        return job.with_(**changes) if changes else job

    def with_(self, **changes: Any) -> Job:
        """A copy with some fields changed (checked again)."""
        return replace(self, **changes)

    @property
    def interval_coverage(self) -> float:
        """The coverage the answers use: this job's, else the model's default."""
        if self.coverage is not None:
            return self.coverage
        from gpuperf_magics.model import DEFAULT_COVERAGE

        return float(DEFAULT_COVERAGE)

    def refuse_but(self, allowed: Sequence[str], what: str, *, why: str) -> None:
        """Refuse a field set here that the question ``what`` does not take (``--remaining``
        takes the GPU to move to, the run says the rest).

        Raises
        ------
        PredictionError
            The first such field, named as the caller writes it, and ``why``.
        """
        for f in fields(self):
            if f.name not in allowed and getattr(self, f.name) not in (None, {}):
                raise PredictionError(f"{what} does not take {spell(f.name, value=False)}: "
                                      + why)

    def one_batch_size(self, what: str) -> int | None:
        """The job's one batch size (None when not given), for an answer about one job.

        Raises
        ------
        PredictionError
            Several batch sizes; ``what`` names the answer that takes one.
        """
        if self.batch_sizes is None:
            return None
        if len(self.batch_sizes) > 1:
            raise PredictionError(f"{what} answers for one batch size; got "
                                  f"{len(self.batch_sizes)}: pick one")
        return self.batch_sizes[0]
