"""How busy the machine was while a run trained: the measurement conditions of a run.

Read from ``/proc/stat`` and ``os.getloadavg`` (Linux; None elsewhere), at the start and the
end of the block only.
"""

from __future__ import annotations

import os
from typing import Any

from gpuperf_magics.run import Run


class CpuClockSample:
    """CPU seconds of the whole machine and of this process, to tell whether others competed."""

    def __init__(self) -> None:
        self.wall = _monotonic()
        self.machine = _machine_busy_seconds()
        t = os.times()
        self.own = t.user + t.system

    def other_load(self) -> float | None:
        """Average cores used by other processes since this sample (None off Linux)."""
        end = CpuClockSample()
        wall = end.wall - self.wall
        if self.machine is None or end.machine is None or wall <= 0.05:
            return None
        other = (end.machine - self.machine) - (end.own - self.own)
        return max(other / wall, 0.0)


def _monotonic() -> float:
    import time

    return time.monotonic()


def _machine_busy_seconds() -> float | None:
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def load_avg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def fill_quality(run: Run, rec: Any, cpu: CpuClockSample, *, sync: bool, phases: bool) -> None:
    """The measurement conditions of a run: threads, load, what timed and marked it."""
    import torch

    q = run.quality
    q["torch_threads"] = torch.get_num_threads()
    q["interop_threads"] = torch.get_num_interop_threads()
    q["load_avg_end"] = load_avg()
    other = cpu.other_load()
    q["other_cpu_load"] = round(other, 2) if other is not None else None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    q["busy"] = bool(other is not None and other > max(0.5, 0.25 * (cores or 1)))
    q["timing_method"] = rec.clock.method if rec.clock is not None else None
    q["detection"] = rec.detection
    q["batch_sampled_steps"] = rec.batch_sampled_steps
    q["sync"] = sync
    q["phases"] = phases
    if rec.device_busy is not None:
        q["device_busy"] = round(rec.device_busy, 3)
    if rec.raised_steps:
        q["raised_steps"] = rec.raised_steps
