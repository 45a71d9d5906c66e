"""Tests of gpuperf_magics.hardware: the GPU path through fakes at the NVML/torch.cuda seam,
the CPU path on this real machine."""

from __future__ import annotations

import dataclasses
import platform
import subprocess
import sys
import uuid
import warnings
from types import SimpleNamespace
from typing import Any

import pytest
import torch

import gpuperf_magics.hardware as hardware
from gpuperf_magics.columns import names
from gpuperf_magics.hardware import Hardware, detect
from gpuperf_magics.hardware.cpu import parse_cpuinfo
from gpuperf_magics.hardware.gpu import (
    cuda_cores_per_sm,
    fp32_tflops,
    memory_bandwidth_gbs,
    read_gpu,
)

torch.set_num_threads(1)

MIB = 2**20

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

A100_UUID = "5b7ae6e1-0c3a-4f6e-9d27-1a2b3c4d5e6f"
H100_UUID = "9f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b"
SLICE_UUID = "0d8e7f6a-5b4c-4d3e-8f2a-1b0c9d8e7f6a"


# ---------------------------------------------------------------- fakes at the seam
class NVMLError(Exception):
    pass


class NVMLError_NotSupported(NVMLError):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_NotFound(NVMLError):
    pass


class FakeNvml:
    """Stands in for the ``pynvml`` module; each GPU is a dict, which is also its handle.

    A dict key whose value is an exception instance makes that query raise it.
    """

    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported
    NVMLError_LibraryNotFound = NVMLError_LibraryNotFound
    NVML_CLOCK_SM = 1
    NVML_CLOCK_MEM = 2
    NVML_DEVICE_MIG_ENABLE = 1
    NVML_DEVICE_ARCH_AMPERE = 7
    NVML_DEVICE_ARCH_ADA = 8
    NVML_DEVICE_ARCH_HOPPER = 9

    def __init__(self, gpus: list[dict[str, Any]], init_error: Exception | None = None) -> None:
        self.gpus = gpus
        self.init_error = init_error
        self.inits = 0
        self.shutdowns = 0

    def _get(self, handle: dict[str, Any], key: str) -> Any:
        if not self.inits or self.shutdowns >= self.inits:
            raise NVMLError("Uninitialized")
        value = handle.get(key, NVMLError_NotSupported())
        if isinstance(value, Exception):
            raise value
        return value

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.init_error
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        return self.gpus[index]

    def nvmlDeviceGetUUID(self, handle: dict[str, Any]) -> str:
        return self._get(handle, "uuid")

    def nvmlDeviceGetName(self, handle: dict[str, Any]) -> str:
        return self._get(handle, "name")

    def nvmlDeviceGetMemoryInfo(self, handle: dict[str, Any]) -> SimpleNamespace:
        return SimpleNamespace(total=self._get(handle, "memory"), free=0, used=0)

    def nvmlDeviceGetMaxClockInfo(self, handle: dict[str, Any], clock: int) -> int:
        return self._get(handle, {1: "sm_clock", 2: "mem_clock"}[clock])

    def nvmlDeviceGetMemoryBusWidth(self, handle: dict[str, Any]) -> int:
        return self._get(handle, "bus")

    def nvmlDeviceGetPowerManagementLimit(self, handle: dict[str, Any]) -> int:
        return self._get(handle, "power_mw")

    def nvmlDeviceGetCudaComputeCapability(self, handle: dict[str, Any]) -> tuple[int, int]:
        return self._get(handle, "cc")

    def nvmlDeviceGetArchitecture(self, handle: dict[str, Any]) -> int:
        return self._get(handle, "arch")

    def nvmlDeviceGetNumGpuCores(self, handle: dict[str, Any]) -> int:
        return self._get(handle, "cores")

    def nvmlDeviceGetMigMode(self, handle: dict[str, Any]) -> list[int]:
        mode = self._get(handle, "mig")
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: dict[str, Any]) -> int:
        return 7 if handle.get("mig") == 1 else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: dict[str, Any], i: int) -> Any:
        slices = handle.get("slices", [])
        if i >= len(slices):
            raise NVMLError_NotFound("Not Found")  # empty MIG slots answer NotFound
        return slices[i]

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040


def a100_nvml(**changes: Any) -> dict[str, Any]:
    gpu = {
        "uuid": f"GPU-{A100_UUID}",
        "name": "NVIDIA A100-SXM4-40GB",
        "memory": 40960 * MIB,
        "sm_clock": 1410,
        "mem_clock": 1215,
        "bus": 5120,
        "power_mw": 400_000,
        "cc": (8, 0),
        "arch": 7,
        "mig": 0,
    }
    return {**gpu, **changes}


