"""One network's regression: fitting it on the network's runs and predicting its rows.

:class:`~gpuperf_magics.model.estimator.GlobalModel` fits one :class:`NetworkFit` per measured
network (:func:`fit_network`) and answers each network's rows from it (:func:`predict_network`):
the point prediction (the interpolating model; the linear one beyond the measured ranges; a
move to GPUs never measured), the kind of each prediction and its interval. The figures that
stand in for a kind's error (:data:`MEASURED_MAPE`) live here because these intervals use them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from gpuperf_magics.model.anchored import AnchoredNetworkModel
from gpuperf_magics.model.features import Table
from gpuperf_magics.model.inputs import HARDWARE, Prepared
from gpuperf_magics.model.paper import PaperNetworkModel
from gpuperf_magics.model.transfer import (
    PRIOR_TRANSFER_MAPE,
    TransferPrior,
    fit_rho_arrays,
    hardware_factor,
    move_by_ratio,
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


class _Interpolator(NamedTuple):
    """The model that interpolates one network and the figures its intervals read."""

    model: Any
    cv: float
    abs_logres: np.ndarray  # sorted |log(y/pred)| out of configuration


@dataclass
class NetworkFit:
    """What :func:`fit_network` learnt of one network (read by predictions and the report)."""

    # The interpolating model, or the _LogChoice that fits and picks it when first read.
    interpolator: _Interpolator | _LogChoice
    ranges: dict[str, tuple[float, float]]
    hardware: np.ndarray  # unique measured hardware rows (n_gpus, n_hw_cols)
    hardware_labels: list[str]
    hw_cols: list[str]
    n_configs: int
    batch_sizes: list[float] = field(default_factory=list)
    transfer: TransferPrior | None = None
    physical: Any = None  # the linear-space (floor + compute × h) model of the default method
    # "physical", "ratio" or "both" (see choose_transfer), or the test that chooses it, run
    # when a move to another GPU first asks (:attr:`transfer_method`).
    transfer_choice: str | _TransferChoice = "ratio"
    # Every run covered the same number of iterations: nothing tells a set-up cost from the
    # time of an iteration, so the model learns the time of one and a job scales with its count.
    per_iteration: bool = False
    columns: list[str] = field(default_factory=list)  # the features this network's model uses
    on_cpu: bool = False  # every training row ran on the CPU (no GPU named or described)
    # Ranges of the features on each measured GPU (key: its rounded hardware row).
    ranges_by_hw: dict[tuple[float, ...], dict[str, tuple[float, float]]] = field(
        default_factory=dict)

    def _chosen(self) -> _Interpolator:
        if isinstance(self.interpolator, _LogChoice):
            self.interpolator = self.interpolator()
        return self.interpolator

    @property
    def model(self) -> Any:
        """The interpolating model (default method: the log-space or the linear one, fitted
        on first read: refits that predict only rows the linear one answers never fit it)."""
        return self._chosen().model

    @property
    def cv_mape(self) -> float:
        """Cross-validated MAPE of the interpolating model (NaN under 4 configurations)."""
        return self._chosen().cv

    @property
    def abs_logres(self) -> np.ndarray:
        """Sorted |log(y/pred)| of the interpolating model out of configuration."""
        return self._chosen().abs_logres

    @property
    def transfer_method(self) -> str:
        """How a move to an unmeasured GPU is made ("physical", "ratio" or "both").

        Chosen by a fit-time test (:func:`choose_transfer`, a further fit of the linear
        model) that only moves to another GPU read: run on first use, on the fit's own data.
        """
        if not isinstance(self.transfer_choice, str):
            self.transfer_choice = self.transfer_choice()
        return self.transfer_choice


@dataclass(frozen=True)
class FitSettings:
    """The estimator's parameters that one network's fit reads."""

    method: str  # "default" or "paper"
    k_max: int | None
    regressor: str
    seed: int
    prior: TransferPrior  # ρ and its error where the network's own runs do not tell them


@dataclass(frozen=True)
class _TransferChoice:
    """The arguments of one :func:`choose_transfer` call, made when first needed."""

    settings: FitSettings
    feats: Table
    its: np.ndarray
    y: np.ndarray
    arch: np.ndarray | None
    hw_cols: list[str]
    rho: float

    def __call__(self) -> str:
        return choose_transfer(self.settings, self.feats, self.its, self.y, self.arch,
                               self.hw_cols, self.rho)


@dataclass(frozen=True)
class _LogChoice:
    """The log-space candidate, fitted on first read on the data of ``data``, against the
    ``linear`` one: the lower anchored MAPE interpolates (a tie: the log-space one)."""

    data: _TransferChoice
    linear: AnchoredNetworkModel

    def __call__(self) -> _Interpolator:
        d = self.data
        log = AnchoredNetworkModel(k_max=d.settings.k_max or 8, space="log",
                                   seed=d.settings.seed, hw_cols=tuple(d.hw_cols), rho=d.rho)
        log.fit(d.feats, d.its, d.y, arch=d.arch)
        model = min((log, self.linear), key=lambda m: m.anchor_mape)
        cv = model.anchor_mape if model.n_configs >= 4 else float("nan")
        return _Interpolator(model, cv, np.sort(np.abs(model.loo_logres)))


@dataclass
class _ModelChoice:
    """The fitted models of one network and the figures of the interpolating one."""

    interpolator: _Interpolator | _LogChoice
    n_configs: int
    transfer: TransferPrior | None = None
    physical: Any = None
    transfer_method: str | _TransferChoice = "ratio"


# ---------------------------------------------------------------------------- fitting
def fit_network(settings: FitSettings, prep: Prepared, rows: np.ndarray,
                y: np.ndarray) -> NetworkFit:
    """Fit one network's model on its ``rows`` of ``prep`` (seconds ``y``)."""
    # Arrays, not pandas: a fit reads these columns hundreds of times (see features.Table).
    feats = Table.of(prep.features).take(rows)
    # A CPU network beside GPU ones: no hardware.
    feats = feats.select([c for c in feats.columns if not np.isnan(feats[c]).any()])
    its = prep.iterations[rows]
    per_iteration = bool(len(its) and np.ptp(its) == 0 and its[0] != 1)
    if per_iteration:
        y, its = y / its, np.ones_like(its)
    arch = prep.architecture[rows] if prep.architecture is not None else None
    hw_cols = [c for c in HARDWARE if c in feats.columns]
    if settings.method == "paper":
        frame = prep.features.iloc[rows].reset_index(drop=True)
        choice = _fit_paper(settings, frame.loc[:, frame.notna().all()], its, y)
    else:
        choice = _fit_default(settings, feats, its, y, arch, hw_cols)
    ranges = {c: (float(feats[c].min()), float(feats[c].max())) for c in feats.columns}
    ranges["iterations"] = (float(its.min()), float(its.max()))
    hardware, labels, ranges_by_hw = _measured_hardware(feats, its, hw_cols,
                                                        prep.hardware_label[rows])
    batch = np.unique(feats["batch_size"]).tolist() if "batch_size" in feats else []
    transfer = choice.transfer if choice.transfer is not None else settings.prior
    return NetworkFit(
        choice.interpolator, ranges, hardware, labels, hw_cols, choice.n_configs, batch,
        transfer, choice.physical, choice.transfer_method,
        per_iteration=per_iteration, ranges_by_hw=ranges_by_hw, columns=list(feats.columns),
        on_cpu=bool((prep.hardware_label[rows] == "CPU").all()),
    )


