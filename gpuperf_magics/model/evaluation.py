"""Held-out error of a model in the scenarios that matter: ``evaluate(model, X, y, scenario)``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import clone

from gpuperf_magics.model.anchored import config_groups


def mape(y_true: Any, y_pred: Any) -> float:
    """Mean absolute percentage error, as a fraction: ``mean(|pred − true| / true)``."""
    true = np.asarray(y_true, dtype=float)
    pred = np.asarray(y_pred, dtype=float)
    return float(np.mean(np.abs(pred - true) / true))

#: Scenario names and what they hold out.
SCENARIOS = {
    "random": "a random fraction of rows (repeats of a configuration may leak)",
    "grouped": "a random fraction of configurations, all repeats together",
    "threshold": "rows with `column` above `threshold` (extrapolation), trained on the rest",
    "leave_one_out": "each value of `column` in turn (GPU, network, batch size ...)",
}


def evaluate(
    model: Any,
    X: pd.DataFrame,
    y: Any,
    scenario: str,
    *,
    column: str | None = None,
    threshold: float | None = None,
    test_size: float = 0.2,
    random_state: int = 0,
) -> pd.DataFrame:
    """MAPE of ``model`` refitted and tested on the splits of a scenario.

    Parameters
    ----------
    model : estimator
        Cloned (unfitted) for every split.
    X : DataFrame
        Canonical table.
    y : array-like
        Seconds.
    scenario : {"random", "grouped", "threshold", "leave_one_out"}
        See :data:`SCENARIOS`. ``"grouped"`` puts all rows with identical features (repeats) on
        one side.
    column : str, optional
        The column of ``"threshold"`` (e.g. ``"gpu_fp32_tflops"``, ``"depth"``,
        ``"batch_size"``) and of ``"leave_one_out"`` (e.g. ``"gpu"``, ``"network"``).
    threshold : float, optional
        Train on ``column <= threshold``, test on ``column > threshold``.
    test_size : float, default 0.2
        Fraction held out by ``"random"`` and ``"grouped"``.
    random_state : int, default 0

    Returns
    -------
    DataFrame
        One row per split: ``scenario``, ``held_out`` (description), ``position``
        ("interior"/"end" for numeric leave-one-out values, else ""), ``n_train``, ``n_test``,
        ``mape`` (fraction).

    Raises
    ------
    ValueError
        Unknown scenario, missing or unknown column, no threshold, or a split with an empty side.
    """
    X, target = _checked(X, y, scenario, column, test_size)
    splits = _splits(model, X, scenario, column, threshold, test_size, random_state)
    rows = []
    for held_out, position, test in splits:
        if test.all() or not test.any():
            raise ValueError(f"split '{held_out}' leaves one side empty")
        fitted = clone(model).fit(X[~test], target[~test])
        pred = fitted.predict(X[test])
        error = mape(target[test], pred)
        rows.append(
            {
                "scenario": scenario,
                "held_out": held_out,
                "position": position,
                "n_train": int((~test).sum()),
                "n_test": int(test.sum()),
                "mape": error,
            }
        )
    return pd.DataFrame(rows)


def _checked(X: Any, y: Any, scenario: str, column: str | None,
             test_size: float) -> tuple[pd.DataFrame, np.ndarray]:
    """``X`` (index reset) and ``y`` as floats, once the arguments are ones :func:`evaluate`
    can split by; ValueError otherwise."""
    if scenario not in SCENARIOS:
        raise ValueError(
            f"unknown scenario {scenario!r}; choose one of: " + ", ".join(SCENARIOS)
        )
    if not isinstance(X, pd.DataFrame):
        raise ValueError("evaluate needs X as a DataFrame (the canonical table)")
    X = X.reset_index(drop=True)
    target = np.asarray(y, dtype=float).reshape(-1)
    if len(target) != len(X):
        raise ValueError(f"y has {len(target)} values for {len(X)} rows of X")
    if scenario in ("threshold", "leave_one_out"):
        if column is None:
            raise ValueError(f"scenario {scenario!r} needs column=...")
        if column not in X.columns:
            raise ValueError(
                f"column {column!r} is not in X; columns: " + ", ".join(map(str, X.columns))
            )
    if scenario in ("random", "grouped") and not 0 < test_size < 1:
        raise ValueError(f"test_size must be a fraction in (0, 1), not {test_size!r}")
    return X, target


def _splits(model: Any, X: pd.DataFrame, scenario: str, column: str | None,
            threshold: float | None, test_size: float,
            random_state: int) -> list[tuple[str, str, np.ndarray]]:
    """The scenario's splits: (what is held out, its position, the test mask) each."""
    splits: list[tuple[str, str, np.ndarray]] = []
    rng = np.random.default_rng(random_state)
    if scenario == "random":
        test = rng.random(len(X)) < test_size
        splits.append((f"{test_size:.0%} of rows", "", test))
    elif scenario == "grouped":
        groups = _configurations(X, getattr(model, "ignore", ()))
        uniq = np.unique(groups)
        chosen = rng.choice(uniq, max(1, round(test_size * len(uniq))), replace=False)
        splits.append((f"{test_size:.0%} of configurations", "", np.isin(groups, chosen)))
    elif scenario == "threshold":
        if threshold is None:
            raise ValueError("scenario 'threshold' needs threshold=...")
        values = pd.to_numeric(X[column], errors="coerce")
        if values.isna().any():
            raise ValueError(f"column {column!r} must be numeric for a threshold split")
        splits.append((f"{column} > {threshold:g}", "", (values > threshold).to_numpy()))
    else:
        column_values = X[column]
        numeric = pd.api.types.is_numeric_dtype(column_values)
        levels = sorted(column_values.dropna().unique().tolist())
        for v in levels:
            position = ""
            if numeric:
                position = "end" if v in (levels[0], levels[-1]) else "interior"
            splits.append((f"{column} = {v}", position, (column_values == v).to_numpy()))
    return splits


def _configurations(X: pd.DataFrame, ignore: Any) -> np.ndarray:
    """A configuration id per row: rows with equal features (as the model sees them: network,
    iterations and the feature columns, not ids, timings or bookkeeping) share one."""
    from gpuperf_magics.model.inputs import prepare

    try:
        prep = prepare(X, ignore)
    except ValueError:  # a table the model would refuse anyway: fall back to every column
        keys = pd.Series([str(r) for r in X.astype(str).to_numpy().tolist()])
        return pd.factorize(keys)[0]
    numeric = np.nan_to_num(prep.features.to_numpy(dtype=float), nan=-1.0)  # CPU: no GPU
    nets = pd.factorize(prep.network)[0] if prep.network is not None else np.zeros(len(X))
    return config_groups(np.column_stack([numeric, prep.iterations, nets]))
