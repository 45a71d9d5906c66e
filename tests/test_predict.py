"""``%predict_time`` and :func:`gpuperf_magics.predict.predict_time` on stores filled by real
profiled CPU runs."""

from __future__ import annotations

import pandas as pd
import pytest
from IPython.core.error import UsageError

import gpuperf_magics as gm
from gpuperf_magics import predict
from gpuperf_magics.model import TrainingTimeModel


@pytest.fixture(scope="module")
def filled(tmp_path_factory, profile_mlp):
    path = tmp_path_factory.mktemp("predict") / "runs.sqlite"
    profile_mlp(path, [8, 16, 32, 64])
    return path


@pytest.fixture
def store(filled, tmp_path):
    """A private copy of the filled store (tests may write to it)."""
    copy = tmp_path / "runs.sqlite"
    gm.Store(filled).export(tmp_path / "runs.csv")
    gm.Store(copy).import_table(tmp_path / "runs.csv")
    return copy


def test_default_table_covers_measured_and_neighbouring_batch_sizes(filled):
    result = predict.predict_time(filled)
    frame = result.frame
    assert result.network == "mlp" and result.runs == 4
    assert list(frame["batch_size"]) == [4, 8, 16, 32, 64, 128]
    assert (frame["gpu"].isna()).all() and (frame["gpu_count"] == 0).all()
    kinds = dict(zip(frame["batch_size"], frame["kind"], strict=True))
    assert kinds[16] == "interpolation" and kinds[32] == "interpolation"
    assert kinds[4] == "extrapolation" and kinds[128] == "extrapolation"
    assert (frame["time_low_s"] <= frame["time_s"]).all()
    assert (frame["time_s"] <= frame["time_high_s"]).all()
    assert frame["time_s"].to_numpy() == pytest.approx(
        (frame["per_iteration_s"] * frame["iterations"]).to_numpy(), rel=1e-9)
    # A tiny MLP's iterations are overhead-bound and noisy: only the guard's promise holds
    # (strict growth is tested on fixed imported times below).
    per_it = dict(zip(frame["batch_size"], frame["per_iteration_s"], strict=True))
    assert per_it[128] >= per_it[8]
    assert 0 < result.cv_mape < 1
    text = str(result)
    assert "mlp: fitted on 4 run(s)" in text and "interpolation" in text
    html = result._repr_html_()
    assert "<table" in html and "predicted time" in html


def test_job_length_from_iterations_epochs_and_the_profiled_dataset(filled):
    by_iterations = predict.predict_time(filled, batch_sizes=[32], iterations=5000).frame
    assert int(by_iterations["iterations"].iloc[0]) == 5000
    by_epochs = predict.predict_time(filled, batch_sizes=[32], epochs=3, samples=1000).frame
    assert int(by_epochs["iterations"].iloc[0]) == 3 * 32  # ceil(1000 / 32) = 32 per epoch
    from_loader = predict.predict_time(filled, batch_sizes=[32], epochs=2)
    assert int(from_loader.frame["iterations"].iloc[0]) == 2 * 8  # 256 samples per epoch
    assert any("256 samples per epoch" in n for n in from_loader.notes)
    per_it = by_iterations["per_iteration_s"].iloc[0]
    assert by_iterations["time_s"].iloc[0] == pytest.approx(per_it * 5000)


def test_gpus_are_transfers_with_their_error(filled):
    frame = predict.predict_time(filled, batch_sizes=[32], gpus=["T4", "a100 80gb"],
                                 gpu_count=2).frame
    gpus = list(frame["gpu"])
    assert gpus[0] is None or pd.isna(gpus[0])
    assert gpus[1:] == ["Tesla T4", "NVIDIA A100-SXM4-80GB"]
    assert list(frame["kind"])[1:] == ["transfer", "transfer"]
    assert (frame["expected_mape"].iloc[1:] > 0).all()
    assert list(frame["gpu_count"])[1:] == [2, 2]


def test_too_little_data_answers_with_advice(tmp_path, profile_mlp):
    path = tmp_path / "one.sqlite"
    profile_mlp(path, [16], name="single")
    result = predict.predict_time(path)
    assert any("batch size" in a for a in result.advice)
    assert (result.frame["time_s"] > 0).all()
    assert "advice:" in str(result)


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


