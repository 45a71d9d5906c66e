"""A rule on predicted times: an iteration never gets slower with fewer samples.

A model fitted per batch size can answer a smaller batch with a longer iteration than a larger
one (noise in the few runs it learnt from). A job does not behave so: a smaller batch does less
work per step. :func:`monotone_in_batch` caps each smaller batch's *predicted* time per
iteration at the next larger one's, rows of the same device and features compared with each
other.

A *measured* configuration is answered by its own runs and never capped: a cap there would
show a batch measured at 152 ms per iteration as 21 ms because one run of a larger batch was
fast on a busy machine. Where two measurements contradict the rule (a larger batch measured
faster per iteration by more than :data:`CONTRADICTION`), both rows say so in their
``detail`` and a note names them: which run is wrong is for the user to find out (profile
again), not for a cap to hide. A measured row also bounds the cap of the predicted rows
below it: they are capped at the larger rows up to the nearest measured one, which stands
for its own batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: The columns scaled together when a row is capped.
TIME_COLUMNS = ("time_s", "time_low_s", "time_high_s", "per_iteration_s")
#: How a model's ``detail`` starts on a row answered by that configuration's own runs.
MEASURED = "measured configuration"
#: A smaller batch measured slower per iteration than a larger one by more than this ratio
#: is a contradiction worth saying (below it, the repeats' noise of an overhead-bound step).
CONTRADICTION = 1.1


def measured_rows(frame: pd.DataFrame) -> Any:
    """Which rows of a prediction table are answered by their configuration's own runs (none
    where the table has no ``detail``)."""
    import pandas as pd

    if "detail" not in frame:
        return pd.Series(False, index=frame.index)
    return frame["detail"].fillna("").astype(str).str.startswith(MEASURED)


def monotone_in_batch(frame: pd.DataFrame, keys: list[str]) -> list[str]:
    """Cap, in place, a smaller batch's predicted time per iteration at the time of the next
    larger batch of the same ``keys`` (device and features); flag measured rows that
    contradict the rule. Returns the notes that say which rows moved or contradict.

    ``frame`` has ``batch_size``, ``detail`` and the :data:`TIME_COLUMNS`; a capped row's
    total time and interval scale with its time per iteration. Measured rows (see
    :func:`measured_rows`) keep their own time.
    """
    import math

    notes: list[str] = []
    measured = measured_rows(frame)
    groups = frame.fillna({k: "" for k in keys if frame[k].dtype == object}).groupby(
        keys, dropna=False, sort=False).groups
    for rows in groups.values():
        order = frame.loc[rows].sort_values("batch_size", ascending=False).index
        floor = math.inf  # the fastest larger row since the nearest larger measured one
        fastest_measured: Any = None  # (index, per iteration) of the fastest larger measured
        for idx in order:
            old = float(frame.loc[idx, "per_iteration_s"])
            if bool(measured.loc[idx]):
                if fastest_measured is not None and old > fastest_measured[1] * CONTRADICTION:
                    _flag(frame, idx, fastest_measured[0], notes)
                if fastest_measured is None or old < fastest_measured[1]:
                    fastest_measured = (idx, old)
                floor = old
                continue
            if old > floor * (1 + 1e-9):
                for col in TIME_COLUMNS:
                    frame.loc[idx, col] *= floor / old
                notes.append(f"batch {int(frame.loc[idx, 'batch_size'])}: predicted time "
                             "capped at the next larger batch's time per iteration (an "
                             "iteration does not get slower with fewer samples)")
            floor = min(floor, float(frame.loc[idx, "per_iteration_s"]))
    return notes


def _flag(frame: pd.DataFrame, small: Any, large: Any, notes: list[str]) -> None:
    """Say on both measured rows, and in a note, that ``small`` was measured slower per
    iteration than the larger batch ``large`` (the larger row names every smaller batch that
    contradicts it once)."""
    from gpuperf_magics.units import format_seconds

    b_small, b_large = int(frame.loc[small, "batch_size"]), int(frame.loc[large, "batch_size"])
    t_small = format_seconds(float(frame.loc[small, "per_iteration_s"]))
    t_large = format_seconds(float(frame.loc[large, "per_iteration_s"]))
    frame.loc[small, "detail"] = (f"{frame.loc[small, 'detail']}; contradicts batch "
                                  f"{b_large}, faster per iteration at {t_large}")
    detail = str(frame.loc[large, "detail"])
    slower = "; contradicts slower smaller batch "
    if slower in detail:
        head, batches = detail.split(slower, 1)
        detail = f"{head}{slower}{batches}, {b_small}"
    else:
        detail = f"{detail}{slower}{b_small}"
    frame.loc[large, "detail"] = detail
    notes.append(f"batch {b_small}: measured at {t_small} per iteration, slower than batch "
                 f"{b_large} at {t_large}: a larger batch is not faster per iteration, so one "
                 "of them is off (a busy machine, a stall); each is answered by its own runs: "
                 "profile both again")
