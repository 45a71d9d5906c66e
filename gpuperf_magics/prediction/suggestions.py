"""What to profile next for a prediction: the default candidates, capped by the device's
memory, and the one line each suggestion reads as.

``%predict_time --suggest``, ``gpuperf predict --suggest`` and the what-if panel's "measure
next" line all ask :meth:`~gpuperf_magics.model.TrainingTimeModel.suggest` through
:func:`next_runs`, so that the three build the same candidates and say the same words
(:func:`suggestion_line`: "profile batch 256 next: ±31% → ±9%, about 12 s").

A job asked in another precision than the runs (``--precision amp``) is asked about in that
precision, and the runs to profile are in the measured one, which the line says: "profile
batch 256 (in FP32) next: ...".

Candidates are the batch sizes and depths a user would try, on the device of the latest run,
with its other features: the powers of two from the smallest measured batch size up to the
largest one measured or asked about, not yet measured (:func:`candidate_batches`); where the
runs vary in a depth (a ``depth`` feature, or ``arch_depth`` when it is the only architecture
figure learnt), the powers of two between the measured and the asked depths too, at the latest
run's batch size. Where the runs recorded their peak GPU memory, a candidate whose predicted
peak (:func:`~.memory.memory_columns`, the rule every prediction row's ``memory_gb`` follows:
fitted to the runs at the latest run's depth; a depth scales it in proportion, as weights and
activations grow) would not fit the device (its recorded total memory, else the catalog's,
less :data:`~.memory.HEADROOM`) is left out, and the output says which were
(:func:`memory_cap`): a suggestion to profile a batch that runs out of memory would cost a
failed run and teach nothing.

The model is the one :func:`~.store_model.fit_store` cached: asking for suggestions never
refits it and never predicts the job again (the panel's one prediction per change).

A line's first figure is the ``±`` the answer shows (its rows' ``expected_mape``; the mean of
the rows asked where there are several, and the line says so): the suggester's own figure for
the targets now (its routes over the measured points) can differ from it, and a line that
read "±30% → ±3%" under an answer of ±22% left the user two errors for one question. The
figure after a run is the suggester's narrowing carried onto that ``±``: its ratio
after / before (the gain it ranks by, :mod:`gpuperf_magics.model.suggest`) times the shown
``±``, so that a run that narrows the answer always reads lower than the answer.
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
    "shown_error",
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
        The rows :meth:`~gpuperf_magics.model.TrainingTimeModel.suggest` returned, up to
        the first that would not narrow the answer (None where it was not asked: no
        candidate); their ``expected_mape_after`` is the suggester's own figure.
    before : float
        The lines' first figure: the answer's shown expected error (the mean over ``rows``);
        NaN where there was no target.
    rows : int
        Rows of the answer that ``before`` is the mean of.
    """

    lines: list[str] = field(default_factory=list)
    memory: str | None = None
    candidates: int = 0
    picks: pd.DataFrame | None = None
    before: float = math.nan
    rows: int = 0

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


def suggestion_line(what: str, before: float, after: float, cost_s: float,
                    rows: int = 1) -> str:
    """"profile batch 256 next: ±31% → ±9%, about 12 s": the candidate (``"batch 256"``,
    ``"depth 64"``), the targets' expected error now (the ``±`` the answer shows; with
    ``rows`` > 1 the mean of that many rows, labelled "(the mean of the 3 rows asked)") and
    once it is measured (fractions), and the predicted seconds of its ``--stop-after auto``
    run. The one wording of magic, command and panel."""
    mean = f" (the mean of the {rows} rows asked)" if rows > 1 else ""
    return (f"profile {what} next: ±{_percent(before)}{mean} → ±{_percent(after)}, about "
            f"{_about(cost_s)}")


def _percent(error: float) -> str:
    """An expected error (fraction) as the lines print it: whole percents, one decimal below
    1% (measuring the asked batch itself leaves a few tenths of a percent, which "±0%"
    would read as exact)."""
    return f"{100 * error:.1f}%" if 100 * error < 0.95 else f"{100 * error:.0f}%"