def _fit_paper(settings: FitSettings, feats: pd.DataFrame, its: np.ndarray,
               y: np.ndarray) -> _ModelChoice:
    """The paper's model of one network (its transfers: the prior's hardware ratio)."""
    model = PaperNetworkModel(
        k_max=settings.k_max or 5, regressor=settings.regressor, seed=settings.seed
    )
    model.fit(feats, its, y)
    pred = model.predict(feats, its)
    abs_logres = np.sort(np.abs(np.log(y / np.maximum(pred, 1e-12))))
    n_configs = len(np.unique(np.column_stack([feats.to_numpy(), its]), axis=0))
    return _ModelChoice(_Interpolator(model, model.cv_mape, abs_logres), n_configs)


def _fit_default(settings: FitSettings, feats: Table, its: np.ndarray, y: np.ndarray,
                 arch: np.ndarray | None, hw_cols: list[str]) -> _ModelChoice:
    """The linear anchored model and the log-space one (fitted on first read, on the same
    rows: the same configurations); the one validated better interpolates."""
    transfer = own_transfer(feats, its, y, hw_cols)
    rho = transfer.rho if transfer is not None else settings.prior.rho
    physical = AnchoredNetworkModel(k_max=settings.k_max or 8, space="linear",
                                    seed=settings.seed, hw_cols=tuple(hw_cols), rho=rho)
    physical.fit(feats, its, y, arch=arch)
    # Copies: the test and the log fit may run long after this fit, and must see its data.
    transfer_method = _TransferChoice(settings, feats, its.copy(), y.copy(),
                                      None if arch is None else arch.copy(), list(hw_cols), rho)
    return _ModelChoice(_LogChoice(transfer_method, physical), physical.n_configs, transfer,
                        physical, transfer_method)


