"""Import paths users, notebooks, benchmarks and the issues rely on keep resolving, wherever
the code behind them moves (a moved name is re-exported from its old home)."""

from __future__ import annotations

import importlib

import pytest

# The list, the README and notebooks, the entry points, and what benchmarks/ imports.
PATHS = (
    "gpuperf_magics.capture.unsaved_runs",
    "gpuperf_magics.architecture.describe",
    "gpuperf_magics.datasets.fetch_lattuada2022",
    "gpuperf_magics.datasets.fetch_sia2023",
    "gpuperf_magics.store.StoreError",
    "gpuperf_magics.hardware.catalog.add_gpus",
    "gpuperf_magics.profile_training",
    "gpuperf_magics.Store",
    "gpuperf_magics.TrainingTimeModel",
    "gpuperf_magics.evaluate",
    "gpuperf_magics.gpus",
    "gpuperf_magics.what_if",
    "gpuperf_magics.WhatIfPanel",
    "gpuperf_magics.predict_time",
    "gpuperf_magics.Run",
    "gpuperf_magics.load_ipython_extension",
    "gpuperf_magics.__version__",
    "gpuperf_magics.prediction.offers.offers",
    "gpuperf_magics.prediction.remaining.remaining_time",
    "gpuperf_magics.prediction.predict.predict_time",
    "gpuperf_magics.model.mape",
    "gpuperf_magics.model.TrainingTimeModel",
    "gpuperf_magics.model.evaluate",
    "gpuperf_magics.hardware.prices.prices",
    "gpuperf_magics.hardware.catalog.lookup",
    "gpuperf_magics.hardware.catalog.match",
    "gpuperf_magics.hardware.catalog.gpus",
    "gpuperf_magics.hardware.catalog.UnknownGPUError",
    "gpuperf_magics.hardware.detect",
    "gpuperf_magics.capture.progress.RemainingEstimator",
    "gpuperf_magics.capture.progress.LiveLine",
    "gpuperf_magics.capture.profile_training",
    "gpuperf_magics.run.Run",
    "gpuperf_magics.run.IterationRecord",
    "gpuperf_magics.store.Store",
    "gpuperf_magics.store.ImportValidationError",
    "gpuperf_magics.store.RunNotFoundError",
    "gpuperf_magics.store.StoreVersionError",
    "gpuperf_magics.store.latest_version",
    "gpuperf_magics.model.naive.NaiveModel",
    "gpuperf_magics.model.features.augment",
    "gpuperf_magics.model.paper.random_folds",
    "gpuperf_magics.model.selection.forward_select",
    "gpuperf_magics.model.gpu_move",
    "gpuperf_magics.model.inputs.prepare",
    "gpuperf_magics.prediction.predict.robust_times",
    "gpuperf_magics.skins.cli.main",
    "gpuperf_magics.skins.demo.main",
    "gpuperf_magics.skins.magics.load",
)

# Names whose home moved, reachable from the old one (the moves of issue 11).
MOVED = {
    "gpuperf_magics.run.format_seconds": "gpuperf_magics.units.format_seconds",
    "gpuperf_magics.prediction.predict.format_duration": "gpuperf_magics.units.format_duration",
    "gpuperf_magics.prediction.offers.format_cost": "gpuperf_magics.units.format_cost",
    "gpuperf_magics.store.CANONICAL_COLUMNS": "gpuperf_magics.columns.CANONICAL_COLUMNS",
    "gpuperf_magics.store.FIRST_COLUMNS": "gpuperf_magics.columns.FIRST_COLUMNS",
}


def _resolve(path: str) -> object:
    """The object a dotted path names: a module, or an attribute of the longest module."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError:
        module, _, name = path.rpartition(".")
        return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("path", PATHS)
def test_import_path_resolves(path: str) -> None:
    assert _resolve(path) is not None


@pytest.mark.parametrize(("old", "new"), list(MOVED.items()))
def test_moved_name_is_the_same_object_at_its_old_home(old: str, new: str) -> None:
    assert _resolve(old) is _resolve(new)


def test_version_is_one_value() -> None:
    import gpuperf_magics
    from gpuperf_magics._version import __version__

    assert gpuperf_magics.__version__ == __version__
    assert "__version__" in gpuperf_magics.__all__


def test_types_users_get_back_or_catch_import_from_the_root() -> None:
    from gpuperf_magics import (  # noqa: F401
        ImportValidationError,
        IterationRecord,
        Offers,
        Prediction,
        PredictionError,
        Remaining,
        RunNotFoundError,
        StoreError,
        UnknownGPUError,
        WhatIfPanel,
        remaining_time,
    )
    from gpuperf_magics.prediction.predict import PredictionError as defined

    assert PredictionError is defined
    assert issubclass(UnknownGPUError, ValueError)


def test_every_root_name_resolves() -> None:
    import gpuperf_magics

    for name in gpuperf_magics.__all__:
        assert getattr(gpuperf_magics, name) is not None, name
