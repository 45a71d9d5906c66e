"""The canonical table → numeric features (gpuperf_magics.model.inputs): which columns are
features, clear errors for bad values, GPU names and the precision a GPU move follows."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_data import steady, synthetic
from torch import nn

import gpuperf_magics as gm
from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.inputs import effective_peak, precision_of, prepare


def test_unknown_gpu_name_lists_close_matches() -> None:
    pytest.importorskip("gpuperf_magics.hardware.catalog")
    x = pd.DataFrame({"batch_size": [8, 16], "iterations": [1, 1], "gpu": ["Tesla Q100", "x"]})
    with pytest.raises(ValueError, match="Q100"):
        TrainingTimeModel().fit(x, [1.0, 2.0])


def test_zero_rows_is_a_clear_error() -> None:
    x, y = synthetic()
    with pytest.raises(ValueError, match="no rows"):
        TrainingTimeModel().fit(x.iloc[:0], y[:0])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    column=st.sampled_from(["batch_size", "iterations", "gpu_fp32_tflops"]),
    bad=st.sampled_from([np.nan, 0.0, -4.0, "abc", np.inf]),
)
def test_bad_feature_values_name_the_column(column: str, bad: object) -> None:
    x, y = synthetic()
    x = x.astype({column: object})
    x.loc[3, column] = bad
    with pytest.raises(ValueError, match=column):
        TrainingTimeModel().fit(x, y)


@settings(max_examples=15, deadline=None)
@given(bad=st.sampled_from([np.nan, 0.0, -1.0, np.inf]))
def test_bad_targets_are_clear_errors(bad: float) -> None:
    x, y = synthetic()
    y = y.copy()
    y[2] = bad
    with pytest.raises(ValueError, match="time_s"):
        TrainingTimeModel().fit(x, y)


def test_non_feature_columns_are_ignored() -> None:
    x, y = synthetic()
    noisy = x.assign(run_id=np.arange(len(x)), it_median_s=y / x["iterations"],
                     tags=[{"a": 1}] * len(x), note="hello")
    model = TrainingTimeModel().fit(noisy, y)
    assert "run_id" not in model.feature_names_in_
    assert "it_median_s" not in model.feature_names_in_
    np.testing.assert_allclose(model.predict(noisy), TrainingTimeModel().fit(x, y).predict(x))


def test_catalog_per_device_figures_win_over_board_figures() -> None:
    pytest.importorskip("gpuperf_magics.hardware.catalog")
    from gpuperf_magics.model.inputs import prepare

    x = pd.DataFrame({"batch_size": [8, 16], "gpu": ["Tesla K80", "Tesla K80"],
                      "gpu_fp32_tflops": [5.591, 5.591]})
    default = prepare(x, prefer_catalog=True)
    paper = prepare(x)
    assert default.features["gpu_fp32_tflops"].iloc[0] == pytest.approx(4.37, rel=0.05)
    assert paper.features["gpu_fp32_tflops"].iloc[0] == 5.591  # the paper's own feature
    assert list(default.architecture) == ["Kepler", "Kepler"]


def test_ignore_takes_a_name_or_names_and_hardware_columns():
    x, y = steady()
    x = x.assign(local_batch_size=x["batch_size"])
    one = TrainingTimeModel(ignore="local_batch_size").fit(x, y)
    assert "batch_size" in one.feature_names_in_
    assert "local_batch_size" not in one.feature_names_in_
    bare = TrainingTimeModel(ignore=["gpu_fp32_tflops", "gpu_bandwidth_gbs"]).fit(x, y)
    assert not {"gpu_fp32_tflops", "gpu_bandwidth_gbs"} & set(bare.feature_names_in_)


def test_an_empty_table_to_predict_says_so():
    x, y = steady()
    model = TrainingTimeModel().fit(x, y)
    with pytest.raises(ValueError, match="X has no rows"):
        model.predict(x.head(0))


def test_peak_memory_of_a_store_frame_is_no_feature(tmp_path: Path) -> None:
    # Peak memory is a result of a run (it grows with the batch), not what ran: a model that
    # took it as a feature would need it for every configuration it is asked about.
    from gpuperf_magics.store import Store

    batch = np.repeat([8, 16, 32, 64, 128], 2)
    table = pd.DataFrame({
        "network": "net", "batch_size": batch, "iterations": 100, "gpu": "Tesla T4",
        "time_s": 100 * (0.01 + 0.001 * batch), "peak_memory_gb": 0.05 * batch,
    })
    store = Store(tmp_path / "runs.sqlite")
    store.import_table(table)
    runs = store.runs()
    assert runs["peak_memory_gb"].notna().all()
    model = TrainingTimeModel().fit(runs.drop(columns="time_s"), runs["time_s"])
    assert "peak_memory_gb" not in model.feature_names_in_
    assert "peak_memory_gb" not in " ".join(model.report()["name"].astype(str))


def test_precision_from_what_the_capture_records():
    frame = pd.DataFrame({
        "arch_amp": [True, False, False, False, False, None, False],
        "arch_dtype": ["float32", "bfloat16", "float32", "float32", "float32", None, "float32"],
        "arch_tf32_matmul": [False, False, True, False, False, None, False],
        "arch_tf32_conv": [True, True, False, True, True, None, False],
        "arch_layers_conv": [0, 0, 0, 0, 4, None, 4],
    })
    assert list(precision_of(frame)) == ["fp16", "fp16", "tf32", "fp32", "tf32", None, "fp32"]
    assert list(precision_of(pd.DataFrame({"batch_size": [8]}))) == [None]
    given = frame.assign(precision=["FP16", "tf32", "fp32", "", None, "fp32", "fp32"])
    assert list(precision_of(given)) == ["fp16", "tf32", "fp32", None, None, "fp32", "fp32"]
    with pytest.raises(ValueError, match="'precision' must be one of fp32, tf32, fp16"):
        precision_of(pd.DataFrame({"precision": ["fp8"]}))


def test_effective_peak_is_between_the_fp32_and_the_tensor_peak():
    assert effective_peak(15.7, 125.0) == pytest.approx(math.sqrt(15.7 * 125.0))
    assert effective_peak(11.34, None) == 11.34  # GTX 1080 Ti: no tensor cores
    assert effective_peak(11.34, float("nan")) == 11.34
    assert effective_peak(35.6, 35.6) == 35.6  # never below the FP32 peak


def test_a_tf32_rate_near_the_fp32_figure_gains_nothing_over_it():
    """TF32 at 8x FP32 (A100) moves by the geometric mean; at 2x (A10, whose FP32 figure
    counts both dual-issue datapaths) by the FP32 figure; FP16 at 4x (A10) keeps the mean."""
    assert effective_peak(19.5, 156.0, "tf32") == pytest.approx(math.sqrt(19.5 * 156.0))
    assert effective_peak(31.2, 62.5, "tf32") == 31.2
    assert effective_peak(31.2, 125.0, "fp16") == pytest.approx(math.sqrt(31.2 * 125.0))
    frame = pd.DataFrame({"network": "bert", "gpu": ["NVIDIA A10", "NVIDIA A100-SXM4-40GB"],
                          "batch_size": 32, "precision": "tf32"})
    prep = prepare(frame, prefer_catalog=True)
    assert list(prep.features["gpu_fp32_tflops"]) == pytest.approx(
        [31.2, math.sqrt(19.5 * 156.0)])
    # Still a device apart from the A10's FP32 runs: a precision it has a tensor rate for.
    assert list(prep.hardware_label) == ["NVIDIA A10 (TF32)", "NVIDIA A100-SXM4-40GB (TF32)"]


def _table(amp: bool) -> tuple[pd.DataFrame, np.ndarray]:
    frame = pd.DataFrame({"network": "bert", "gpu": "Tesla V100-SXM2-32GB",
                          "batch_size": [8, 16, 32, 64], "arch_amp": amp,
                          "arch_dtype": "float32"})
    return frame, 0.01 + 0.004 * frame["batch_size"].to_numpy(float)


def test_prepare_uses_the_precisions_peak_for_named_gpus_only_by_default():
    frame, _ = _table(amp=True)
    prep = prepare(frame, prefer_catalog=True)
    assert prep.features["gpu_fp32_tflops"].iloc[0] == pytest.approx(math.sqrt(15.7 * 125.0))
    assert prep.hardware_label[0] == "Tesla V100-SXM2-32GB (FP16)"
    paper = prepare(frame, prefer_catalog=False)  # the paper's method keeps its figures
    assert paper.features["gpu_fp32_tflops"].iloc[0] == 15.7
    assert "arch_amp" not in prep.features.columns  # not a feature: it chose the peak


def test_a_mixed_precision_run_moves_to_a_tensor_core_gpu_by_its_tensor_rate():
    ratios = {}
    for amp in (False, True):
        x, y = _table(amp)
        model = TrainingTimeModel(public_data=False).fit(x, y)
        a100 = model.predict(x.assign(gpu="A100 40GB"))
        ratios[amp] = float(np.mean(y / a100))
    # V100 → A100: FP32 peaks differ by 1.24×, FP16 tensor peaks by 2.5×.
    assert ratios[True] > ratios[False] * 1.15


def test_the_capture_records_whether_tf32_was_allowed(tmp_path):
    model = nn.Sequential(nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    path = tmp_path / "runs.sqlite"
    with gm.profile_training(name="m", store=path) as run:
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            opt.step()
    assert run.architecture["arch_tf32_matmul"] is bool(torch.backends.cuda.matmul.allow_tf32)
    assert run.architecture["arch_tf32_conv"] is bool(torch.backends.cudnn.allow_tf32)
    runs = gm.Store(path).runs()
    assert list(precision_of(runs)) == ["fp32"]  # a Linear: cuDNN's TF32 does not apply
