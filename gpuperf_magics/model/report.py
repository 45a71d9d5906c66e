"""What a fitted model says about itself: one row per term, range, move and error.

:meth:`GlobalModel.report` and :meth:`DefaultModel.report` read these rows; they are a table
rather than a text so that a notebook can filter them (``report[report.item == "range"]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.model.network_fit import NetworkFit


class GlobalModel(Protocol):
    """What a report reads of a fitted cross-series model (:class:`~.estimator.GlobalModel`):
    a protocol rather than the class, so that the estimator and its report do not import
    each other."""

    fits_: dict[str, NetworkFit]
    method: str
    pooled_: Any


def network_report(estimator: GlobalModel) -> pd.DataFrame:
    """The rows of :meth:`GlobalModel.report` (its docstring lists them) of a fitted model."""
    rows: list[dict[str, Any]] = []
    for net, fit in estimator.fits_.items():
        model = fit.model
        coef = getattr(model, "coef", np.zeros(0))
        for term, c in zip(model.terms, coef, strict=True):
            rows.append({"network": net, "item": "term", "name": term, "value": float(c)})
        if getattr(model, "intercept", None) is not None and estimator.method == "paper":
            rows.append({"network": net, "item": "term", "name": "intercept",
                         "value": float(model.intercept)})
        if estimator.method == "default":
            rows.append({"network": net, "item": "model", "name": f"{model.space} space",
                         "value": float(model.bandwidth)})
            rows.extend(_physical_rows(net, fit))
        rows.append({"network": net, "item": "cv_mape", "name": "cv_mape",
                     "value": fit.cv_mape})
        for col, (lo, hi) in fit.ranges.items():
            rows.append({"network": net, "item": "range", "name": col, "min": lo, "max": hi})
        if fit.transfer is not None:
            rows.append({"network": net, "item": "transfer", "name": fit.transfer.source,
                         "value": fit.transfer.mape})
    if estimator.pooled_ is not None:
        rows.extend(estimator.pooled_.report().assign(network="(new network)").to_dict("records"))
    return pd.DataFrame(rows, columns=["network", "item", "name", "value", "min", "max"])


def _physical_rows(net: str, fit: NetworkFit) -> list[dict[str, Any]]:
    """Rows on the floor + compute × h model: extrapolation, η per GPU, transfer method."""
    phys = fit.physical
    if phys is None:
        return []
    rows: list[dict[str, Any]] = [
        {"network": net, "item": "extrapolation",
         "name": "linear space (floor + compute × h)", "value": float(phys.bandwidth)}
    ]
    for term, c in zip(phys.terms, phys.coef, strict=True):
        rows.append({"network": net, "item": "physical term", "name": term,
                     "value": float(c)})
    if phys.uses_h:
        labels = dict(zip(map(tuple, np.round(fit.hardware, 9)), fit.hardware_labels,
                          strict=True))
        for spec, log_eta in zip(phys._gpus, phys._log_eta, strict=True):
            name = labels.get(tuple(np.round(spec, 9)), str(spec))
            rows.append({"network": net, "item": "efficiency", "name": name,
                         "value": float(np.exp(log_eta))})
        for arch, log_eta in sorted(phys._arch_log_eta.items()):
            rows.append({"network": net, "item": "efficiency",
                         "name": f"architecture {arch}", "value": float(np.exp(log_eta))})
    rows.append({"network": net, "item": "transfer method", "name": fit.transfer_method,
                 "value": float(phys.rho)})
    return rows
