"""What the host CPU is and how many of its threads torch uses, without psutil.

The machine's static facts (model, cores, memory, clock) are read once per process; the thread
settings and the affinity mask are read at every call, as a user may change them between cells.
"""

from __future__ import annotations

import contextlib
import functools
import os
import platform
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from gpuperf_magics.columns import names

#: ``cpu_*`` keys of :meth:`CpuInfo.as_features`, in order; each is ``cpu_`` + a field name.
CPU_FEATURES = names(producer="hardware.cpu")

_GIB = 2**30


@dataclass(frozen=True)
class CpuInfo:
    """The host CPU and torch's use of it (``None``: not known on this platform).

    Attributes
    ----------
    model : str
        Model name, e.g. ``"AMD EPYC 7763 64-Core Processor"``; the machine type
        (``"x86_64"``) where the OS does not tell.
    physical_cores : int or None
        Cores of the whole machine (not hyper-threads).
    logical_cores : int or None
        Hardware threads of the whole machine (``os.cpu_count()``).
    affinity : int or None
        Logical CPUs this process may run on (containers and ``taskset`` restrict it).
    threads : int or None
        torch's intra-op threads (``torch.get_num_threads()``).
    interop_threads : int or None
        torch's inter-op threads (``torch.get_num_interop_threads()``).
    simd : str or None
        Vector ISA torch's kernels use, e.g. ``"AVX2"``, ``"AVX512"``.
    memory_gb : float or None
        Physical memory in GiB (2**30 bytes).
    mhz : float or None
        Maximum clock from cpufreq where the kernel exposes it, else the highest current
        clock in ``/proc/cpuinfo`` (virtual machines often show only that).
    """

    model: str
    physical_cores: int | None = None
    logical_cores: int | None = None
    affinity: int | None = None
    threads: int | None = None
    interop_threads: int | None = None
    simd: str | None = None
    memory_gb: float | None = None
    mhz: float | None = None

    def as_features(self) -> dict[str, Any]:
        """The flat ``cpu_*`` features (keys: :data:`CPU_FEATURES`)."""
        return {key: getattr(self, key[len("cpu_") :]) for key in CPU_FEATURES}


class CpuinfoSummary(NamedTuple):
    """What :func:`parse_cpuinfo` extracts from ``/proc/cpuinfo``."""

    model: str | None
    physical_cores: int | None
    mhz: float | None


def parse_cpuinfo(text: str) -> CpuinfoSummary:
    """Model name, physical cores and highest clock from the text of ``/proc/cpuinfo``.

    Physical cores are the distinct ``(physical id, core id)`` pairs, so hyper-threads and
    sockets count right; ``None`` where the kernel omits them (ARM, some hypervisors).

    Parameters
    ----------
    text : str
        Contents of ``/proc/cpuinfo``.

    Returns
    -------
    CpuinfoSummary
    """
    model: str | None = None
    cores: set[tuple[str, str]] = set()
    mhz: list[float] = []
    # Blocks are separated by blank lines, one per logical CPU.
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        model = model or fields.get("model name") or None
        if "core id" in fields:
            cores.add((fields.get("physical id", "0"), fields["core id"]))
        with contextlib.suppress(KeyError, ValueError):
            mhz.append(float(fields["cpu MHz"]))
    return CpuinfoSummary(model, len(cores) or None, max(mhz) if mhz else None)


def _read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def _sysctl(name: str) -> str | None:
    import subprocess  # macOS only; most processes never need it

    try:
        done = subprocess.run(
            ["sysctl", "-n", name], capture_output=True, text=True, timeout=2, check=True
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return done.stdout.strip() or None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        pass
    meminfo = _read_text("/proc/meminfo") or ""
    for line in meminfo.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024  # the kernel writes kB (KiB)
    return None


def _max_freq_mhz() -> float | None:
    khz = _read_text("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    try:
        return int(khz) / 1000 if khz else None
    except ValueError:
        return None


class _Static(NamedTuple):
    model: str
    physical_cores: int | None
    logical_cores: int | None
    memory_gb: float | None
    mhz: float | None


@functools.cache
def _static() -> _Static:
    """The facts that do not change while the process runs, read once."""
    summary = parse_cpuinfo(_read_text("/proc/cpuinfo") or "")
    model, physical = summary.model, summary.physical_cores
    if sys.platform == "darwin":
        model = model or _sysctl("machdep.cpu.brand_string")
        physical = physical or int(_sysctl("hw.physicalcpu") or 0) or None
    # platform.processor() is '' on Linux but names the CPU on Windows.
    model = model or platform.processor() or platform.machine() or "unknown"
    logical = os.cpu_count()
    memory = _memory_bytes()
    return _Static(
        model=model,
        physical_cores=physical or logical,
        logical_cores=logical,
        memory_gb=round(memory / _GIB, 2) if memory else None,
        mhz=_max_freq_mhz() or summary.mhz,
    )


# The SIMD level is fixed when torch loads (ATEN_CPU_CAPABILITY), so one read suffices.
@functools.cache
def _simd(torch: ModuleType) -> str | None:
    try:
        import torch.backends.cpu as torch_cpu
    except ImportError:
        return None
    get = getattr(torch_cpu, "get_cpu_capability", None)  # torch >= 2.1
    return str(get()) if get is not None else None


def read_cpu(torch: ModuleType) -> CpuInfo:
    """Read the host CPU and torch's current thread settings.

    Parameters
    ----------
    torch : module
        The imported ``torch`` module (passed in so importing this module stays cheap).

    Returns
    -------
    CpuInfo
    """
    static = _static()
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return CpuInfo(
        model=static.model,
        physical_cores=static.physical_cores,
        logical_cores=static.logical_cores,
        affinity=affinity,
        threads=torch.get_num_threads(),
        interop_threads=torch.get_num_interop_threads(),
        simd=_simd(torch),
        memory_gb=static.memory_gb,
        mhz=static.mhz,
    )


def clear_cache() -> None:
    """Forget the static facts read so far (the next :func:`read_cpu` reads them again)."""
    _static.cache_clear()
    _simd.cache_clear()
