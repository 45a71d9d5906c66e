""":func:`gpuperf_magics.prediction.predict.predict_time` on stores filled by real profiled CPU runs (the
``%predict_time`` magic's own tests are in test_magics.py)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

import gpuperf_magics as gm
from gpuperf_magics.prediction import predict
from gpuperf_magics.prediction.job import Job, flag_spelling
from gpuperf_magics.prediction.store_model import PredictionError


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
    # Four runs are too few to validate a move to another batch size: the public figures
    # stand in (each row's expected error), and the header claims no cross-validated error.
    assert math.isnan(result.cv_mape)
    text = str(result)
    assert "mlp: fitted on 4 run(s)" in text and "measured: median of its runs" in text
    assert "not cross-validated" in text and "n/a" not in text
    assert "each row's expected error is the public data's figure" in text
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


def test_set_feature_from_imported_measurements(tmp_path):
    path = tmp_path / "depth.sqlite"
    rows = [{"network": "resnet", "batch_size": b, "depth": d, "time_s": 0.01 * b * d + 0.05,
             "iterations": 1} for b in (16, 32, 64) for d in (1, 2, 3, 4)]
    gm.Store(path).import_table(pd.DataFrame(rows))
    frame = predict.predict_time(path, "resnet", batch_sizes=[32], settings={"depth": 6}).frame
    assert frame["depth"].iloc[0] == 6
    assert frame["kind"].iloc[0] == "extrapolation" and "depth" in frame["detail"].iloc[0]
    with pytest.raises(PredictionError, match=r"no feature 'width'.*depth"):
        predict.predict_time(path, "resnet", settings={"width": 2})


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"network": "resnet"}, "known networks: 'mlp'"),
        ({"gpus": ["Voodoo 5"]}, "Voodoo 5"),
        ({"iterations": 10, "epochs": 2}, r"either iterations=N or epochs=E \(with samples"),
        ({"iterations": 0}, "iterations must be a finite number > 0"),
        ({"gpu_count": 2}, r"gpu_count needs a GPU: .* add gpus=\[NAME\]"),
        ({"batch_sizes": [0, 8]}, "batch_sizes must be a finite number > 0"),
        ({"settings": {"width": "wide"}}, "settings takes feature names and finite numbers"),
    ],
)
def test_prediction_errors_say_what_to_do_in_python_words(filled, kwargs, message):
    """A Python caller reads its parameters' names, never a flag of the magic or the CLI."""
    with pytest.raises(PredictionError, match=message) as caught:
        predict.predict_time(filled, **kwargs)
    assert "--" not in str(caught.value)


def test_the_magic_reads_the_same_mistakes_in_flags(filled):
    with flag_spelling(), pytest.raises(PredictionError, match=r"--gpu-count needs a GPU: .* "
                                        r"add --gpu NAME"):
        predict.predict_time(filled, gpu_count=2)


def test_a_job_and_keywords_are_one_question(filled):
    job = Job(batch_sizes=[16, 32], iterations=100, gpus=["T4"])
    by_job = predict.predict_time(filled, job).frame
    by_keywords = predict.predict_time(filled, batch_sizes=[16, 32], iterations=100,
                                       gpus=["T4"]).frame
    pd.testing.assert_frame_equal(by_job, by_keywords)
    # Keywords change a job's fields; a field a job does not have is a TypeError.
    moved = predict.predict_time(filled, job, gpus=["A100 80GB"]).frame
    assert "NVIDIA A100-SXM4-80GB" in set(moved["gpu"])
    with pytest.raises(TypeError, match="'batch_size' is not a field of a Job"):
        predict.predict_time(filled, batch_size=16)


def test_intervals_take_the_models_coverage_by_default(filled):
    from gpuperf_magics.model import DEFAULT_COVERAGE

    default = predict.predict_time(filled, batch_sizes=[32], iterations=100).frame
    same = predict.predict_time(filled, batch_sizes=[32], iterations=100,
                                coverage=DEFAULT_COVERAGE).frame
    wider = predict.predict_time(filled, batch_sizes=[32], iterations=100,
                                 coverage=0.95).frame
    pd.testing.assert_frame_equal(default, same)
    assert (wider["time_high_s"] - wider["time_low_s"]
            > default["time_high_s"] - default["time_low_s"]).all()


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


