"""The hardware and software a training run ran on: :func:`detect` → :class:`Hardware`.

``detect()`` is called once per profiled cell, so what cannot change while the process runs
(the GPU's specs from NVML, the CPU model, library versions) is read once and cached; thread
settings are read every time. Importing this package does not import torch or pynvml.

Examples
--------
>>> from gpuperf_magics.hardware import detect
>>> hw = detect()                      # cuda:<current> if CUDA is available, else cpu
>>> hw.label                           # doctest: +SKIP
'NVIDIA A100-SXM4-40GB'
>>> hw.as_features()["gpu_bandwidth_gbs"]  # doctest: +SKIP
1555.2
"""

from __future__ import annotations

import functools
import platform
import warnings
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpuperf_magics.columns import names
from gpuperf_magics.hardware import cpu as _cpu
from gpuperf_magics.hardware.cpu import CPU_FEATURES as CPU_FEATURES  # re-exported
from gpuperf_magics.hardware.cpu import CpuInfo, read_cpu
from gpuperf_magics.hardware.gpu import GPU_FEATURES, GpuInfo, read_gpu

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["CpuInfo", "GpuInfo", "Hardware", "detect"]

#: ``sw_*`` keys of :meth:`SoftwareInfo.as_features`, in order.
SW_FEATURES = names(producer="hardware.software")


@dataclass(frozen=True)
class SoftwareInfo:
    """Versions of the software stack.

    Attributes
    ----------
    python : str
        e.g. ``"3.11.9"``.
    torch : str
        ``torch.__version__``, e.g. ``"2.13.0+cu128"``.
    cuda : str or None
        CUDA version torch was built with (``torch.version.cuda``); ``None`` on CPU builds.
    cudnn : str or None
        cuDNN version, e.g. ``"9.1.0"``, when cuDNN is available.
    platform : str
        ``platform.platform()``, e.g. ``"Linux-6.8.0-x86_64-with-glibc2.35"``.
    """

    python: str
    torch: str
    cuda: str | None = None
    cudnn: str | None = None
    platform: str | None = None

    def as_features(self) -> dict[str, Any]:
        """The flat ``sw_*`` features (keys: :data:`SW_FEATURES`)."""
        return {key: getattr(self, key[len("sw_") :]) for key in SW_FEATURES}


@dataclass(frozen=True)
class Hardware:
    """Where a run ran: the torch device, its GPU (if any), the host CPU and the software.

    Attributes
    ----------
    device : str
        The torch device, ``"cuda:0"`` or ``"cpu"``.
    cpu : CpuInfo
    software : SoftwareInfo
    gpu : GpuInfo or None
        ``None`` unless ``device`` is a CUDA device.
    """

    device: str
    cpu: CpuInfo
    software: SoftwareInfo
    gpu: GpuInfo | None = None

    @property
    def label(self) -> str:
        """Short name for display: the GPU's name, else ``"CPU <model>"``."""
        if self.gpu is not None:
            return self.gpu.name
        kind = "CPU" if self.device == "cpu" else self.device
        return f"{kind} {self.cpu.model}"

    def as_features(self) -> dict[str, Any]:
        """Flat ``gpu_*``, ``cpu_*`` and ``sw_*`` features (keys:
        ``columns.names(group="hardware")``).

        ``gpu_*`` values are ``None`` when there is no GPU; every key is always present.
        """
        gpu = self.gpu.as_features() if self.gpu is not None else dict.fromkeys(GPU_FEATURES)
        return {**gpu, **self.cpu.as_features(), **self.software.as_features()}


# torch device index -> its specs; CUDA_VISIBLE_DEVICES is fixed once CUDA is initialised,
# so an index names the same device for the life of the process.
_GPUS: dict[int, GpuInfo] = {}


def detect(device: str | int | torch.device | None = None, *, refresh: bool = False) -> Hardware:
    """Describe the device a training run uses, its host and the software stack.

    Parameters
    ----------
    device : str, int, torch.device or None
        ``"cuda:1"``, ``"cuda"`` (the current device), ``"cpu"``, ``1`` (``cuda:1``) or a
        ``torch.device``. ``None``: the current CUDA device when ``torch.cuda.is_available()``,
        else the CPU.
    refresh : bool, default False
        Read the static specs again instead of using those cached in this process.

    Returns
    -------
    Hardware

    Raises
    ------
    ValueError
        ``device`` is not a device name, or names a CUDA device this process cannot see.
    """
    import torch

    if refresh:
        _GPUS.clear()
        _software.cache_clear()
        _cpu.clear_cache()
    resolved = _resolve_device(torch, device)
    gpu = None
    if resolved.type == "cuda":
        index = resolved.index if resolved.index is not None else torch.cuda.current_device()
        if index not in _GPUS:
            _GPUS[index] = read_gpu(
                torch.cuda, index, _load_nvml(), hip=getattr(torch.version, "hip", None) is not None
            )
        gpu = _GPUS[index]
    return Hardware(device=str(resolved), cpu=read_cpu(torch), software=_software(torch), gpu=gpu)


def _resolve_device(torch: ModuleType, device: Any) -> torch.device:
    if device is None:
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
    try:
        # An int is a CUDA index, as in torch's own APIs; torch.device(int) follows the
        # "current accelerator" instead, which a CPU-only build does not have.
        is_index = isinstance(device, int) and not isinstance(device, bool)
        resolved = torch.device("cuda", device) if is_index else torch.device(device)
    except (RuntimeError, TypeError, ValueError) as error:
        raise ValueError(
            f"detect(device={device!r}): not a torch device; pass 'cpu', 'cuda', 'cuda:N', an "
            "int N or a torch.device"
        ) from error
    if resolved.type != "cuda":
        return resolved
    if not torch.cuda.is_available():
        raise ValueError(
            f"detect(device={device!r}): torch.cuda.is_available() is False in this process (no "
            "GPU, no driver, or a CPU-only build of torch); pass device='cpu'"
        )
    index = resolved.index if resolved.index is not None else torch.cuda.current_device()
    count = torch.cuda.device_count()
    if not 0 <= index < count:
        raise ValueError(
            f"detect(device={device!r}): torch sees {count} CUDA device(s) (cuda:0 to "
            f"cuda:{count - 1}; CUDA_VISIBLE_DEVICES decides which); pass one of those"
        )
    return torch.device("cuda", index)


def _load_nvml() -> ModuleType | None:
    """The ``pynvml`` module of nvidia-ml-py, or ``None`` when it is not installed."""
    with warnings.catch_warnings():
        # The deprecated PyPI package also named ``pynvml`` warns on import; nothing for the
        # user to act on in the middle of a profiled cell.
        warnings.simplefilter("ignore", FutureWarning)
        try:
            import pynvml
        except ImportError:
            return None
    return pynvml


def _cudnn_version(torch: ModuleType) -> str | None:
    import torch.backends.cudnn as cudnn

    if not cudnn.is_available():
        return None
    version = cudnn.version()
    if not version:
        return None
    # cuDNN 9 encodes major*10000 + minor*100 + patch; cuDNN 8 and older major*1000 + ...
    major, rest = divmod(version, 10000 if version >= 10000 else 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


@functools.cache
def _software(torch: ModuleType) -> SoftwareInfo:
    return SoftwareInfo(
        python=platform.python_version(),
        torch=str(torch.__version__),
        cuda=torch.version.cuda,
        cudnn=_cudnn_version(torch),
        platform=platform.platform(),
    )
