"""The local-first default: series moves, guards, candidate choice, noisy repeats, offline fits."""

from __future__ import annotations

import socket

import numpy as np
import pandas as pd
import pytest

from gpuperf_magics.model import TrainingTimeModel, mape
from gpuperf_magics.model.local import build_index, local_value, route
from gpuperf_magics.model.naive import NaiveModel

BATCHES = (8, 16, 32, 64, 128, 256, 512)


def _floor_series(noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Launch-bound up to batch 100 (1 s per iteration), then linear in the batch."""
    rng = np.random.default_rng(seed)
    rows = [{"network": "net", "batch_size": b, "iterations": 1, "gpu": "Tesla T4",
             "time_s": max(1.0, 0.01 * b) * (1 + noise * rng.standard_normal())}
            for b in BATCHES]
    return pd.DataFrame(rows)


def _hold(frame: pd.DataFrame, mask: np.ndarray) -> tuple[pd.DataFrame, np.ndarray,
                                                           pd.DataFrame, np.ndarray]:
    x, y = frame.drop(columns="time_s"), frame["time_s"].to_numpy()
    return x[~mask], y[~mask], x[mask], y[mask]


def test_a_series_with_a_floor_is_predicted_better_than_by_a_line() -> None:
    frame = _floor_series()
    for held in (8, 32, 512):
        xt, yt, xq, yq = _hold(frame, (frame["batch_size"] == held).to_numpy())
        ours = TrainingTimeModel().fit(xt, yt).predict(xq)
        line = NaiveModel().fit(xt, yt).predict(xq)
        assert mape(yq, ours) < mape(yq, line), held
    # The smallest batch sits on the floor: the local move keeps it there.
    xt, yt, xq, yq = _hold(frame, (frame["batch_size"] == 8).to_numpy())
    table = TrainingTimeModel().fit(xt, yt).predict_table(xq)
    assert table["time_s"].iloc[0] == pytest.approx(1.0, rel=1e-6)
    assert table["kind"].iloc[0] == "extrapolation"
    assert "batch_size 8 < measured min 16" in table["detail"].iloc[0]


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


def test_set_up_time_is_only_told_apart_by_iteration_counts_far_apart() -> None:
    # 1201 and 1221 iterations in the same 220 s (one public file): no set-up time to tell.
    values = np.ones((2, 1))
    index = build_index(values, ["batch_size"], np.zeros((2, 0)), np.full(2, np.nan),
                        np.array([1201.0, 1221.0]), np.array([220.0, 220.5]))
    assert index.setup[0] == 0.0
    assert index.t[0] == pytest.approx(np.median([220 / 1201, 220.5 / 1221]))
    # 100 and 1000 iterations: 20 s of set-up and 0.2 s per iteration.
    index = build_index(values, ["batch_size"], np.zeros((2, 0)), np.full(2, np.nan),
                        np.array([100.0, 1000.0]), np.array([40.0, 220.0]))
    assert index.setup[0] == pytest.approx(20.0)
    assert index.t[0] == pytest.approx(0.2)


def test_validation_picks_the_naive_line_where_it_is_best() -> None:
    # A straight line with 6% noise and many batch sizes: a line through every point averages
    # the noise out, piecewise interpolation follows it.
    rng = np.random.default_rng(3)
    rows = [{"network": "net", "batch_size": b, "iterations": 1, "gpu": "Tesla T4",
             "time_s": (0.2 + 0.01 * b) * (1 + 0.06 * rng.standard_normal())}
            for b in range(8, 8 * 31, 8)]
    frame = pd.DataFrame(rows)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    chosen = model.moves_["net"]["batch:inside"]
    errors = chosen["candidates"]
    assert errors["line"] < min(errors["lin"], errors["log"])  # the naive line is best here
    assert not chosen["public"] and chosen["validated"] >= 20
    # The default picks it, or the cross-series model where that validated at least as well
    # (on a straight line it is one).
    assert chosen["method"] in ("line", "global")
    assert errors[chosen["method"]] <= errors["line"]


def test_validation_keeps_the_local_move_on_a_series_with_a_floor() -> None:
    rows = [{"network": "net", "batch_size": b, "iterations": 1, "gpu": "Tesla T4",
             "time_s": max(1.0, 0.01 * b)} for b in range(8, 8 * 41, 8)]
    frame = pd.DataFrame(rows)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    assert model.moves_["net"]["batch:inside"]["method"] in ("lin", "log")


def test_one_outlier_run_does_not_flatten_the_curve_and_is_reported() -> None:
    # Three runs per batch size; one run of batch 64 on a busy machine took 8x longer.
    rows = []
    for b in (16, 32, 64, 128):
        for k in range(3):
            slow = 8.0 if (b == 64 and k == 0) else 1.0
            rows.append({"network": "net", "batch_size": b, "iterations": 10,
                         "gpu": "Tesla T4", "busy": slow > 1,
                         "time_s": 10 * 0.01 * b * slow * (1 + 0.01 * k)})
    frame = pd.DataFrame(rows)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    query = pd.DataFrame({"network": ["net"] * 4, "batch_size": [16, 32, 64, 128],
                          "iterations": [10] * 4, "gpu": ["Tesla T4"] * 4})
    table = model.predict_table(query)
    per_it = table["per_iteration_s"].to_numpy()
    assert np.all(np.diff(per_it) > 0)  # still grows with the batch
    assert per_it[2] == pytest.approx(0.64 * 1.02, rel=1e-6)  # the median, not the outlier
    assert "repeats differ" in table["detail"].iloc[2]
    assert "flagged busy" in table["detail"].iloc[2]


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


def test_intervals_and_expected_error_come_from_one_distribution() -> None:
    frame = _floor_series(noise=0.03)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    report = model.report()
    moves = report[report["item"] == "move"]
    assert len(moves) and (moves["min"] <= 1).all() and (moves["max"] >= 1).all()
    query = frame.drop(columns="time_s").assign(batch_size=[12, 24, 48, 96, 192, 384, 1024])
    table = model.predict_table(query)
    for _, row in table.iterrows():
        key = "batch:inside" if row["kind"] == "interpolation" else "batch:beyond"
        assert row["expected_mape"] == pytest.approx(model.moves_["net"][key]["mape"])


def test_fit_and_predict_never_open_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError("network access refused by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    frame = _floor_series(noise=0.02)
    model = TrainingTimeModel().fit(frame.drop(columns="time_s"), frame["time_s"])
    table = model.predict_table(frame.drop(columns="time_s").assign(gpu="A100 80GB"))
    assert set(table["kind"]) == {"transfer"}
    assert model.transfer_prior_.source.startswith("public data")


def test_score_is_higher_is_better_and_mape_its_own_function() -> None:
    frame = _floor_series(noise=0.02)
    x, y = frame.drop(columns="time_s"), frame["time_s"].to_numpy()
    model = TrainingTimeModel().fit(x, y)
    assert model.score(x, y) > 0.99
    assert mape(y, model.predict(x)) < 0.01
    assert mape([1.0, 2.0], [1.1, 1.8]) == pytest.approx(0.1)


def test_the_two_methods_are_two_estimator_classes() -> None:
    from gpuperf_magics.model.default import DefaultModel
    from gpuperf_magics.model.estimator import PaperModel

    frame = _floor_series(noise=0.02)
    x, y = frame.drop(columns="time_s"), frame["time_s"]
    assert isinstance(TrainingTimeModel().fit(x, y).estimator_, DefaultModel)
    assert isinstance(TrainingTimeModel(method="paper").fit(x, y).estimator_, PaperModel)
    with pytest.raises(ValueError, match="method must be"):
        TrainingTimeModel(method="magic").fit(x, y)


DATA = __import__("pathlib").Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.mark.skipif(not DATA.is_dir(), reason=f"public data not found at {DATA}")
def test_the_shipped_gpu_moves_are_what_their_script_regenerates(monkeypatch) -> None:
    import importlib.util
    import sys
    from pathlib import Path

    from gpuperf_magics.model import gpu_move

    monkeypatch.setenv("GPUPERF_DATA_HOME", str(DATA))
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_transfer_params.py"
    spec = importlib.util.spec_from_file_location("gpu_transfer_params", path)
    script = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "gpu_transfer_params", script)
    spec.loader.exec_module(script)
    shipped = (path.parents[1] / "gpuperf_magics" / "model" / gpu_move.PARAMS_FILE).read_text()
    assert script.text() == shipped
    moves = gpu_move.shipped()
    # With the precision recorded, the learnt move beat the plain ratio on held-out GPUs; the
    # file says how much, and a move without precision falls back to the plain ratio.
    assert moves["recorded"].mape < moves["recorded"].naive_mape
    assert moves["unrecorded"].weight <= moves["recorded"].weight