def shown_error(asked: pd.DataFrame) -> float:
    """The expected error the answer shows for the rows ``asked`` (their ``±``, the mean
    where there are several), as the table rounds each row: NaN where none has one."""
    import numpy as np

    shown = asked["expected_mape"].to_numpy(dtype=float, na_value=np.nan)
    shown = shown[np.isfinite(shown)]
    return float(np.mean(shown)) if len(shown) else math.nan


def candidate_batches(measured: set[int], asked: list[int]) -> list[int]:
    """Powers of two from the smallest measured batch size (or depth) up to the largest
    measured or asked one, not yet measured (smallest first)."""
    top = max([*asked, *measured, 1])
    low = min(measured, default=1)
    return [2 ** e for e in range(max(0, math.ceil(math.log2(low))), 64)
            if 2 ** e <= top and 2 ** e not in measured]


def device_memory_gb(runs: pd.DataFrame, gpu: str | None) -> float | None:
    """GiB the measured device has: the latest run's recorded total memory, else the
    catalog's figure for ``gpu``; None for the CPU or a GPU nobody knows the size of (the
    figure every prediction row carries, :func:`~.memory.gpu_memory_gb`)."""
    from gpuperf_magics.prediction.memory import gpu_memory_gb

    return gpu_memory_gb(gpu, runs)


def memory_cap(needs: dict[str, float], capacity: float | None,
               gpu: str | None) -> tuple[list[str], str | None]:
    """The candidates (``"batch 256"``, ``"depth 64"``) whose predicted peak (GiB, NaN:
    unknown) would not fit ``capacity`` GiB after :data:`~.memory.HEADROOM`, and a note
    naming them (None when none would not)."""
    from gpuperf_magics.prediction.memory import HEADROOM, fits

    dropped = [c for c, need in needs.items() if fits(need, capacity) is False]
    if not dropped:
        return [], None
    kinds: dict[str, list[str]] = {}  # "batch 256", "batch 512" read "batch 256, 512"
    for label in dropped:
        kind, _, value = label.partition(" ")
        kinds.setdefault(kind, []).append(value)
    shown = "; ".join(f"{kind} {', '.join(v[:4])}" + (f" and {len(v) - 4} more" if len(v) > 4
                                                      else "") for kind, v in kinds.items())
    least = min(needs[c] for c in dropped)
    return dropped, (f"not suggested for memory: {shown} (from about {least:.1f} GiB; the "
                     f"{gpu} has {capacity:.1f}, {100 * HEADROOM:.0f}% of it kept back)")


def _depth_column(features: list[str], runs: pd.DataFrame) -> str | None:
    """The depth the runs vary in (whole numbers), as a feature: ``depth`` (an imported
    column) or ``arch_depth`` where it is the only architecture figure learnt (a network
    built deeper has more parameters and FLOPs too, which a candidate cannot know)."""
    import pandas as pd

    from gpuperf_magics.prediction.store_model import ARCH_FEATURES

    others = [c for c in ARCH_FEATURES if c != "arch_depth" and c in features]
    for col in ("depth", *(() if others else ("arch_depth",))):
        values = pd.to_numeric(runs[col], errors="coerce").dropna() if col in features \
            else pd.Series(dtype=float)
        if values.nunique() > 1 and bool(((values == values.round()) & (values > 0)).all()):
            return col
    return None


def _candidates(fit: StoreFit, asked: pd.DataFrame, on_device: pd.DataFrame,
                gpu: str | None) -> tuple[pd.DataFrame, list[str], str | None]:
    """The default candidates (see the module docstring), their labels, and the note on
    those left out for memory."""
    import pandas as pd

    from gpuperf_magics.prediction.memory import memory_columns

    latest = fit.runs.iloc[-1]
    one = {c: latest.get(c) for c in fit.model.features}
    depth = _depth_column(fit.model.features, on_device)
    here = on_device if depth is None else on_device[on_device[depth] == latest[depth]]
    batches = candidate_batches({int(b) for b in here["batch_size"].dropna()},
                                [int(b) for b in asked["batch_size"]])
    rows = {f"batch {b}": {**one, "batch_size": b} for b in batches}
    if depth is not None:
        depths = candidate_batches({int(d) for d in on_device[depth]},
                                   [int(d) for d in asked[depth].dropna()])
        rows.update({f"depth {d}": {**one, depth: float(d)} for d in depths})
    if not rows:
        return pd.DataFrame(), [], None
    # The GPU memory each candidate needs, by the rule every prediction row shows
    # (memory_columns: fitted at the latest run's depth, another depth in proportion).
    sized = memory_columns(pd.DataFrame(list(rows.values())), on_device)
    needs = dict(zip(rows, sized["memory_gb"].to_numpy(dtype=float), strict=True))
    dropped, note = memory_cap(needs, device_memory_gb(on_device, gpu), gpu)
    kept = [label for label in rows if label not in dropped]
    return pd.DataFrame([rows[label] for label in kept]), kept, note


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