def h100_nvml() -> dict[str, Any]:
    return {
        "uuid": f"GPU-{H100_UUID}",
        "name": "NVIDIA H100 80GB HBM3",
        "memory": 81559 * MIB,
        "sm_clock": 1980,
        "mem_clock": 2619,
        "bus": 5120,
        "power_mw": 700_000,
        "cc": (9, 0),
        "arch": 9,
        "mig": 0,
    }


def a100_props(**changes: Any) -> SimpleNamespace:
    """torch.cuda.get_device_properties() of an A100 (uuid without the GPU- prefix)."""
    props = {
        "name": "NVIDIA A100-SXM4-40GB",
        "major": 8,
        "minor": 0,
        "multi_processor_count": 108,
        "total_memory": 42_505_273_344,
        "uuid": A100_UUID,
        "L2_cache_size": 40 * MIB,
        "clock_rate": 1_410_000,  # kHz
        "memory_clock_rate": 1_215_000,  # kHz
        "memory_bus_width": 5120,
    }
    return SimpleNamespace(**{**props, **changes})


def h100_props() -> SimpleNamespace:
    return SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        major=9,
        minor=0,
        multi_processor_count=132,
        total_memory=85_030_354_944,
        uuid=H100_UUID,
        L2_cache_size=50 * MIB,
        clock_rate=1_980_000,
        memory_clock_rate=2_619_000,
        memory_bus_width=5120,
    )


def fake_cuda(*props: SimpleNamespace) -> SimpleNamespace:
    return SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: len(props),
        current_device=lambda: 0,
        get_device_properties=lambda i: props[i],
    )


# ---------------------------------------------------------------- derived figures
@pytest.mark.parametrize(
    ("mem_clock_mhz", "bus_bits", "spec_gbs"),
    [(1215, 5120, 1555), (2619, 5120, 3352), (10501, 384, 1008)],
    ids=["A100-SXM4-40GB", "H100-SXM", "RTX-4090"],
)
def test_bandwidth_formula_reproduces_spec_sheets(
    mem_clock_mhz: int, bus_bits: int, spec_gbs: float
) -> None:
    assert memory_bandwidth_gbs(mem_clock_mhz, bus_bits) == pytest.approx(spec_gbs, abs=1)


def test_bandwidth_and_peak_are_none_without_inputs() -> None:
    assert memory_bandwidth_gbs(None, 5120) is None
    assert memory_bandwidth_gbs(1215, 0) is None
    assert fp32_tflops(None, 1410) is None


@pytest.mark.parametrize(
    ("capability", "per_sm"),
    [
        ((3, 7), 192),
        ((5, 2), 128),
        ((6, 0), 64),
        ((6, 1), 128),
        ((7, 0), 64),
        ((7, 5), 64),
        ((8, 0), 64),
        ((8, 6), 128),
        ((8, 9), 128),
        ((9, 0), 128),
        ((10, 0), 128),
        ((12, 0), 128),
        ((8, 8), None),
        ((9, 5), None),
        ((2, 0), None),
    ],
)
def test_cores_per_sm_table_never_guesses(capability: tuple[int, int], per_sm: int | None) -> None:
    assert cuda_cores_per_sm(*capability) == per_sm


def test_fp32_peak_matches_spec_sheets() -> None:
    assert fp32_tflops(108 * 64, 1410) == pytest.approx(19.5, abs=0.05)  # A100
    assert fp32_tflops(132 * 128, 1980) == pytest.approx(66.9, abs=0.05)  # H100 SXM
    assert fp32_tflops(128 * 128, 2520) == pytest.approx(82.6, abs=0.05)  # RTX 4090


# ---------------------------------------------------------------- GPU path (fakes)
def test_reads_an_a100_from_torch_and_nvml() -> None:
    nvml = FakeNvml([a100_nvml()])
    gpu = read_gpu(fake_cuda(a100_props()), 0, nvml)  # type: ignore[arg-type]

    assert gpu.name == "NVIDIA A100-SXM4-40GB"
    assert gpu.uuid == f"GPU-{A100_UUID}"
    assert gpu.architecture == "Ampere"
    assert gpu.compute_capability == 8.0
    assert gpu.sm_count == 108
    assert gpu.cuda_cores == 6912
    assert gpu.clock_mhz == 1410
    assert gpu.mem_clock_mhz == 1215
    assert gpu.mem_bus_bits == 5120
    assert gpu.memory_gb == 40.0  # NVML's total, as the spec sheet counts it
    assert gpu.bandwidth_gbs == pytest.approx(1555.2)
    assert gpu.fp32_tflops == pytest.approx(19.49, abs=0.01)
    assert gpu.driver == "550.54.15"
    assert gpu.cuda_driver == "12.4"
    assert gpu.power_limit_w == 400.0
    assert gpu.mig is False
    assert gpu.l2_mb == 40.0
    assert gpu.visible_count == 1
    assert gpu.nvml_index == 0
    assert (gpu.tf32_tflops, gpu.fp16_tflops, gpu.release_year) == (None, None, None)
    assert nvml.inits == nvml.shutdowns == 1