def _measured_hardware(
    feats: Table, its: np.ndarray, hw_cols: list[str], hardware_label: np.ndarray
) -> tuple[np.ndarray, list[str], dict[tuple[float, ...], dict[str, tuple[float, float]]]]:
    """The distinct measured GPUs, their labels and the feature ranges measured on each."""
    if not hw_cols:
        return np.empty((0, 0)), [], {}
    ranges_by_hw = {}
    values = feats.matrix(hw_cols)
    hardware, first = np.unique(values, axis=0, return_index=True)
    labels = [str(hardware_label[i]) for i in first]
    for spec in hardware:
        mine = np.isclose(values, spec[None, :], rtol=1e-6).all(axis=1)
        own = {c: (float(feats[c][mine].min()), float(feats[c][mine].max()))
               for c in feats.columns if c not in hw_cols}
        own["iterations"] = (float(its[mine].min()), float(its[mine].max()))
        ranges_by_hw[hw_key(spec)] = own
    return hardware, labels, ranges_by_hw


def own_transfer(
    feats: Table, its: np.ndarray, y: np.ndarray, hw_cols: list[str]
) -> TransferPrior | None:
    """ρ learnt from the user's own runs when one configuration ran on several GPUs."""
    if len(hw_cols) != 2 or len(np.unique(feats.matrix(hw_cols), axis=0)) < 2:
        return None
    config_cols = [c for c in feats.columns if c not in hw_cols]
    own = fit_rho_arrays(feats.matrix(config_cols),
                         feats.matrix(["gpu_fp32_tflops", "gpu_bandwidth_gbs"]), y / its)
    if own is None:
        return None
    return TransferPrior(own.rho, own.mape, "your runs (leave-one-GPU-out)")


#: Spread of the measured GPUs' hardware factors (log) from which a network's own runs measure
#: how much of its time a GPU moves: 2× between the slowest and the fastest.
MEASURED_H_SPAN = math.log(2.0)


def choose_transfer(
    settings: FitSettings,
    feats: Table,
    its: np.ndarray,
    y: np.ndarray,
    arch: np.ndarray | None,
    hw_cols: list[str],
    rho: float,
) -> str:
    """Pick how to move to an unmeasured GPU: the floor + compute × h model evaluated at its
    figures ("physical": only the compute part moves) or the hardware ratio of the whole time
    ("ratio").

    Where the measured GPUs' hardware factors span 2× or more, the runs measure the split
    between the part a GPU moves and the part it does not, and the model that holds it is
    used. lattuada2022's deepspeech_tf runs about as long on a P600 as on a K80 and an M60 (3.7×
    its hardware factor): its host sets the pace, and the ratio made its 1080 Ti rows 3.5× too
    fast. Below that span the split is a guess, and a fit-time extrapolation test decides: the
    fastest measured GPU is held out and predicted both ways from the others (a test of the
    slowest, or of every GPU weighed by distance, could not tell a flat network from one whose
    time follows the peak, see docs/accuracy.md). Two GPUs less than 2× apart leave nothing
    to test: both moves are averaged (geometrically).
    """
    if len(hw_cols) == 0:
        return "ratio"
    gpus, gid = np.unique(feats.matrix(hw_cols), axis=0, return_inverse=True)
    gid = gid.reshape(-1)
    h = hardware_factor(gpus[:, 0], gpus[:, 1] if len(hw_cols) > 1 else None, rho)
    if len(gpus) >= 2 and float(np.ptp(np.log(h))) >= MEASURED_H_SPAN:
        return "physical"
    if len(gpus) < 3:
        return "both"
    held = gid == int(np.argmin(h))
    model = AnchoredNetworkModel(k_max=settings.k_max or 8, space="linear",
                                 seed=settings.seed, hw_cols=tuple(hw_cols), rho=rho)
    rest = ~held
    model.fit(feats.take(rest), its[rest], y[rest],
              arch=None if arch is None else arch[rest])
    if not model.uses_h:
        return "ratio"
    known = np.unique(feats.take(rest).matrix(hw_cols), axis=0)
    q = feats.take(held)
    a = None if arch is None else arch[held]
    physical = model.backbone(q, its[held], a)
    ratio = move_by_ratio(model, known, hw_cols, rho, q, its[held])
    err = {
        "physical": float(np.mean(np.abs(physical / y[held] - 1))),
        "ratio": float(np.mean(np.abs(ratio / y[held] - 1))),
    }
    return min(err, key=err.__getitem__)


