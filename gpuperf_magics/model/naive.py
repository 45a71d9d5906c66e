"""The obvious methods, as one estimator: what a user would do on a napkin.

- A move along one measured series (batch size, depth, another numeric feature): a straight
  line ``a + b·x`` through every point of the series; with one other batch size measured, the
  time per sample kept.
- A move to another GPU: the same configuration measured on the other GPUs, scaled by the
  ratio of their peaks (the plain peak of the precision the rows record, else FP32), median over
  those GPUs; where no GPU measured the configuration, each GPU's line carried by the ratio.
- Anything else: one line in batch size through every row of the network.

:class:`~gpuperf_magics.model.default.DefaultModel` holds the same methods as candidates (the
routes and formulas of :mod:`~.local` and :mod:`~.gpu_move`); ``benchmarks/accuracy.py``
compares it with this estimator on every scenario.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from gpuperf_magics.model.gpu_move import GpuMove
from gpuperf_magics.model.inputs import check_target, prepare
from gpuperf_magics.model.local import (
    candidates,
    local_value,
    route,
)
from gpuperf_magics.model.series import SeriesIndex, network_index, query_arrays

#: The naive move between GPUs: the plain peak ratio (weight 0 on anything learnt).
PLAIN = GpuMove()


class NaiveModel(RegressorMixin, BaseEstimator):
    """Straight lines per series and the spec-sheet peak ratio (see the module docstring)."""

    def fit(self, X: Any, y: Any) -> NaiveModel:
        prep = prepare(X, prefer_catalog=True)
        target = check_target(y, len(prep.features))
        nets = prep.network if prep.network is not None else np.full(len(target), "*")
        self.index_: dict[str, tuple[SeriesIndex, list[str], tuple[float, float]]] = {}
        for net in pd.unique(nets):
            rows = np.flatnonzero(nets == net)
            index, hw_cols = network_index(prep, rows, target[rows])
            self.index_[str(net)] = (index, hw_cols, _overall_line(index))
        return self

    def predict(self, X: Any) -> np.ndarray:
        prep = prepare(X, prefer_catalog=True)
        nets = prep.network if prep.network is not None else np.full(len(prep.features), "*")
        out = np.full(len(nets), np.nan)
        subs = {"batch:inside": "line", "batch:beyond": "line", "feature:inside": "line",
                "feature:beyond": "line"}
        for net in pd.unique(nets):
            rows = np.flatnonzero(nets == net)
            if str(net) not in self.index_:
                raise ValueError(f"network {net!r} was not in the training data")
            index, hw_cols, (a, b) = self.index_[str(net)]
            arrays = query_arrays(index, hw_cols, prep, rows)
            if arrays is None:
                raise ValueError(f"X lacks the features {net!r} was fitted with")
            values, hw, naive = arrays
            everyone = np.ones(index.n, dtype=bool)
            for i, row in enumerate(rows):
                r = route(index, values[i], hw[i], everyone)
                its = float(prep.iterations[row])
                if r.kind in ("repeat", "axis"):
                    per_it = local_value(index, r, values[i], "line", its, per_sample=True)
                elif r.kind == "gpu":
                    preds = candidates(index, r, values[i], hw[i], float(naive[i]), PLAIN, subs,
                                       its)
                    per_it = preds.get("ratio", preds["learnt"])  # learnt = ratio with PLAIN
                else:
                    x = values[i, index.batch_axis] if index.batch_axis is not None else 1.0
                    per_it = max(a + b * x, 1e-12) + float(np.median(index.setup)) / its
                out[row] = per_it * its
        return out


def _overall_line(index: SeriesIndex) -> tuple[float, float]:
    """One line in batch size through every configuration of a network."""
    if index.batch_axis is None or index.n < 2:
        return float(np.median(index.t)), 0.0
    x = index.values[:, index.batch_axis]
    if np.ptp(x) == 0:
        return float(np.median(index.t)), 0.0
    b, a = np.polyfit(x, index.t, 1)
    return float(a), float(b)
