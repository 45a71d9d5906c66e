"""Which runs of a store a model learns from, and how (gpuperf_magics.prediction.store_model)."""

from __future__ import annotations

import pandas as pd
import pytest

import gpuperf_magics as gm
from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.prediction import predict, store_model
from gpuperf_magics.prediction.store_model import PredictionError


def _runs(**columns) -> pd.DataFrame:
    base = {"run_id": [1, 2, 3], "network": ["resnet", "ResNet-50", "resnet"],
            "batch_size": [32, 64, 128], "gpu": ["Tesla T4"] * 3, "iterations": [10, 10, 10],
            "source": ["profile"] * 3}
    base.update(columns)
    return pd.DataFrame(base)


def test_resolve_network_defaults_to_the_latest_and_ignores_case() -> None:
    runs = _runs()
    assert store_model.resolve_network(runs, None) == "resnet"
    assert store_model.resolve_network(runs, "resnet-50") == "ResNet-50"
    with pytest.raises(PredictionError, match="known networks: 'resnet', 'ResNet-50'"):
        store_model.resolve_network(runs, "vgg")


def test_usable_runs_leave_out_runs_without_batch_size_and_other_devices() -> None:
    runs, notes = store_model.usable_runs(_runs(batch_size=[None, 64, 128],
                                                gpu=["Tesla T4", None, "Tesla T4"]))
    assert list(runs["run_id"]) == [3]
    assert "left out run(s) 1" in notes[0] and "1 CPU run(s) left out" in notes[1]


def test_steady_state_is_profiled_or_per_step_runs_only() -> None:
    assert store_model.steady_state(_runs())
    assert store_model.steady_state(_runs(source=["import"] * 3, iterations=[1, 1, 1]))
    assert not store_model.steady_state(_runs(source=["import"] * 3))


@pytest.fixture
def store(filled, tmp_path):
    """A private copy of the filled store (tests may write to it)."""
    copy = tmp_path / "runs.sqlite"
    gm.Store(filled).export(tmp_path / "runs.csv")
    gm.Store(copy).import_table(tmp_path / "runs.csv")
    return copy


def test_empty_store_says_to_profile_first(tmp_path):
    with pytest.raises(PredictionError, match="profile a training cell"):
        predict.predict_time(tmp_path / "empty.sqlite")


def test_second_call_on_unchanged_store_does_not_refit(store, monkeypatch, profile_mlp):
    fits = []
    original = TrainingTimeModel.fit

    def counting_fit(self, x, y):
        fits.append(len(x))
        return original(self, x, y)

    monkeypatch.setattr(TrainingTimeModel, "fit", counting_fit)
    predict.predict_time(store)
    predict.predict_time(store, batch_sizes=[8, 16])
    assert fits == [4]
    profile_mlp(store, [128])  # the store changes: the next call refits on 5 runs
    predict.predict_time(store)
    assert fits == [4, 5]


def test_whole_run_imports_keep_their_setup_time(tmp_path):
    """Imported whole-run times (set-up + iterations, as the paper's data) are not divided."""
    path = tmp_path / "whole.sqlite"
    rows = [{"network": "net", "batch_size": b, "iterations": n, "time_s": 30 + n * 0.001 * b}
            for b in (16, 32, 64, 128) for n in (500, 1000, 2000)]
    gm.Store(path).import_table(pd.DataFrame(rows))
    assert not store_model.steady_state(gm.Store(path).runs())
    frame = predict.predict_time(path, batch_sizes=[32, 64], iterations=1000).frame
    expected = [30 + 1000 * 0.032, 30 + 1000 * 0.064]
    assert frame["time_s"].to_numpy() == pytest.approx(expected, rel=0.1)


def test_one_stall_in_a_short_run_does_not_skew_the_model(tmp_path):
    """A profiled run whose total is mostly one stall is learnt from its typical iterations."""
    from gpuperf_magics.run import IterationRecord, Run

    path = tmp_path / "stall.sqlite"
    for batch in (16, 32, 64):
        per_it = 0.001 * batch
        durations = [per_it * 3] + [per_it] * 20
        if batch == 16:
            durations[10] = 1.0  # one stall: 60x a normal iteration
        run = Run(network="net", batch_size=batch, iterations=[
            IterationRecord(i, d, batch, warmup=i == 0) for i, d in enumerate(durations)])
        gm.Store(path).save_run(run)
    times = store_model.robust_times(gm.Store(path), gm.Store(path).runs())
    assert list(times / 20) == pytest.approx([0.016, 0.032, 0.064])
    frame = predict.predict_time(path, batch_sizes=[16], iterations=100).frame
    assert frame["per_iteration_s"].iloc[0] == pytest.approx(0.016, rel=0.1)


def test_busy_runs_are_learnt_from_their_median_iteration(tmp_path):
    from gpuperf_magics.run import IterationRecord, Run

    path = tmp_path / "busy.sqlite"
    durations = [0.01] * 14 + [0.2] * 6  # 30 % of the iterations stalled by another process
    run = Run(network="net", batch_size=8, quality={"busy": True},
              iterations=[IterationRecord(i, d, 8) for i, d in enumerate(durations)])
    gm.Store(path).save_run(run)
    times = store_model.robust_times(gm.Store(path), gm.Store(path).runs())
    assert times.iloc[0] == pytest.approx(0.01 * 20)