# ---------------------------------------------------------------------------- prediction
def predict_network(
    settings: FitSettings, fit: NetworkFit, prep: Prepared, rows: np.ndarray, cov: float,
    out: dict,
) -> None:
    """Write the predictions of a measured network's ``rows`` into the columns of ``out``
    (those it holds: without ``time_low_s``, ``time_high_s`` and ``expected_mape`` no interval
    is computed, and the log-space candidate is fitted only if a point needs it)."""
    # The default's models read arrays: column by column, no frame of the rows (refits).
    frame = (None if settings.method == "default"
             else prep.features.iloc[rows][fit.columns].reset_index(drop=True))
    feats = Table.of(frame) if frame is not None else Table(
        {c: np.ascontiguousarray(prep.features[c].to_numpy(dtype=float)[rows])
         for c in fit.columns}, len(rows))
    count = prep.iterations[rows]
    its = np.ones_like(count) if fit.per_iteration else count
    labels = prep.hardware_label[rows]
    _check_rows(fit, feats, prep, rows, labels)
    kinds, details = kinds_of(fit, feats, its, labels)
    pred = _point_predictions(settings, fit, feats if frame is None else frame, its, kinds,
                              prep, rows)
    if fit.per_iteration:
        pred = pred * count
    pred = np.maximum(pred, 1e-9)
    columns = {"time_s": pred, "per_iteration_s": pred / count, "kind": kinds,
               "detail": details}
    if out.keys() & {"time_low_s", "time_high_s", "expected_mape"}:
        expected, half = _expected_errors(fit, kinds, cov)
        columns.update(time_low_s=pred * np.exp(-half), time_high_s=pred * np.exp(half),
                       expected_mape=expected)
    for name, values in columns.items():
        if name in out:
            out[name][rows] = values


def _check_rows(fit: NetworkFit, feats: Table, prep: Prepared, rows: np.ndarray,
                labels: np.ndarray) -> None:
    """Raise ValueError where the rows' device is one the network's runs cannot speak for."""
    if fit.hw_cols and np.isnan(feats.matrix(fit.hw_cols)).any():
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


def _point_predictions(settings: FitSettings, fit: NetworkFit, feats: Any,
                       its: np.ndarray, kinds: np.ndarray, prep: Prepared,
                       rows: np.ndarray) -> np.ndarray:
    """Seconds of each row by the model its kind of prediction uses."""
    if settings.method != "default":
        return np.asarray(fit.model.predict(feats, its), dtype=float)
    # Outside the measured ranges the structurally linear model (floor + compute terms,
    # each a time that grows linearly in its factors) extrapolates; a power law fitted in
    # log space may interpolate better but bends where no data hold it (depth: 16.8% vs
    # 9.0% MAPE on lattuada2022, see benchmarks/accuracy.py).
    transfer = kinds == "transfer"
    extra = kinds == "extrapolation"
    if (~(transfer | extra)).any() or (transfer.any() and not (  # (transfer_method: a fit)
            fit.physical.uses_h and fit.transfer_method == "physical")):
        pred = np.asarray(fit.model.predict(feats, its), dtype=float)
    else:  # the linear model alone predicts every row (and the log one need not be fitted)
        pred = np.empty(len(kinds))
    if extra.any():
        pred[extra] = fit.physical.predict(feats.take(extra), its[extra])
    if transfer.any():
        if fit.physical.uses_h:
            arch = None if prep.architecture is None else prep.architecture[rows][transfer]
            pred[transfer] = transfer_physical(
                settings, fit, feats.take(transfer), its[transfer], arch
            )
        else:
            pred[transfer] = transfer_ratio(settings, fit, feats.take(transfer), its[transfer])
    return pred * batch_prior(fit, feats)