def test_a_measured_batch_is_answered_by_its_own_runs_and_a_contradiction_is_said(tmp_path):
    """Batch 32 measured at 152 ms per iteration stays 152 ms beside batch 64's one fast
    21.2 ms run (it was capped to 21.2 ms, labelled "interpolation (measured configuration)"):
    both rows and a note say the measurements contradict each other."""
    path = tmp_path / "busy.sqlite"
    times = {16: [0.080, 0.082], 32: [0.152, 0.150, 0.154], 64: [0.0212]}
    rows = [{"network": "net", "batch_size": b, "time_s": t, "iterations": 1}
            for b, ts in times.items() for t in ts]
    gm.Store(path).import_table(pd.DataFrame(rows))
    result = predict.predict_time(path, batch_sizes=[16, 24, 32, 64], iterations=100)
    frame = result.frame.set_index("batch_size")
    assert frame.loc[32, "per_iteration_s"] == pytest.approx(0.152)
    assert frame.loc[16, "per_iteration_s"] == pytest.approx(0.081)
    assert frame.loc[32, "time_s"] == pytest.approx(15.2)
    assert "contradicts batch 64" in frame.loc[32, "detail"]
    assert "contradicts slower smaller batch 32, 16" in frame.loc[64, "detail"]
    assert any(n.startswith("batch 32: measured at 152.0 ms per iteration, slower than batch 64")
               for n in result.notes)
    kinds = dict(zip(result.table()["configuration"], result.table()["kind"], strict=True))
    assert kinds["batch 32 · CPU"].startswith("measured: median of its runs; contradicts")
    assert all(k.count("(") <= 1 for k in kinds.values())  # flat labels
    assert "CPU nan" not in result.header()


def test_time_per_iteration_never_falls_as_the_batch_grows(filled):
    frame = predict.predict_time(filled, batch_sizes=[1, 2, 4, 8, 16, 32, 64, 128, 512],
                                 gpus=["T4"]).frame
    from gpuperf_magics.model.monotone import CONTRADICTION, measured_rows

    for _, group in frame.groupby(frame["gpu"].fillna("CPU")):
        group = group.sort_values("batch_size")
        per_it = group["per_iteration_s"].to_numpy()
        # A predicted row never exceeds the next larger one; a measured row keeps its own
        # runs' time, within the repeats' noise or flagged as a contradiction.
        own = measured_rows(group).to_numpy()[:-1]
        flagged = group["detail"].str.contains("contradicts").to_numpy()[:-1]
        ok = per_it[1:] >= per_it[:-1] * (1 - 1e-9)
        noise = own & (per_it[1:] * CONTRADICTION >= per_it[:-1])
        assert (ok | noise | (own & flagged)).all()


@pytest.mark.parametrize(("keywords", "message"), [
    ({"iterations": 0}, "iterations must be a finite number > 0"),
    ({"iterations": True}, "iterations must be a whole number"),
    ({"samples": 2.5}, "samples must be a whole number"),
    ({"epochs": float("nan")}, "epochs must be a finite number > 0"),
    ({"gpu_count": -1}, "gpu_count must be a finite number > 0"),
])
def test_job_sizes_are_checked_before_the_store_is_read(tmp_path, keywords, message):
    with pytest.raises(PredictionError, match=message):
        predict.predict_time(tmp_path / "absent.sqlite", **keywords)
    assert not (tmp_path / "absent.sqlite").exists()


def test_more_gpus_than_measured_add_the_all_reduce_of_the_runs_parameters(tmp_path):
    # arch_params is no feature here (one network, one size), yet a move to 4 GPUs needs it.
    rows = [{"network": "net", "gpu": "Tesla T4", "gpu_count": 1, "batch_size": b,
             "iterations": 100, "time_s": 100 * (0.01 + b * 0.001), "arch_params": 25e6}
            for b in (32, 64, 128)]
    path = tmp_path / "t4.sqlite"
    gm.Store(path).import_table(pd.DataFrame(rows))
    one = predict.predict_time(path, batch_sizes=[64]).frame
    four = predict.predict_time(path, batch_sizes=[64], gpu_count=4).frame
    assert "all-reduce" in four["detail"].iloc[0] and "weak scaling" in four["detail"].iloc[0]
    assert four["time_s"].iloc[0] > one["time_s"].iloc[0]


def test_a_short_gpu_name_says_which_variant_it_took(filled):
    short = predict.predict_time(filled, batch_sizes=[32], gpus=["A100", "T4"])
    assert "NVIDIA A100-SXM4-40GB" in set(short.frame["gpu"])
    assert [n for n in short.notes if "→" in n] == [
        "A100 → NVIDIA A100-SXM4-40GB (also: NVIDIA A100 80GB PCIe, NVIDIA A100-PCIE-40GB, "
        "NVIDIA A100-SXM4-80GB; name one to choose)"]
    full = predict.predict_time(filled, batch_sizes=[32], gpus=["NVIDIA A100-SXM4-40GB"])
    assert not any("→" in n for n in full.notes)
