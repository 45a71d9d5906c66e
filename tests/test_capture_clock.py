"""Clocks and the peak-memory reader at the GPU seam (a fake CUDA module), and the session on
the CUDA event path."""

from __future__ import annotations

import pytest
import torch
from tiny_models import mlp_one_hidden_layer as mlp
from tiny_models import train
from torch import nn

import gpuperf_magics as gm
from gpuperf_magics.capture.clock import CudaEventClock, SyncedClock


class FakeEvent:
    """A CUDA event on a fake device whose timeline is a counter advanced by the test."""

    def __init__(self, cuda: FakeCuda, enable_timing: bool = False) -> None:
        self.cuda, self.t = cuda, None

    def record(self, stream: object = None) -> None:
        self.t = self.cuda.now

    def query(self) -> bool:
        return self.t is not None and self.t <= self.cuda.done

    def elapsed_time(self, other: FakeEvent) -> float:
        assert self.query() and other.query(), "elapsed_time on an unfinished event"
        return (other.t - self.t) * 1.0  # ms


class FakeCuda:
    def __init__(self) -> None:
        self.now = 0.0
        self.done = 0.0
        self.syncs = 0
        self.allocated = 0  # bytes the fake allocator holds now and at its peak
        self.peak = 0
        self.resets = 0

    def reset_peak_memory_stats(self, device: object = None) -> None:
        self.resets += 1
        self.peak = self.allocated

    def max_memory_allocated(self, device: object = None) -> int:
        return self.peak

    def Event(self, enable_timing: bool = False) -> FakeEvent:
        return FakeEvent(self, enable_timing)

    def current_stream(self, device: object = None) -> object:
        return object()

    def synchronize(self, device: object = None) -> None:
        self.syncs += 1
        self.done = self.now


def test_cuda_event_clock_times_the_gpu_timeline_and_drains():
    cuda = FakeCuda()
    clock = CudaEventClock(cuda)
    clock.drain_every = 4
    clock.start()
    tokens = []
    for _ in range(10):
        cuda.now += 2.0  # the GPU spends 2 ms per iteration
        tokens.append(clock.mark())
        cuda.done = cuda.now - 2.0  # the GPU lags one iteration behind the host
    assert cuda.syncs == 1  # no synchronisation on the timed path
    assert len(clock._pending) < 10  # finished events were converted on the way
    clock.finish()
    assert cuda.syncs == 2
    assert [clock.seconds(t) for t in tokens] == pytest.approx([0.002 * (i + 1) for i in range(10)])


def test_synced_clock_synchronises_every_mark():
    calls = []
    clock = SyncedClock(lambda: calls.append(1))
    clock.start()
    a = clock.mark()
    b = clock.mark()
    clock.finish()
    assert len(calls) == 3
    assert clock.seconds(b) >= clock.seconds(a) >= 0


class WallClockCuda(FakeCuda):
    """A fake device whose timeline is the host's clock and whose events finish at once."""

    @property
    def now(self) -> float:
        import time

        return time.perf_counter() * 1e3

    @now.setter
    def now(self, value: float) -> None:
        pass

    @property
    def done(self) -> float:
        return float("inf")

    @done.setter
    def done(self, value: float) -> None:
        pass


def test_session_on_the_cuda_event_path(monkeypatch):
    """The recorder and session with CUDA event timing (the GPU seam faked)."""
    from gpuperf_magics.capture import recorder as recorder_mod

    cuda = WallClockCuda()
    monkeypatch.setattr(recorder_mod, "make_clock", lambda device, sync: CudaEventClock(cuda))
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(save=False, phases=True) as run:
        train(model, opt, steps=8)
    assert run.quality["timing_method"] == "cuda_events"
    assert cuda.syncs == 2  # once at the start, once at the end: none per iteration
    assert len(run.iterations) == 8
    assert all(it.duration_s > 0 for it in run.iterations)
    for it in run.iterations[1:]:
        assert sum(it.phases.values()) == pytest.approx(it.duration_s, rel=1e-6)


