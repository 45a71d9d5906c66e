"""What a CUDA device is: specs from ``torch.cuda`` and NVML, and the peaks derived from them.

The seam to the hardware is narrow on purpose: :func:`read_gpu` takes a ``torch.cuda``-like
object and the ``pynvml`` module (or ``None``), so tests drive every path with fakes.

NVML enumerates every GPU of the machine in PCI order and ignores ``CUDA_VISIBLE_DEVICES``,
while torch's device indices honour it; the two are therefore joined by UUID, never by index.
"""

from __future__ import annotations

import re
from contextlib import suppress
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from gpuperf_magics.columns import names

#: ``gpu_*`` keys of :meth:`GpuInfo.as_features`, in order; each is ``gpu_`` + a field name.
GPU_FEATURES = names(producer="hardware.gpu")

_GIB = 2**30
_MIB = 2**20

# FP32 lanes per SM, as in the CUDA samples' _ConvertSMVer2Cores. A (major, minor) key is
# exact; a bare major covers every minor of that generation. Anything absent is unknown.
_CORES_PER_SM: dict[tuple[int, int] | int, int] = {
    3: 192,
    5: 128,
    (6, 0): 64,
    (6, 1): 128,
    (6, 2): 128,
    7: 64,
    (8, 0): 64,
    (8, 6): 128,
    (8, 7): 128,
    (8, 9): 128,
    (9, 0): 128,
    10: 128,
    11: 128,
    12: 128,
}

_ARCHITECTURES: dict[tuple[int, int] | int, str] = {
    3: "Kepler",
    5: "Maxwell",
    6: "Pascal",
    (7, 0): "Volta",
    (7, 2): "Volta",
    (7, 5): "Turing",
    (8, 0): "Ampere",
    (8, 6): "Ampere",
    (8, 7): "Ampere",
    (8, 9): "Ada Lovelace",
    (9, 0): "Hopper",
    10: "Blackwell",
    11: "Blackwell",
    12: "Blackwell",
}

# NVML's nvmlDeviceGetArchitecture codes, by constant name, for capabilities newer than the
# table above.
_NVML_ARCHITECTURES = {
    "NVML_DEVICE_ARCH_KEPLER": "Kepler",
    "NVML_DEVICE_ARCH_MAXWELL": "Maxwell",
    "NVML_DEVICE_ARCH_PASCAL": "Pascal",
    "NVML_DEVICE_ARCH_VOLTA": "Volta",
    "NVML_DEVICE_ARCH_TURING": "Turing",
    "NVML_DEVICE_ARCH_AMPERE": "Ampere",
    "NVML_DEVICE_ARCH_ADA": "Ada Lovelace",
    "NVML_DEVICE_ARCH_HOPPER": "Hopper",
    "NVML_DEVICE_ARCH_BLACKWELL": "Blackwell",
    "NVML_DEVICE_ARCH_RUBIN": "Rubin",
}


class CudaLike(Protocol):
    """The part of ``torch.cuda`` that :func:`read_gpu` uses."""

    def device_count(self) -> int: ...

    def get_device_properties(self, device: int) -> Any: ...


