"""What to profile next for a prediction: the default candidates, capped by the device's
memory, and the one line each suggestion reads as.

``%predict_time --suggest``, ``gpuperf predict --suggest`` and the what-if panel's "measure
next" line all ask :meth:`~gpuperf_magics.model.TrainingTimeModel.suggest` through
:func:`next_runs`, so that the three build the same candidates and say the same words
(:func:`suggestion_line`: "profile batch 256 next: ±31% → ±9%, about 12 s").

Candidates are the batch sizes a user would try: the powers of two between the smallest
measured batch size and the largest one measured or asked about, not yet measured, on the
device of the latest run, with its other features (:func:`candidate_batches`). Where the runs
recorded their peak GPU memory, a batch whose predicted peak (:mod:`~.memory`) would not fit
the device (its recorded total memory, else the catalog's, less :data:`~.memory.HEADROOM`) is
left out, and the output says which were (:func:`memory_cap`): a suggestion to profile a batch
that runs out of memory would cost a failed run and teach nothing.

The model is the one :func:`~.store_model.fit_store` cached: asking for suggestions never
refits it and never predicts the job again (the panel's one prediction per change).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gpuperf_magics.prediction.store_model import PredictionError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from gpuperf_magics.prediction.record import Prediction
    from gpuperf_magics.prediction.store_model import StoreFit

__all__ = [
    "SUGGESTIONS",
    "NextRuns",
    "candidate_batches",
    "device_memory_gb",
    "memory_cap",
    "next_runs",
    "suggestion_line",
    "with_suggestions",
]

#: Suggestions ``--suggest`` lists at most (the panel shows the first).
SUGGESTIONS = 3


@dataclass(frozen=True)
class NextRuns:
    """What to profile next for a prediction, as :func:`next_runs` found it.

    Attributes
    ----------
    lines : list of str
        One :func:`suggestion_line` per suggested candidate, best first (empty: none).
    memory : str or None
        Which batches were left out because they would not fit the device's memory.
    candidates : int
        Candidates asked about (after the memory cap).
    picks : DataFrame or None
        The rows :meth:`~gpuperf_magics.model.TrainingTimeModel.suggest` returned (None
        where it was not asked: no candidate).
    """

    lines: list[str] = field(default_factory=list)
    memory: str | None = None
    candidates: int = 0
    picks: pd.DataFrame | None = None

    @property
    def notes(self) -> list[str]:
        """What the output says besides the lines: the batches left out for memory, or
        that nothing is left to profile."""
        if self.memory:
            return [self.memory]
        if not self.candidates:
            return ["nothing left to profile between the measured and the asked batch sizes"]
        return []

    def first(self) -> str | None:
        """The what-if panel's "measure next" line: the top suggestion, then the batches
        left out for memory; None where there is neither."""
        line = self.lines[0] if self.lines else None
        if self.memory:
            return f"{line}; {self.memory}" if line else self.memory
        return line


def _about(seconds: float) -> str:
    """Profiling seconds as a person reads them: "0.4 s", "12 s", "3 min"."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def suggestion_line(batch_size: int, before: float, after: float, cost_s: float) -> str:
    """"profile batch 256 next: ±31% → ±9%, about 12 s": the batch, the targets' expected
    error now and once it is measured (fractions), and the predicted seconds of its
    ``--stop-after auto`` run. The one wording of magic, command and panel."""
    return (f"profile batch {int(batch_size)} next: ±{100 * before:.0f}% → "
            f"±{100 * after:.0f}%, about {_about(cost_s)}")


def candidate_batches(measured: set[int], asked: list[int]) -> list[int]:
    """Powers of two from the smallest measured batch size up to the largest measured or
    asked one, not yet measured (smallest first)."""
    top = max([*asked, *measured, 1])
    low = min(measured, default=1)
    return [2 ** e for e in range(max(0, math.ceil(math.log2(low))), 64)
            if 2 ** e <= top and 2 ** e not in measured]


def device_memory_gb(runs: pd.DataFrame, gpu: str | None) -> float | None:
    """GiB the measured device has: the latest run's recorded total memory, else the
    catalog's figure for ``gpu``; None for the CPU or a GPU nobody knows the size of."""
    import pandas as pd

    from gpuperf_magics.hardware.catalog import UnknownGPUError, lookup

    if gpu is None:
        return None
    if "gpu_memory_gb" in runs:
        recorded = pd.to_numeric(runs["gpu_memory_gb"], errors="coerce").dropna()
        if len(recorded) and math.isfinite(recorded.iloc[-1]) and recorded.iloc[-1] > 0:
            return float(recorded.iloc[-1])
    try:
        size = float(lookup(gpu)["gpu_memory_gb"])
    except (UnknownGPUError, KeyError, TypeError, ValueError):
        return None
    return size if math.isfinite(size) and size > 0 else None


