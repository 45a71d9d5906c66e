"""Training-time prediction: :class:`TrainingTimeModel`, :func:`evaluate` and :func:`mape`.

Modules: ``inputs`` (canonical table → numeric features), ``series`` (a network's measured
configurations as arrays), ``local`` (routes along measured series), ``gpu_move`` (moving a
time to another GPU: the spec-sheet ratio and the learnt move), ``default`` (the default,
local-first estimator), ``validation`` (how it validates and chooses each kind of move),
``features``, ``selection``, ``paper``, ``anchored``, ``pooled``, ``transfer`` (the
cross-series models), ``network_fit`` (one network's cross-series fit and its predictions),
``estimator`` (the cross-series estimator and the paper's method), ``report`` (their report
rows), ``training_time`` (the public estimator), ``evaluation`` (scenario MAPE tables). Every
module but this one is internal.
"""

from __future__ import annotations

from gpuperf_magics.model.evaluation import SCENARIOS, evaluate, mape
from gpuperf_magics.model.inputs import DEFAULT_COVERAGE
from gpuperf_magics.model.training_time import TrainingTimeModel

__all__ = ["DEFAULT_COVERAGE", "SCENARIOS", "TrainingTimeModel", "evaluate", "mape"]