@dataclass(frozen=True)
class GpuInfo:
    """Specs of one CUDA device, as torch and NVML report them (``None``: not known).

    Attributes
    ----------
    index : int
        torch's device index (``cuda:<index>``, after ``CUDA_VISIBLE_DEVICES``).
    name : str
        Device name, e.g. ``"NVIDIA A100-SXM4-40GB"`` (for MIG: the slice's name).
    uuid : str or None
        ``GPU-…`` (or ``MIG-…``) as ``nvidia-smi -L`` prints it.
    architecture : str or None
        ``"Ampere"``, ``"Hopper"`` …; the ``gfx`` target on ROCm.
    compute_capability : float or None
        ``major + minor / 10``, e.g. ``8.6``; ``None`` on ROCm.
    sm_count : int or None
        Streaming multiprocessors (compute units on ROCm); for MIG, the slice's.
    cuda_cores : int or None
        ``sm_count`` × FP32 lanes per SM of the compute capability; NVML's count where the
        capability is not in the table; never guessed.
    clock_mhz : float or None
        Rated maximum (boost) SM clock. CUDA's value is preferred: NVML's "max clock" is the
        top of the voltage/frequency curve, which on GeForce cards lies above the rated boost.
    mem_clock_mhz : float or None
        Maximum memory clock as NVML (else CUDA) reports it; see :func:`memory_bandwidth_gbs`.
    mem_bus_bits : int or None
        Memory bus width in bits.
    memory_gb : float or None
        Memory in GiB (2**30 bytes, as spec sheets mean "GB" for GPU memory); NVML's total
        when known (a MIG slice's own), else what CUDA can allocate.
    bandwidth_gbs : float or None
        Theoretical memory bandwidth, GB/s (10**9 bytes/s), see :func:`memory_bandwidth_gbs`.
    fp32_tflops : float or None
        Theoretical FP32 peak (non-tensor), see :func:`fp32_tflops`.
    tf32_tflops, fp16_tflops, bf16_tflops : float or None
        Dense tensor-core peaks; not measurable on the device, so ``None`` here: the spec
        catalog fills them (``dataclasses.replace``).
    release_year : int or None
        From the catalog too; ``None`` here.
    driver : str or None
        Driver version, e.g. ``"550.54.15"`` (NVML).
    cuda_driver : str or None
        Highest CUDA version the driver supports, e.g. ``"12.4"`` (NVML).
    power_limit_w : float or None
        Power management limit in watts (NVML).
    mig : bool or None
        MIG mode enabled on the physical GPU (``True`` also when this device is a MIG slice).
    l2_mb : float or None
        L2 cache in MiB.
    visible_count : int or None
        CUDA devices torch can see in this process.
    nvml_index : int or None
        NVML's index of the physical GPU; ``None`` when NVML gave nothing (library missing,
        no UUID match), i.e. every field above came from torch alone.
    """

    index: int
    name: str
    uuid: str | None = None
    architecture: str | None = None
    compute_capability: float | None = None
    sm_count: int | None = None
    cuda_cores: int | None = None
    clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_bus_bits: int | None = None
    memory_gb: float | None = None
    bandwidth_gbs: float | None = None
    fp32_tflops: float | None = None
    tf32_tflops: float | None = None
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    release_year: int | None = None
    driver: str | None = None
    cuda_driver: str | None = None
    power_limit_w: float | None = None
    mig: bool | None = None
    l2_mb: float | None = None
    visible_count: int | None = None
    nvml_index: int | None = None

    def as_features(self) -> dict[str, Any]:
        """The flat ``gpu_*`` features (keys: :data:`GPU_FEATURES`)."""
        return {key: getattr(self, key[len("gpu_") :]) for key in GPU_FEATURES}


# ---------------------------------------------------------------- derived figures
def _lookup(table: dict[tuple[int, int] | int, Any], major: int, minor: int) -> Any:
    exact = table.get((major, minor))
    return exact if exact is not None else table.get(major)


def cuda_cores_per_sm(major: int, minor: int) -> int | None:
    """FP32 lanes per SM for a compute capability, or ``None`` when it is not known.

    Examples
    --------
    >>> cuda_cores_per_sm(8, 0), cuda_cores_per_sm(8, 6), cuda_cores_per_sm(8, 8)
    (64, 128, None)
    """
    return _lookup(_CORES_PER_SM, major, minor)


def architecture_name(major: int, minor: int) -> str | None:
    """Architecture name of a compute capability (``(8, 0)`` → ``"Ampere"``), or ``None``."""
    return _lookup(_ARCHITECTURES, major, minor)


def memory_bandwidth_gbs(mem_clock_mhz: float | None, bus_bits: int | None) -> float | None:
    """Theoretical memory bandwidth in GB/s: ``clock MHz × 2 × bus bits / 8 / 1000``.

    The factor 2 is double data rate. NVML and CUDA report the memory clock so that this one
    formula holds for HBM and GDDR alike: for GDDR6X (PAM4) they already report half the
    effective data rate. Checked against spec sheets: A100-SXM4-40GB 1215 MHz × 5120 bit →
    1555 GB/s; H100 SXM 2619 MHz × 5120 bit → 3352 GB/s; RTX 4090 10501 MHz × 384 bit →
    1008 GB/s.

    Parameters
    ----------
    mem_clock_mhz : float or None
        Maximum memory clock as NVML (``nvmlDeviceGetMaxClockInfo(h, NVML_CLOCK_MEM)``) or CUDA
        (``memory_clock_rate`` / 1000) report it.
    bus_bits : int or None
        Memory bus width in bits.

    Returns
    -------
    float or None
        GB/s (10**9 bytes per second), rounded to 0.1; ``None`` if an input is missing.
    """
    if not mem_clock_mhz or not bus_bits:
        return None
    return round(mem_clock_mhz * 2 * bus_bits / 8 / 1000, 1)


def fp32_tflops(cuda_cores: int | None, clock_mhz: float | None) -> float | None:
    """Theoretical FP32 peak in TFLOP/s: ``cores × 2 (FMA) × clock``, or ``None``.

    A100 (6912 cores, 1410 MHz) → 19.49; H100 SXM (16896, 1980 MHz) → 66.91.
    """
    if not cuda_cores or not clock_mhz:
        return None
    return round(cuda_cores * 2 * clock_mhz / 1e6, 3)


