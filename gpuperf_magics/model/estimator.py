"""The cross-series models: the paper's method and the default's global backbone per network.

:class:`GlobalModel` fits one regression per network on all its runs (``method="paper"``: the
paper's augmented linear regression; ``"default"``: the anchored floor + compute model of
:mod:`~.anchored`) and, for the default, one model across networks for networks never measured
(:mod:`~.pooled`). :class:`~gpuperf_magics.model.default.DefaultModel` builds on it and answers
from the measured series first; :class:`~gpuperf_magics.model.training_time.TrainingTimeModel`
is the public estimator in front of both.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, RegressorMixin

from gpuperf_magics.model.anchored import AnchoredNetworkModel
from gpuperf_magics.model.inputs import (
    HARDWARE,
    Prepared,
    check_coverage,
    check_method,
    check_target,
    prepare,
)
from gpuperf_magics.model.paper import PaperNetworkModel
from gpuperf_magics.model.pooled import MIN_NETWORKS, REQUIRED, PooledModel, fit_pooled
from gpuperf_magics.model.transfer import (
    PRIOR_TRANSFER_MAPE,
    TransferPrior,
    fit_rho,
    hardware_factor,
    move_by_ratio,
    public_prior,
)

#: Used only if ``measured_mape.json`` is missing or unreadable (fractions).
_FALLBACK_MAPE = {"interpolation": 0.06, "extrapolation": 0.16, "transfer": 0.50}


def _measured_mape() -> dict[str, float]:
    """The per-kind errors ``benchmarks/accuracy.py --write`` measured on the public data."""
    try:
        text = resources.files("gpuperf_magics.model").joinpath("measured_mape.json").read_text()
        values = json.loads(text)["mape"]
        return {k: float(values[k]) for k in _FALLBACK_MAPE}
    except (OSError, ValueError, KeyError, TypeError):
        return dict(_FALLBACK_MAPE)


#: Error of the default model per kind of prediction (fractions), as measured by
#: ``benchmarks/accuracy.py --write`` on the public data (``measured_mape.json`` next to this
#: module says which scenarios). A prediction's ``expected_mape`` is the larger of this and the
#: model's own cross-validated error.
MEASURED_MAPE = _measured_mape()


@dataclass
class _NetworkFit:
    model: Any
    ranges: dict[str, tuple[float, float]]
    hardware: np.ndarray  # unique measured hardware rows (n_gpus, n_hw_cols)
    hardware_labels: list[str]
    hw_cols: list[str]
    abs_logres: np.ndarray  # sorted |log(y/pred)| out of configuration
    cv_mape: float
    n_configs: int
    batch_sizes: list[float] = field(default_factory=list)
    transfer: TransferPrior | None = None
    physical: Any = None  # the linear-space (floor + compute × h) model of the default method
    transfer_method: str = "ratio"  # "physical", "ratio" or "both" (see _choose_transfer)
    # Every run covered the same number of iterations: nothing tells a set-up cost from the
    # time of an iteration, so the model learns the time of one and a job scales with its count.
    per_iteration: bool = False
    columns: list[str] = field(default_factory=list)  # the features this network's model uses
    on_cpu: bool = False  # every training row ran on the CPU (no GPU named or described)
    # Ranges of the features on each measured GPU (key: its rounded hardware row).
    ranges_by_hw: dict[tuple[float, ...], dict[str, tuple[float, float]]] = field(
        default_factory=dict)


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
        GPU's catalog figures or the hardware ratio of the whole time, whichever a fit-time
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
        self.fits_: dict[str, _NetworkFit] = {}
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

    def _fit_network(
        self, net: str, prep: Prepared, rows: np.ndarray, y: np.ndarray
    ) -> _NetworkFit:
        feats = prep.features.iloc[rows].reset_index(drop=True)
        feats = feats.loc[:, feats.notna().all()]  # a CPU network beside GPU ones: no hardware
        its = prep.iterations[rows]
        per_iteration = bool(len(its) and np.ptp(its) == 0 and its[0] != 1)
        if per_iteration:
            y, its = y / its, np.ones_like(its)
        arch = prep.architecture[rows] if prep.architecture is not None else None
        hw_cols = [c for c in HARDWARE if c in feats.columns]
        if self.method == "paper":
            model: Any = PaperNetworkModel(
                k_max=self.k_max or 5, regressor=self.regressor, seed=self.random_state
            )
            model.fit(feats, its, y)
            cv = model.cv_mape
            pred = model.predict(feats, its)
            abs_logres = np.sort(np.abs(np.log(y / np.maximum(pred, 1e-12))))
            n_configs = len(np.unique(np.column_stack([feats.to_numpy(), its]), axis=0))
        else:
            transfer = self._own_transfer(feats, its, y, hw_cols)
            rho = transfer.rho if transfer is not None else self.transfer_prior_.rho
            candidates = []
            for space in ("log", "linear"):
                m = AnchoredNetworkModel(
                    k_max=self.k_max or 8, space=space, seed=self.random_state,
                    hw_cols=tuple(hw_cols), rho=rho,
                )
                m.fit(feats, its, y, arch=arch)
                candidates.append(m)
            physical: AnchoredNetworkModel | None = candidates[1]
            transfer_method = self._choose_transfer(feats, its, y, arch, hw_cols, rho)
            model = min(candidates, key=lambda m: m.anchor_mape)
            n_configs = model.n_configs
            cv = model.anchor_mape if n_configs >= 4 else float("nan")
            abs_logres = np.sort(np.abs(model.loo_logres))
        ranges = {c: (float(feats[c].min()), float(feats[c].max())) for c in feats.columns}
        ranges["iterations"] = (float(its.min()), float(its.max()))
        ranges_by_hw = {}
        if hw_cols:
            hardware, first = np.unique(feats[hw_cols].to_numpy(), axis=0, return_index=True)
            labels = [str(prep.hardware_label[rows][i]) for i in first]
            values = feats[hw_cols].to_numpy()
            for spec in hardware:
                mine = np.isclose(values, spec[None, :], rtol=1e-6).all(axis=1)
                own = {c: (float(feats.loc[mine, c].min()), float(feats.loc[mine, c].max()))
                       for c in feats.columns if c not in hw_cols}
                own["iterations"] = (float(its[mine].min()), float(its[mine].max()))
                ranges_by_hw[_hw_key(spec)] = own
        else:
            hardware, labels = np.empty((0, 0)), []
        batch = sorted(feats["batch_size"].unique().tolist()) if "batch_size" in feats else []
        if self.method == "paper":
            transfer, physical, transfer_method = self.transfer_prior_, None, "ratio"
        elif transfer is None:
            transfer = self.transfer_prior_
        fit = _NetworkFit(
            model, ranges, hardware, labels, hw_cols, abs_logres, cv, n_configs, batch, transfer,
            physical, transfer_method, per_iteration=per_iteration, ranges_by_hw=ranges_by_hw,
            columns=list(feats.columns),
            on_cpu=bool((prep.hardware_label[rows] == "CPU").all()),
        )
        self._advise(net, fit)
        return fit

    def _own_transfer(
        self, feats: pd.DataFrame, its: np.ndarray, y: np.ndarray, hw_cols: list[str]
    ) -> TransferPrior | None:
        """ρ learnt from the user's own runs when one configuration ran on several GPUs."""
        if len(hw_cols) != 2 or len(np.unique(feats[hw_cols].to_numpy(), axis=0)) < 2:
            return None
        config_cols = [c for c in feats.columns if c not in hw_cols]
        own = fit_rho(feats.assign(time_s=y / its), config_cols)
        if own is None:
            return None
        return TransferPrior(own.rho, own.mape, "your runs (leave-one-GPU-out)")

    def _advise(self, net: str, fit: _NetworkFit) -> None:
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
        half = np.maximum(_quantile(pooled.abs_logres, cov), -math.log(1 - cov) * expected)
        out["time_s"][rows] = pred
        out["time_low_s"][rows] = pred * np.exp(-half)
        out["time_high_s"][rows] = pred * np.exp(half)
        out["per_iteration_s"][rows] = pred / prep.iterations[rows]
        out["kind"][rows] = "new network"
        out["detail"][rows] = details
        out["expected_mape"][rows] = expected

    def _predict_network(
        self, fit: _NetworkFit, prep: Prepared, rows: np.ndarray, cov: float, out: dict
    ) -> None:
        feats = prep.features.iloc[rows][fit.columns].reset_index(drop=True)
        count = prep.iterations[rows]
        its = np.ones_like(count) if fit.per_iteration else count
        labels = prep.hardware_label[rows]
        if fit.hw_cols and feats[fit.hw_cols].isna().any(axis=None):
            raise ValueError(
                f"network {prep.network[rows][0] if prep.network is not None else ''!r} was "
                "measured on GPUs: give its rows a gpu (or gpu_fp32_tflops and "
                "gpu_bandwidth_gbs)"
            )
        if fit.on_cpu and (labels != "CPU").any():
            gpu = labels[labels != "CPU"][0]
            name = "" if prep.network is None else f" of {prep.network[rows][0]!r}"
            raise ValueError(
                f"the runs{name} were measured on the CPU only: the model cannot say how "
                f"{gpu} runs them. Profile one run on a GPU, or use "
                "gpuperf_magics.predict_time(), which estimates GPUs from the FLOPs (±50%)"
            )
        kinds, details = self._kinds(fit, feats, its, labels)
        transfer = kinds == "transfer"
        pred = np.asarray(fit.model.predict(feats, its), dtype=float)
        if self.method == "default":
            # Outside the measured ranges the structurally linear model (floor + compute terms,
            # each a time that grows linearly in its factors) extrapolates; a power law fitted in
            # log space may interpolate better but bends where no data hold it (depth: 16.8% vs
            # 9.0% MAPE on lattuada2022, see benchmarks/accuracy.py).
            extra = kinds == "extrapolation"
            if extra.any():
                pred[extra] = fit.physical.predict(feats.iloc[extra], its[extra])
            if transfer.any():
                if fit.physical.uses_h:
                    arch = None if prep.architecture is None else prep.architecture[rows][transfer]
                    pred[transfer] = self._transfer_physical(
                        fit, feats.iloc[transfer], its[transfer], arch
                    )
                else:
                    pred[transfer] = self._transfer(fit, feats.iloc[transfer], its[transfer])
            pred *= self._batch_prior(fit, feats)
        if fit.per_iteration:
            pred = pred * count
        pred = np.maximum(pred, 1e-9)
        own = _quantile(fit.abs_logres, cov)
        cv = fit.cv_mape if np.isfinite(fit.cv_mape) else MEASURED_MAPE["extrapolation"]
        expected = np.empty(len(rows))
        half = np.empty(len(rows))
        for i, kind in enumerate(kinds):
            measured = MEASURED_MAPE[kind]
            if kind == "transfer" and fit.transfer is not None and fit.transfer.source.startswith(
                    ("your runs", "physical prior")):
                # Your own GPUs measured it (or nothing did): that figure counts. ρ's error on
                # the public data is the crude ratio's, not this model's (MEASURED_MAPE is).
                measured = max(measured, fit.transfer.mape)
            if fit.n_configs < 4:
                measured = max(measured, PRIOR_TRANSFER_MAPE)
            expected[i] = max(cv, measured)
            # |log error| ~ exponential with mean ≈ MAPE gives the quantile -ln(1-cov)·MAPE. The
            # residuals out of configuration alone understate it where the model reproduces
            # its few configurations (a ±0.3% interval next to a measured ±7% error): the
            # interval is never narrower than the expected error says.
            half[i] = max(own, -math.log(1 - cov) * expected[i])
        out["time_s"][rows] = pred
        out["time_low_s"][rows] = pred * np.exp(-half)
        out["time_high_s"][rows] = pred * np.exp(half)
        out["per_iteration_s"][rows] = pred / count
        out["kind"][rows] = kinds
        out["detail"][rows] = details
        out["expected_mape"][rows] = expected

    def _kinds(
        self, fit: _NetworkFit, feats: pd.DataFrame, its: np.ndarray, labels: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        n = len(feats)
        kinds = np.full(n, "interpolation", dtype=object)
        details = np.full(n, "", dtype=object)
        if fit.hw_cols and len(fit.hardware):
            hw = feats[fit.hw_cols].to_numpy()
            known = np.isclose(hw[:, None, :], fit.hardware[None, :, :], rtol=1e-6).all(-1)
            for i in np.flatnonzero(~known.any(axis=1)):
                kinds[i] = "transfer"
                details[i] = f"to {labels[i]} from {', '.join(fit.hardware_labels)}"
        values = {c: feats[c].to_numpy() for c in feats.columns if c not in fit.hw_cols}
        values["iterations"] = its
        hw_rows = feats[fit.hw_cols].to_numpy() if fit.ranges_by_hw else None
        for i in np.flatnonzero(kinds == "interpolation"):
            notes = []
            # On a measured GPU, what was measured on that GPU: a batch size only another GPU
            # ran is an extrapolation on this one.
            ranges = fit.ranges if hw_rows is None else fit.ranges_by_hw.get(
                _hw_key(hw_rows[i]), fit.ranges)
            for col, v in values.items():
                lo, hi = ranges[col]
                if v[i] > hi * (1 + 1e-9):
                    notes.append(f"{col} {v[i]:g} > measured max {hi:g}")
                elif v[i] < lo * (1 - 1e-9):
                    notes.append(f"{col} {v[i]:g} < measured min {lo:g}")
            if notes:
                kinds[i] = "extrapolation"
                details[i] = "; ".join(notes)
        return kinds, details

    def _transfer(self, fit: _NetworkFit, feats: pd.DataFrame, its: np.ndarray) -> np.ndarray:
        """Carry each measured GPU's prediction to the new GPU by the hardware ratio."""
        rho = fit.transfer.rho if fit.transfer is not None else self.transfer_prior_.rho
        return move_by_ratio(fit.model, fit.hardware, fit.hw_cols, rho, feats, its)

    def _transfer_physical(
        self, fit: _NetworkFit, feats: pd.DataFrame, its: np.ndarray, arch: np.ndarray | None
    ) -> np.ndarray:
        """The floor + compute × h model evaluated at the new GPU's figures."""
        model = fit.physical
        base = model.backbone(feats, its, arch)
        if fit.transfer_method == "physical":
            return base
        ratio = self._transfer(fit, feats, its)
        return ratio if fit.transfer_method == "ratio" else np.sqrt(base * ratio)

    def _choose_transfer(
        self,
        feats: pd.DataFrame,
        its: np.ndarray,
        y: np.ndarray,
        arch: np.ndarray | None,
        hw_cols: list[str],
        rho: float,
    ) -> str:
        """Pick how to move to an unmeasured GPU by a fit-time extrapolation test.

        The fastest measured GPU is held out, and the floor + compute × h model fitted on the
        others predicts it two ways: evaluated at its figures ("physical": only the compute part
        shrinks) and by the hardware ratio of the whole time ("ratio"). The better one is used;
        with fewer than 3 GPUs there is nothing to test and both are averaged (geometrically).
        """
        if len(hw_cols) == 0:
            return "ratio"
        gpus, gid = np.unique(feats[hw_cols].to_numpy(dtype=float), axis=0, return_inverse=True)
        gid = gid.reshape(-1)
        if len(gpus) < 3:
            return "both"
        h = hardware_factor(gpus[:, 0], gpus[:, 1] if len(hw_cols) > 1 else None, rho)
        held = gid == int(np.argmin(h))
        model = AnchoredNetworkModel(
            k_max=self.k_max or 8, space="linear", seed=self.random_state,
            hw_cols=tuple(hw_cols), rho=rho,
        )
        rest = ~held
        model.fit(feats[rest].reset_index(drop=True), its[rest], y[rest],
                  arch=None if arch is None else arch[rest])
        if not model.uses_h:
            return "ratio"
        known = np.unique(feats[rest][hw_cols].to_numpy(dtype=float), axis=0)
        q = feats[held].reset_index(drop=True)
        a = None if arch is None else arch[held]
        physical = model.backbone(q, its[held], a)
        ratio = move_by_ratio(model, known, hw_cols, rho, q, its[held])
        err = {
            "physical": float(np.mean(np.abs(physical / y[held] - 1))),
            "ratio": float(np.mean(np.abs(ratio / y[held] - 1))),
        }
        return min(err, key=err.__getitem__)

    def _batch_prior(self, fit: _NetworkFit, feats: pd.DataFrame) -> np.ndarray:
        """Proportional scaling in batch size when only one batch size was measured."""
        if len(fit.batch_sizes) != 1 or "batch_size" not in feats:
            return np.ones(len(feats))
        return feats["batch_size"].to_numpy(dtype=float) / fit.batch_sizes[0]

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


def _hw_key(spec: np.ndarray) -> tuple[float, ...]:
    """A measured GPU's hardware row as a dictionary key (figures equal to 6 digits)."""
    return tuple(float(f"{v:.6g}") for v in spec)


def _quantile(sorted_abs: np.ndarray, coverage: float) -> float:
    """Split-conformal quantile: the ceil((n+1)·coverage)-th smallest value."""
    n = len(sorted_abs)
    if n == 0:
        return float("inf")
    k = math.ceil((n + 1) * coverage)
    return float(sorted_abs[min(k, n) - 1])


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
