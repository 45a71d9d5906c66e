"""Training-time prediction: :class:`TrainingTimeModel`, :func:`evaluate` and :func:`mape`.

Modules: ``inputs`` (canonical table → numeric features), ``series`` (a network's measured
configurations as arrays), ``local`` (routes along measured series), ``gpu_move`` (moving a
time to another GPU: the spec-sheet ratio and the learnt move), ``default`` (the default,
local-first estimator), ``validation`` (how it validates and chooses each kind of move),
``parallel`` (networks validated in worker processes), ``features``, ``selection``,
``paper``, ``anchored``, ``pooled``, ``transfer`` (the cross-series models), ``network_fit``
(one network's cross-series fit and its predictions), ``estimator`` (the cross-series
estimator and the paper's method), ``report`` (their report rows), ``training_time`` (the
public estimator), ``evaluation`` (scenario MAPE tables). Every module but this one is
internal.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["DEFAULT_COVERAGE", "SCENARIOS", "TrainingTimeModel", "evaluate", "mape"]

# name -> module that defines it, imported on first access (PEP 562), as the package's top
# level does: a worker process that validates networks (``parallel``) imports the modules it
# needs, not scikit-learn (1.5 of the 2.2 s this package's import took).
_LAZY = {"DEFAULT_COVERAGE": "inputs", "SCENARIOS": "evaluation", "evaluate": "evaluation",
         "mape": "evaluation", "TrainingTimeModel": "training_time"}

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.model.evaluation import SCENARIOS, evaluate, mape
    from gpuperf_magics.model.inputs import DEFAULT_COVERAGE
    from gpuperf_magics.model.training_time import TrainingTimeModel


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuperf_magics.model' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"gpuperf_magics.model.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
