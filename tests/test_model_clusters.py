"""Intervals of one more move from few validated ones: of a GPU never measured from the few
GPUs that were, and of any move from few validated residuals (gpuperf_magics.model.clusters,
and their use by the default model)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy.special import stdtrit

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.clusters import cluster_interval, sample_interval
from gpuperf_magics.model.evidence import empty_base


def _validated(rng: np.random.Generator, n_gpus: int, tau: float, noise: float,
               runs: int = 10) -> tuple[np.ndarray, np.ndarray, float]:
    """Residuals as validation makes them: each GPU, whose effect is drawn with spread
    ``tau``, moved from the mean of the others (``runs`` configurations each, with ``noise``),
    and one more run on one more GPU moved from all of them."""
    effect = rng.normal(0.0, tau, n_gpus + 1)
    res = np.concatenate([effect[g] - np.delete(effect[:n_gpus], g).mean()
                          + rng.normal(0.0, noise, runs) for g in range(n_gpus)])
    new = effect[n_gpus] - effect[:n_gpus].mean() + rng.normal(0.0, noise)
    return res, np.repeat(np.arange(n_gpus), runs), float(new)


@pytest.mark.parametrize("n_gpus", [3, 4, 8])
def test_a_new_gpu_is_inside_its_80_percent_interval_80_percent_of_the_time(
        n_gpus: int) -> None:
    """Known noise: the GPUs' effects spread by 0.3 in log time, the runs by 0.1. The
    pooled residuals' 10th-90th percentiles cover less the fewer the GPUs (a new draw falls
    inside the range of n draws (n − 1)/(n + 1) of the time); the cluster interval covers
    80% (±3.6%, twice the binomial σ of 500 draws)."""
    rng = np.random.default_rng(n_gpus)
    inside = pooled = 0
    draws = 500
    for _ in range(draws):
        res, groups, new = _validated(rng, n_gpus, tau=0.3, noise=0.1)
        interval = cluster_interval(res, groups, 0.8)
        assert interval is not None
        inside += interval[0] <= new <= interval[1]
        lo, hi = np.quantile(res, [0.1, 0.9])
        pooled += lo <= new <= hi
    assert inside / draws == pytest.approx(0.8, abs=0.036)
    if n_gpus <= 4:
        assert pooled / draws < 0.76  # what the pooled quantiles gave


@pytest.mark.parametrize("n_gpus,runs", [(4, 2), (6, 2), (5, 3)])
def test_few_configurations_per_gpu_still_cover_80_percent(n_gpus: int, runs: int) -> None:
    """Runs as noisy as the GPUs differ, two or three per GPU: their distances to their own
    GPU's mean understate their spread by √((n − 1)/n), which the interval scales back
    (unscaled, four GPUs of two runs covered 70%), and whose spread is known from few
    degrees of freedom (Student's t): 80% within the binomial tolerance of 1000 draws (±2.6%),
    or wider by a few points (each term at its own t errs wide: 83% for four GPUs of two)."""
    rng = np.random.default_rng(10 * n_gpus + runs)
    inside, draws = 0, 1000
    for _ in range(draws):
        res, groups, new = _validated(rng, n_gpus, tau=0.1, noise=0.2, runs=runs)
        lo, hi = cluster_interval(res, groups, 0.8)
        inside += lo <= new <= hi
    assert 0.8 - 0.026 <= inside / draws <= 0.8 + 0.05


def test_the_interval_of_exact_runs_is_students_t_on_the_gpus_spread() -> None:
    """Runs without noise: the interval is the mean ± t(G − 1) times the GPUs' spread, with
    the spread of effects recovered from residuals that are G/(G − 1) times them."""
    means = np.array([0.3, -0.1, -0.2, 0.0])
    res = np.repeat(means, 5)
    groups = np.repeat(np.arange(4), 5)
    lo, hi = cluster_interval(res, groups, 0.8)
    spread = np.var(means, ddof=1) * (3 / 4) ** 2 * (1 + 1 / 4)
    half = float(stdtrit(3, 0.9)) * math.sqrt(spread)
    assert (lo, hi) == pytest.approx((-half, half))
    # Ten times the configurations per GPU: the same four draws, the same interval.
    assert cluster_interval(np.repeat(means, 50), np.repeat(np.arange(4), 50), 0.8) == (
        pytest.approx((lo, hi)))


def test_the_runs_spread_is_their_own_quantile_not_a_normals() -> None:
    """GPUs that agree, runs with a heavy tail (one in ten 1.0 off, the rest 0.05): the
    interval is the runs' 80% quantile of distance to their GPU's mean, not 1.28 standard
    deviations (0.42, which the one-in-ten tail would have set)."""
    runs = np.array([0.05, -0.05] * 4 + [1.0, -1.0])
    res = np.tile(runs, 4)
    groups = np.repeat(np.arange(4), len(runs))
    lo, hi = cluster_interval(res, groups, 0.8)
    # Distances to each GPU's own mean of ten runs, scaled back by √(10/9), at Student's t
    # of the runs' 36 degrees of freedom.
    q = (float(np.quantile(np.abs(runs), 0.8)) * math.sqrt(10 / 9)
         * float(stdtrit(36, 0.9)) / float(stdtrit(1e9, 0.9)))
    assert (lo, hi) == pytest.approx((-q, q))
    assert hi < 1.28 * float(np.std(runs))


def test_from_ten_gpus_at_80_percent_the_pooled_percentiles_are_left_alone() -> None:
    """Ten GPUs: the pooled 10th and 90th percentiles are (at least) the second draw from each
    end, which covers a new draw 9/11 of the time; at 90% it takes twenty."""
    rng = np.random.default_rng(0)
    for n_gpus, coverage, drawn in [(9, 0.8, True), (10, 0.8, False), (19, 0.9, True),
                                    (20, 0.9, False)]:
        res, groups, _ = _validated(rng, n_gpus, tau=0.3, noise=0.1)
        assert (cluster_interval(res, groups, coverage) is not None) is drawn


def test_two_gpus_are_one_mirrored_draw_and_give_no_interval() -> None:
    res = np.array([0.2, 0.25, -0.2, -0.25])
    assert cluster_interval(res, np.array([0, 0, 1, 1]), 0.8) is None
    assert cluster_interval(res, np.zeros(4), 0.8) is None


def test_a_move_to_an_unmeasured_gpu_is_at_least_as_wide_as_the_gpus_spread_allows() -> None:
    """Four networks on four GPUs whose speeds miss the spec sheet by known factors: a fifth
    GPU's interval holds the cluster interval of the spec-sheet move's validated errors,
    wider than their pooled percentiles (four GPUs' errors, 96 configurations)."""
    factor = {"Tesla T4": 1.0, "NVIDIA GeForce RTX 2080 Ti": 0.75,
              "Tesla V100-SXM2-16GB": 1.35, "NVIDIA A100-SXM4-40GB": 0.8}
    peaks = {"Tesla T4": 8.1, "NVIDIA GeForce RTX 2080 Ti": 13.4,
             "Tesla V100-SXM2-16GB": 15.7, "NVIDIA A100-SXM4-40GB": 19.5}
    rows = [{"network": f"net{k}", "gpu": gpu, "batch_size": b, "iterations": 10,
             "time_s": 10 * 0.002 * (k + 1) * b * 8.1 / (peaks[gpu] * f)}
            for k in range(4) for gpu, f in factor.items() for b in (16, 32, 64, 128, 256, 512)]
    store = pd.DataFrame(rows)
    model = TrainingTimeModel(evidence=empty_base()).fit(store.drop(columns="time_s"),
                                                         store["time_s"])
    est = model.estimator_
    res, groups = est.evidence_residuals_["gpu:spec"], est.evidence_groups_["gpu:spec"]
    assert len(np.unique(groups[np.isfinite(groups)])) == 4 and len(groups) == len(res)
    # Still paired after sorting and pooling: the runs scale exactly, so one GPU's moves
    # err alike (its factor against the others'), and the four GPUs apart.
    for g in np.unique(groups[np.isfinite(groups)]):
        assert np.ptp(res[groups == g]) < 1e-6
    assert len(np.unique(np.round(res[np.isfinite(groups)], 6))) == 4
    # The chosen method's residuals keep their GPUs too (the intervals of other methods).
    transfer = est.local_["net0"].moves["transfer"]
    assert transfer.groups is not None and len(np.unique(transfer.groups)) == 4
    lo, hi = cluster_interval(res, groups, 0.8)
    pooled = np.quantile(res, [0.1, 0.9])
    assert hi - lo > pooled[1] - pooled[0]
    query = pd.DataFrame([{"network": "net0", "gpu": "Quadro RTX 6000", "batch_size": 64,
                           "iterations": 10}])
    table = model.predict_table(query)
    assert table["kind"].iloc[0] == "transfer"
    t = table.iloc[0]
    assert math.log(t["time_low_s"] / t["time_s"]) <= min(lo, 0.0) + 1e-9
    assert math.log(t["time_high_s"] / t["time_s"]) >= max(hi, 0.0) - 1e-9
    # A measured GPU asked at another batch is no new GPU: its move keeps no GPUs.
    assert est.local_["net0"].moves["gpu"].groups is None


#: Four alike GPUs (a T4, an RTX 2080 Ti, a V100, a Quadro RTX 6000).
ALIKE = ("Tesla T4", "NVIDIA GeForce RTX 2080 Ti", "Tesla V100-SXM2-16GB", "Quadro RTX 6000")


def _compute_and_memory_runs(**extra: object) -> TrainingTimeModel:
    """Five networks whose time is a compute term plus a memory term, each run on the four
    :data:`ALIKE` GPUs at five batch sizes, twice (1% noise), fitted (``extra``: columns
    every run has)."""
    from gpuperf_magics.hardware import catalog

    spec = {g: dict(catalog.lookup(g)) for g in ALIKE}
    rng = np.random.default_rng(0)
    rows = [{"network": f"net{k}", "gpu": g, "batch_size": b, "iterations": 10, **extra,
             "time_s": 10 * b * (0.002 * (k + 1) / spec[g]["gpu_fp32_tflops"]
                                 + 0.05 * (k + 1) / spec[g]["gpu_bandwidth_gbs"])
             * math.exp(rng.normal(0.0, 0.01))}
            for k in range(5) for g in ALIKE for b in (16, 32, 64, 128, 256) for _ in range(2)]
    store = pd.DataFrame(rows)
    return TrainingTimeModel().fit(store.drop(columns="time_s"), store["time_s"])


def _evidence_and_own(model: TrainingTimeModel, net: str) -> tuple[tuple[float, ...], Any]:
    """The interval and expected error of the evidence move of the row just asked (its last
    estimate is that row's), and the network's chosen move to a new device."""
    est = model.estimator_
    local = est.local_[net]
    return (local.evidence.interval(est.evidence_residuals_, local.evidence.last, 0.8,
                                    est.evidence_groups_), local.moves["transfer"])


def test_a_gpu_beyond_those_run_is_as_uncertain_as_its_evidence_move_whichever_answers(
) -> None:
    """Where the cross-series fit wins a network's own validation (moves between the four
    alike GPUs, about 1% off), its interval and expected error on an A100, above them all in
    peak and bandwidth, are still at least the evidence move's to a GPU never run (the
    public calibration), not the four GPUs' 1%. A Quadro RTX 5000, inside their range,
    keeps the fit's own."""
    from gpuperf_magics.model.default import _interval

    model = _compute_and_memory_runs()
    est = model.estimator_
    fitted = [k for k in range(5) if est.local_[f"net{k}"].moves["transfer"].method == "global"]
    assert fitted, "the cross-series fit won no network's validation: the case is not made"
    for k in fitted:
        query = pd.DataFrame([{"network": f"net{k}", "gpu": "NVIDIA A100-SXM4-40GB",
                               "batch_size": 64, "iterations": 10}])
        row = model.predict_table(query).iloc[0]
        assert row["kind"] == "transfer" and "measured evidence" not in row["detail"]
        (e_lo, e_hi, e_mape), own = _evidence_and_own(model, f"net{k}")
        o_lo, o_hi = _interval(own.logres, 0.8, own.groups, sample=not own.prior)
        assert o_hi - o_lo < 0.25 * (e_hi - e_lo)  # the four alike GPUs' own interval
        assert math.log(row["time_low_s"] / row["time_s"]) <= e_lo + 1e-9
        assert math.log(row["time_high_s"] / row["time_s"]) >= e_hi - 1e-9
        # The expected error says it alike, not the four GPUs' 1%.
        assert e_mape > 5 * own.mape
        assert row["expected_mape"] >= e_mape - 1e-9
        assert "than any GPU or precision this network ran" in row["detail"]
        inside = model.predict_table(query.assign(gpu="Quadro RTX 5000")).iloc[0]
        assert "measured evidence" not in inside["detail"]
        assert "than any GPU or precision this network ran" not in inside["detail"]
        (e_lo, e_hi, e_mape), _ = _evidence_and_own(model, f"net{k}")
        assert math.log(inside["time_high_s"] / inside["time_low_s"]) < 0.5 * (e_hi - e_lo)
        assert inside["expected_mape"] < 0.5 * e_mape


def test_a_precision_never_run_is_as_uncertain_as_its_evidence_move() -> None:
    """The same networks run in FP32 and asked in AMP on a GPU they ran: a device never run
    (its effective peak above every FP32 one). Their own moves between FP32 GPUs, about 1%
    off, say nothing of what AMP gains (1.3-3x between networks on lambda2025); the
    interval and expected error are at least the move between precisions' evidence."""
    model = _compute_and_memory_runs(precision="fp32")
    floored = 0
    for k in range(5):
        query = pd.DataFrame([{"network": f"net{k}", "gpu": ALIKE[2], "batch_size": 64,
                               "iterations": 10, "precision": "amp"}])
        row = model.predict_table(query).iloc[0]
        (e_lo, e_hi, e_mape), own = _evidence_and_own(model, f"net{k}")
        assert row["kind"] == "transfer"
        if own.method == "evidence":  # answered by the evidence move: its own interval
            assert "measured evidence" in row["detail"]
        else:  # another method floored at it, which the detail says
            assert "than any GPU or precision this network ran" in row["detail"]
            floored += 1
        assert own.mape < 0.05 < e_mape
        assert math.log(row["time_low_s"] / row["time_s"]) <= e_lo + 1e-9
        assert math.log(row["time_high_s"] / row["time_s"]) >= e_hi - 1e-9
        assert row["expected_mape"] >= e_mape - 1e-9
    assert floored, "every network's own validation chose the evidence move: no floor tested"


@pytest.mark.parametrize("n", [6, 8, 9, 12, 20, 40])
@pytest.mark.parametrize("dist", ["normal", "laplace"])
def test_one_more_move_is_inside_the_interval_of_n_validated_ones_80_percent_of_the_time(
        n: int, dist: str) -> None:
    """n residuals and one more from the same distribution: the interval covers the new one
    80% of the time (binomial tolerance of 1500 draws, ±2.1%, or a few points wider: Student's
    interval below nine residuals errs wide on heavy tails), where the residuals' own 10th-90th
    percentiles cover (n − 1)/(n + 1)-ish, 60% for six."""
    rng = np.random.default_rng(n)
    draws, inside, pooled = 1500, 0, 0
    for _ in range(draws):
        x = rng.normal(size=n + 1) if dist == "normal" else rng.laplace(size=n + 1)
        lo, hi = sample_interval(x[:n], 0.8)
        inside += lo <= x[n] <= hi
        plo, phi = np.quantile(x[:n], [0.1, 0.9])
        pooled += plo <= x[n] <= phi
    assert 0.8 - 0.021 <= inside / draws <= 0.8 + 0.045
    if n <= 12:
        assert pooled / draws < 0.72


def test_from_nine_residuals_the_bounds_are_order_statistics_below_students_t() -> None:
    """At 80% the bounds are the residuals of rank (n + 1)/10 and 9(n + 1)/10: the smallest
    and largest of nine, interpolated between ranks beyond; below nine, at least Student's
    prediction interval mean ± t(n − 1) s √(1 + 1/n)."""
    nine = np.arange(9.0)
    assert sample_interval(nine, 0.8) == (0.0, 8.0)
    nineteen = np.arange(19.0)  # ranks 2 and 18: the second smallest and the second largest
    assert sample_interval(nineteen, 0.8) == pytest.approx((1.0, 17.0))
    assert sample_interval(np.arange(14.0)[::-1], 0.8) == pytest.approx((0.5, 12.5))
    six = np.array([-0.1, -0.05, 0.0, 0.02, 0.05, 0.08])
    half = float(stdtrit(5, 0.9)) * float(np.std(six, ddof=1)) * math.sqrt(1 + 1 / 6)
    lo, hi = sample_interval(six, 0.8)
    assert (lo, hi) == pytest.approx((six.mean() - half, six.mean() + half))
    assert lo < six.min() and hi > six.max()


def test_a_move_validated_few_times_gets_the_interval_of_one_more_not_their_percentiles() -> None:
    """A network measured at six batch sizes on one GPU: its validated moves inside the
    series are few, and the interval of a batch between two measured ones is at least
    :func:`sample_interval` of them (the repeat noise, none here, added in quadrature),
    wider than their own 10th-90th percentiles."""
    rng = np.random.default_rng(3)
    batches = (8, 16, 32, 64, 128, 256, 512, 1024)
    store = pd.DataFrame([{"network": "mlp", "gpu": "Tesla T4", "batch_size": b,
                           "iterations": 10,
                           "time_s": 10 * (0.004 + 0.0001 * b) * math.exp(rng.normal(0, 0.05))}
                          for b in batches])
    model = TrainingTimeModel(evidence=empty_base()).fit(store.drop(columns="time_s"),
                                                         store["time_s"])
    move = model.estimator_.local_["mlp"].moves["batch:inside"]
    assert not move.prior and 6 <= len(move.logres) < 9
    lo, hi = sample_interval(move.logres, 0.8)
    plo, phi = np.quantile(move.logres, [0.1, 0.9])
    assert hi - lo > phi - plo
    table = model.predict_table(pd.DataFrame([{"network": "mlp", "gpu": "Tesla T4",
                                               "batch_size": 48, "iterations": 10}]))
    t = table.iloc[0]
    assert t["kind"] == "interpolation"
    assert math.log(t["time_low_s"] / t["time_s"]) <= min(lo, 0.0) + 1e-9
    assert math.log(t["time_high_s"] / t["time_s"]) >= max(hi, 0.0) - 1e-9


def test_an_answer_carries_the_noise_of_the_runs_it_is_drawn_from() -> None:
    """Six runs of each configuration: at image size 32 they spread by 10%, at 224 by 0.5%.
    Two answers between measured batch sizes share the move's validated interval and differ by
    the noise of the series they are drawn through (not the network's pooled noise): wider at
    32 than at 224. A measured configuration asked again carries its own runs' noise, a fifth
    of the pooled one or less."""
    rng = np.random.default_rng(5)
    rows = []
    for size, spread in ((32, 0.10), (224, 0.005)):
        for b in (8, 16, 32, 64, 128, 256, 512, 1024):
            rows += [{"network": "cnn", "gpu": "Tesla T4", "batch_size": b, "image_size": size,
                      "iterations": 100,
                      "time_s": 100 * (0.01 + 0.0002 * b * size / 32)
                      * math.exp(rng.normal(0, spread))} for _ in range(6)]
    store = pd.DataFrame(rows)
    model = TrainingTimeModel(evidence=empty_base()).fit(store.drop(columns="time_s"),
                                                         store["time_s"])
    local = model.estimator_.local_["cnn"]
    assert sorted(len(v) for v in local.runs.values()) == [6] * 16
    asked = pd.DataFrame([{"network": "cnn", "gpu": "Tesla T4", "batch_size": b,
                           "image_size": size, "iterations": 100}
                          for b, size in ((384, 224), (384, 32), (512, 224))])
    table = model.predict_table(asked)
    width = np.log(table["time_high_s"] / table["time_low_s"]).to_numpy()
    repeat = local.moves["repeat"]
    pooled_lo, pooled_hi = np.quantile(repeat.logres, [0.1, 0.9])
    assert table["kind"].iloc[0] == table["kind"].iloc[1] == "interpolation"
    assert width[1] > width[0] + 0.1
    assert width[0] < pooled_hi - pooled_lo
    # The expected error holds the same noise as the interval: the move's validated error
    # and one run's spread around its configuration's median.
    move = local.moves["batch:inside"]
    expected = table["expected_mape"].to_numpy()
    assert expected[1] > expected[0] >= move.mape
    # A measured configuration asked again: its own six runs' noise.
    assert table["kind"].iloc[2] == "interpolation"
    assert width[2] < 0.2 * (pooled_hi - pooled_lo)
    assert table["expected_mape"].iloc[2] < 0.2 * repeat.mape
