"""gpuperf_magics: profile PyTorch training in Jupyter and predict training time.

``%load_ext gpuperf_magics`` registers ``%%profile_training`` and ``%predict_time``. Everything
the magics do is reachable from Python without IPython::

    import gpuperf_magics as gm
    with gm.profile_training(name="resnet18", store="runs.sqlite") as run:
        train()                      # unchanged training loop
    gm.Store("runs.sqlite").runs()   # one row per profiled configuration
    gm.predict_time("runs.sqlite", batch_sizes=[64, 256], epochs=90, gpus=["A100 80GB"])
    job = gm.Job(batch_sizes=[64], epochs=90, deadline_s=3 * 3600)  # one job, many questions
    gm.offers("runs.sqlite", job)

Importing this package is cheap: torch, IPython, pandas and scikit-learn are imported only
when a name that needs them is first used.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from gpuperf_magics._version import __version__

# The package's logger: silent unless the application configures logging (never done here).
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "ImportValidationError",
    "IterationRecord",
    "Job",
    "Offers",
    "Prediction",
    "PredictionError",
    "Remaining",
    "Run",
    "RunNotFoundError",
    "Store",
    "StoreError",
    "TrainingTimeModel",
    "UnknownGPUError",
    "WhatIfPanel",
    "__version__",
    "evaluate",
    "gpus",
    "live_prior",
    "load_ipython_extension",
    "offers",
    "predict_time",
    "profile_training",
    "remaining_time",
    "unload_ipython_extension",
    "what_if",
]

# name -> module that defines it; resolved on first access (PEP 562).
# The types a user gets back or catches are here too, so that ``except gm.StoreError`` and
# ``isinstance(p, gm.Prediction)`` need no knowledge of the module that defines them.
_LAZY = {
    "Run": "gpuperf_magics.run",
    "IterationRecord": "gpuperf_magics.run",
    "Store": "gpuperf_magics.store",
    "StoreError": "gpuperf_magics.store",
    "ImportValidationError": "gpuperf_magics.store",
    "RunNotFoundError": "gpuperf_magics.store",
    "profile_training": "gpuperf_magics.capture",
    "TrainingTimeModel": "gpuperf_magics.model",
    "evaluate": "gpuperf_magics.model",
    "gpus": "gpuperf_magics.hardware.catalog",
    "UnknownGPUError": "gpuperf_magics.hardware.catalog",
    "Job": "gpuperf_magics.prediction.job",
    "predict_time": "gpuperf_magics.prediction.predict",
    "Prediction": "gpuperf_magics.prediction.record",
    "PredictionError": "gpuperf_magics.prediction.store_model",
    "live_prior": "gpuperf_magics.prediction.live",
    "Offers": "gpuperf_magics.prediction.offers",
    "offers": "gpuperf_magics.prediction.offers",
    "Remaining": "gpuperf_magics.prediction.remaining",
    "remaining_time": "gpuperf_magics.prediction.remaining",
    "what_if": "gpuperf_magics.skins.widgets",
    "WhatIfPanel": "gpuperf_magics.skins.widgets",
}

if TYPE_CHECKING:  # pragma: no cover
    from IPython.core.interactiveshell import InteractiveShell

    from gpuperf_magics.capture import profile_training
    from gpuperf_magics.hardware.catalog import UnknownGPUError, gpus
    from gpuperf_magics.model import TrainingTimeModel, evaluate
    from gpuperf_magics.prediction.job import Job
    from gpuperf_magics.prediction.live import live_prior
    from gpuperf_magics.prediction.offers import Offers, offers
    from gpuperf_magics.prediction.predict import predict_time
    from gpuperf_magics.prediction.record import Prediction
    from gpuperf_magics.prediction.remaining import Remaining, remaining_time
    from gpuperf_magics.prediction.store_model import PredictionError
    from gpuperf_magics.run import IterationRecord, Run
    from gpuperf_magics.skins.widgets import WhatIfPanel, what_if
    from gpuperf_magics.store import (
        ImportValidationError,
        RunNotFoundError,
        Store,
        StoreError,
    )


#: Subpackages reachable as attributes (``gm.datasets.fetch_sia2023()``), imported on first use.
_SUBMODULES = frozenset({"architecture", "capture", "datasets", "hardware", "model",
                         "prediction", "skins", "store"})


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"gpuperf_magics.{name}")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuperf_magics' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | _SUBMODULES)


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register the magics (``%load_ext gpuperf_magics``)."""
    from gpuperf_magics.skins import magics

    magics.load(ipython)


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Remove the magics and anything the extension installed (``%unload_ext``)."""
    from gpuperf_magics.skins import magics

    magics.unload(ipython)
