"""Clocks that timestamp iteration boundaries: the seam between the CPU and CUDA paths.

Hooks call :meth:`Clock.mark` at every boundary; it must be cheap and must not synchronise the
device (that would destroy the CPU/GPU overlap we are measuring). Marks are resolved into seconds
only in :meth:`Clock.finish`, after the cell.

- :class:`PerfCounterClock`: host ``perf_counter_ns``. Exact on the CPU, where work is synchronous.
- :class:`CudaEventClock`: ``torch.cuda.Event(enable_timing=True)`` recorded on the current
  stream, so the intervals are GPU-timeline time (what the GPU spent, idle gaps included), with
  one ``synchronize`` at the start and one at the end. Finished events are converted to offsets
  every :attr:`CudaEventClock.drain_every` marks without blocking, so long runs keep few events.
- :class:`SyncedClock`: synchronise the device at every mark, then ``perf_counter_ns`` (``--sync``):
  exact wall time per iteration at the price of the overlap.

The same seam reads the peak GPU memory of a run (:class:`CudaPeakMemory`): the allocator's
peak is reset when the clock starts and read once the clock has finished. Both calls are
host-side bookkeeping of the caching allocator; neither synchronises the device.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

_GIB = 2**30


class Clock(Protocol):
    method: str

    def start(self) -> None: ...

    def mark(self) -> int:
        """Timestamp now; returns a token to pass to :meth:`seconds`."""
        ...

    def finish(self) -> None: ...

    def seconds(self, token: int) -> float:
        """Seconds from :meth:`start` to the mark ``token`` (valid after :meth:`finish`)."""
        ...


class PerfCounterClock:
    """Host clock; tokens are the ``perf_counter_ns`` values themselves."""

    method = "perf_counter"

    def __init__(self) -> None:
        self._t0 = 0

    def start(self) -> None:
        self._t0 = time.perf_counter_ns()

    def mark(self) -> int:
        return time.perf_counter_ns()

    def finish(self) -> None:
        pass

    def seconds(self, token: int) -> float:
        return (token - self._t0) * 1e-9


class SyncedClock(PerfCounterClock):
    """Synchronise the accelerator at every mark (``--sync``), then read the host clock."""

    method = "synchronize+perf_counter"

    def __init__(self, synchronize: Any) -> None:
        super().__init__()
        self._sync = synchronize

    def start(self) -> None:
        self._sync()
        super().start()

    def mark(self) -> int:
        self._sync()
        return time.perf_counter_ns()


class CudaEventClock:
    """CUDA events at the boundaries; ``cuda`` is ``torch.cuda`` (or a fake with its API)."""

    method = "cuda_events"
    drain_every = 1024

    def __init__(self, cuda: Any, device: Any = None) -> None:
        self._cuda = cuda
        self._device = device
        self._base: Any = None
        self._pending: list[tuple[int, Any]] = []
        self._resolved: dict[int, float] = {}
        self._next = 0

    def _event(self) -> Any:
        ev = self._cuda.Event(enable_timing=True)
        ev.record(self._cuda.current_stream(self._device))
        return ev

    def start(self) -> None:
        self._cuda.synchronize(self._device)
        self._base = self._event()

    def mark(self) -> int:
        token = self._next
        self._next += 1
        self._pending.append((token, self._event()))
        if len(self._pending) >= self.drain_every:
            self._drain(block=False)
        return token

    def _drain(self, block: bool) -> None:
        still: list[tuple[int, Any]] = []
        for i, (token, ev) in enumerate(self._pending):
            if not block and not ev.query():
                # Events complete in stream order: the rest are not done either.
                still = self._pending[i:]
                break
            self._resolved[token] = self._base.elapsed_time(ev) * 1e-3
        self._pending = still

    def finish(self) -> None:
        self._cuda.synchronize(self._device)
        self._drain(block=True)

    def seconds(self, token: int) -> float:
        return self._resolved[token]


def make_clock(device: Any, sync: bool) -> Clock:
    """The clock for a model on ``device`` (a ``torch.device`` or None for the CPU)."""
    if device is not None and getattr(device, "type", "cpu") == "cuda":
        import torch

        if sync:
            return SyncedClock(lambda: torch.cuda.synchronize(device))
        return CudaEventClock(torch.cuda, device)
    return PerfCounterClock()


class CudaPeakMemory:
    """Peak memory of the tensors on one CUDA device; ``cuda`` is ``torch.cuda`` or a fake.

    ``max_memory_allocated`` counts what tensors held, not what the caching allocator reserved
    nor the CUDA context: the figure that scales with the batch, and the one comparable
    between GPUs. Memory another process or library took on the device is not in it.
    """

    def __init__(self, cuda: Any, device: Any = None) -> None:
        self._cuda = cuda
        self._device = device

    def start(self) -> None:
        self._cuda.reset_peak_memory_stats(self._device)

    def peak_gib(self) -> float | None:
        """GiB at the peak since :meth:`start`; None when the device does not say."""
        peak = self._cuda.max_memory_allocated(self._device)
        return float(peak) / _GIB if peak else None


def make_peak_memory(device: Any) -> CudaPeakMemory | None:
    """The peak-memory reader of a model on ``device``: None off CUDA (nothing to read)."""
    if device is not None and getattr(device, "type", "cpu") == "cuda":
        import torch

        return CudaPeakMemory(torch.cuda, device)
    return None
