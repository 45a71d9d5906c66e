"""Training-time prediction: :class:`TrainingTimeModel` and :func:`evaluate`.

Modules: ``inputs`` (canonical table → numeric features), ``features`` (the paper's
augmentation), ``selection`` (forward selection by cross-validated MAPE), ``paper`` (the paper's
method), ``anchored`` (the default per-network model), ``transfer`` (moving to another GPU),
``estimator`` (the public estimator), ``evaluation`` (scenario MAPE tables).
"""

from __future__ import annotations

from gpuperf_magics.model.estimator import TrainingTimeModel
from gpuperf_magics.model.evaluation import SCENARIOS, evaluate

__all__ = ["SCENARIOS", "TrainingTimeModel", "evaluate"]