def test_visible_devices_are_matched_to_nvml_by_uuid(monkeypatch: pytest.MonkeyPatch) -> None:
    # CUDA_VISIBLE_DEVICES=1: torch's cuda:0 is the machine's second GPU, NVML's index 1.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    nvml = FakeNvml([a100_nvml(), h100_nvml()])
    gpu = read_gpu(fake_cuda(h100_props()), 0, nvml)  # type: ignore[arg-type]

    assert gpu.index == 0
    assert gpu.nvml_index == 1
    assert gpu.uuid == f"GPU-{H100_UUID}"
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.architecture == "Hopper"
    assert gpu.power_limit_w == 700.0
    assert gpu.cuda_cores == 132 * 128
    assert gpu.bandwidth_gbs == pytest.approx(3352.3)
    assert gpu.visible_count == 1


@pytest.mark.parametrize(
    "torch_uuid",
    [A100_UUID, A100_UUID.upper(), f"GPU-{A100_UUID}", uuid.UUID(A100_UUID)],
    ids=["plain", "upper", "prefixed", "uuid-object"],
)
def test_uuid_spellings_all_match(torch_uuid: Any) -> None:
    nvml = FakeNvml([h100_nvml(), a100_nvml()])
    gpu = read_gpu(fake_cuda(a100_props(uuid=torch_uuid)), 0, nvml)  # type: ignore[arg-type]
    assert gpu.nvml_index == 1
    assert gpu.uuid == f"GPU-{A100_UUID}"


def test_unsupported_nvml_queries_leave_fields_none() -> None:
    nvml = FakeNvml(
        [
            a100_nvml(
                power_mw=NVMLError_NotSupported(),
                bus=NVMLError_NotSupported(),
                mem_clock=NVMLError_NotSupported(),
                mig=NVMLError_NotSupported(),  # a GPU without MIG: definitely not in MIG mode
                arch=NVMLError_NotSupported(),
            )
        ]
    )
    props = a100_props(memory_bus_width=0, memory_clock_rate=0)  # torch can't say either
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpu = read_gpu(fake_cuda(props), 0, nvml)  # type: ignore[arg-type]

    assert gpu.power_limit_w is None
    assert gpu.mem_bus_bits is None
    assert gpu.mem_clock_mhz is None
    assert gpu.bandwidth_gbs is None
    assert gpu.mig is False
    assert gpu.architecture == "Ampere"  # from the compute capability
    assert gpu.memory_gb == 40.0  # the other queries still answered
    assert gpu.nvml_index == 0
    assert nvml.shutdowns == 1


