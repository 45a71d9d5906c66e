"""``TrainingTimeModel``: the public estimator, in front of the default and the paper's method."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from gpuperf_magics.model.default import DefaultModel
from gpuperf_magics.model.estimator import PaperModel
from gpuperf_magics.model.evidence import EvidenceBase
from gpuperf_magics.model.gpu_move import GpuMove
from gpuperf_magics.model.inputs import DEFAULT_COVERAGE, check_method
from gpuperf_magics.model.suggest import iteration_noise, latest_device


class TrainingTimeModel(RegressorMixin, BaseEstimator):
    """Predict the seconds a training run takes from profiled or imported runs.

    A scikit-learn regressor (``fit(X, y)``, ``predict``, ``clone``-able, usable in
    ``cross_val_score``); ``method`` picks one of two estimators, fitted as ``estimator_``.

    Parameters
    ----------
    method : {"default", "paper"}, default "default"
        ``"default"``: :class:`~gpuperf_magics.model.default.DefaultModel`: a query on a
        measured series is predicted from that series (piecewise between measured points,
        bounded beyond them), a move to another GPU by the learnt or the plain spec-sheet
        ratio, each kind of move by the candidate (the naive one included) that validated best
        on your own data; the rest by a cross-series regression. ``"paper"``:
        :class:`~gpuperf_magics.model.estimator.PaperModel`, the method of Lattuada et al.
        (Cluster Computing 2022) as its library runs it.
    k_max : int, optional
        Most terms the forward selection keeps (default 8, or 5 for ``"paper"``).
    regressor : {"ridge", "nnls"}, default "ridge"
        The paper's regressor (ignored by ``"default"``).
    coverage : float, default 0.8
        Coverage of the intervals of :meth:`predict_table` (0.8: 10th to 90th percentile).
    ignore : sequence of str, default ()
        Numeric columns of ``X`` that are not features.
    public_data : bool, default True
        Use what the package learnt from public multi-GPU data (shipped with it; nothing is
        downloaded). Ignored by ``"paper"``.
    random_state : int, default 0
        Seed of the cross-validation splits.
    gpu_moves : dict, optional
        GPU moves to use instead of the shipped ones (``"default"`` only; see
        :mod:`gpuperf_magics.model.gpu_move`).
    evidence : EvidenceBase, optional
        Public evidence of GPU moves to use instead of the shipped base (``"default"`` only;
        see :mod:`gpuperf_magics.model.evidence`).
    n_jobs : int, optional
        Processes the fit validates the networks in (``"default"`` only; the answers are the
        same whatever it is): 1 this one, -1 every core (joblib's meaning); None: every core
        from 1,000 configurations of several networks, else this one
        (:mod:`gpuperf_magics.model.parallel`).

    Attributes
    ----------
    estimator_ : DefaultModel or PaperModel
        The fitted estimator; its fitted attributes (``networks_``, ``cv_mape_``,
        ``advice_``, ``moves_`` ...) are readable here too.

    Notes
    -----
    :meth:`score` is scikit-learn's R² (higher is better), so model selection tools pick the
    best model; the MAPE is :func:`gpuperf_magics.model.mape`. (Before version 0.3, ``score``
    returned the MAPE.)

    Examples
    --------
    >>> x, y = runs.drop(columns="time_s"), runs["time_s"]  # doctest: +SKIP
    >>> model = TrainingTimeModel().fit(x, y)  # doctest: +SKIP
    >>> model.predict_table(configurations)  # doctest: +SKIP
    """

    def __init__(
        self,
        method: str = "default",
        k_max: int | None = None,
        regressor: str = "ridge",
        coverage: float = DEFAULT_COVERAGE,
        ignore: Sequence[str] = (),
        public_data: bool = True,
        random_state: int = 0,
        gpu_moves: dict[str, GpuMove] | None = None,
        evidence: EvidenceBase | None = None,
        n_jobs: int | None = None,
    ) -> None:
        self.method = method
        self.k_max = k_max
        self.regressor = regressor
        self.coverage = coverage
        self.ignore = ignore
        self.public_data = public_data
        self.random_state = random_state
        self.gpu_moves = gpu_moves
        self.evidence = evidence
        self.n_jobs = n_jobs

    def fit(self, X: Any, y: Any) -> TrainingTimeModel:
        """Fit the chosen estimator.

        Parameters
        ----------
        X : DataFrame or 2-D numeric array
            Canonical table (``network``, ``batch_size``, ``iterations``, ``gpu``/``gpu_*``,
            ``precision``, further numeric features); other columns are ignored.
        y : array-like of float
            Seconds each row's iterations took.

        Returns
        -------
        self
        """
        check_method(self.method, self.regressor)
        if self.method == "paper":
            est: DefaultModel | PaperModel = PaperModel(
                k_max=self.k_max, regressor=self.regressor, coverage=self.coverage,
                ignore=self.ignore, random_state=self.random_state)
        else:
            est = DefaultModel(k_max=self.k_max, coverage=self.coverage, ignore=self.ignore,
                               public_data=self.public_data, random_state=self.random_state,
                               gpu_moves=self.gpu_moves, evidence=self.evidence,
                               n_jobs=self.n_jobs)
        self.estimator_ = est.fit(X, y)
        self.latest_device_ = latest_device(X)
        self.iteration_noise_ = iteration_noise(X)  # what a profiling run of each costs
        self.n_features_in_ = est.n_features_in_
        self.feature_names_in_ = est.feature_names_in_
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Seconds the iterations of each row will take."""
        return self.predict_table(X)["time_s"].to_numpy()

    def predict_table(self, X: Any, coverage: float | None = None) -> pd.DataFrame:
        """Predictions with intervals, the kind of each prediction and its expected error.

        Returns
        -------
        DataFrame
            Indexed like ``X``; columns ``network``, ``time_s``, ``time_low_s``,
            ``time_high_s``, ``per_iteration_s``, ``kind`` ("interpolation",
            "extrapolation", "transfer" or "new network"), ``detail``, ``expected_mape``.
        """
        self._check_fitted()
        if (not isinstance(X, pd.DataFrame) and np.ndim(X) == 2
                and np.shape(X)[1] != self.n_features_in_):
            raise ValueError(f"X has {np.shape(X)[1]} features, but TrainingTimeModel is "
                             f"expecting {self.n_features_in_} features as input")
        return self.estimator_.predict_table(X, coverage=coverage)

    def suggest(self, target: Any, candidates: Any, k: int = 3,
                device: str | None = None, per: str = "second") -> pd.DataFrame:
        """The ``k`` candidates worth profiling next for the ``target`` configurations.

        Ranked by the drop of the targets' expected error (from the validated moves that give
        the intervals) per predicted second of a ``--stop-after auto`` run, or with
        ``per="run"`` by the drop alone (a budget of a few more runs rather than of seconds);
        see :func:`gpuperf_magics.model.suggest.suggest` for the columns added
        (``expected_mape_after``, ``cost_s``, ``gain_per_s``). Candidates already measured or
        on another device than ``device`` (default: the device of the latest run fitted) are
        never suggested.
        """
        from gpuperf_magics.model.suggest import suggest

        self._check_fitted()
        return suggest(self.estimator_, target, candidates, k=k, device=device,
                       latest=self.__dict__.get("latest_device_"),
                       noise=self.__dict__.get("iteration_noise_"), per=per)

    def report(self) -> pd.DataFrame:
        """Terms, coefficients, validated errors and ranges (see the estimators' ``report``)."""
        self._check_fitted()
        return self.estimator_.report()

    def _check_fitted(self) -> None:
        if "estimator_" not in self.__dict__:
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("call fit(X, y) before predicting")

    def __getattr__(self, name: str) -> Any:
        # Fitted attributes of the estimator read through (model.networks_, model.advice_).
        est = self.__dict__.get("estimator_")
        if est is not None and name.endswith("_") and not name.startswith("__"):
            return getattr(est, name)
        raise AttributeError(name)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.positive_only = True
        return tags
