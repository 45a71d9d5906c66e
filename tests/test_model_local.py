"""Routes along measured series (gpuperf_magics.model.local): axis moves and their guards,
chains through estimated points, derived figures, GPU moves."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.local import local_value, route
from gpuperf_magics.model.series import build_index


def _index(batches: tuple[int, ...], times: list[float]):
    values = np.array(batches, float)[:, None]
    return build_index(values, ["batch_size"], np.zeros((len(batches), 0)),
                       np.full(len(batches), np.nan), np.ones(len(batches)),
                       np.array(times, float))


def test_moves_beyond_the_range_are_bounded_by_what_a_batch_can_do() -> None:
    # A series that bends down at its end would extrapolate below the largest batch's time.
    index = _index((16, 32, 64), [1.0, 2.0, 2.2])
    allowed = np.ones(index.n, dtype=bool)
    for method in ("lin", "log"):
        up = local_value(index, route(index, np.array([128.0]), np.zeros(0), allowed),
                         np.array([128.0]), method)
        assert 2.2 <= up <= 2.2 * 128 / 64  # never faster per iteration, never slower per sample
        down = local_value(index, route(index, np.array([4.0]), np.zeros(0), allowed),
                           np.array([4.0]), method)
        assert 1.0 * 4 / 16 <= down <= 1.0  # never above the smallest batch's time
    # Between measured points: the neighbours, not a global fit.
    mid = route(index, np.array([48.0]), np.zeros(0), allowed)
    assert mid.position == "inside"
    assert local_value(index, mid, np.array([48.0]), "lin") == pytest.approx(2.1)


def test_far_above_a_gpu_batch_series_the_time_grows_as_a_power_not_a_line() -> None:
    """Two batch sizes 1.4x apart on a GPU, at 12.3 and 14.6 ms (sia2023's NCF, host-bound:
    it ran 19 ms at batch 16,413), asked up to 32,768: a line through them is trusted
    LINE_SPACINGS of their spacings beyond, and from there the time grows as the batch to
    the power _far_slope gives (their slope weighed against the public elasticity); the
    line alone answered 5.9 s at 32,768, 290x too slow. On the CPU the line stays."""
    from gpuperf_magics.model.batch_single import elasticity
    from gpuperf_magics.model.local import LINE_SPACINGS, _far_slope

    batches, times = (32, 45), [0.0123, 0.0146]
    values = np.array(batches, float)[:, None]

    def index(device):
        return build_index(values, ["batch_size"], np.zeros((2, 0)), np.full(2, np.nan),
                           np.ones(2), np.array(times), device=np.array(device, object))

    def answer(ix, q: float) -> float:
        r = route(ix, np.array([q]), np.zeros(0), np.ones(2, dtype=bool))
        return local_value(ix, r, np.array([q]), "lin")

    gpu, cpu = index(["Tesla T4|fp32"] * 2), index([None, None])
    line = np.polyfit(batches, times, 1)
    far = 45 * (45 / 32) ** LINE_SPACINGS  # 349: the line's last trusted batch
    for q in (64, 128, 0.999 * far):  # up to there: the line, on both
        assert answer(gpu, q) == pytest.approx(np.polyval(line, q))
        assert answer(cpu, q) == pytest.approx(np.polyval(line, q))
    at_far = np.polyval(line, far)
    e = _far_slope(values[:, 0], np.array(times), at_far)
    data = np.log(times[1] / times[0]) / np.log(45 / 32)  # 0.50: what the two points say
    assert min(data, elasticity(at_far)) <= e <= max(data, elasticity(at_far))
    for q in (1.001 * far, 16413, 32768):
        assert answer(gpu, q) == pytest.approx(at_far * (q / far) ** e)
        assert answer(cpu, q) == pytest.approx(np.polyval(line, q))
        # The source of a GPU move (per sample) keeps the line: those moves compare devices
        # per sample at each device's own batch.
        r = route(gpu, np.array([q]), np.zeros(0), np.ones(2, dtype=bool))
        assert local_value(gpu, r, np.array([q]), "lin", per_sample=True) == pytest.approx(
            np.polyval(line, q))
    assert answer(gpu, 32768) < 0.15 * np.polyval(line, 32768)
    assert answer(gpu, 1.001 * far) == pytest.approx(at_far, rel=1e-3)  # no jump at the hand-off
    # The answer says where it left the line.
    x = pd.DataFrame({"network": "ncf", "batch_size": list(batches), "iterations": 100,
                      "gpu": "Tesla T4"})
    model = TrainingTimeModel(public_data=False).fit(x, 100 * np.array(times))
    near, beyond = model.predict_table(x.iloc[[0, 0]].assign(batch_size=[128, 32768]))["detail"]
    assert "power" not in near and beyond.endswith("then as a power of batch_size from 348)")


def test_one_measured_batch_keeps_the_time_per_sample() -> None:
    index = _index((32,), [0.5])
    r = route(index, np.array([64.0]), np.zeros(0), np.ones(1, dtype=bool))
    assert r.kind == "axis" and r.position == "single"
    assert local_value(index, r, np.array([64.0]), "lin") == pytest.approx(1.0)


def _grid(cells: list[tuple[int, int]], extra: dict | None = None) -> pd.DataFrame:
    """Runs of a network whose time per iteration is 1 ms per sample per block."""
    return pd.DataFrame([{"network": "net", "depth": d, "batch_size": b, "iterations": 10,
                          "gpu": "Tesla T4", **(extra or {}), "time_s": 10 * 1e-3 * d * b}
                         for d, b in cells])


def test_a_query_two_moves_away_is_chained_through_estimated_points() -> None:
    # Depth 1..3 at batch 32, and batches 32..128 at depth 1: depth 4 at batch 128 shares no
    # series with any run (no other depth at batch 128, no other batch at depth 4).
    frame = _grid([(1, 32), (2, 32), (3, 32), (1, 64), (1, 128)])
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    query = _grid([(4, 128)])
    table = model.predict_table(query.drop(columns="time_s"))
    # Each point is a batch move (time per sample) at depth 1..3, then a line in depth.
    assert table["time_s"].iloc[0] == pytest.approx(query["time_s"].iloc[0], rel=1e-9)
    assert "through 3 estimated points" in table["detail"].iloc[0]
    assert table["kind"].iloc[0] == "extrapolation"


def test_a_feature_no_run_varies_is_carried_over_and_one_that_varies_is_not() -> None:
    # Every run on one disk: a query on another disk can only keep the measured time (a
    # regression extrapolating a constant column invents an effect).
    frame = _grid([(1, 32), (2, 32), (3, 32)], {"disk_speed": 384})
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    query = _grid([(4, 32)], {"disk_speed": 216})
    table = model.predict_table(query.drop(columns="time_s"))
    assert table["time_s"].iloc[0] == pytest.approx(query["time_s"].iloc[0], rel=1e-9)
    assert "no run varies it" in table["detail"].iloc[0]
    # Two disks measured (at depth 1 only): the disk's effect is for the cross-series model.
    frame = pd.concat([frame, _grid([(1, 32)], {"disk_speed": 300})], ignore_index=True)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    table = model.predict_table(query.drop(columns="time_s"))
    assert "no run varies it" not in str(table["detail"].iloc[0])


def test_figures_that_follow_the_depth_move_with_it() -> None:
    # Parameters grow with depth: a deeper network differs in both, and is still a move along
    # the depth series at each batch size (the line in depth, exact on this linear family).
    params = {1: 2.0e6, 2: 3.5e6, 3: 5.0e6, 4: 6.5e6}
    frame = _grid([(d, b) for d in (1, 2, 3, 4) for b in (32, 64)])
    frame["arch_params"] = frame["depth"].map(params)
    held = (frame["depth"] == 4).to_numpy()
    x, y = frame.drop(columns="time_s"), frame["time_s"].to_numpy()
    table = TrainingTimeModel().fit(x[~held], y[~held]).predict_table(x[held])
    np.testing.assert_allclose(table["time_s"], y[held], rtol=1e-9)
    assert table["detail"].str.startswith("depth 4 > measured max 3").all()
    # Another width at a measured depth is not that depth's series.
    wider = x[held].assign(depth=2.0)
    table = TrainingTimeModel().fit(x[~held], y[~held]).predict_table(wider)
    assert not table["detail"].astype(str).str.contains("measured configuration").any()


def test_a_gpu_move_uses_the_same_configuration_on_other_gpus() -> None:
    rows = []
    for gpu, speed in (("Tesla T4", 1.0), ("Tesla V100-SXM2-16GB", 0.4),
                       ("NVIDIA A100-SXM4-40GB", 0.25)):
        for b in (32, 64, 128):
            rows.append({"network": "net", "batch_size": b, "iterations": 1, "gpu": gpu,
                         "time_s": 0.01 * b * speed})
    frame = pd.DataFrame(rows)
    held = (frame["gpu"] == "Tesla V100-SXM2-16GB").to_numpy()
    model = TrainingTimeModel().fit(frame[~held].drop(columns="time_s"),
                                    frame.loc[~held, "time_s"])
    table = model.predict_table(frame[held].drop(columns="time_s"))
    assert set(table["kind"]) == {"transfer"}
    assert table["detail"].str.contains("from 2 measured GPUs").all()
    low, high = table["time_low_s"].to_numpy(), table["time_high_s"].to_numpy()
    assert np.all(low <= table["time_s"]) and np.all(table["time_s"] <= high)


def test_a_gpu_with_the_spec_sheet_of_a_measured_one_is_another_gpu_moved_from_its_twin() -> None:
    """The Quadro RTX 8000 is the Quadro RTX 6000 with 48 GB: one peak, one bandwidth. A run on
    the 6000 is not a measured configuration of the 8000 (until 2026-12-05 it was, with the
    repeat noise for interval: on lambda2025, 64% of such rows inside it); it is a move to
    another GPU, from the twin alone where one was measured (the T4's move, off by its own
    architecture, would blur it)."""
    rows = []
    for gpu, speed in (("Tesla T4", 1.0), ("Quadro RTX 6000", 0.5), ("Quadro RTX 8000", 0.45)):
        for b in (32, 64, 128):
            rows.append({"network": "net", "batch_size": b, "iterations": 1, "gpu": gpu,
                         "time_s": 0.01 * b * speed})
    frame = pd.DataFrame(rows)
    held = (frame["gpu"] == "Quadro RTX 8000").to_numpy()
    model = TrainingTimeModel(public_data=False).fit(frame[~held].drop(columns="time_s"),
                                                     frame.loc[~held, "time_s"])
    table = model.predict_table(frame[held].drop(columns="time_s"))
    assert set(table["kind"]) == {"transfer"}
    assert table["detail"].str.contains("from 1 measured GPU").all()
    twin = frame.loc[frame["gpu"] == "Quadro RTX 6000", "time_s"].to_numpy()
    np.testing.assert_allclose(table["time_s"].to_numpy(), twin, rtol=1e-9)
    # A move between GPUs, not a repeat: wider than the repeat noise of the measured runs.
    measured = model.predict_table(frame[frame["gpu"] == "Quadro RTX 6000"].drop(
        columns="time_s"))
    width = (table["time_high_s"] / table["time_low_s"]).to_numpy()
    assert np.all(width > (measured["time_high_s"] / measured["time_low_s"]).to_numpy())


def _routes_equal(a, b) -> bool:
    same = (a.kind == b.kind and a.axis == b.axis and a.position == b.position
            and np.array_equal(a.members, b.members) and len(a.sources) == len(b.sources)
            and len(a.steps) == len(b.steps))
    return same and all(ra == rb and _routes_equal(sa, sb) for (ra, sa), (rb, sb)
                        in zip(a.sources, b.sources, strict=True)) and all(
        xa == xb and _routes_equal(sa, sb)
        for (xa, _, sa), (xb, _, sb) in zip(a.steps, b.steps, strict=True))


def test_routes_found_through_the_lookup_are_those_the_comparison_finds() -> None:
    # Depth, batch and loader threads on three GPUs, parameters derived from the depth; some
    # configurations missing so that chains, single points and dead ends all occur (a GPU
    # move's sources are found for all other GPUs at once: each must be its own route).
    from gpuperf_magics.model.series import lookup

    rng = np.random.default_rng(3)
    rows = [(d, b, w, g) for d in (1, 2, 3, 5) for b in (8, 16, 32, 64) for w in (2, 4)
            for g in (0, 1, 2) if rng.random() < 0.6]
    values = np.array([(d, b, w, 1e6 * d) for d, b, w, _ in rows], float)
    specs = [(8.1, 320.0), (19.5, 1555.0), (14.0, 900.0)]
    hw = np.array([specs[g] for *_, g in rows])
    index = build_index(values, ["depth", "batch_size", "workers", "arch_params"], hw,
                        hw[:, 0], np.full(len(rows), 10.0), rng.uniform(1, 2, len(rows)))
    assert index.derived.tolist() == [False, False, False, True]
    plain = build_index(values, ["depth", "batch_size", "workers", "arch_params"], hw,
                        hw[:, 0], np.full(len(rows), 10.0), index.t * 10)
    plain.__dict__["_lookup"] = None  # routes by comparing every configuration
    assert lookup(index) is not None
    queries = [index.values[c] for c in range(index.n)]
    queries += [np.array([4.0, 16, 2, 4e6]), np.array([2.0, 48, 4, 2e6]),
                np.array([2.0, 16 * (1 + 1e-12), 4, 2e6]), np.array([7.0, 128, 8, 7e6]),
                np.array([2.0, 16, 4, 2.5e6]), np.array([3.0, 16, 4, np.nan])]
    for v in queries:
        for h in (hw[0], hw[-1], np.array([30.0, 900.0])):
            for drop in range(0, index.n, 7):
                allowed = np.ones(index.n, dtype=bool)
                allowed[drop] = False
                fast = route(index, v, h, allowed)
                slow = route(plain, v, h, allowed)
                assert _routes_equal(fast, slow), (v, h, drop)


def test_values_too_close_to_code_are_routed_by_comparison() -> None:
    from gpuperf_magics.model.series import lookup

    index = _index((16, 16 * (1 + 1e-10), 32), [1.0, 1.0, 2.0])
    assert lookup(index) is None
    r = route(index, np.array([24.0]), np.zeros(0), np.ones(index.n, dtype=bool))
    assert r.kind == "axis" and r.position == "inside"


def test_the_line_and_median_helpers_give_numpy_s_numbers_bit_for_bit() -> None:
    from gpuperf_magics.model.local import _median, _polyfit1

    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(2, 9))
        x = np.sort(rng.choice(np.array([4, 8, 16, 32, 64, 128, 256, 512, 768.0]), n,
                               replace=False)) * rng.uniform(0.5, 2)
        t = rng.uniform(1e-4, 2, n)
        assert np.array_equal(_polyfit1(x, t), np.polyfit(x, t, 1))
        assert np.array_equal(_polyfit1(np.log(x), np.log(t)), np.polyfit(np.log(x), np.log(t), 1))
        v = rng.uniform(0, 1, int(rng.integers(1, 6))).tolist()
        assert _median(v) == float(np.median(v))
    assert np.isnan(_median([1.0, float("nan")]))
    with pytest.warns(np.exceptions.RankWarning):  # two equal points: numpy's own answer
        assert np.array_equal(_polyfit1(np.array([2.0, 2.0]), np.array([1.0, 3.0])),
                              np.polyfit(np.array([2.0, 2.0]), np.array([1.0, 3.0]), 1))


def _series_on(gpu: str | None, seconds) -> pd.DataFrame:
    """One network at batch 32 to 4,096 on ``gpu`` (None: the CPU), ``seconds(batch)`` per
    iteration."""
    batches = [32, 64, 128, 256, 512, 1024, 2048, 4096]
    return pd.DataFrame({"network": "net", "batch_size": batches, "iterations": 100,
                         "gpu": gpu, "time_s": [100 * seconds(b) for b in batches]})


def _gpu_index(frame: pd.DataFrame):
    """The series index of a fitted default model of ``frame`` (one network)."""
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    return model.estimator_.local_["net"].index


def test_a_batch_series_that_does_not_grow_keeps_its_host_s_share_on_another_gpu() -> None:
    """A recommender's 10 ms per iteration that grows 4% from batch 32 to 4,096 on a T4 waited
    for its host, which an A100 does not speed up: its time moves to the A100 nearly whole,
    where the peak ratio would make it 2.4 times faster; a series that grows with the batch
    (GPU work) moves by the GPU's ratio as before."""
    from gpuperf_magics.model.local import HOST_ELASTICITY, host_share

    flat = _series_on("Tesla T4", lambda b: 0.010 + 1e-7 * b)
    index = _gpu_index(flat)
    at_64 = host_share(index, 0, np.array([64.0]))
    assert at_64 == pytest.approx(0.010 / (0.010 + 64e-7), rel=1e-6)
    assert host_share(index, 0, np.array([4096.0])) < at_64  # the GPU's work grows with it
    grows = _series_on("Tesla T4", lambda b: 1e-3 * b ** 0.9)
    assert host_share(_gpu_index(grows), 0, np.array([64.0])) == 0.0
    # Not on the CPU (no GPU to move off), nor from a span too short to tell flat from noise.
    assert host_share(_gpu_index(_series_on(None, lambda b: 0.010)), 0, np.array([64.0])) == 0
    short = flat[flat["batch_size"] <= 128]
    assert host_share(_gpu_index(short), 0, np.array([64.0])) == 0.0
    assert 0 < HOST_ELASTICITY < 0.5

    asked = flat.drop(columns="time_s").assign(gpu="NVIDIA A100-SXM4-40GB").iloc[[1]]
    for frame, kept in ((flat, True), (grows, False)):
        model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
        row = model.predict_table(asked).iloc[0]
        measured = float(frame["time_s"].iloc[1]) / 100
        if kept:
            assert row["per_iteration_s"] == pytest.approx(measured, rel=0.05)
            assert "host-bound where measured" in row["detail"]
        else:
            assert row["per_iteration_s"] < measured / 1.5
            assert "host-bound" not in row["detail"]


def test_a_host_bound_series_moves_are_validated_apart_from_the_gpu_bound_ones() -> None:
    """Measured on three GPUs, the flat network's validated GPU moves are residuals of the
    ``host`` bucket (its interval), not of the buckets GPU-bound moves are calibrated by."""
    frames = [_series_on(g, lambda b, s=s: s * (0.010 + 1e-7 * b))
              for g, s in (("Tesla T4", 1.0), ("NVIDIA A100-SXM4-40GB", 1.3),
                           ("Tesla V100-SXM2-32GB", 0.8))]
    frame = pd.concat(frames, ignore_index=True)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    buckets = model.estimator_.evidence_residuals_
    assert any(b.endswith(":host") for b in buckets)
    assert not any(b.endswith(":spec") for b in buckets)
