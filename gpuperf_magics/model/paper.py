"""The paper's method for one network, as its library runs it (``method="paper"``).

Lattuada et al. 2022 (aMLLibrary): raw features (iterations included) plus their inverses and
pairwise products (never ``x * 1/x``), no scaling; sequential forward selection of up to
``k_max`` terms keeping the best subset of any size by 5-fold cross-validated MAPE on the
unscaled target (rows split at random, as the library does); Ridge (``alpha`` from a grid) or
non-negative least squares, the hyper-parameter chosen by the same cross-validated MAPE.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from gpuperf_magics.model.features import augment, evaluate_terms
from gpuperf_magics.model.selection import forward_select, solve_subset

#: Ridge penalties tried (aMLLibrary's configurations span 0.01..10).
ALPHAS = (0.01, 0.1, 1.0, 10.0)


def random_folds(n: int, n_splits: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Shuffled K-fold splits of ``n`` rows."""
    order = np.random.default_rng(seed).permutation(n)
    parts = np.array_split(order, n_splits)
    return [(np.sort(np.concatenate(parts[:i] + parts[i + 1 :])), np.sort(p)) for i, p in
            enumerate(parts)]


@dataclass
class PaperNetworkModel:
    """One network's model: augmented features, SFS, Ridge or NNLS."""

    k_max: int = 5
    regressor: str = "ridge"
    seed: int = 0

    def fit(self, features: pd.DataFrame, iterations: np.ndarray, y: np.ndarray) -> None:
        raw = features.copy()
        raw.insert(0, "it", iterations)
        varying = [c for c in raw.columns if np.ptp(raw[c].to_numpy()) > 0]
        self.raw_names = varying
        n = len(y)
        if not varying or n < 3:
            self.terms, self.coef, self.intercept = [], np.zeros(0), float(np.mean(y))
            self.alpha, self.cv_mape = 0.0, float("nan")
            return
        z, names = augment(raw[varying].to_numpy(), varying)
        folds = random_folds(n, min(5, n), self.seed)
        grid = ALPHAS if self.regressor == "ridge" else (0.0,)
        best = None
        for alpha in grid:
            result = forward_select(
                z, y, folds, k_max=self.k_max, alpha=alpha, nonneg=self.regressor == "nnls"
            )
            if best is None or result.cv_mape < best[1].cv_mape:
                best = (alpha, result)
        assert best is not None
        self.alpha, result = best
        self.terms = [names[i] for i in result.terms]
        self.cv_mape = result.cv_mape
        self.coef, self.intercept = solve_subset(
            z[:, list(result.terms)], y, alpha=self.alpha, nonneg=self.regressor == "nnls"
        )

    def predict(self, features: pd.DataFrame, iterations: np.ndarray) -> np.ndarray:
        if not self.terms:
            return np.full(len(features), self.intercept)
        cols = {c: features[c].to_numpy(dtype=float) for c in features.columns}
        cols["it"] = np.asarray(iterations, dtype=float)
        return evaluate_terms(cols, self.terms) @ self.coef + self.intercept