def test_set_feature_from_imported_measurements(tmp_path):
    path = tmp_path / "depth.sqlite"
    rows = [{"network": "resnet", "batch_size": b, "depth": d, "time_s": 0.01 * b * d + 0.05,
             "iterations": 1} for b in (16, 32, 64) for d in (1, 2, 3, 4)]
    gm.Store(path).import_table(pd.DataFrame(rows))
    frame = predict.predict_time(path, "resnet", batch_sizes=[32], settings={"depth": 6}).frame
    assert frame["depth"].iloc[0] == 6
    assert frame["kind"].iloc[0] == "extrapolation" and "depth" in frame["detail"].iloc[0]
    with pytest.raises(predict.PredictionError, match=r"no feature 'width'.*depth"):
        predict.predict_time(path, "resnet", settings={"width": 2})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"network": "resnet"}, "known networks: 'mlp'"),
        ({"gpus": ["Voodoo 5"]}, "Voodoo 5"),
        ({"iterations": 10, "epochs": 2}, "either --iterations or --epochs"),
        ({"iterations": 0}, "iterations must be a finite number > 0"),
        ({"gpu_count": 2}, "--gpu-count needs a GPU"),
        ({"batch_sizes": [0, 8]}, "positive"),
    ],
)
def test_prediction_errors_say_what_to_do(filled, kwargs, message):
    with pytest.raises(predict.PredictionError, match=message):
        predict.predict_time(filled, **kwargs)


def test_empty_store_says_to_profile_first(tmp_path):
    with pytest.raises(predict.PredictionError, match="profile a training cell"):
        predict.predict_time(tmp_path / "empty.sqlite")


@pytest.mark.parametrize(
    "text, expected",
    [("32,64, 128", [32, 64, 128]), ("32 64", [32, 64]), (None, None)],
)
def test_parse_batch_sizes(text, expected):
    assert predict.parse_batch_sizes(text) == expected


def test_format_duration():
    assert predict.format_duration(0.25) == "250 ms"
    assert predict.format_duration(12.34) == "12.3 s"
    assert predict.format_duration(3725) == "1:02:05"
    assert predict.format_duration(2 * 86400 + 61) == "2d 0:01:01"


# ---------------------------------------------------------------------- the magic
def test_magic_displays_table_and_flags(ip, filled, capsys):
    ip.run_line_magic("predict_time", f"--store {filled}")
    out = capsys.readouterr().out
    assert "mlp: fitted on 4 run(s)" in out and "interpolation" in out
    result = ip.run_line_magic(
        "predict_time",
        f'mlp --store {filled} --batch-size 16,48 --epochs 2 --samples 960 '
        f'--gpu "T4,A100 80GB" --gpu-count 1 -q -o -v pred',
    )
    assert capsys.readouterr().out == ""
    assert isinstance(result, predict.Prediction) and ip.user_ns["pred"] is result
    assert list(result.frame["batch_size"]) == [16, 48] * 3
    assert list(result.frame["iterations"])[:2] == [2 * 60, 2 * 20]
    assert set(result.frame["kind"][2:]) == {"transfer"}


@pytest.mark.parametrize(
    "line, message",
    [
        ("--batch-size 32,abc", "--batch-size expects integers"),
        ("--set depth", "feature=finite number"),
        ("nosuchnet", "known networks"),
        ("--gpu 'Voodoo 5'", "Voodoo"),
        ("-v 2x", "variable name"),
        ("--epochs nan", "--epochs expects a finite positive number"),
        ("--epochs inf", "--epochs expects a finite positive number"),
        ("--iterations -5", "--iterations expects a finite positive whole number"),
        ("--set depth=nan", "finite number"),
    ],
)
def test_magic_usage_errors(ip, filled, line, message):
    with pytest.raises(UsageError, match=message):
        ip.run_line_magic("predict_time", f"--store {filled} {line}")


def test_magic_help(ip):
    doc = ip.find_line_magic("predict_time").__doc__
    assert "--batch-size" in doc and "--gpu" in doc
    assert doc.count("%predict_time [") == 1  # the usage magic_arguments writes, once


def test_whole_run_imports_keep_their_setup_time(tmp_path):
    """Imported whole-run times (set-up + iterations, as the paper's data) are not divided."""
    path = tmp_path / "whole.sqlite"
    rows = [{"network": "net", "batch_size": b, "iterations": n, "time_s": 30 + n * 0.001 * b}
            for b in (16, 32, 64, 128) for n in (500, 1000, 2000)]
    gm.Store(path).import_table(pd.DataFrame(rows))
    assert not predict.steady_state(gm.Store(path).runs())
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
    times = predict.robust_times(gm.Store(path), gm.Store(path).runs())
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
    times = predict.robust_times(gm.Store(path), gm.Store(path).runs())
    assert times.iloc[0] == pytest.approx(0.01 * 20)


