"""How busy a GPU was while a run trained: NVML's utilization samples over the run's window.

NVML samples each GPU's utilization, "the percent of time over the past sample period during
which one or more kernels was executing", every 1/6 to 1 s, and keeps the recent samples
(``nvmlDeviceGetSamples`` with ``NVML_GPU_UTILIZATION_SAMPLES``, since a CPU timestamp in
µs). Their mean over a run is the share of the run the GPU worked: near 1 where the GPU is the
bottleneck, well below where it waited for its host between short kernels (a small network).
The capture reads it once after the loop, off the timed path (:class:`GpuBusy`), and stores
it as ``device_busy``. The predictor does not use it by default: scaling moves by it did worse
on networks it was not set on (:mod:`gpuperf_magics.model.host_bound`, ``use_busy``).

The figure is None where NVML is missing or does not sample (no driver library, some
virtualised GPUs), the device cannot be found by its UUID, or fewer than :data:`MIN_SAMPLES`
samples fall wholly in the window (a run shorter than about a second).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from contextlib import suppress
from types import ModuleType
from typing import Any

from gpuperf_magics.hardware.gpu import _find_device, _uuid_key

#: Samples a mean needs: fewer say more about the moments around the run than about it.
MIN_SAMPLES = 3
#: ``nvmlValueType_t`` → the field of ``c_nvmlValue_t`` that holds it.
_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal",
                 6: "usVal"}


def busy_fraction(nvml: ModuleType, uuid: str | None, since_us: int, until_us: int,
                  visible_count: int = 1) -> float | None:
    """Mean utilization (0-1) of the GPU whose UUID is ``uuid`` over the samples NVML took
    between ``since_us`` and ``until_us`` (CPU time in µs since the epoch); None where NVML
    cannot say (see the module docstring)."""
    target = _uuid_key(uuid)
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return None
    try:
        found = _find_device(nvml, target, visible_count)
        if found is None:
            return None
        _, physical, mig = found
        kind = getattr(nvml, "NVML_GPU_UTILIZATION_SAMPLES", 1)
        value_type, samples = nvml.nvmlDeviceGetSamples(
            mig if mig is not None else physical, kind, int(since_us))
        field = _VALUE_FIELDS.get(int(value_type), "uiVal")
        taken = sorted((int(s.timeStamp), float(getattr(s.sampleValue, field)))
                       for s in samples)
    except (nvml.NVMLError, AttributeError, TypeError, ValueError):
        return None
    finally:
        with suppress(nvml.NVMLError):
            nvml.nvmlShutdown()
    # A sample covers the period before its timestamp: the first after the start reaches
    # back before it (an H200 run of 0.5 s read 19% busy for a GPU-bound loop that way).
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(taken))
    period = gaps[len(gaps) // 2] if gaps else 0
    values = [v for t, v in taken if since_us + period <= t <= until_us]
    if len(values) < MIN_SAMPLES:
        return None
    return min(max(sum(values) / len(values) / 100.0, 0.0), 1.0)


class GpuBusy:
    """The GPU-busy share of one run: :meth:`start` before the loop, :meth:`fraction` after.

    ``nvml`` is the ``pynvml`` module (or a fake), ``uuid`` the device's as torch reports it,
    ``clock`` a source of seconds since the epoch (``time.time``).
    """

    def __init__(self, nvml: ModuleType, uuid: str | None, visible_count: int = 1,
                 clock: Callable[[], float] = time.time) -> None:
        self._nvml, self._uuid, self._visible, self._clock = nvml, uuid, visible_count, clock
        self._since: int | None = None

    def start(self) -> None:
        self._since = int(self._clock() * 1e6)

    def fraction(self) -> float | None:
        if self._since is None:
            return None
        return busy_fraction(self._nvml, self._uuid, self._since, int(self._clock() * 1e6),
                             self._visible)


def device_busy_reader(device: Any) -> GpuBusy | None:
    """The reader for a model on ``device`` (a ``torch.device``): None off CUDA or without
    ``nvidia-ml-py``."""
    if device is None or getattr(device, "type", "cpu") != "cuda":
        return None
    try:
        import pynvml
    except ImportError:
        return None
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return GpuBusy(pynvml, str(getattr(props, "uuid", "")) or None, torch.cuda.device_count())