def test_the_peak_gpu_memory_is_reset_before_the_loop_and_kept_with_the_run(monkeypatch,
                                                                             tmp_path):
    """Peak memory at the CUDA seam: reset when timing starts, read once at the end, saved."""
    from gpuperf_magics.capture import recorder as recorder_mod
    from gpuperf_magics.capture.clock import CudaPeakMemory

    cuda = WallClockCuda()
    cuda.allocated = cuda.peak = 9 * 2**30  # left over from an earlier cell: not this run's
    monkeypatch.setattr(recorder_mod, "make_clock", lambda device, sync: CudaEventClock(cuda))
    monkeypatch.setattr(recorder_mod, "make_peak_memory",
                        lambda device: CudaPeakMemory(cuda, device))
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    store = tmp_path / "runs.sqlite"
    with gm.profile_training(store=store) as run:
        cuda.allocated = 2**30  # the first cell's tensors were freed before this loop
        assert cuda.resets == 0
        for step in range(6):
            opt.zero_grad()
            loss_fn(model(torch.randn(16, 32)), torch.randint(0, 10, (16,))).backward()
            opt.step()
            assert cuda.resets == 1  # once, when timing began; never per iteration
            cuda.peak = max(cuda.peak, int(1.5 * 2**30) + step)
    assert run.peak_memory_gb == pytest.approx(1.5)
    assert gm.Store(store).runs()["peak_memory_gb"].tolist() == pytest.approx([1.5])
    assert gm.Store(store).get_run(run.run_id).peak_memory_gb == pytest.approx(1.5)


def test_a_failing_peak_memory_reader_costs_only_the_figure(monkeypatch):
    from gpuperf_magics.capture import recorder as recorder_mod
    from gpuperf_magics.capture.clock import CudaPeakMemory

    class Broken(WallClockCuda):
        def max_memory_allocated(self, device: object = None) -> int:
            raise RuntimeError("CUDA error: device lost")

    cuda = Broken()
    monkeypatch.setattr(recorder_mod, "make_clock", lambda device, sync: CudaEventClock(cuda))
    monkeypatch.setattr(recorder_mod, "make_peak_memory",
                        lambda device: CudaPeakMemory(cuda, device))
    model = mlp()
    with gm.profile_training(save=False) as run:
        train(model, torch.optim.SGD(model.parameters(), lr=0.01), steps=4)
    assert len(run.iterations) == 4 and run.peak_memory_gb is None


def test_on_the_cpu_the_peak_gpu_memory_stays_unknown():
    model = mlp()
    with gm.profile_training(save=False) as run:
        train(model, torch.optim.SGD(model.parameters(), lr=0.01), steps=4)
    assert run.peak_memory_gb is None
    assert run.to_record()["peak_memory_gb"] is None


def test_how_busy_the_gpu_was_is_read_once_after_the_loop_and_kept(monkeypatch, tmp_path):
    """The NVML seam faked: the reader starts when timing starts, is read once when the loop
    ends (never per iteration), and its share lands in the run's quality and the store; a
    reader that fails costs only the figure."""
    from fake_nvml import A100_UUID, FakeNvml, a100_nvml

    from gpuperf_magics.capture import recorder as recorder_mod
    from gpuperf_magics.hardware.busy import GpuBusy

    now = [100.0]
    samples = [(int(100.1e6) + 100_000 * i, 30) for i in range(20)]
    nvml = FakeNvml([a100_nvml(samples=samples)])
    cuda = WallClockCuda()
    monkeypatch.setattr(recorder_mod, "make_clock", lambda device, sync: CudaEventClock(cuda))
    monkeypatch.setattr(recorder_mod, "device_busy_reader",
                        lambda device: GpuBusy(nvml, A100_UUID, clock=lambda: now[0]))
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    store = tmp_path / "runs.sqlite"
    with gm.profile_training(store=store) as run:
        train(model, opt, steps=6)
        assert nvml.inits == 0  # nothing on the timed path
        now[0] = 102.5
    assert nvml.inits == 1
    assert run.quality["device_busy"] == pytest.approx(0.30)
    assert gm.Store(store).runs()["device_busy"].tolist() == pytest.approx([0.30])

    def broken(device):
        raise RuntimeError("no NVML here")

    monkeypatch.setattr(recorder_mod, "device_busy_reader", broken)
    with gm.profile_training(save=False) as run:
        train(model, opt, steps=4)
    assert "device_busy" not in run.quality and len(run.iterations) == 4
