"""The cross-series models: the paper's method and the default's global backbone per network.

:class:`GlobalModel` fits one regression per network on all its runs (``method="paper"``: the
paper's augmented linear regression; ``"default"``: the anchored floor + compute model of
:mod:`~.anchored`) and, for the default, one model across networks for networks never measured
(:mod:`~.pooled`). :class:`~gpuperf_magics.model.default.DefaultModel` builds on it and answers
from the measured series first; :class:`~gpuperf_magics.model.training_time.TrainingTimeModel`
is the public estimator in front of both.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from gpuperf_magics.model.inputs import (
    HARDWARE,
    Prepared,
    check_coverage,
    check_method,
    check_target,
    prepare,
)
from gpuperf_magics.model.network_fit import (
    MEASURED_MAPE,
    FitSettings,
    NetworkFit,
    fit_network,
    predict_network,
    quantile,
)
from gpuperf_magics.model.pooled import MIN_NETWORKS, REQUIRED, PooledModel, fit_pooled
from gpuperf_magics.model.transfer import PRIOR_TRANSFER_MAPE, TransferPrior, public_prior


class GlobalModel(RegressorMixin, BaseEstimator):
    """Predict the seconds a training run takes from one regression per network.

    One model per ``network`` (a single model when the table has no ``network`` column), and
    with the default method one model across networks on their architecture (FLOPs per sample,
    parameters, layer types: :mod:`~gpuperf_magics.model.pooled`) for networks never measured.

    Parameters
    ----------
    method : {"default", "paper"}, default "default"
        ``"paper"``: Lattuada et al. 2022 as its library runs it: raw features, inverses and
        pairwise products, forward selection of up to ``k_max`` (5) terms by 5-fold random-split
        MAPE, Ridge with ``alpha`` in 0.01..10 (or ``regressor="nnls"``). ``"default"``: see
        :mod:`gpuperf_magics.model.anchored`: a log-space power law and a linear "floor +
        compute × h" model (``h = 1/peak + ρ/bandwidth`` times a per-GPU efficiency), both
        non-negative, fitted for relative error with folds grouped by configuration and
        anchored on the nearest measured configurations. Interpolations use the one with the
        lower out-of-configuration error; extrapolations (batch size, depth ... beyond the
        measured range) the linear one; unmeasured GPUs the linear one evaluated at the new
        GPU's catalog figures where the measured GPUs span 2× or more in hardware factor, and
        below that span this or the hardware ratio of the whole time, whichever a fit-time
        test on the fastest measured GPU preferred. Named GPUs use the catalog's per-device
        figures where given ones differ by more than 10% (the paper keeps the given ones).
    k_max : int, optional
        Most terms the forward selection keeps (default 8, or 5 for ``"paper"``).
    regressor : {"ridge", "nnls"}, default "ridge"
        The paper's regressor (ignored by ``"default"``, which is non-negative least squares).
    coverage : float, default 0.9
        Coverage of the intervals of :meth:`predict_table`.
    ignore : sequence of str, default ()
        Numeric columns of ``X`` that are not features.
    public_data : bool, default True
        Learn ρ for GPU transfers from the public data when available.
    random_state : int, default 0
        Seed of the cross-validation splits.

    Attributes
    ----------
    networks_ : list of str
        Networks fitted (``["*"]`` without a ``network`` column).
    feature_names_in_ : ndarray of str
        Feature columns used.
    cv_mape_ : float
        Cross-validated MAPE (fraction), averaged over networks weighted by rows.
    low_confidence_ : bool
        Fewer than 4 distinct configurations in some network: proportional/line estimates.
    advice_ : list of str
        What to profile next.
    transfer_prior_ : TransferPrior
        ρ and measured error used for GPUs never measured.
    pooled_ : PooledModel or None
        The cross-network model for networks never measured; None with ``method="paper"`` or
        when the table lacks the architecture columns (``arch_flops_fwd_bwd``) or has fewer
        than 3 networks.

    Notes
    -----
    :meth:`score` is scikit-learn's R² (higher is better); the MAPE is
    :func:`gpuperf_magics.model.mape`.

    Examples
    --------
    >>> x, y = runs.drop(columns="time_s"), runs["time_s"]  # doctest: +SKIP
    >>> model = GlobalModel().fit(x, y)  # doctest: +SKIP
    >>> model.predict_table(configurations)  # doctest: +SKIP
    """

    def __init__(
        self,
        method: str = "default",
        k_max: int | None = None,
        regressor: str = "ridge",
        coverage: float = 0.9,
        ignore: Sequence[str] = (),
        public_data: bool = True,
        random_state: int = 0,
    ) -> None:
        self.method = method
        self.k_max = k_max
        self.regressor = regressor
        self.coverage = coverage
        self.ignore = ignore
        self.public_data = public_data
        self.random_state = random_state

    # ------------------------------------------------------------------ fitting
    def fit(self, X: Any, y: Any) -> GlobalModel:
        """Fit one model per network.

        Parameters
        ----------
        X : DataFrame or 2-D numeric array
            Canonical table (``network``, ``batch_size``, ``iterations``, ``gpu``/``gpu_*``,
            further numeric features); other columns are ignored.
        y : array-like of float
            Seconds each row's iterations took.

        Returns
        -------
        self
        """
        check_method(self.method, self.regressor)
        check_coverage(self.coverage)
        prep = prepare(X, self.ignore, prefer_catalog=self.method == "default")
        target = check_target(y, len(prep.features))
        self.feature_names_in_ = np.asarray(prep.features.columns, dtype=object)
        self.n_features_in_ = len(self.feature_names_in_)
        self.transfer_prior_ = (
            public_prior()
            if self.public_data
            else TransferPrior(20.0, PRIOR_TRANSFER_MAPE, "physical prior (public data off)")
        )
        nets = prep.network if prep.network is not None else np.full(len(target), "*")
        self.networks_ = sorted(pd.unique(nets).tolist())
        self.fits_: dict[str, NetworkFit] = {}
        self.advice_: list[str] = []
        for net in self.networks_:
            rows = np.flatnonzero(nets == net)
            self.fits_[net] = self._fit_network(net, prep, rows, target[rows])
        weights = [len(np.flatnonzero(nets == n)) for n in self.networks_]
        scores = [self.fits_[n].cv_mape for n in self.networks_]
        finite = [(s, w) for s, w in zip(scores, weights, strict=True) if np.isfinite(s)]
        self.cv_mape_ = (
            float(sum(s * w for s, w in finite) / sum(w for _, w in finite))
            if finite
            else float("nan")
        )
        self.low_confidence_ = any(f.n_configs < 4 for f in self.fits_.values())
        self.pooled_: PooledModel | None = None
        hw_values = prep.features[[c for c in HARDWARE if c in prep.features.columns]]
        if (self.method == "default" and prep.network is not None
                and not hw_values.isna().any(axis=None)):  # one kind of device across networks
            hw = tuple(hw_values.columns)
            self.pooled_ = fit_pooled(prep.features, prep.iterations, target, prep.network, hw,
                                      self.transfer_prior_.rho)
        return self

    def _settings(self) -> FitSettings:
        """The parameters one network's fit and predictions read."""
        return FitSettings(self.method, self.k_max, self.regressor, self.random_state,
                           self.transfer_prior_)

    def _fit_network(
        self, net: str, prep: Prepared, rows: np.ndarray, y: np.ndarray
    ) -> NetworkFit:
        """Fit network ``net`` on its ``rows`` (:func:`~.network_fit.fit_network`); advise."""
        fit = fit_network(self._settings(), prep, rows, y)
        self._advise(net, fit)
        return fit

    def _advise(self, net: str, fit: NetworkFit) -> None:
        name = "" if net == "*" else f" of {net!r}"
        if fit.batch_sizes and len(fit.batch_sizes) < 3:
            b = fit.batch_sizes
            more = [x for x in (b[0] / 4, b[0] / 2, b[-1] * 2, b[-1] * 4) if x >= 1 and x not in b]
            picks = sorted({int(more[0]), int(more[-1])}) if more else []
            need = 3 - len(b)
            self.advice_.append(
                f"profile {need} more batch size{'s' if need > 1 else ''}{name}, such as "
                + " and ".join(str(p) for p in picks[:need] or picks)
            )
        if fit.n_configs < 4:
            self.advice_.append(
                f"low confidence{name}: {fit.n_configs} measured configuration(s); predictions "
                "are proportional estimates (time ∝ iterations × batch size) until you profile "
                "at least 4 configurations"
            )
        if len(fit.hardware) == 1:
            error = self._transfer_error(net)
            self.advice_.append(
                f"one GPU measured{name} ({fit.hardware_labels[0]}): predictions for other GPUs "
                f"are transfers with about {100 * error:.0f}% expected error; one run on the "
                "target GPU replaces the guess"
            )

    def _transfer_error(self, net: str) -> float:
        """The error a move of ``net`` to an unmeasured GPU is expected to have."""
        error = MEASURED_MAPE["transfer"]
        if self.transfer_prior_.source.startswith("physical prior"):
            error = max(error, self.transfer_prior_.mape)
        return error

    # ------------------------------------------------------------------ prediction
    def predict(self, X: Any) -> np.ndarray:
        """Seconds the iterations of each row will take.

        Parameters
        ----------
        X : DataFrame or 2-D numeric array
            Configurations to predict (the columns used in :meth:`fit`).

        Returns
        -------
        ndarray of float
        """
        return self.predict_table(X)["time_s"].to_numpy()

    def predict_table(self, X: Any, coverage: float | None = None) -> pd.DataFrame:
        """Predictions with intervals and the kind of each prediction.

        Parameters
        ----------
        X : DataFrame or 2-D numeric array
            Configurations to predict.
        coverage : float, optional
            Interval coverage (default: the ``coverage`` parameter).

        Returns
        -------
        DataFrame
            Indexed like ``X``; columns ``network``, ``time_s``, ``time_low_s``, ``time_high_s``,
            ``per_iteration_s``, ``kind`` ("interpolation", "extrapolation", "transfer" or
            "new network": a network without runs, predicted by :attr:`pooled_`), ``detail``
            (why, e.g. "batch_size 512 > measured max 256"), ``expected_mape`` (fraction: the
            measured error for that kind of prediction).
        """
        self._check_fitted()
        cov = check_coverage(self.coverage if coverage is None else coverage)
        index = X.index if isinstance(X, pd.DataFrame) else pd.RangeIndex(len(np.asarray(X)))
        prep = prepare(X, self.ignore, prefer_catalog=self.method == "default")
        return self._table(prep, index, cov)

    def _table(self, prep: Prepared, index: pd.Index, cov: float) -> pd.DataFrame:
        """:meth:`predict_table` of prepared rows (``index``: the rows' labels)."""
        nets = prep.network if prep.network is not None else np.full(len(prep.features), "*")
        needed = {c for n in pd.unique(nets) if n in self.fits_ for c in self.fits_[n].columns}
        missing = [c for c in self.feature_names_in_
                   if c in needed and c not in prep.features.columns]
        if missing and set(missing) <= set(HARDWARE):
            gpu_nets = [n for n in pd.unique(nets) if n in self.fits_ and self.fits_[n].hw_cols]
            raise ValueError(
                f"network {gpu_nets[0]!r} was measured on GPUs: give its rows a gpu (or "
                "gpu_fp32_tflops and gpu_bandwidth_gbs)"
            )
        if missing:
            raise ValueError(
                f"X lacks the column(s) {', '.join(map(repr, missing))} the model was fitted "
                "with (or the GPU could not be resolved to them)"
            )
        unknown = sorted(set(nets) - set(self.fits_))
        if unknown and self.pooled_ is None:
            raise ValueError(
                f"network {unknown[0]!r} was not in the training data (known: "
                + ", ".join(self.networks_) + "); a network never measured is predicted from "
                f"at least {MIN_NETWORKS} measured networks with their architecture (columns "
                + ", ".join(REQUIRED) + ", as %%profile_training records them)"
            )
        n = len(nets)
        out = {
            "network": nets.astype(object),
            "time_s": np.zeros(n),
            "time_low_s": np.zeros(n),
            "time_high_s": np.zeros(n),
            "per_iteration_s": np.zeros(n),
            "kind": np.empty(n, dtype=object),
            "detail": np.empty(n, dtype=object),
            "expected_mape": np.zeros(n),
        }
        for net in pd.unique(nets):
            rows = np.flatnonzero(nets == net)
            if net in self.fits_:
                self._predict_network(self.fits_[net], prep, rows, cov, out)
            else:
                self._predict_new_network(prep, rows, cov, out)
        return pd.DataFrame(out, index=index)

    def _predict_new_network(
        self, prep: Prepared, rows: np.ndarray, cov: float, out: dict
    ) -> None:
        """Rows of a network without runs, from the cross-network model."""
        pooled = self.pooled_
        assert pooled is not None
        feats = prep.features.iloc[rows].reset_index(drop=True)
        labels = prep.hardware_label[rows]
        if not pooled.hw_cols and (labels != "CPU").any():
            raise ValueError(
                f"the networks were measured on the CPU only: the model cannot say how "
                f"{labels[labels != 'CPU'][0]} runs a new one. Profile runs on a GPU first"
            )
        lacking = [c for c in pooled.needed
                   if c not in feats.columns or feats[c].isna().any()]
        if lacking:
            net = prep.network[rows][0] if prep.network is not None else "?"
            raise ValueError(
                f"network {net!r} was never measured: predicting it from its architecture "
                f"needs {', '.join(map(repr, lacking))} on its rows "
                "(gpuperf_magics.architecture.describe(model, batch) gives the arch_* figures)"
            )
        pred = pooled.predict(feats, prep.iterations[rows])
        expected = np.full(len(rows), pooled.cv_mape)
        detail = (f"from the architecture of {len(pooled.networks)} measured networks "
                  f"(FLOPs per sample, parameters, layer types)")
        details = np.full(len(rows), detail, dtype=object)
        if pooled.hw_cols:
            measured = np.vstack([f.hardware for f in self.fits_.values() if len(f.hardware)])
            hw = feats[list(pooled.hw_cols)].to_numpy()
            known = np.isclose(hw[:, None, :], measured[None, :, :], rtol=1e-6).all(-1).any(1)
            expected[~known] = np.maximum(expected[~known], MEASURED_MAPE["transfer"])
            for i in np.flatnonzero(~known):
                details[i] += f", on {labels[i]} (never measured)"
        # Out-of-network residuals where there are enough, else the expected error sets it.
        half = np.maximum(quantile(pooled.abs_logres, cov), -math.log(1 - cov) * expected)
        out["time_s"][rows] = pred
        out["time_low_s"][rows] = pred * np.exp(-half)
        out["time_high_s"][rows] = pred * np.exp(half)
        out["per_iteration_s"][rows] = pred / prep.iterations[rows]
        out["kind"][rows] = "new network"
        out["detail"][rows] = details
        out["expected_mape"][rows] = expected

    def _predict_network(
        self, fit: NetworkFit, prep: Prepared, rows: np.ndarray, cov: float, out: dict
    ) -> None:
        """Rows of a measured network (:func:`~.network_fit.predict_network`)."""
        predict_network(self._settings(), fit, prep, rows, cov, out)

    # ------------------------------------------------------------------ reporting
    def report(self) -> pd.DataFrame:
        """Selected terms and coefficients, cross-validated MAPE and training ranges.

        Returns
        -------
        DataFrame
            Columns ``network``, ``item``, ``name``, ``value``, ``min``, ``max``. Items:
            ``"term"`` (the interpolating model's terms and coefficients), ``"model"`` (which
            model interpolates; value: the anchor's bandwidth), ``"extrapolation"`` (the model
            used beyond the measured ranges), ``"physical term"`` (its terms), ``"efficiency"``
            (η per measured GPU: the factor on the spec-sheet compute time that fits that GPU;
            1 is typical, above 1 slower than its figures say; ``"architecture <name>"`` rows
            are what an unmeasured GPU of that architecture gets), ``"transfer method"``
            ("physical", "ratio" or "both", see :class:`TrainingTimeModel`; value: ρ),
            ``"cv_mape"``, ``"range"``, ``"transfer"`` (where ρ comes from; value: its
            leave-one-GPU-out MAPE); then, with network ``"(new network)"``, the cross-network
            model's ``"new network term"`` rows and its ``"new network cv_mape"``
            (leave-one-network-out).
        """
        from gpuperf_magics.model.report import network_report

        self._check_fitted()
        return network_report(self)

    def _check_fitted(self) -> None:
        if not hasattr(self, "fits_"):
            from sklearn.exceptions import NotFittedError

            raise NotFittedError("call fit(X, y) before predicting")

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        tags.target_tags.positive_only = True
        return tags


class PaperModel(GlobalModel):
    """The method of Lattuada, Gianniti, Ardagna and Zhang (Cluster Computing 2022).

    One model per network: raw features, their inverses and pairwise products, forward
    selection of up to ``k_max`` (5) terms by 5-fold random-split MAPE, Ridge with ``alpha`` in
    0.01..10 (or ``regressor="nnls"``). See :class:`GlobalModel` for the parameters.
    """

    method = "paper"
    public_data = False

    def __init__(
        self,
        k_max: int | None = None,
        regressor: str = "ridge",
        coverage: float = 0.8,
        ignore: Sequence[str] = (),
        random_state: int = 0,
    ) -> None:
        self.k_max = k_max
        self.regressor = regressor
        self.coverage = coverage
        self.ignore = ignore
        self.random_state = random_state