def _expected_errors(fit: NetworkFit, kinds: np.ndarray,
                     cov: float) -> tuple[np.ndarray, np.ndarray]:
    """Each row's expected MAPE and the half-width of its interval in log time."""
    own = quantile(fit.abs_logres, cov)
    cv = fit.cv_mape if np.isfinite(fit.cv_mape) else MEASURED_MAPE["extrapolation"]
    expected = np.empty(len(kinds))
    half = np.empty(len(kinds))
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
    return expected, half


def kinds_of(
    fit: NetworkFit, feats: pd.DataFrame | Table, its: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's kind of prediction ("interpolation", "extrapolation", "transfer") and why."""
    feats = Table.of(feats)
    n = len(feats)
    kinds = np.full(n, "interpolation", dtype=object)
    details = np.full(n, "", dtype=object)
    if fit.hw_cols and len(fit.hardware):
        hw = feats.matrix(fit.hw_cols)
        known = np.isclose(hw[:, None, :], fit.hardware[None, :, :], rtol=1e-6).all(-1)
        for i in np.flatnonzero(~known.any(axis=1)):
            kinds[i] = "transfer"
            details[i] = f"to {labels[i]} from {', '.join(fit.hardware_labels)}"
    values = {c: feats[c] for c in feats.columns if c not in fit.hw_cols}
    values["iterations"] = its
    hw_rows = feats.matrix(fit.hw_cols) if fit.ranges_by_hw else None
    for i in np.flatnonzero(kinds == "interpolation"):
        notes = []
        # On a measured GPU, what was measured on that GPU: a batch size only another GPU
        # ran is an extrapolation on this one.
        ranges = fit.ranges if hw_rows is None else fit.ranges_by_hw.get(
            hw_key(hw_rows[i]), fit.ranges)
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


def transfer_ratio(settings: FitSettings, fit: NetworkFit, feats: pd.DataFrame | Table,
                   its: np.ndarray) -> np.ndarray:
    """Carry each measured GPU's prediction to the new GPU by the hardware ratio."""
    rho = fit.transfer.rho if fit.transfer is not None else settings.prior.rho
    return move_by_ratio(fit.model, fit.hardware, fit.hw_cols, rho, feats, its)


def transfer_physical(
    settings: FitSettings, fit: NetworkFit, feats: pd.DataFrame | Table, its: np.ndarray,
    arch: np.ndarray | None,
) -> np.ndarray:
    """The floor + compute × h model evaluated at the new GPU's figures."""
    model = fit.physical
    base = model.backbone(feats, its, arch)
    if fit.transfer_method == "physical":
        return base
    ratio = transfer_ratio(settings, fit, feats, its)
    return ratio if fit.transfer_method == "ratio" else np.sqrt(base * ratio)


def batch_prior(fit: NetworkFit, feats: pd.DataFrame | Table) -> np.ndarray:
    """Proportional scaling in batch size when only one batch size was measured."""
    feats = Table.of(feats)
    if len(fit.batch_sizes) != 1 or "batch_size" not in feats:
        return np.ones(len(feats))
    return feats["batch_size"] / fit.batch_sizes[0]


def hw_key(spec: np.ndarray) -> tuple[float, ...]:
    """A measured GPU's hardware row as a dictionary key (figures equal to 6 digits)."""
    return tuple(float(f"{v:.6g}") for v in spec)


def quantile(sorted_abs: np.ndarray, coverage: float) -> float:
    """Split-conformal quantile: the ceil((n+1)·coverage)-th smallest value."""
    n = len(sorted_abs)
    if n == 0:
        return float("inf")
    k = math.ceil((n + 1) * coverage)
    return float(sorted_abs[min(k, n) - 1])
