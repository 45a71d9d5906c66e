"""How the store's model leads a young run: the rule (:func:`blend`) and the live line's
prior (:func:`live_prior`).

One rule says how a run's own rate and the store's model share an estimate: the remaining
time of a stopped run (:mod:`~.remaining`) and the live line of a running cell both follow
it. The live line belongs to the capture (:mod:`gpuperf_magics.capture.progress`), which may
not import this layer; so this layer builds the line's prior (a
:class:`~gpuperf_magics.capture.progress.Prior`: a callable the line asks at each update) and
the caller hands it in: ``profile_training(..., live=live_prior(store, network))``. The
model is fitted when the prior is made, before the cell runs, never beside the loop.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from gpuperf_magics.capture.progress import Configuration

__all__ = ["PRIOR_ITERATIONS", "LivePrior", "blend", "live_prior"]

_log = logging.getLogger(__name__)

#: Weight of the store's model, in iterations: once a run has ``n`` steady iterations its own
#: mean weighs ``n / (n + PRIOR_ITERATIONS)``.
PRIOR_ITERATIONS = 20


def blend(own: float | None, steady: int, model: float | None) -> tuple[float | None, float]:
    """Seconds per iteration from the run's own steady iterations and the store's model.

    While a run is young its own mean rests on few iterations and the model leads; as its
    steady iterations add up the run takes over: after ``steady`` of them its mean weighs
    ``steady / (steady + PRIOR_ITERATIONS)``. Either one alone where the other is missing.

    Returns
    -------
    (float or None, float)
        The estimate (None when neither is known) and the weight of the run's own mean.
    """
    if model is None or not math.isfinite(model):
        return own, (1.0 if own is not None else 0.0)
    if own is None or steady <= 0:
        return model, 0.0
    weight = steady / (steady + PRIOR_ITERATIONS)
    return weight * own + (1 - weight) * model, weight


class LivePrior:
    """The store's model of one network, fitted before a profiled cell runs, leading the
    live line's estimate while the run is young (:func:`blend`).

    The line calls it from its thread at each update. The first call that finds the running
    loop's configuration known asks the model once (a prediction from the model fitted
    before the cell, a few milliseconds) and keeps the answer in :attr:`model_per_step`. A
    cell of another network than the one fitted gets no model: fitting during the loop would
    compete with it. A model that cannot answer leaves the line to the run's own steps (and
    says why in the log).

    Parameters
    ----------
    store : Store or None
        The store fitted from; None when it has no model (:attr:`reason` says why).
    network : str or None
        The network the model was fitted for.
    reason : str, optional
        Why there is no model, when there is none.

    Attributes
    ----------
    model_per_step : float or None
        The model's seconds per iteration of the running configuration, once asked.
    """

    def __init__(self, store: Any, network: str | None, reason: str | None = None) -> None:
        self.store = store
        self.network = network
        self.reason = reason
        self.model_per_step: float | None = None
        self._answered = store is None
        self._lock = threading.Lock()

    def __call__(self, own_s: float | None, steady: int,
                 configuration: Callable[[], Configuration | None]) -> float | None:
        """Seconds per step to estimate with: the run's own mean blended with the model's
        answer for the running configuration (the run alone until the model answers)."""
        return blend(own_s, steady, self._model(configuration))[0]

    def _model(self, configuration: Callable[[], Configuration | None]) -> float | None:
        with self._lock:
            if self._answered:
                return self.model_per_step
            try:
                config = configuration()
            except Exception:  # asked again at the next update
                _log.debug("the running loop's configuration is unreadable", exc_info=True)
                return None
            if config is None:
                return None
            self._answered = True
            try:
                self.model_per_step = self._ask(*config)
            except Exception:  # the line goes on with the run's own steps
                _log.info("the store's model gave no time for the running loop",
                          exc_info=True)
                self.model_per_step = None
            return self.model_per_step

    def _ask(self, network: str, batch_size: int, gpu: str | None, gpu_count: int) -> float | None:
        from gpuperf_magics.hardware.catalog import UnknownGPUError, lookup
        from gpuperf_magics.prediction.predict import predict_time

        if self.network is None or network.lower() != self.network.lower():
            return None
        frame = predict_time(self.store, self.network, batch_sizes=[int(batch_size)],
                             iterations=1, gpus=[gpu] if gpu else None,
                             gpu_count=max(1, gpu_count) if gpu else None).frame
        if gpu is None:
            rows = frame[frame["gpu"].isna()]
        else:
            try:
                names = {gpu, str(lookup(gpu)["gpu_name"])}
            except UnknownGPUError:
                names = {gpu}
            rows = frame[frame["gpu"].isin(names)]
        if rows.empty:
            return None
        value = float(rows["time_s"].iloc[0])
        return value if math.isfinite(value) and value > 0 else None


def live_prior(store: Any = None, network: str | None = None) -> LivePrior:
    """The live line's prior: the store's model of ``network`` (default: the store's latest
    network), fitted now (or taken from the cache of this store revision).

    Always a prior: where the store has no model of the network (no store, no run, a model
    that cannot be fitted) the prior leaves the line to the run's own steps, and its
    :attr:`~LivePrior.reason` says why.

    Examples
    --------
    >>> import gpuperf_magics as gm
    >>> prior = live_prior("runs.sqlite", "mlp")  # doctest: +SKIP
    >>> with gm.profile_training("mlp", "runs.sqlite", epochs=3, live=prior):  # doctest: +SKIP
    ...     train()
    """
    from gpuperf_magics.prediction.store_model import PredictionError, fit_store
    from gpuperf_magics.store import Store, StoreError

    try:
        st = store if isinstance(store, Store) else Store(store)
        runs = fit_store(st, network).runs
    except (PredictionError, StoreError, ValueError, OSError) as exc:
        # No store, no run, no model: the cell runs all the same, on its own steps.
        _log.info("no model for the live line: %s", exc)
        return LivePrior(None, network, reason=str(exc))
    net = str(runs["network"].iloc[0])
    try:
        # One answer now, at the latest run's batch: what the model prepares lazily on its
        # first prediction is done here, not in the thread beside the loop.
        from gpuperf_magics.prediction.predict import predict_time

        batch = runs["batch_size"].dropna()
        predict_time(st, net, iterations=1,
                     batch_sizes=[int(batch.iloc[-1])] if len(batch) else None)
    except Exception:  # the prior still answers later, or leaves the line to the run
        _log.info("warming the model up for the live line failed", exc_info=True)
    return LivePrior(st, net)
