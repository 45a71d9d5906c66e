"""Networks validated in worker processes (gpuperf_magics.model.parallel): the same answers to
the bit as in one process, and how many processes a fit asks for."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.parallel import AUTO_WORKERS, PARALLEL_FROM, _shares, workers

GPUS = {"Tesla T4": 1.0, "NVIDIA A100-SXM4-40GB": 0.25, "Tesla V100-SXM2-32GB": 0.45}


def _zoo(networks: int = 5, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """Several networks on three GPUs over a batch grid, 3% noise: every kind of move (batch
    inside and beyond, another GPU, refits of the cross-series model) is validated."""
    rng = np.random.default_rng(seed)
    rows = []
    for n in range(networks):
        flops = 1e9 * rng.uniform(0.5, 8)
        for gpu, speed in GPUS.items():
            for b in (8, 16, 32, 64, 128, 256):
                per_it = 0.004 + speed * flops * b * 2e-13
                rows.append({"network": f"cnn{n}", "gpu": gpu, "batch_size": b,
                             "iterations": 100, "arch_flops_fwd": flops,
                             "time_s": 100 * per_it * (1 + 0.03 * rng.standard_normal())})
    frame = pd.DataFrame(rows)
    return frame.drop(columns="time_s"), frame["time_s"].to_numpy()


def test_worker_processes_give_the_answers_of_one_process(caplog) -> None:
    x, y = _zoo()
    query = pd.concat([x.iloc[::5], x.iloc[::7].assign(batch_size=x["batch_size"] * 3),
                       x.iloc[::4].assign(gpu="NVIDIA H100 80GB HBM3")], ignore_index=True)
    one = TrainingTimeModel(n_jobs=1).fit(x, y)
    with caplog.at_level(logging.DEBUG, logger="gpuperf_magics.model.parallel"):
        two = TrainingTimeModel(n_jobs=2).fit(x, y)
    # The second fit did go to two worker processes (no fall-back to this one).
    said = [r.getMessage() for r in caplog.records if r.name == "gpuperf_magics.model.parallel"]
    assert said == ["validating 5 networks in 2 processes"]
    a, b = one.predict_table(query), two.predict_table(query)
    for column in a.columns:
        assert a[column].equals(b[column]), column
    assert one.estimator_.moves_ == two.estimator_.moves_
    assert one.estimator_.advice_ == two.estimator_.advice_
    for bucket, res in one.estimator_.evidence_residuals_.items():
        assert np.array_equal(res, two.estimator_.evidence_residuals_[bucket])


def test_workers_follow_joblib_and_start_none_below_the_threshold(monkeypatch) -> None:
    import joblib

    monkeypatch.setattr(joblib, "cpu_count", lambda *a, **k: 16)
    assert workers(None, PARALLEL_FROM - 1, 15) == 1  # too small to repay a pool
    assert workers(None, PARALLEL_FROM, 1) == 1  # one network: nothing to share
    assert workers(None, PARALLEL_FROM, 15) == AUTO_WORKERS
    assert workers(None, PARALLEL_FROM, 3) == 3  # never more than the networks
    assert workers(-1, 10, 40) == 16
    assert workers(-2, 10, 40) == 15
    assert workers(4, 10, 2) == 2
    assert workers(1, 10**6, 40) == 1


@pytest.mark.parametrize("bad", [0, 1.5, True, "all"])
def test_a_bad_n_jobs_says_what_to_give(bad) -> None:
    x, y = _zoo(networks=2)
    with pytest.raises(ValueError, match="n_jobs must be a whole number"):
        TrainingTimeModel(n_jobs=bad).fit(x, y)


def test_shares_put_the_largest_networks_on_the_least_loaded_worker() -> None:
    shares = _shares([100, 10, 60, 50, 5], 2)
    assert sorted(i for s in shares for i in s) == [0, 1, 2, 3, 4]
    loads = sorted(sum([100, 10, 60, 50, 5][i] for i in s) for s in shares)
    assert loads == [110, 115]
    assert _shares([3], 4) == [[0]]  # no empty share
