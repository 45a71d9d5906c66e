"""A rule on predicted times: an iteration never gets slower with fewer samples.

A model fitted per batch size can answer a smaller batch with a longer iteration than a larger
one (noise in the few runs it learnt from). A job does not behave so: a smaller batch does less
work per step. :func:`monotone_in_batch` caps each smaller batch's time per iteration at the
next larger one's, rows of the same device and features compared with each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

#: The columns scaled together when a row is capped.
TIME_COLUMNS = ("time_s", "time_low_s", "time_high_s", "per_iteration_s")


def monotone_in_batch(frame: pd.DataFrame, keys: list[str]) -> list[str]:
    """Cap, in place, a smaller batch's time per iteration at the time of the next larger
    batch of the same ``keys`` (device and features); the notes that say which rows moved.

    ``frame`` has ``batch_size`` and the :data:`TIME_COLUMNS`; a capped row's total time and
    interval scale with its time per iteration.
    """
    import numpy as np

    notes: list[str] = []
    groups = frame.fillna({k: "" for k in keys if frame[k].dtype == object}).groupby(
        keys, dropna=False, sort=False).groups
    for rows in groups.values():
        order = frame.loc[rows].sort_values("batch_size").index
        per_it = frame.loc[order, "per_iteration_s"].to_numpy()
        capped = np.minimum.accumulate(per_it[::-1])[::-1]
        for idx, old, new in zip(order, per_it, capped, strict=True):
            if new < old * (1 - 1e-9):
                factor = new / old
                for col in TIME_COLUMNS:
                    frame.loc[idx, col] *= factor
                notes.append(f"batch {int(frame.loc[idx, 'batch_size'])}: capped at the time "
                             "per iteration of the next larger batch (an iteration does not "
                             "get slower with fewer samples)")
    return notes
