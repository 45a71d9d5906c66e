"""A model fitted on a store's runs of one network: which runs, which features, which times.

:func:`fit_store` reads a store's completed runs, keeps those of one network that a model can
learn from (:func:`usable_runs`), chooses the features every run has, turns profiled runs into
robust per-iteration times (:func:`robust_times`, :func:`per_iteration_table`) and fits a
:class:`~gpuperf_magics.model.TrainingTimeModel`. Fitted models are cached per store file and
network and refitted only when the store was written in between.

This is the part of prediction that knows the store; :mod:`~.predict` builds the
configurations asked for and asks the fitted model.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from gpuperf_magics.model import TrainingTimeModel

__all__ = [
    "StoreFit",
    "StoreModel",
    "fit_store",
    "per_iteration_table",
    "resolve_network",
    "robust_times",
    "steady_state",
    "usable_runs",
]

#: Columns of a store's runs that the predictor uses besides the user's own features.
BASE_FEATURES = ("network", "batch_size", "iterations", "gpu", "gpu_count")


class PredictionError(ValueError):
    """A prediction cannot be made as asked; the message says what to do instead."""


# --------------------------------------------------------------------------- fitting
_CACHE: dict[tuple[str, tuple[str, int], str | None], Any] = {}
_LOCK = threading.Lock()


def _feature_columns(runs: pd.DataFrame, notes: list[str] | None = None) -> list[str]:
    """The base columns and the features every run has; a feature some runs lack is left
    out (with a note), as a model cannot learn from a value that is not there."""
    features = []
    for col in runs.attrs.get("feature_columns", []):
        have = int(runs[col].notna().sum())
        if have == len(runs):
            features.append(col)
        elif have and notes is not None:
            notes.append(f"feature {col!r} left out: {len(runs) - have} of {len(runs)} runs "
                         "lack it")
    return [*BASE_FEATURES, *features]


def steady_state(runs: pd.DataFrame) -> bool:
    """Whether every run's time covers steady iterations only (no set-up to amortise).

    True for profiled runs (warm-up is left out of ``time_s``) and for per-step imports
    (``iterations`` = 1). Imported whole-run times with varying iteration counts (set-up
    included, as in the paper's data) are not: the model then learns the set-up too.
    """
    return bool(((runs["source"] == "profile") | (runs["iterations"] == 1)).all())


#: Share of the slowest and of the fastest steady iterations left out of a profiled run's
#: per-iteration time (a trimmed mean).
TRIM = 0.1


#: The one rule for a run's time per iteration, as the outputs name it: the job time learnt
#: from a store and ``--remaining`` both take it.
PER_ITERATION_RULE = "trimmed mean of its steady iterations (median on a busy run)"


def steady_per_iteration(durations: Any, *, busy: bool = False) -> float | None:
    """A run's seconds per iteration from its steady (non-warm-up) iterations: the mean of
    the middle 80 % (:data:`TRIM` left out at each end), their median on a run flagged busy;
    None with fewer than 3 iterations left. See :func:`robust_times` for why."""
    import numpy as np

    steady = np.sort(np.asarray(durations, dtype=float))
    k = int(len(steady) * TRIM)
    if len(steady) - 2 * k < 3:
        return None
    if busy:
        return float(np.median(steady))
    return float(steady[k : len(steady) - k].mean())


def robust_times(store: Any, runs: pd.DataFrame) -> pd.Series:
    """Seconds per run to learn from: profiled runs' steady time as a robust mean × count.

    A short profiling run can hold one stall (another process, a page-fault storm, a
    checkpoint) that is most of its total; the mean of the middle 80 % of its iterations keeps
    regular costs (data loading every iteration) and drops such rare events. On a run flagged
    busy (other processes took CPU time while it ran) the stalls are not rare, and the median
    iteration stands for the run. Imported rows are taken as they are.
    """
    import numpy as np
    import pandas as pd

    times = runs["time_s"].astype(float).copy()
    profiled = np.flatnonzero((runs["source"] == "profile").to_numpy())
    run_ids = runs["run_id"].to_numpy()
    # One query for every run's iterations (not one per run).
    steady = _steady_durations(store.iterations([int(run_ids[i]) for i in profiled]))
    busy = runs["busy"].tolist() if "busy" in runs else None
    values = times.to_numpy(copy=True)
    iterations = runs["iterations"].to_numpy()
    none = np.empty(0)
    for i in profiled:
        flag = None if busy is None else busy[i]
        per_iteration = steady_per_iteration(
            steady.get(int(run_ids[i]), none),
            busy=flag is not None and not pd.isna(flag) and bool(flag))
        if per_iteration is not None:
            values[i] = per_iteration * int(iterations[i])
    return pd.Series(values, index=times.index, name=times.name)


def _steady_durations(every: pd.DataFrame) -> dict[int, Any]:
    """Each run's steady (non-warm-up) durations, by run id: numpy slices of one array, not a
    pandas group and mask per run (those made most of a 2,000-run fit's time)."""
    import numpy as np

    keep = ~every["warmup"].to_numpy(dtype=bool)
    ids = every["run_id"].to_numpy()[keep]
    durations = every["duration_s"].to_numpy(dtype=float)[keep]
    order = np.argsort(ids, kind="stable")
    ids, durations = ids[order], durations[order]
    if not len(ids):
        return {}
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    ends = np.r_[starts[1:], len(ids)]
    return {int(ids[s]): durations[s:e] for s, e in zip(starts, ends, strict=True)}


def per_iteration_table(
    runs: pd.DataFrame, columns: list[str], times: pd.Series | None = None
) -> tuple[pd.DataFrame, Any]:
    """``X, y`` the store's model learns from (``times`` default to ``runs["time_s"]``).

    Steady-state runs (see :func:`steady_state`) become one iteration each, so the time of a
    job is the time of one iteration × its iterations and a longer job is no extrapolation;
    whole-run times are kept as they are.
    """
    from gpuperf_magics.model.inputs import precision_of

    y = runs["time_s"] if times is None else times
    x = runs[columns]
    precision = precision_of(runs)
    if any(p is not None for p in precision):  # which peak a GPU move follows (not a feature)
        x = x.assign(precision=precision)
    if steady_state(runs):
        return x.assign(iterations=1), y / runs["iterations"]
    return x, y


def usable_runs(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """One network's runs a model can learn from, and notes on what was left out."""
    notes = []
    no_batch = runs["batch_size"].isna()
    if no_batch.any():
        ids = ", ".join(str(i) for i in runs.loc[no_batch, "run_id"])
        notes.append(f"left out run(s) {ids}: no batch size was recorded (was the model in "
                     "train() mode? gpuperf_magics.Store().delete(id) removes a run)")
        runs = runs[~no_batch]
    on_gpu = runs["gpu"].notna()
    if on_gpu.any() and not on_gpu.all() and len(runs):
        # CPU and GPU times cannot share one model; follow the device of the latest run.
        keep = on_gpu if bool(on_gpu.iloc[-1]) else ~on_gpu
        kind, other = ("GPU", "CPU") if bool(on_gpu.iloc[-1]) else ("CPU", "GPU")
        notes.append(f"learnt from the {kind} runs (the latest run's device); "
                     f"{int((~keep).sum())} {other} run(s) left out")
        runs = runs[keep]
    return runs.reset_index(drop=True), notes


#: Architecture figures that become features when runs of one name differ in them (a depth
#: or width study named as one network).
ARCH_FEATURES = ("arch_depth", "arch_params", "arch_flops_fwd_bwd")


def _architecture_features(runs: pd.DataFrame, notes: list[str]) -> list[str]:
    """The ``arch_*`` figures that vary among one network's runs, as features.

    Runs named alike but built differently (``--name resnet`` over ResNet-18/34/50) are one
    study: the model learns how time follows depth, parameters and FLOPs, and predicts for the
    latest run's architecture unless ``--set arch_depth=...`` says otherwise.
    """
    varying = [c for c in ARCH_FEATURES if c in runs.columns and runs[c].notna().all()
               and runs[c].nunique() > 1]
    if varying:
        notes.append(f"runs of {runs['network'].iloc[0]!r} differ in architecture: learnt with "
                     f"{', '.join(varying)} as features, predicted for the latest run's "
                     "(--set arch_depth=N for another; separate networks need their own --name)")
    return varying


@dataclass(frozen=True)
class StoreModel:
    """A model fitted on one network's runs of a store, and how the store's runs feed it.

    Attributes
    ----------
    model : TrainingTimeModel
    features : list of str
        The store's columns the model was fitted on.
    precision : str or None
        The latest run's precision (predictions run as it did).
    steady_state : bool
        The model learnt the time of one iteration (profiled runs), not whole runs.
    notes : list of str
        Runs left out and why.
    """

    model: TrainingTimeModel
    features: list[str]
    precision: str | None
    steady_state: bool
    notes: list[str]


class StoreFit(NamedTuple):
    """What :func:`fit_store` returns: one network's fitted model and the runs it learnt from.

    Attributes
    ----------
    model : StoreModel
        The fitted model and how the store's runs feed it (``model.model`` is the
        :class:`~gpuperf_magics.model.TrainingTimeModel`).
    runs : DataFrame
        The network's completed runs the model was fitted on (runs no model can use left
        out), in the store's order: the latest run is the last row.
    """

    model: StoreModel
    runs: pd.DataFrame


def fit_store(store: Any = None, network: str | None = None) -> StoreFit:
    """The model of one network fitted on a store's completed runs, and those runs.

    Each network gets its own model, on the features its own runs have; a run no model can use
    (no batch size; a CPU run among GPU runs) is left out with a note (``StoreModel.notes``).
    Cached per store file and network: a second call refits only if the store was written in
    between (its :meth:`~gpuperf_magics.Store.token` changed).

    Returns
    -------
    StoreFit
        ``model`` (a :class:`StoreModel`) and ``runs``; it unpacks as ``model, runs``.

    Raises
    ------
    PredictionError
        The store has no completed run of the network, or the network is unknown.
    """
    from gpuperf_magics.model import TrainingTimeModel
    from gpuperf_magics.store import Store

    st = store if isinstance(store, Store) else Store(store)
    token = st.token()
    with _LOCK:
        for stale in [k for k in _CACHE if k[0] == str(st.path) and k[1] != token]:
            del _CACHE[stale]  # the file changed: its models and runs are history
        cached_runs = _CACHE.get((str(st.path), token, None))
    if cached_runs is None:
        all_runs = st.runs(status="ok")
        all_runs = all_runs[all_runs["time_s"] > 0].reset_index(drop=True)
        with _LOCK:
            _CACHE[(str(st.path), token, None)] = all_runs
    else:
        all_runs = cached_runs
    if all_runs.empty:
        raise PredictionError(
            f"the store {st.path} has no completed run to learn from: profile a training cell "
            "with %%profile_training (or gpuperf_magics.profile_training) first, or import "
            "measurements with Store.import_table"
        )
    net = resolve_network(all_runs, network)
    key = (str(st.path), token, net)
    with _LOCK:
        cached = _CACHE.get(key)
    if cached is not None:
        return cached
    mine = all_runs[all_runs["network"] == net]
    mine.attrs = dict(all_runs.attrs)
    runs, notes = usable_runs(mine)
    runs.attrs = dict(all_runs.attrs)
    if runs.empty:
        raise PredictionError(f"no usable run of {net!r}: " + "; ".join(notes))
    columns = _feature_columns(runs, notes) + _architecture_features(runs, notes)
    try:
        model = TrainingTimeModel().fit(
            *per_iteration_table(runs, columns, robust_times(st, runs))
        )
    except ValueError as exc:
        raise PredictionError(f"cannot fit a model for {net!r} on {st.path}: {exc}") from exc
    from gpuperf_magics.model.inputs import precision_of

    fitted = StoreModel(model, columns, precision_of(runs.tail(1))[0], steady_state(runs),
                        notes)
    result = StoreFit(fitted, runs)
    with _LOCK:
        _CACHE[key] = result
    return result


def resolve_network(runs: pd.DataFrame, network: str | None) -> str:
    """The network a question is about: ``network`` as the runs spell it (any case), or the
    latest run's when None.

    Raises
    ------
    PredictionError
        No run of that network; the message lists the known ones.
    """
    known = list(dict.fromkeys(runs["network"].tolist()))
    if network is None:
        return str(runs["network"].iloc[-1])
    if network in known:
        return network
    lowered = {k.lower(): k for k in known}
    if network.lower() in lowered:
        return lowered[network.lower()]
    raise PredictionError(
        f"no completed runs of network {network!r} in the store; known networks: "
        + ", ".join(repr(k) for k in known)
    )