def next_runs(prediction: Prediction, fit: StoreFit, k: int = SUGGESTIONS,
              per: str = "second") -> NextRuns:
    """The ``k`` candidates worth profiling next for the configurations of ``prediction``
    (see the module docstring), from the model ``fit`` holds (no refit, no new prediction
    of the job), ranked by the narrowing per second of profiling or, with ``per="run"``,
    per run (``--suggest-per``, :data:`gpuperf_magics.model.suggest.PER`).

    Raises
    ------
    PredictionError
        No configuration of the prediction is answered by the fitted model.
    ValueError
        What :meth:`~gpuperf_magics.model.TrainingTimeModel.suggest` refuses.
    """

    fitted, runs = fit.model, fit.runs
    latest = runs.iloc[-1]
    gpu = latest["gpu"] if isinstance(latest["gpu"], str) and latest["gpu"] else None
    asked = _targets(prediction.frame, gpu)
    on_device = runs[runs["gpu"] == gpu] if gpu is not None else runs[runs["gpu"].isna()]
    candidates, labels, memory = _candidates(fit, asked, on_device, gpu)
    if candidates.empty:
        return NextRuns(memory=memory)
    targets = asked[[c for c in fitted.features if c in asked.columns]]
    extra: dict[str, Any] = {}
    if fitted.precision is not None:
        extra["precision"] = fitted.precision
    if fitted.steady_state:
        extra["iterations"] = 1
    # The targets in the precision asked (an AMP job measured in FP32 is a move between
    # devices, narrowed by FP32 runs); the candidates run as the runs did.
    asked_in = prediction.frame.attrs.get("precision") or fitted.precision
    picks = fitted.model.suggest(
        targets.assign(**{**extra, **({"precision": asked_in} if asked_in else {})}),
        candidates.assign(**extra), k=k, device=gpu or "CPU", per=per)
    # The line opens with the answer's own ±, and carries the suggester's narrowing onto it
    # (the module docstring says why).
    own = picks.attrs["expected_mape_before"]
    before = shown_error(asked)
    if not math.isfinite(before):
        before = own
    ratio = before / own if own > 0 and math.isfinite(own) else 1.0
    # The greedy list goes on past the last pick that narrows the answer: a run that would
    # widen or keep it is no suggestion (nor are the picks that assumed it measured).
    gains = picks["gain_per_s"].to_numpy(dtype=float)
    picks = picks.iloc[:next((i for i, g in enumerate(gains) if not g > 0), len(gains))]
    if asked_in and asked_in != fitted.precision:  # say which precision to profile in
        runs_in = fitted.precision.upper() if fitted.precision else "your runs' precision"
        labels = [f"{label} (in {runs_in})" for label in labels]
    lines = [suggestion_line(labels[candidates.index.get_loc(i)], before,
                             row.expected_mape_after * ratio, row.cost_s, len(asked))
             for i, row in zip(picks.index, picks.itertuples(), strict=True)]
    return NextRuns(lines, memory, len(candidates), picks, before, len(asked))


def with_suggestions(prediction: Prediction, store: Any,
                     k: int = SUGGESTIONS, per: str = "second") -> Prediction:
    """The prediction with ``--suggest``'s ranked list added to its advice: one
    :func:`suggestion_line` per candidate (the targets' expected error now, then once that
    candidate and the ones listed above it are measured), then what was left out and why.
    Targets: every configuration of the prediction the fitted model answers; ``per``: what
    the budget is counted in, as :func:`next_runs` takes it."""
    from gpuperf_magics.prediction.store_model import fit_store

    found = next_runs(prediction, fit_store(store, prediction.network), k, per)
    return replace(prediction, advice=[*prediction.advice, *found.lines, *found.notes])