def test_three_batch_sizes_keep_a_per_iteration_floor(tmp_path):
    """Extrapolating from few configurations keeps the fixed cost of an iteration."""
    path = tmp_path / "floor.sqlite"
    rows = [{"network": "net", "batch_size": b, "time_s": t}
            for b, t in ((16, 392e-6), (32, 458e-6), (64, 535e-6))]
    gm.Store(path).import_table(pd.DataFrame(rows))
    frame = predict.predict_time(path, batch_sizes=[8, 128], iterations=1).frame
    per_it = list(frame["per_iteration_s"])
    assert 250e-6 < per_it[0] < 392e-6  # below the smallest measured, far above 0
    assert 535e-6 < per_it[1] < 1e-3
    assert (frame["time_high_s"] > frame["time_s"] * 1.01).all()  # an interval, not a point


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


def test_time_per_iteration_never_falls_as_the_batch_grows(filled):
    frame = predict.predict_time(filled, batch_sizes=[1, 2, 4, 8, 16, 32, 64, 128, 512],
                                 gpus=["T4"]).frame
    for _, group in frame.groupby(frame["gpu"].fillna("CPU")):
        per_it = group.sort_values("batch_size")["per_iteration_s"].to_numpy()
        assert (per_it[1:] >= per_it[:-1] * (1 - 1e-9)).all()


def test_unquoted_names_and_lists_read_as_meant(ip, filled):
    result = ip.run_line_magic(
        "predict_time", f"mlp --store {filled} --batch-size 16, 48 --gpu A100 80GB --gpu T4 -q -o")
    frame = result.frame
    assert list(frame["batch_size"]) == [16, 48] * 3
    assert list(dict.fromkeys(frame["gpu"].dropna())) == ["NVIDIA A100-SXM4-80GB", "Tesla T4"]
    spaced = ip.run_line_magic("predict_time", f"mlp --store {filled} --batch-size 16 48 -q -o")
    assert list(spaced.frame["batch_size"]) == [16, 48]


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



def test_a_smaller_batch_is_capped_at_the_next_larger_batchs_iteration() -> None:
    from gpuperf_magics.model.monotone import monotone_in_batch

    frame = pd.DataFrame({"batch_size": [64, 32, 128], "gpu": ["T4"] * 3, "gpu_count": 1,
                          "per_iteration_s": [0.2, 0.3, 0.4], "time_s": [2.0, 3.0, 4.0],
                          "time_low_s": [1.0, 1.5, 2.0], "time_high_s": [4.0, 6.0, 8.0]})
    notes = monotone_in_batch(frame, ["gpu", "gpu_count"])
    assert list(frame["per_iteration_s"]) == pytest.approx([0.2, 0.2, 0.4])
    assert list(frame["time_high_s"]) == pytest.approx([4.0, 4.0, 8.0])
    assert len(notes) == 1 and notes[0].startswith("batch 32: capped")


def test_cpu_to_gpu_rows_need_a_flops_count() -> None:
    from gpuperf_magics.model.cpu_to_gpu import cpu_to_gpu_table

    configs = pd.DataFrame({"network": ["n"], "gpu": ["Tesla T4"], "batch_size": [32],
                            "gpu_count": [1], "iterations": [100]})
    with pytest.raises(ValueError, match="no FLOPs count"):
        cpu_to_gpu_table(configs, pd.Series({"arch_depth": 3}))
    rows = cpu_to_gpu_table(configs, pd.Series({"arch_flops_fwd_bwd": 1e9,
                                                "arch_layers_total": 10}))
    assert rows["kind"].iloc[0] == "transfer"
    assert rows["time_s"].iloc[0] == pytest.approx(100 * rows["per_iteration_s"].iloc[0])
    assert rows["time_low_s"].iloc[0] < rows["time_s"].iloc[0] < rows["time_high_s"].iloc[0]


@pytest.mark.parametrize(("keywords", "message"), [
    ({"iterations": 0}, "iterations must be a finite number > 0"),
    ({"iterations": True}, "iterations must be a whole number"),
    ({"samples": 2.5}, "samples must be a whole number"),
    ({"epochs": float("nan")}, "epochs must be a finite number > 0"),
    ({"gpu_count": -1}, "gpu_count must be a finite number > 0"),
])
def test_job_sizes_are_checked_before_the_store_is_read(tmp_path, keywords, message):
    with pytest.raises(predict.PredictionError, match=message):
        predict.predict_time(tmp_path / "absent.sqlite", **keywords)
    assert not (tmp_path / "absent.sqlite").exists()
