"""Tests of gpuperf_magics.hardware.busy: the share of a run the GPU worked, from NVML's
utilization samples over the run's window (fakes at the NVML seam)."""

from __future__ import annotations

import pytest
from fake_nvml import A100_UUID, FakeNvml, NVMLError, a100_nvml, h100_nvml

from gpuperf_magics.hardware.busy import MIN_SAMPLES, GpuBusy, busy_fraction

#: NVML samples every 1/6 s: a run from t=1 s to t=3 s, a GPU 20% busy, and samples outside.
SAMPLES = [(500_000, 100)] + [(1_000_000 + 166_667 * i, 20) for i in range(12)] + [
    (3_500_000, 100)]


def test_the_mean_of_the_samples_inside_the_window() -> None:
    nvml = FakeNvml([h100_nvml(), a100_nvml(samples=SAMPLES)])
    assert busy_fraction(nvml, A100_UUID, 1_000_000, 3_000_000, visible_count=2) == \
        pytest.approx(0.20)
    assert nvml.inits == nvml.shutdowns == 1


def test_too_few_samples_or_no_device_or_no_support_say_nothing() -> None:
    short = [(1_000_000, 50)] * (MIN_SAMPLES - 1)
    assert busy_fraction(FakeNvml([a100_nvml(samples=short)]), A100_UUID, 0, 2_000_000) is None
    unknown = "00000000-0000-0000-0000-000000000000"
    assert busy_fraction(FakeNvml([a100_nvml(samples=SAMPLES), h100_nvml()]), unknown, 0,
                         5_000_000, visible_count=2) is None
    unsupported = FakeNvml([a100_nvml()])  # no "samples": the query raises NotSupported
    assert busy_fraction(unsupported, A100_UUID, 0, 5_000_000) is None
    assert unsupported.inits == unsupported.shutdowns == 1
    no_library = FakeNvml([], init_error=NVMLError("no library"))
    assert busy_fraction(no_library, A100_UUID, 0, 5_000_000) is None


def test_the_reader_takes_its_window_from_its_clock() -> None:
    now = [1.0]
    reader = GpuBusy(FakeNvml([a100_nvml(samples=SAMPLES)]), A100_UUID, clock=lambda: now[0])
    assert reader.fraction() is None  # not started
    reader.start()
    now[0] = 3.0
    assert reader.fraction() == pytest.approx(0.20)


def test_a_sample_reaching_back_before_the_start_is_left_out() -> None:
    """A sample covers the 1/6 s before its timestamp: one taken 50 ms into the run is mostly
    the idle time before it (0%), and would pull a 90%-busy run down."""
    start = 10_000_000
    samples = [(start + 50_000 + 166_667 * i, 0 if i == 0 else 90) for i in range(8)]
    nvml = FakeNvml([a100_nvml(samples=samples)])
    assert busy_fraction(nvml, A100_UUID, start, start + 1_500_000) == pytest.approx(0.90)
    # Half a second: two whole samples, too few to say.
    assert busy_fraction(nvml, A100_UUID, start, start + 500_000) is None
