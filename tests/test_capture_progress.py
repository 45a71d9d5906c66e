"""The live line of a profiled cell: the estimate on a fake clock, one output per cell."""

from __future__ import annotations

import datetime as dt

import pytest

from gpuperf_magics.capture.progress import (
    PRIOR_STEPS,
    WARMUP_STEPS,
    LiveLine,
    RemainingEstimator,
)

NOON = dt.datetime(2026, 12, 1, 12, 0, 0)


class FakeJob:
    """Steps and a clock the test moves by hand."""

    def __init__(self, total):
        self.now, self.steps, self.total = 0.0, 0, total

    def progress(self):
        return self.steps, self.total

    def clock(self):
        return self.now

    def wall(self):
        return NOON + dt.timedelta(seconds=self.now)


def test_warm_up_is_left_out_and_pauses_count():
    est = RemainingEstimator(total=1000, start=0.0)
    first = est.update(0.5, 1, NOON)  # still in warm-up: nothing to say yet
    assert first.per_step_s is None and first.remaining_s is None
    assert "estimating" in first.line()
    est.update(5.0, WARMUP_STEPS, NOON)  # a 4.5 s first step (compilation) is not counted
    steady = est.update(5.0 + 98 * 0.1, 100, NOON)
    assert steady.per_step_s == pytest.approx(0.1)
    assert steady.remaining_s == pytest.approx(900 * 0.1)
    # A 5 s evaluation between steps counts, spread over the steps since warm-up.
    paused = est.update(5.0 + 98 * 0.1 + 5 + 0.1, 101, NOON)
    assert paused.per_step_s == pytest.approx((98 * 0.1 + 5.1) / 99)


def test_the_model_leads_while_the_run_is_young():
    est = RemainingEstimator(total=100, start=0.0, model_per_step=0.2)
    assert est.update(0.1, 1, NOON).per_step_s == 0.2  # warm-up: the model alone
    est.update(1.0, WARMUP_STEPS, NOON)
    young = est.update(1.0 + 0.1 * 5, WARMUP_STEPS + 5, NOON)
    weight = 5 / (5 + PRIOR_STEPS)
    assert young.per_step_s == pytest.approx(weight * 0.1 + (1 - weight) * 0.2)
    old = est.update(1.0 + 0.1 * 500, WARMUP_STEPS + 500, NOON)
    assert abs(old.per_step_s - 0.1) < abs(young.per_step_s - 0.1)


def test_the_line_says_steps_rate_elapsed_remaining_and_finish_time():
    job = FakeJob(total=1000)
    shown = []
    live = LiveLine(job.progress, shown.append, clock=job.clock, wall=job.wall)
    job.steps, job.now = WARMUP_STEPS, 2.0
    live.tick()
    job.steps, job.now = 102, 12.0  # 100 steps in 10 s: 100 ms each, 898 left
    assert live.tick() == ("102/1,000 it · 100.0 ms/it · elapsed 12.0 s · 0:01:30 left · "
                           "done at 12:01:41")
    assert live.tick() is None  # nothing changed: nothing redrawn
    assert len(shown) == 2


def test_no_line_until_the_job_length_is_known():
    job = FakeJob(total=None)
    shown = []
    live = LiveLine(job.progress, shown.append, clock=job.clock, wall=job.wall)
    job.steps = 50
    assert live.tick() is None and shown == []
    job.total = 200  # --epochs: known once the DataLoader is iterated
    assert live.tick().startswith("50/200 it")


def test_the_thread_stops_and_draws_the_last_state():
    job = FakeJob(total=10)
    shown = []
    live = LiveLine(job.progress, shown.append, clock=job.clock, wall=job.wall,
                    interval=3600).start()
    job.steps, job.now = 10, 1.0
    live.stop()
    assert shown == ["10/10 it · elapsed 1.0 s · estimating…"]


CELL = """
import torch
from torch import nn
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(300):
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
"""


def test_the_magic_shows_one_updating_output_per_cell(ip, monkeypatch, tmp_path):
    from IPython.core import display_functions

    from gpuperf_magics import magics

    calls = {"display": 0, "update": 0}

    class Handle:
        def update(self, obj, **kwargs):
            calls["update"] += 1

    def display(obj, **kwargs):
        if kwargs.get("display_id"):
            calls["display"] += 1
            return Handle()
        return None

    monkeypatch.setattr(display_functions, "display", display)
    monkeypatch.setattr(magics, "_live_wanted", lambda shell: True)
    monkeypatch.setattr("IPython.display.display", display)
    ip.run_cell_magic("profile_training",
                      f"--store {tmp_path / 'runs.sqlite'} --total-iterations 300", CELL)
    assert calls["display"] == 1  # one output for the cell, updated in place
    assert calls["update"] < 300  # never one per iteration
    calls["display"] = 0
    ip.run_cell_magic("profile_training", f"--store {tmp_path / 'runs.sqlite'}", CELL)
    assert calls["display"] == 0  # no job length: no line
    calls["display"] = 0
    ip.run_cell_magic("profile_training",
                      f"--store {tmp_path / 'runs.sqlite'} --total-iterations 300 -q", CELL)
    assert calls["display"] == 0  # -q: nothing at all


def test_no_live_line_outside_a_kernel(ip):
    from gpuperf_magics.magics import _live_wanted

    assert not _live_wanted(ip)  # a terminal would print each update as a new line
