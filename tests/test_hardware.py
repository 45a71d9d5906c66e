"""Tests of gpuperf_magics.hardware (the package: ``detect`` and ``Hardware``): the CPU path on
this real machine, the GPU path through fakes at the NVML/torch.cuda seam, the import cost."""

from __future__ import annotations

import dataclasses
import platform
import subprocess
import sys
import warnings

import pytest
import torch
from fake_nvml import (
    FakeNvml,
    NVMLError_LibraryNotFound,
    a100_nvml,
    a100_props,
    fake_cuda,
    h100_nvml,
    h100_props,
)

import gpuperf_magics.hardware as hardware
from gpuperf_magics.columns import names
from gpuperf_magics.hardware import Hardware, detect

torch.set_num_threads(1)


# The flat keys agreed in the interface spec, spelled out so a rename breaks this test.
SPEC_KEYS = [
    "gpu_name",
    "gpu_uuid",
    "gpu_architecture",
    "gpu_compute_capability",
    "gpu_sm_count",
    "gpu_cuda_cores",
    "gpu_clock_mhz",
    "gpu_mem_clock_mhz",
    "gpu_mem_bus_bits",
    "gpu_memory_gb",
    "gpu_bandwidth_gbs",
    "gpu_fp32_tflops",
    "gpu_tf32_tflops",
    "gpu_fp16_tflops",
    "gpu_bf16_tflops",
    "gpu_release_year",
    "gpu_driver",
    "gpu_cuda_driver",
    "gpu_power_limit_w",
    "gpu_mig",
    "gpu_l2_mb",
    "gpu_visible_count",
    "cpu_model",
    "cpu_physical_cores",
    "cpu_logical_cores",
    "cpu_affinity",
    "cpu_threads",
    "cpu_interop_threads",
    "cpu_simd",
    "cpu_memory_gb",
    "cpu_mhz",
    "sw_python",
    "sw_torch",
    "sw_cuda",
    "sw_cudnn",
    "sw_platform",
]


# ---------------------------------------------------------------- detect()
def test_detect_on_this_cpu_machine() -> None:
    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only path")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hw = detect()

    assert hw.device == "cpu"
    assert hw.gpu is None
    assert hw.label == f"CPU {hw.cpu.model}"
    cpu = hw.cpu
    assert isinstance(cpu.model, str) and cpu.model
    assert isinstance(cpu.logical_cores, int) and cpu.logical_cores >= 1
    assert isinstance(cpu.physical_cores, int) and 1 <= cpu.physical_cores <= cpu.logical_cores
    assert cpu.affinity is None or 1 <= cpu.affinity <= cpu.logical_cores
    assert cpu.threads == torch.get_num_threads() == 1
    assert cpu.interop_threads == torch.get_num_interop_threads()
    assert cpu.simd is None or cpu.simd.isupper()
    assert cpu.memory_gb is not None and 0.1 < cpu.memory_gb < 100_000
    assert cpu.mhz is None or 100 < cpu.mhz < 10_000
    sw = hw.software
    assert sw.python == platform.python_version()
    assert sw.torch == torch.__version__
    assert sw.cuda == torch.version.cuda
    assert sw.cudnn is None
    assert sw.platform

    features = hw.as_features()
    assert list(features) == list(names(group="hardware")) == SPEC_KEYS
    assert all(features[key] is None for key in features if key.startswith("gpu_"))
    assert features["cpu_model"] == cpu.model
    assert features["sw_torch"] == torch.__version__


def test_detect_reads_thread_settings_every_call() -> None:
    before = detect("cpu").cpu.threads
    torch.set_num_threads(2)
    try:
        assert detect("cpu").cpu.threads == 2
    finally:
        torch.set_num_threads(1)
    assert before == 1


def test_detect_accepts_device_spellings() -> None:
    assert detect("cpu").device == "cpu"
    assert detect(torch.device("cpu")).device == "cpu"
    with pytest.raises(ValueError, match="not a torch device"):
        detect("gpu:0")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_detect_cuda_without_cuda_says_what_to_do() -> None:
    with pytest.raises(ValueError, match="device='cpu'"):
        detect("cuda:0")


def test_hardware_is_frozen() -> None:
    hw = detect("cpu")
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.device = "cuda:0"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        hw.cpu.model = "other"  # type: ignore[misc]


def test_detect_gpu_path_through_torch_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = fake_cuda(a100_props(), h100_props())
    for name in ("is_available", "device_count", "current_device", "get_device_properties"):
        monkeypatch.setattr(torch.cuda, name, getattr(cuda, name))
    nvml = FakeNvml([h100_nvml(), a100_nvml()])
    monkeypatch.setattr(hardware, "_load_nvml", lambda: nvml)
    monkeypatch.setattr(hardware, "_GPUS", {})

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hw = detect()
    assert hw.device == "cuda:0"
    assert hw.label == "NVIDIA A100-SXM4-40GB"
    assert hw.as_features()["gpu_bandwidth_gbs"] == pytest.approx(1555.2)
    assert hw.as_features()["gpu_visible_count"] == 2
    assert list(hw.as_features()) == SPEC_KEYS

    second = detect("cuda:1")
    assert second.gpu is not None and second.gpu.name == "NVIDIA H100 80GB HBM3"
    assert second.gpu.nvml_index == 0
    assert detect("cuda").gpu == hw.gpu
    assert nvml.inits == 2  # once per device: the static specs are cached

    detect(0, refresh=True)
    assert nvml.inits == 3

    with pytest.raises(ValueError, match="sees 2 CUDA device"):
        detect("cuda:2")


def test_detect_with_no_gpu_and_no_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    nvml = FakeNvml([], init_error=NVMLError_LibraryNotFound("not found"))
    monkeypatch.setattr(hardware, "_load_nvml", lambda: nvml)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hw = detect()
    assert hw.gpu is None
    assert hw.cpu.model and hw.cpu.logical_cores
    assert nvml.inits == 0  # NVML is not even tried without a CUDA device


# ---------------------------------------------------------------- import cost
def test_import_does_not_import_torch_or_pynvml() -> None:
    code = (
        "import sys, gpuperf_magics.hardware\n"
        "heavy = {'torch', 'pynvml'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_label_of_a_cpu_run_names_the_model() -> None:
    hw = detect("cpu")
    assert isinstance(hw, Hardware)
    assert hw.label.startswith("CPU ")
