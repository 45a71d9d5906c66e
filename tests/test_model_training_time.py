"""TrainingTimeModel, the public estimator: scikit-learn's contract (fit returns self, clone,
cross_val_score, check_estimator), array input and interactive predictions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from model_data import floor_series, synthetic
from sklearn.base import clone
from sklearn.model_selection import cross_val_score

from gpuperf_magics.model import TrainingTimeModel, mape


def test_fit_returns_self_and_predicts_seconds() -> None:
    # Eight batch sizes: enough to validate moves between them, so cv_mape_ is the user's own.
    x, y = synthetic(n_batches=8)
    model = TrainingTimeModel()
    assert model.fit(x, y) is model
    pred = model.predict(x)
    assert pred.shape == (len(x),) and np.all(pred > 0)
    assert mape(y, model.predict(x)) < 0.05 and model.score(x, y) > 0.9
    assert 0 < model.cv_mape_ < 0.10


def test_init_only_stores_arguments_and_clone_works() -> None:
    x, y = synthetic()
    model = TrainingTimeModel(method="paper", k_max=3, coverage=0.8).fit(x, y)
    assert model.get_params()["k_max"] == 3 and hasattr(model, "estimator_")
    # A clone of a fitted model has its parameters and none of its fitted state.
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    assert not hasattr(copy, "estimator_")


def test_cross_val_score_with_sklearn_scorer() -> None:
    x, y = synthetic()
    scores = cross_val_score(TrainingTimeModel(), x, y, cv=3,
                             scoring="neg_mean_absolute_percentage_error")
    assert np.all(scores <= 0) and np.all(scores > -0.5)


def test_numeric_array_input() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(1, 10, (40, 2))
    y = 2 * x[:, 0] + x[:, 1]
    model = TrainingTimeModel().fit(x, y)
    assert mape(y, model.predict(x)) < 0.05 and model.score(x, y) > 0.9


def test_sklearn_estimator_checks_that_apply() -> None:
    # check_estimator (below) checks the default TrainingTimeModel only: the parameter checks
    # are run here on the configured models it never builds, and on the two estimator
    # classes TrainingTimeModel wraps.
    from sklearn.utils.estimator_checks import (
        check_get_params_invariance,
        check_no_attributes_set_in_init,
        check_parameters_default_constructible,
        check_set_params,
    )

    from gpuperf_magics.model.default import DefaultModel
    from gpuperf_magics.model.estimator import PaperModel

    for model in (TrainingTimeModel(method="paper", k_max=3, regressor="nnls", coverage=0.9,
                                    ignore=("depth",), public_data=False, random_state=1),
                  DefaultModel(k_max=3, coverage=0.9, public_data=False, random_state=1),
                  PaperModel()):
        name = type(model).__name__
        check_no_attributes_set_in_init(name, model)
        check_parameters_default_constructible(name, model)
        check_get_params_invariance(name, model)
        check_set_params(name, model)


def test_predict_table_never_refits(monkeypatch: pytest.MonkeyPatch) -> None:
    """An answer is read off the fitted state: no ``fit`` of any of the model's estimators
    runs inside ``predict_table`` (its speed is benchmarks/predict_speed.py's figure)."""
    import importlib
    import inspect
    import pkgutil

    import gpuperf_magics.model as package

    x, y = synthetic()
    model = TrainingTimeModel().fit(x, y)
    query = pd.concat([x] * 5, ignore_index=True).iloc[:100]

    def refit(*args: object, **kwargs: object) -> None:
        raise AssertionError("predict_table refitted an estimator")

    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and "fit" in vars(cls):
                monkeypatch.setattr(cls, "fit", refit)
    table = model.predict_table(query)
    assert len(table) > 0 and (table["time_s"] > 0).all()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.SkipTestWarning")
def test_scikit_learn_estimator_checks_pass_where_they_apply() -> None:
    from sklearn.utils.estimator_checks import check_estimator

    expected = {
        # An object array of text is a table: it belongs in a DataFrame with named columns.
        "check_dtype_object": "text columns need a DataFrame",
        # An array-like that forbids np.shape: the canonical table is a DataFrame or ndarray.
        "check_regressor_data_not_an_array": "array-likes are read with numpy",
    }
    results = check_estimator(TrainingTimeModel(), on_fail=None,
                              expected_failed_checks=expected)
    failed = [r["check_name"] for r in results if r["status"] == "failed"]
    assert failed == []
    assert sum(r["status"] == "passed" for r in results) >= 45


def test_score_is_higher_is_better_and_mape_its_own_function() -> None:
    frame = floor_series(noise=0.02)
    x, y = frame.drop(columns="time_s"), frame["time_s"].to_numpy()
    model = TrainingTimeModel().fit(x, y)
    assert model.score(x, y) > 0.99
    assert mape(y, model.predict(x)) < 0.01
    assert mape([1.0, 2.0], [1.1, 1.8]) == pytest.approx(0.1)


def test_the_two_methods_are_two_estimator_classes() -> None:
    from gpuperf_magics.model.default import DefaultModel
    from gpuperf_magics.model.estimator import PaperModel

    frame = floor_series(noise=0.02)
    x, y = frame.drop(columns="time_s"), frame["time_s"]
    assert isinstance(TrainingTimeModel().fit(x, y).estimator_, DefaultModel)
    assert isinstance(TrainingTimeModel(method="paper").fit(x, y).estimator_, PaperModel)
    with pytest.raises(ValueError, match="method must be"):
        TrainingTimeModel(method="magic").fit(x, y)
