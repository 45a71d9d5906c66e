"""Fakes at the hardware seam: a stand-in for the ``pynvml`` module and for ``torch.cuda``,
and the A100 and H100 they describe (the tests of hardware.gpu and of the hardware package)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

#: One mebibyte, the unit of NVML and torch memory figures.
MIB = 2**20

#: The A100's UUID as torch reports it (NVML adds the ``GPU-`` prefix).
A100_UUID = "5b7ae6e1-0c3a-4f6e-9d27-1a2b3c4d5e6f"

#: The H100's UUID as torch reports it.
H100_UUID = "9f1c2d3e-4b5a-6978-8a9b-0c1d2e3f4a5b"


class NVMLError(Exception):
    """The base of pynvml's errors."""


class NVMLError_NotSupported(NVMLError):
    """A query the device does not support."""


class NVMLError_LibraryNotFound(NVMLError):
    """No NVML library on the machine."""


class NVMLError_NotFound(NVMLError):
    """No such device (an empty MIG slot)."""


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

    def nvmlDeviceGetSamples(self, handle: dict[str, Any], kind: int, since: int
                             ) -> tuple[int, list[SimpleNamespace]]:
        """The GPU's utilization samples (``"samples"``: (µs timestamp, percent) pairs) from
        ``since`` on, as NVML serves them: (value type 1, unsigned int; the samples)."""
        samples = self._get(handle, "samples")
        return 1, [SimpleNamespace(timeStamp=t, sampleValue=SimpleNamespace(uiVal=v))
                   for t, v in samples if t >= since]

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040


def a100_nvml(**changes: Any) -> dict[str, Any]:
    """An A100-SXM4-40GB as FakeNvml serves it, with ``changes`` applied."""
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
    """An H100 80GB HBM3 as FakeNvml serves it."""
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
    """torch.cuda.get_device_properties() of an H100."""
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
    """Stands in for ``torch.cuda`` with one visible device per ``props``."""
    return SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: len(props),
        current_device=lambda: 0,
        get_device_properties=lambda i: props[i],
    )