# ---------------------------------------------------------------- NVML
@dataclass(frozen=True)
class _NvmlReading:
    """What NVML said about the physical GPU (or MIG slice) matched to a torch device."""

    index: int
    name: str | None = None
    uuid: str | None = None
    architecture: str | None = None
    compute_capability: tuple[int, int] | None = None
    clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    mem_bus_bits: int | None = None
    memory_total: int | None = None
    cores: int | None = None
    power_limit_w: float | None = None
    mig: bool | None = None
    driver: str | None = None
    cuda_driver: str | None = None


def _uuid_key(value: Any) -> str | None:
    """32 lowercase hex digits of a UUID in any of NVML's or torch's spellings."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        # NVML bindings before 11.5 return bytes; a raw 16-byte UUID is bytes too.
        text = value.hex() if len(value) == 16 else value.decode(errors="replace")
    else:
        text = str(value)
    text = text.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    digits = re.sub(r"[^0-9a-f]", "", text)
    return digits if len(digits) == 32 else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def _query(nvml: ModuleType, function: str, *args: Any) -> Any:
    """Call an optional NVML query; ``None`` when unsupported or absent from these bindings."""
    call = getattr(nvml, function, None)
    if call is None:
        return None
    try:
        return call(*args)
    except nvml.NVMLError:
        return None


def _nvml_architecture(nvml: ModuleType, handle: Any) -> str | None:
    code = _query(nvml, "nvmlDeviceGetArchitecture", handle)
    if code is None:
        return None
    for constant, label in _NVML_ARCHITECTURES.items():
        if getattr(nvml, constant, None) == code:
            return label
    return None


def _mig_mode(nvml: ModuleType, handle: Any) -> bool | None:
    call = getattr(nvml, "nvmlDeviceGetMigMode", None)
    if call is None:
        return None
    try:
        current, _pending = call(handle)
    except nvml.NVMLError as error:
        # A GPU that cannot do MIG (pre-Ampere, GeForce) is definitely not in MIG mode.
        return False if isinstance(error, getattr(nvml, "NVMLError_NotSupported", ())) else None
    return bool(current == getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1))


def _find_device(
    nvml: ModuleType, target: str | None, visible_count: int
) -> tuple[int, Any, Any] | None:
    """(NVML index, physical handle, MIG handle or None) of the torch device's UUID."""
    handles: list[tuple[int, Any]] = []
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = _query(nvml, "nvmlDeviceGetHandleByIndex", i)
        if handle is not None:
            handles.append((i, handle))
    if target is None:
        # Without a UUID from torch only the unambiguous case can be matched.
        if len(handles) == 1 and visible_count == 1 and not _mig_mode(nvml, handles[0][1]):
            return handles[0][0], handles[0][1], None
        return None
    for i, handle in handles:
        if _uuid_key(_query(nvml, "nvmlDeviceGetUUID", handle)) == target:
            return i, handle, None
    # A MIG slice is not among NVML's devices: it hangs below its (MIG-enabled) parent.
    for i, handle in handles:
        if not _mig_mode(nvml, handle):
            continue
        for slot in range(_query(nvml, "nvmlDeviceGetMaxMigDeviceCount", handle) or 0):
            mig = _query(nvml, "nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
            if mig is not None and _uuid_key(_query(nvml, "nvmlDeviceGetUUID", mig)) == target:
                return i, handle, mig
    return None


def _cuda_driver_version(nvml: ModuleType) -> str | None:
    version = _query(nvml, "nvmlSystemGetCudaDriverVersion")
    if not version:
        return None
    return f"{version // 1000}.{version % 1000 // 10}"  # 12040 -> "12.4"


def _read_nvml(nvml: ModuleType, target: str | None, visible_count: int) -> _NvmlReading | None:
    """NVML's view of the device whose UUID key is ``target``; ``None`` if NVML can't say."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None  # no driver library (CPU machines, ROCm, some containers): not an error
    try:
        found = _find_device(nvml, target, visible_count)
        if found is None:
            return None
        index, physical, mig = found
        device = mig if mig is not None else physical
        memory = _query(nvml, "nvmlDeviceGetMemoryInfo", device)
        power_mw = _query(nvml, "nvmlDeviceGetPowerManagementLimit", physical)
        capability = _query(nvml, "nvmlDeviceGetCudaComputeCapability", physical)
        # Clock ids from nvml.h (NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2).
        sm_clock = _query(
            nvml, "nvmlDeviceGetMaxClockInfo", physical, getattr(nvml, "NVML_CLOCK_SM", 1)
        )
        mem_clock = _query(
            nvml, "nvmlDeviceGetMaxClockInfo", physical, getattr(nvml, "NVML_CLOCK_MEM", 2)
        )
        # NVML's core count describes the whole GPU, not a MIG slice.
        cores = None if mig is not None else _query(nvml, "nvmlDeviceGetNumGpuCores", physical)
        return _NvmlReading(
            index=index,
            name=_text(_query(nvml, "nvmlDeviceGetName", device)),
            uuid=_text(_query(nvml, "nvmlDeviceGetUUID", device)),
            architecture=_nvml_architecture(nvml, physical),
            compute_capability=(int(capability[0]), int(capability[1])) if capability else None,
            clock_mhz=float(sm_clock) if sm_clock else None,
            mem_clock_mhz=float(mem_clock) if mem_clock else None,
            mem_bus_bits=_query(nvml, "nvmlDeviceGetMemoryBusWidth", physical) or None,
            memory_total=getattr(memory, "total", None) or None,
            cores=cores or None,
            power_limit_w=power_mw / 1000 if power_mw else None,
            mig=True if mig is not None else _mig_mode(nvml, physical),
            driver=_text(_query(nvml, "nvmlSystemGetDriverVersion")),
            cuda_driver=_cuda_driver_version(nvml),
        )
    except nvml.NVMLError:
        return None  # device enumeration itself failed (e.g. a GPU fell off the bus)
    finally:
        with suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


# ---------------------------------------------------------------- both together
def _positive(value: Any, scale: float = 1.0) -> float | None:
    """``value / scale`` for a positive number; ``None`` for 0, missing or not a number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return value / scale


def _torch_uuid(props: Any) -> str | None:
    raw = getattr(props, "uuid", None)
    key = _uuid_key(raw)
    if key is None:
        return None
    text = str(raw).strip()
    if text[:4].lower() in ("gpu-", "mig-"):
        return text
    return "GPU-" + "-".join((key[:8], key[8:12], key[12:16], key[16:20], key[20:]))


def read_gpu(cuda: CudaLike, index: int, nvml: ModuleType | None, *, hip: bool = False) -> GpuInfo:
    """Read the specs of torch device ``cuda:<index>``.

    Parameters
    ----------
    cuda : CudaLike
        ``torch.cuda`` (or a fake with ``device_count`` and ``get_device_properties``); the
        caller has checked ``is_available()``.
    index : int
        torch's device index.
    nvml : module or None
        The ``pynvml`` module (from ``nvidia-ml-py``), or ``None`` when it is not installed.
        Every NVML failure, a missing driver library included, only leaves fields to torch.
    hip : bool, default False
        torch is a ROCm build (``torch.version.hip``): CUDA's tables do not apply.

    Returns
    -------
    GpuInfo
    """
    props = cuda.get_device_properties(index)
    visible = cuda.device_count()
    reading = None
    if nvml is not None and not hip:
        reading = _read_nvml(nvml, _uuid_key(getattr(props, "uuid", None)), visible)
    nv = reading or _NvmlReading(index=-1)

    major, minor = getattr(props, "major", None), getattr(props, "minor", None)
    if (major is None or minor is None) and nv.compute_capability:
        major, minor = nv.compute_capability
    architecture = capability = cores = None
    sm_count = getattr(props, "multi_processor_count", None) or None
    if hip:
        architecture = str(getattr(props, "gcnArchName", "")).split(":")[0] or None
    elif major is not None and minor is not None:
        capability = float(f"{major}.{minor}")
        architecture = architecture_name(major, minor) or nv.architecture
        per_sm = cuda_cores_per_sm(major, minor)
        cores = sm_count * per_sm if per_sm and sm_count else nv.cores

    clock = _positive(getattr(props, "clock_rate", None), 1000) or nv.clock_mhz
    mem_clock = nv.mem_clock_mhz or _positive(getattr(props, "memory_clock_rate", None), 1000)
    bus_bits = nv.mem_bus_bits or getattr(props, "memory_bus_width", None) or None
    memory = _positive(nv.memory_total, _GIB) or _positive(getattr(props, "total_memory", 0), _GIB)
    l2 = _positive(getattr(props, "L2_cache_size", None), _MIB)
    return GpuInfo(
        index=index,
        name=str(getattr(props, "name", "") or nv.name or f"cuda:{index}"),
        uuid=nv.uuid or _torch_uuid(props),
        architecture=architecture,
        compute_capability=capability,
        sm_count=sm_count,
        cuda_cores=cores,
        clock_mhz=clock,
        mem_clock_mhz=mem_clock,
        mem_bus_bits=bus_bits,
        memory_gb=round(memory, 2) if memory else None,
        bandwidth_gbs=memory_bandwidth_gbs(mem_clock, bus_bits),
        fp32_tflops=fp32_tflops(cores, clock),
        driver=nv.driver,
        cuda_driver=nv.cuda_driver,
        power_limit_w=round(nv.power_limit_w, 1) if nv.power_limit_w else None,
        mig=nv.mig,
        l2_mb=round(l2, 2) if l2 else None,
        visible_count=visible,
        nvml_index=reading.index if reading else None,
    )
