"""Validation of several networks at once, in worker processes.

Validation (:mod:`~.validation`) is most of a fit: every configuration of a network left out
and predicted by every candidate, each held-out axis value and group of GPUs refitted. It is
done per network, from that network's configurations alone, with its own seeded generator, so
the networks can be validated in any order and in other processes: the result is the same to
the bit (a test checks it). :func:`validate_all` sends them to a `joblib` process pool (the
``loky`` backend, which scikit-learn uses and which is safe in a notebook kernel), a share of
the networks per worker, largest first.

A pool costs time to start (1.8 s for two workers on the project's 2-core machine, of which
1.1 s is each worker importing numpy, pandas, scipy and the model's modules; scikit-learn is
not imported there), and joblib keeps the workers for the next fits (5 minutes idle), so
``n_jobs=None`` validates in this process below :data:`PARALLEL_FROM` configurations, and
uses at most :data:`AUTO_WORKERS` processes. Measured (``benchmarks/fit_speed.py --jobs``):
see docs/performance.md.

A worker imports the package afresh: a change made to its modules' state in this process (a
test's or a benchmark's patch of a constant) is not seen there; fit with ``n_jobs=1`` then.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpuperf_magics.model.inputs import Prepared
from gpuperf_magics.model.network_fit import FitSettings, NetworkFit, fit_network, predict_network
from gpuperf_magics.model.validation import validate

logger = logging.getLogger(__name__)

#: Configurations from which ``n_jobs=None`` validates in a process pool: below, starting
#: the pool costs about what it saves on two cores.
PARALLEL_FROM = 1000
#: Most processes ``n_jobs=None`` starts (each holds its own copy of the networks it
#: validates; more than this saves little at the sizes users fit).
AUTO_WORKERS = 8


@dataclass
class Refitter:
    """What validation reads of the model it validates (``validation.DefaultModel``), and no
    more: the settings of a network's fit, so that a worker is sent these and the networks it
    validates, not the whole model. Its refits give no advice (the model's own refits drop
    theirs: validation restores ``advice_``)."""

    settings: FitSettings
    random_state: int
    coverage: float
    advice_: list[str] = field(default_factory=list)

    def _fit_network(self, net: str, prep: Prepared, rows: np.ndarray, y: np.ndarray
                     ) -> NetworkFit:
        return fit_network(self.settings, prep, rows, y)

    def _predict_network(self, fit: NetworkFit, prep: Prepared, rows: np.ndarray, cov: float,
                         out: dict) -> None:
        predict_network(self.settings, fit, prep, rows, cov, out)


Job = tuple[Any, tuple[Any, ...]]  # (a network's _Local, its configuration medians)
Result = tuple[dict[str, list[dict[str, float]]], dict[str, list[float]],
               dict[str, list[float]]]


def workers(n_jobs: int | None, configurations: int, networks: int) -> int:
    """Processes to validate ``networks`` networks of ``configurations`` configurations in.

    ``n_jobs``: joblib's meaning (1: this process; -1: every core; -2: all but one), and
    None: every core up to :data:`AUTO_WORKERS` from :data:`PARALLEL_FROM` configurations,
    else this process. Never more than there are networks.
    """
    if n_jobs is None:
        if configurations < PARALLEL_FROM or networks < 2:
            return 1
        from joblib import cpu_count

        return int(min(cpu_count(), AUTO_WORKERS, networks))
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a whole number other than 0 (1: no worker "
                         f"processes; -1: every core) or None, not {n_jobs!r}")
    if n_jobs < 0:
        from joblib import cpu_count

        n_jobs = max(cpu_count() + 1 + int(n_jobs), 1)
    return int(max(min(n_jobs, networks), 1))


def validate_all(refitter: Refitter, jobs: Sequence[Job], n_workers: int) -> list[Result]:
    """``validation.validate`` of every job, in order; in ``n_workers`` processes where that
    is more than one (a share of the jobs each, balanced by configurations). Where a pool
    cannot be started (a platform without processes), in this process, with a warning."""
    if n_workers <= 1 or len(jobs) < 2:
        return [validate(refitter, local, medians) for local, medians in jobs]
    shares = _shares([local.index.n for local, _ in jobs], n_workers)
    from joblib import Parallel, delayed
    from joblib.externals.loky.process_executor import TerminatedWorkerError

    try:
        logger.debug("validating %d networks in %d processes", len(jobs), len(shares))
        done = Parallel(n_jobs=len(shares), backend="loky")(
            delayed(_validate_share)(refitter, [jobs[i] for i in share]) for share in shares)
    except (OSError, NotImplementedError, TerminatedWorkerError) as error:  # pragma: no cover
        logger.warning("validating in this process: the worker processes failed (%s); "
                       "TrainingTimeModel(n_jobs=1) skips them", error)
        return [validate(refitter, local, medians) for local, medians in jobs]
    out: list[Result | None] = [None] * len(jobs)
    for share, results in zip(shares, done, strict=True):
        for i, result in zip(share, results, strict=True):
            out[i] = result
    return [r for r in out if r is not None]


def _validate_share(refitter: Refitter, jobs: list[Job]) -> list[Result]:
    return [validate(refitter, local, medians) for local, medians in jobs]


def _shares(sizes: Sequence[int], n: int) -> list[list[int]]:
    """Job positions per worker: the largest job first, each to the least loaded worker (a
    network's validation grows with its configurations)."""
    load = [0] * n
    shares: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(sizes)), key=lambda j: -sizes[j]):
        w = min(range(n), key=load.__getitem__)
        shares[w].append(i)
        load[w] += sizes[i]
    return [s for s in shares if s]