def test_nvml_library_not_found_leaves_torch_fields() -> None:
    nvml = FakeNvml([a100_nvml()], init_error=NVMLError_LibraryNotFound("not found"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpu = read_gpu(fake_cuda(a100_props()), 0, nvml)  # type: ignore[arg-type]

    assert gpu.nvml_index is None
    assert (gpu.driver, gpu.cuda_driver, gpu.power_limit_w, gpu.mig) == (None, None, None, None)
    assert gpu.uuid == f"GPU-{A100_UUID}"  # spelled as nvidia-smi does, from torch's UUID
    assert gpu.memory_gb == pytest.approx(39.59, abs=0.01)  # what CUDA can allocate
    assert gpu.bandwidth_gbs == pytest.approx(1555.2)  # from torch's clock and bus width
    assert gpu.fp32_tflops == pytest.approx(19.49, abs=0.01)
    assert nvml.shutdowns == 0


def test_real_pynvml_without_a_driver_leaves_torch_fields() -> None:
    pynvml = pytest.importorskip("pynvml")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gpu = read_gpu(fake_cuda(a100_props()), 0, pynvml)  # type: ignore[arg-type]
    assert gpu.nvml_index is None
    assert gpu.bandwidth_gbs == pytest.approx(1555.2)


def test_pynvml_not_installed_leaves_torch_fields() -> None:
    gpu = read_gpu(fake_cuda(a100_props()), 0, None)  # type: ignore[arg-type]
    assert gpu.nvml_index is None
    assert gpu.cuda_cores == 6912
    assert gpu.l2_mb == 40.0


def test_unmatched_uuid_takes_nothing_from_nvml() -> None:
    nvml = FakeNvml([h100_nvml()])
    gpu = read_gpu(fake_cuda(a100_props()), 0, nvml)  # type: ignore[arg-type]
    assert gpu.nvml_index is None
    assert gpu.power_limit_w is None
    assert nvml.shutdowns == 1


def test_without_torch_uuid_only_a_single_gpu_is_matched() -> None:
    alone = read_gpu(fake_cuda(a100_props(uuid=None)), 0, FakeNvml([a100_nvml()]))  # type: ignore[arg-type]
    assert alone.nvml_index == 0
    assert alone.power_limit_w == 400.0

    nvml = FakeNvml([a100_nvml(), h100_nvml()])
    ambiguous = read_gpu(fake_cuda(a100_props(uuid=None)), 0, nvml)  # type: ignore[arg-type]
    assert ambiguous.nvml_index is None
    assert ambiguous.uuid is None


def test_mig_slice_is_found_below_its_parent() -> None:
    mig_slice = {
        "uuid": f"MIG-{SLICE_UUID}",
        "name": "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
        "memory": 4864 * MIB,
    }
    nvml = FakeNvml([h100_nvml(), a100_nvml(mig=1, slices=[mig_slice])])
    props = a100_props(
        name="NVIDIA A100-SXM4-40GB MIG 1g.5gb",
        uuid=SLICE_UUID,
        multi_processor_count=14,
        total_memory=4_810_080_256,
    )
    gpu = read_gpu(fake_cuda(props), 0, nvml)  # type: ignore[arg-type]

    assert gpu.mig is True
    assert gpu.nvml_index == 1
    assert gpu.uuid == f"MIG-{SLICE_UUID}"
    assert gpu.memory_gb == 4.75  # the slice's memory, not the GPU's
    assert gpu.sm_count == 14
    assert gpu.cuda_cores == 14 * 64
    assert gpu.clock_mhz == 1410
    assert gpu.power_limit_w == 400.0  # the physical GPU's


def test_unknown_capability_takes_nvml_cores_or_none() -> None:
    props = a100_props(major=8, minor=8)
    without = read_gpu(fake_cuda(props), 0, FakeNvml([a100_nvml(cc=(8, 8))]))  # type: ignore[arg-type]
    assert without.cuda_cores is None
    assert without.fp32_tflops is None
    assert without.architecture == "Ampere"  # NVML's architecture code still says it

    with_cores = read_gpu(fake_cuda(props), 0, FakeNvml([a100_nvml(cores=7000)]))  # type: ignore[arg-type]
    assert with_cores.cuda_cores == 7000


def test_rocm_device_gets_no_cuda_tables() -> None:
    props = SimpleNamespace(
        name="AMD Instinct MI300X",
        major=9,
        minor=4,
        multi_processor_count=304,
        total_memory=192 * 2**30,
        gcnArchName="gfx942:sramecc+:xnack-",
        uuid=None,
        L2_cache_size=4 * MIB,
        clock_rate=2_100_000,
        memory_clock_rate=1_300_000,
        memory_bus_width=8192,
    )
    nvml = FakeNvml([a100_nvml()])
    gpu = read_gpu(fake_cuda(props), 0, nvml, hip=True)  # type: ignore[arg-type]
    assert gpu.architecture == "gfx942"
    assert gpu.compute_capability is None
    assert gpu.cuda_cores is None
    assert gpu.memory_gb == 192.0
    assert nvml.inits == 0


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


# ---------------------------------------------------------------- /proc/cpuinfo
TWO_SOCKETS_WITH_SMT = "\n\n".join(
    f"processor\t: {cpu}\nmodel name\t: Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz\n"
    f"cpu MHz\t\t: {2500.0 + cpu}\nphysical id\t: {cpu // 4}\ncore id\t\t: {cpu % 2}"
    for cpu in range(8)
)


def test_parse_cpuinfo_counts_physical_cores_over_sockets() -> None:
    summary = parse_cpuinfo(TWO_SOCKETS_WITH_SMT)
    assert summary.model == "Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"
    assert summary.physical_cores == 4  # 2 sockets × 2 cores, hyper-threads not counted
    assert summary.mhz == 2507.0


def test_parse_cpuinfo_without_topology() -> None:
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n\nprocessor\t: 1\n"
    assert parse_cpuinfo(arm) == (None, None, None)
    assert parse_cpuinfo("") == (None, None, None)


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
