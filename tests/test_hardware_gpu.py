"""Tests of gpuperf_magics.hardware.gpu: ``read_gpu`` through fakes at the NVML/torch.cuda
seam (UUID matching, MIG slices, missing or driverless NVML, ROCm) and the derived figures."""

from __future__ import annotations

import uuid
import warnings
from types import SimpleNamespace
from typing import Any

import pytest
from fake_nvml import (
    A100_UUID,
    H100_UUID,
    MIB,
    FakeNvml,
    NVMLError_LibraryNotFound,
    NVMLError_NotSupported,
    a100_nvml,
    a100_props,
    fake_cuda,
    h100_nvml,
    h100_props,
)

from gpuperf_magics.hardware.gpu import (
    cuda_cores_per_sm,
    fp32_tflops,
    memory_bandwidth_gbs,
    read_gpu,
)

SLICE_UUID = "0d8e7f6a-5b4c-4d3e-8f2a-1b0c9d8e7f6a"


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