def memory_cap(sizes: list[int], runs: pd.DataFrame, gpu: str | None,
               gpu_count: int = 1) -> tuple[list[int], str | None]:
    """``sizes`` without the batches whose predicted peak memory would not fit the device,
    and a note naming those left out (None when none was, or nothing is known to cap by:
    no recorded peak, the CPU, a GPU of unknown size)."""
    from gpuperf_magics.prediction.memory import HEADROOM, fits, peak_memory

    model = peak_memory(runs)
    capacity = device_memory_gb(runs, gpu)
    if model is None or capacity is None:
        return list(sizes), None
    count = max(1, int(gpu_count))
    dropped = [b for b in sizes if fits(model.needed_gb(b, count), capacity) is False]
    if not dropped:
        return list(sizes), None
    needs = " and ".join(f"{model.needed_gb(b, count):.1f}" for b in dropped[:2])
    more = f" … {model.needed_gb(dropped[-1], count):.1f}" if len(dropped) > 2 else ""
    note = (f"not suggested for memory: batch {', '.join(map(str, dropped))} (would need "
            f"{needs}{more} GiB of the {gpu}'s {capacity:.1f}, {100 * HEADROOM:.0f}% of it "
            "kept back)")
    return [b for b in sizes if b not in dropped], note


def _targets(frame: pd.DataFrame, measured_gpu: str | None) -> pd.DataFrame:
    """The rows the fitted model answers (the measured kind of device): a GPU answered
    from the FLOPs of CPU runs is not narrowed by more CPU runs.

    Raises
    ------
    PredictionError
        No row is answered by the model.
    """
    on_model = frame["gpu"].isna() if measured_gpu is None else frame["gpu"].notna()
    if not on_model.any():
        gpus = ", ".join(dict.fromkeys(str(g) for g in frame["gpu"].dropna()))
        raise PredictionError(f"the answer for {gpus} is estimated from the FLOPs of CPU "
                              "runs, which more CPU runs do not narrow: profile one run on "
                              "a GPU")
    return frame[on_model]


def next_runs(prediction: Prediction, fit: StoreFit, k: int = SUGGESTIONS) -> NextRuns:
    """The ``k`` batch sizes worth profiling next for the configurations of ``prediction``
    (see the module docstring), from the model ``fit`` holds (no refit, no new prediction
    of the job).

    Raises
    ------
    PredictionError
        No configuration of the prediction is answered by the fitted model.
    ValueError
        What :meth:`~gpuperf_magics.model.TrainingTimeModel.suggest` refuses.
    """
    import pandas as pd

    fitted, runs = fit.model, fit.runs
    latest = runs.iloc[-1]
    gpu = latest["gpu"] if isinstance(latest["gpu"], str) and latest["gpu"] else None
    asked = _targets(prediction.frame, gpu)
    on_device = runs[runs["gpu"] == gpu] if gpu is not None else runs[runs["gpu"].isna()]
    measured = {int(b) for b in on_device["batch_size"].dropna()}
    sizes = candidate_batches(measured, [int(b) for b in asked["batch_size"]])
    count = int(latest["gpu_count"]) if gpu is not None and pd.notna(latest["gpu_count"]) \
        else 1
    sizes, memory = memory_cap(sizes, on_device, gpu, count)
    if not sizes:
        return NextRuns(memory=memory)
    one = {c: latest.get(c) for c in fitted.features}
    candidates = pd.DataFrame([{**one, "batch_size": b} for b in sizes])
    targets = asked[[c for c in fitted.features if c in asked.columns]]
    extra: dict[str, Any] = {}
    if fitted.precision is not None:
        extra["precision"] = fitted.precision
    if fitted.steady_state:
        extra["iterations"] = 1
    picks = fitted.model.suggest(targets.assign(**extra), candidates.assign(**extra), k=k,
                                 device=gpu or "CPU")
    before = picks.attrs["expected_mape_before"]
    lines = [suggestion_line(row.batch_size, before, row.expected_mape_after, row.cost_s)
             for row in picks.itertuples()]
    return NextRuns(lines, memory, len(sizes), picks)


def with_suggestions(prediction: Prediction, store: Any,
                     k: int = SUGGESTIONS) -> Prediction:
    """The prediction with ``--suggest``'s ranked list added to its advice: one
    :func:`suggestion_line` per candidate (the targets' expected error now, then once that
    batch and the ones listed above it are measured), then what was left out and why.
    Targets: every configuration of the prediction the fitted model answers."""
    from gpuperf_magics.prediction.store_model import fit_store

    found = next_runs(prediction, fit_store(store, prediction.network), k)
    return replace(prediction, advice=[*prediction.advice, *found.lines, *found.notes])
