"""Another batch size from the one measured on a GPU (gpuperf_magics.model.batch_single): the
elasticity learnt from known series, the move and its interval, the model answering from one
GPU point (and keeping the time per sample on the CPU), and the shipped file rebuilt."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_data import NO_DATA, SHARED_DATA

from gpuperf_magics.model import TrainingTimeModel, batch_single

ROOT = Path(__file__).resolve().parents[1]


def _series(e: float, points: int = 5, scale: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    x = 8.0 * 2.0 ** np.arange(points)
    return x, scale * x ** e


def test_a_known_elasticity_is_recovered_with_no_spread() -> None:
    learnt = batch_single.learn([_series(0.6), _series(0.6, points=3, scale=2.0)])
    assert np.allclose(learnt["elasticity"], 0.6, atol=1e-4)
    assert learnt["knots"] == list(batch_single.KNOTS)
    assert np.allclose(learnt["deviation_quantiles"], 0.0, atol=1e-4)
    assert learnt["series"] == 2


def test_the_elasticity_follows_the_time_per_iteration() -> None:
    """Short iterations (a few ms: the host's) hardly grow with the batch, long ones (seconds:
    a saturated GPU) nearly in proportion: the curve recovers each where its series lie, and
    never falls as the time grows."""
    short = [_series(0.1, scale=1e-3)] * 2  # 8 ms to 13 ms per iteration
    long = [_series(0.9, scale=0.1)] * 2  # 0.65 s to 8 s
    learnt = batch_single.learn(short + long)
    curve = dict(zip(learnt["knots"], learnt["elasticity"], strict=True))
    assert curve[-2.0] == pytest.approx(0.1, abs=0.02)
    assert curve[0.5] == pytest.approx(0.9, abs=0.02)
    assert np.all(np.diff(learnt["elasticity"]) >= 0)


def test_each_series_weighs_one_however_many_points_it_has() -> None:
    """Three series at 0.9 with few points, two at 0.3 with many, at the same times: the
    median is 0.9 (three series of five), not 0.3 (most pairs); the spread holds both."""
    few = _series(0.9, points=3, scale=0.1 / 8 ** 0.9)  # 0.10 to 0.35 s per iteration
    many = _series(0.3, points=8, scale=0.1 / 8 ** 0.3)  # 0.10 to 0.43 s
    learnt = batch_single.learn([few] * 3 + [many] * 2)
    curve = dict(zip(learnt["knots"], learnt["elasticity"], strict=True))
    assert curve[-1.0] == pytest.approx(0.9, abs=0.05)
    q = dict(zip(batch_single.LEVELS, learnt["deviation_quantiles"], strict=True))
    assert q[0.1] == pytest.approx(-0.6, abs=0.05) and q[0.9] == pytest.approx(0.0, abs=0.05)


def test_pairs_closer_than_twice_or_beyond_eight_times_are_not_learnt_from() -> None:
    x = np.array([10.0, 12.0, 100.0])  # 10-12: too close; 10-100, 12-100: too far
    assert batch_single.learn([(x, x ** 0.5)])["series"] == 0
    # Elasticities outside [0, 1] (noise) are clipped: a time per iteration neither falls
    # with the batch nor grows faster than it.
    falling = batch_single.learn([(np.array([8.0, 32.0]), np.array([2.0, 1.0]))])
    assert falling["elasticity"] == [0.0] * len(batch_single.KNOTS)


def test_the_move_and_its_interval_grow_with_the_log_distance() -> None:
    e = batch_single.elasticity(0.1)
    assert 0.0 < e < 1.0
    assert batch_single.elasticity(0.003) <= e <= batch_single.elasticity(3.0)
    assert batch_single.elasticity(0.0) == batch_single.elasticity(1e-9)  # flat below 3 ms
    lo2, hi2, ex2 = batch_single.interval(32, 64, 0.8)
    lo8, hi8, ex8 = batch_single.interval(32, 256, 0.8)
    assert lo8 == pytest.approx(3 * lo2) and hi8 == pytest.approx(3 * hi2)
    assert lo8 < 0 < hi8 and ex8 > ex2 > 0
    # Down: the same spread, mirrored.
    lo, hi, _ = batch_single.interval(256, 32, 0.8)
    assert lo == pytest.approx(-hi8) and hi == pytest.approx(-lo8)
    assert batch_single.interval(32, 32, 0.8) == (0.0, 0.0, 0.0)


def _one_point(gpu: str | None) -> pd.DataFrame:
    row = {"network": "net", "batch_size": 32, "iterations": 100}
    if gpu is not None:
        row["gpu"] = gpu
    return pd.DataFrame([row])


def test_one_batch_measured_on_a_gpu_moves_as_the_public_elasticity() -> None:
    x = _one_point("Tesla T4")
    model = TrainingTimeModel(public_data=False).fit(x, np.array([5.0]))
    asked = x.assign(batch_size=[256])
    table = model.predict_table(asked)
    e = batch_single.elasticity(0.05)
    assert table["per_iteration_s"].iloc[0] == pytest.approx(0.05 * 8 ** e)
    assert "public GPU batch series" in table["detail"].iloc[0]
    lo, hi, expected = batch_single.interval(32, 256, model.coverage)
    t = table["time_s"].iloc[0]
    # At least the elasticities' spread (the run's own noise may add to it).
    assert table["time_low_s"].iloc[0] <= t * math.exp(lo) * (1 + 1e-9)
    assert table["time_high_s"].iloc[0] >= t * math.exp(hi) * (1 - 1e-9)
    assert table["expected_mape"].iloc[0] >= expected - 1e-12


def test_one_batch_measured_on_the_cpu_keeps_its_time_per_sample() -> None:
    x = _one_point(None)
    model = TrainingTimeModel(public_data=False).fit(x, np.array([5.0]))
    table = model.predict_table(x.assign(batch_size=[256]))
    assert table["per_iteration_s"].iloc[0] == pytest.approx(0.05 * 8)
    assert "time per sample kept" in table["detail"].iloc[0]


@pytest.mark.skipif(not SHARED_DATA.is_dir(), reason=NO_DATA)
def test_the_shipped_elasticities_are_what_their_script_rebuilds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPERF_DATA_HOME", str(SHARED_DATA))
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    path = ROOT / "benchmarks" / "batch_elasticity.py"
    spec = importlib.util.spec_from_file_location("batch_elasticity", path)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "batch_elasticity", script)
    spec.loader.exec_module(script)
    shipped = (ROOT / "gpuperf_magics" / "model" / batch_single.PARAMS_FILE).read_text()
    assert script.build() == shipped


def test_the_networks_own_batch_series_on_that_gpu_come_before_the_public_curve() -> None:
    """Measured at batch 32, 64 and 128 at depth 1, growing as the batch to the power 0.5,
    and at batch 32 alone at depth 2: depth 2 at batch 128 grows as depth 1 did, not as the
    public curve says; another GPU's series does not count, nor the query's own series."""
    rows = [{"network": "net", "depth": 1, "batch_size": b, "iterations": 10,
             "gpu": "Tesla T4", "time_s": 10 * 0.02 * (b / 32) ** 0.5} for b in (32, 64, 128)]
    rows.append({"network": "net", "depth": 2, "batch_size": 32, "iterations": 10,
                 "gpu": "Tesla T4", "time_s": 10 * 0.05})
    frame = pd.DataFrame(rows)
    model = TrainingTimeModel(public_data=False).fit(frame.drop(columns="time_s"),
                                                     frame["time_s"])
    asked = pd.DataFrame([{"network": "net", "depth": 2, "batch_size": 128, "iterations": 10,
                           "gpu": "Tesla T4"}])
    table = model.predict_table(asked)
    assert table["per_iteration_s"].iloc[0] == pytest.approx(0.05 * 4 ** 0.5, rel=1e-6)
    assert "this network's other batch series" in table["detail"].iloc[0]
    # The same runs with depth 1's series on another GPU: depth 2 on the T4 has no series of
    # its own network there, and takes the public curve.
    elsewhere = frame.assign(gpu=np.where(frame["depth"] == 1, "NVIDIA A100-SXM4-40GB",
                                          "Tesla T4"))
    model = TrainingTimeModel(public_data=False).fit(elsewhere.drop(columns="time_s"),
                                                     elsewhere["time_s"])
    table = model.predict_table(asked)
    e = batch_single.elasticity(0.05)
    assert table["per_iteration_s"].iloc[0] == pytest.approx(0.05 * 4 ** e, rel=1e-6)


def _local(rows: list[tuple[int, int, float]]):
    """The fitted local model of one network on a T4: (depth, batch, seconds per iteration)."""
    frame = pd.DataFrame([{"network": "net", "depth": d, "batch_size": b, "iterations": 10,
                           "gpu": "Tesla T4", "time_s": 10 * t} for d, b, t in rows])
    model = TrainingTimeModel(public_data=False).fit(frame.drop(columns="time_s"),
                                                     frame["time_s"])
    return model.estimator_.local_["net"]


def test_pairs_reaching_the_asked_batch_do_not_tell_how_a_series_grows() -> None:
    """Validation holds out a batch size from every series at once: a pair of another series
    that reaches it would be the held-out answer itself. Depth 1 and 3 measured at 32 and
    128, depth 2 at 128 alone: asked depth 2 at 32, only pairs not at 32 count (none here),
    so the public curve answers; asked at 512, depth 1's and 3's pairs 32-128 count."""
    from gpuperf_magics.model.local import own_elasticity, route

    local = _local([(1, 32, 0.02), (1, 128, 0.02 * 4 ** 0.3), (2, 128, 0.05),
                    (3, 32, 0.06), (3, 128, 0.06 * 4 ** 0.3)])
    index = local.index
    j = index.batch_axis
    c = int(np.flatnonzero((index.values[:, 0] == 2) & (index.values[:, j] == 128))[0])
    everyone = np.ones(index.n, dtype=bool)
    down = index.values[c].copy()
    down[j] = 32
    assert own_elasticity(index, route(index, down, index.hw[c], everyone), down) is None
    up = index.values[c].copy()
    up[j] = 512
    r = route(index, up, index.hw[c], everyone)
    assert r.position == "single"
    assert own_elasticity(index, r, up) == pytest.approx(0.3)


def test_a_runs_set_up_time_is_not_grown_with_the_batch() -> None:
    """Measured at batch 32 alone on a GPU, 0.05 s per iteration and 5 s of set-up over 10
    iterations: batch 256 is the iteration grown as the public curve of 0.05 s says, plus the
    same set-up."""
    frame = pd.DataFrame([{"network": "net", "batch_size": 32, "iterations": n,
                           "gpu": "Tesla T4", "time_s": 5.0 + 0.05 * n} for n in (10, 40)])
    model = TrainingTimeModel(public_data=False).fit(frame.drop(columns="time_s"),
                                                     frame["time_s"])
    asked = pd.DataFrame([{"network": "net", "batch_size": 256, "iterations": 10,
                           "gpu": "Tesla T4"}])
    table = model.predict_table(asked)
    e = batch_single.elasticity(0.05)
    assert table["time_s"].iloc[0] == pytest.approx(5.0 + 10 * 0.05 * 8 ** e, rel=1e-3)
