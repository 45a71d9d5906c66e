"""Which compute peak a GPU move follows: the precision of the run's matrix products."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

import gpuperf_magics as gm
from gpuperf_magics.model import TrainingTimeModel
from gpuperf_magics.model.inputs import effective_peak, precision_of, prepare


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
