"""Training-time prediction: :class:`TrainingTimeModel`, :func:`evaluate` and :func:`mape`.

Modules: ``inputs`` (canonical table → numeric features), ``local`` (routes along measured
series), ``gpu_move`` (moving a time to another GPU: the spec-sheet ratio and the learnt move),
``default`` (the default, local-first estimator), ``features``, ``selection``, ``paper``,
``anchored``, ``pooled``, ``transfer`` (the cross-series models), ``estimator`` (the
cross-series estimator and the paper's method), ``training_time`` (the public estimator),
``evaluation`` (scenario MAPE tables).
"""

from __future__ import annotations

from gpuperf_magics.model.evaluation import SCENARIOS, evaluate, mape
from gpuperf_magics.model.training_time import TrainingTimeModel

__all__ = ["SCENARIOS", "TrainingTimeModel", "evaluate", "mape"]