def test_robust_times_apply_the_per_run_rule_to_every_run(tmp_path):
    """Each profiled run's time is its own steady iterations' rule × its count, whatever the
    order of the runs (busy, too short to trim, imported ones among them)."""
    import numpy as np

    from gpuperf_magics.run import IterationRecord, Run

    path = tmp_path / "many.sqlite"
    rng = np.random.default_rng(3)
    expected = {}
    for k in range(12):
        count = 4 if k == 5 else 10 + k  # run 5: 3 steady iterations, too few to trim
        durations = list(0.01 * (1 + rng.random(count)))
        run = Run(network="net", batch_size=8 + k, quality={"busy": k % 4 == 1},
                  iterations=[IterationRecord(i, d, 8, warmup=i == 0)
                              for i, d in enumerate(durations)])
        run_id = gm.Store(path).save_run(run)
        rule = store_model.steady_per_iteration(durations[1:], busy=k % 4 == 1)
        expected[run_id] = run.time_s if rule is None else rule * (count - 1)
    gm.Store(path).import_table(pd.DataFrame(
        {"network": ["net"], "batch_size": [4], "time_s": [2.5], "iterations": [7]}))
    runs = gm.Store(path).runs().iloc[::-1]  # the order of the frame is the caller's
    times = store_model.robust_times(gm.Store(path), runs)
    assert list(times.index) == list(runs.index)
    got = dict(zip(runs["run_id"], times, strict=True))
    assert got.pop(max(got)) == 2.5  # the imported row, as it is
    assert got == pytest.approx(expected, rel=1e-12)


def test_one_networks_runs_never_block_another(filled, tmp_path):
    """CPU runs of one network, GPU imports of another, a run without batch size, and a feature
    only one network has: each network still gets its own model."""
    from gpuperf_magics.run import IterationRecord, Run

    path = tmp_path / "mixed.sqlite"
    gm.Store(filled).export(tmp_path / "cpu.csv")
    gm.Store(path).import_table(tmp_path / "cpu.csv")  # network "mlp", CPU
    gm.Store(path).import_table(pd.DataFrame(
        {"network": "bert", "gpu": "Tesla T4", "batch_size": [8, 16, 32],
         "seq_len": 128, "time_s": [0.1, 0.18, 0.35]}))
    gm.Store(path).save_run(Run(network="mlp", iterations=[IterationRecord(0, 0.5)]))
    cpu = predict.predict_time(path, "mlp", batch_sizes=[16])
    assert any("no batch size" in n for n in cpu.notes)
    assert cpu.frame["kind"].iloc[0] == "interpolation"
    gpu = predict.predict_time(path, "bert", batch_sizes=[16], gpus=["A100 40GB"])
    assert list(gpu.frame["gpu"]) == ["Tesla T4", "NVIDIA A100-SXM4-40GB"]
    assert list(gpu.frame["kind"]) == ["interpolation", "transfer"]


def test_cache_does_not_outlive_a_recreated_store(tmp_path):
    path = tmp_path / "again.sqlite"
    rows = [{"network": "old", "batch_size": b, "time_s": 0.01 * b} for b in (8, 16, 32)]
    gm.Store(path).import_table(pd.DataFrame(rows))
    assert predict.predict_time(path).network == "old"
    path.unlink()
    for suffix in ("-wal", "-shm"):
        (tmp_path / f"again.sqlite{suffix}").unlink(missing_ok=True)
    import time

    time.sleep(1.1)  # the creation time has a resolution of one second
    gm.Store(path).import_table(pd.DataFrame(
        [{"network": "new", "batch_size": b, "time_s": 0.02 * b} for b in (8, 16, 32)]))
    assert predict.predict_time(path).network == "new"


def test_a_feature_some_runs_lack_is_left_out_with_a_note(tmp_path):
    path = tmp_path / "partial.sqlite"
    rows = [{"network": "net", "batch_size": b, "time_s": 0.01 * b, "disk_speed": 200.0}
            for b in (8, 16, 32)]
    rows.append({"network": "net", "batch_size": 64, "time_s": 0.64})  # no disk_speed
    gm.Store(path).import_table(pd.DataFrame(rows))
    result = predict.predict_time(path, batch_sizes=[24], iterations=10)
    assert any("'disk_speed' left out: 1 of 4 runs" in n for n in result.notes)
    assert result.frame["time_s"].iloc[0] == pytest.approx(10 * 0.24, rel=0.1)


def test_runs_of_one_name_with_other_architectures_are_one_study(tmp_path, profile_mlp):
    import torch
    from torch import nn

    path = tmp_path / "mixed.sqlite"
    profile_mlp(path, [8, 16, 32], name="net")
    big = nn.Sequential(nn.Linear(32, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.SGD(big.parameters(), lr=0.01)
    for batch in (64, 128):
        with gm.profile_training(name="net", store=path):
            for _ in range(6):
                opt.zero_grad()
                big(torch.randn(batch, 32)).sum().backward()
                opt.step()
    result = predict.predict_time(path, batch_sizes=[64])
    assert result.runs == 5
    assert any("differ in architecture" in n and "arch_params" in n for n in result.notes)
    frame = result.frame
    assert frame["arch_params"].iloc[0] == 32 * 1024 + 1024 + 1024 * 10 + 10  # the latest
    small = predict.predict_time(path, batch_sizes=[16], settings={"arch_params": 5514})
    assert small.frame["kind"].iloc[0] == "interpolation"


def test_fit_store_returns_the_model_and_its_runs_by_name(filled):
    fit = store_model.fit_store(filled)
    assert isinstance(fit, store_model.StoreFit)
    assert isinstance(fit.model, store_model.StoreModel)
    assert list(fit.runs["batch_size"]) == [8, 16, 32, 64]
    model, runs = fit  # a named tuple: unpacking still reads model, runs
    assert model is fit.model and runs is fit.runs
