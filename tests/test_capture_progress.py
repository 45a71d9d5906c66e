"""The live line of a profiled cell: the estimate on a fake clock, one output per cell."""

from __future__ import annotations

import datetime as dt
import threading

import pytest

from gpuperf_magics.capture import progress
from gpuperf_magics.capture.progress import (
    PRIOR_ITERATIONS,
    WARMUP_STEPS,
    LiveLine,
    RemainingEstimator,
    blend,
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
    weight = 5 / (5 + PRIOR_ITERATIONS)  # blend's rule, the one of stopped runs
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


def test_the_line_asks_the_model_until_it_answers_then_blends_it():
    job = FakeJob(total=1000)
    answers = [None, None, 0.2]  # the loop shows its configuration at the third update
    asked = []

    def prior():
        asked.append(1)
        return answers[min(len(asked), len(answers)) - 1]

    shown = []
    live = LiveLine(job.progress, shown.append, clock=job.clock, wall=job.wall, prior=prior)
    job.steps, job.now = 1, 0.5
    assert live.tick().endswith("estimating…")  # warm-up, no model yet
    job.steps, job.now = WARMUP_STEPS, 1.0
    live.tick()
    job.steps, job.now = WARMUP_STEPS + 5, 1.5  # 5 steps of 0.1 s
    line = live.tick()
    assert live.model_per_step == 0.2 and len(asked) == 3
    weight = 5 / (5 + PRIOR_ITERATIONS)
    assert f"{1e3 * (weight * 0.1 + (1 - weight) * 0.2):.1f} ms/it" in line
    job.steps, job.now = WARMUP_STEPS + 6, 1.6
    live.tick()
    assert len(asked) == 3  # answered once: never asked again


def test_a_failing_prior_leaves_the_line_to_the_run():
    job = FakeJob(total=100)

    def prior():
        raise RuntimeError("the store went away")

    live = LiveLine(job.progress, lambda text: None, clock=job.clock, wall=job.wall,
                    prior=prior)
    job.steps, job.now = WARMUP_STEPS, 1.0
    live.tick()
    job.steps, job.now = WARMUP_STEPS + 10, 2.0
    assert "100.0 ms/it" in live.tick() and live.model_per_step is None


def test_the_thread_redraws_the_line_as_the_job_moves():
    """The thread, not the test, calls tick(): each update shows new content."""
    job = FakeJob(total=10)
    shown, drawn = [], threading.Event()

    def steps():
        job.steps = min(job.steps + 1, 10)  # one step per update, a second each
        job.now += 1.0
        return job.progress()

    def show(text):
        shown.append(text)
        if len(shown) >= 4:
            drawn.set()

    live = LiveLine(steps, show, clock=job.clock, wall=job.wall, interval=0.001).start()
    assert drawn.wait(30), "the live line's thread never drew"
    live.stop()
    assert len(set(shown)) == len(shown) >= 4  # every redraw says something new
    assert [t.split(" it")[0] for t in shown[:3]] == ["1/10", "2/10", "3/10"]


CELL = """
import torch
from torch import nn
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(300):
    if step == 150:
        wait_for_the_line()  # the thread draws while the loop is under way
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
"""


@pytest.fixture
def outputs(ip, monkeypatch):
    """What the magic displays: the first output of each display id and its updates."""
    from IPython.core import display_functions

    from gpuperf_magics.skins import magics

    seen = {"display": [], "update": []}
    updated = threading.Event()

    class Handle:
        def update(self, obj, **kwargs):
            seen["update"].append(obj["text/plain"])
            updated.set()

    def display(obj, **kwargs):
        if kwargs.get("display_id"):
            seen["display"].append(obj["text/plain"])
            return Handle()
        return None

    def wait_for_the_line():
        updated.clear()
        assert updated.wait(30), "the live line was not redrawn while the loop ran"

    monkeypatch.setattr(display_functions, "display", display)
    monkeypatch.setattr("IPython.display.display", display)
    monkeypatch.setattr(magics, "_live_wanted", lambda shell: True)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.01)
    ip.user_ns["wait_for_the_line"] = wait_for_the_line
    yield seen
    ip.user_ns.pop("wait_for_the_line", None)


def test_the_magic_shows_one_updating_output_per_cell(ip, outputs, tmp_path):
    store = tmp_path / "runs.sqlite"
    ip.run_cell_magic("profile_training", f"--store {store} --total-iterations 300", CELL)
    assert len(outputs["display"]) == 1  # one output for the cell, updated in place
    lines = outputs["display"] + outputs["update"]
    assert 2 <= len(lines) < 300  # redrawn while it ran, never once per iteration
    assert len(set(lines)) == len(lines)  # each redraw changed what it says
    done = [int(t.split("/")[0].replace(",", "")) for t in lines]
    assert done[0] <= 150 and done == sorted(done)
    assert lines[-1].startswith("300/300 it")
    for line in ("", " -q"):
        outputs["display"].clear()
        # No job length (first), or -q: no line at all.
        args = f"--store {store}" + (" --total-iterations 300" + line if line else "")
        ip.run_cell_magic("profile_training", args,
                          CELL.replace("wait_for_the_line()", "pass"))
        assert outputs["display"] == []


def test_the_line_starts_from_the_stores_model_of_the_network(ip, outputs, tmp_path,
                                                              monkeypatch):
    lines = []

    class Recording(LiveLine):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            lines.append(self)

    monkeypatch.setattr(progress, "LiveLine", Recording)
    store = tmp_path / "runs.sqlite"
    for _ in range(2):  # the second cell finds the first one's run in the store
        ip.run_cell_magic("profile_training",
                          f"--store {store} -n lin --total-iterations 300", CELL)
    first, second = lines
    assert first.model_per_step is None  # an empty store: the run alone
    assert second.model_per_step is not None and second.model_per_step > 0
    # Another network, unnamed: the store's model of 'lin' is not this one's.
    ip.run_cell_magic("profile_training", f"--store {store} --total-iterations 300",
                      CELL.replace("nn.Linear(4, 2)", "nn.Linear(4, 3)"))
    assert lines[-1].model_per_step is None


def test_no_live_line_outside_a_kernel(ip):
    from gpuperf_magics.skins.magics import _live_wanted

    assert not _live_wanted(ip)  # a terminal would print each update as a new line


def test_the_live_line_and_a_stopped_run_blend_by_one_rule():
    from gpuperf_magics.prediction import remaining

    assert remaining.PRIOR_ITERATIONS == PRIOR_ITERATIONS
    for args in [(0.1, 20, 0.3), (0.1, 0, 0.3), (None, 5, 0.3), (0.1, 5, None),
                 (None, 0, None), (0.1, 5, float("nan"))]:
        assert remaining.blend(*args) == blend(*args)


def test_the_capture_imports_no_prediction_module():
    import ast
    from pathlib import Path

    import gpuperf_magics.capture as capture

    prediction = {"predict", "remaining", "offers", "widgets", "magics", "cli", "demo"}
    for path in Path(capture.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                assert not (parts[0] == "gpuperf_magics" and len(parts) > 1
                            and parts[1] in prediction), (path.name, node.module)


def test_the_old_name_of_the_prior_weight_still_imports():
    from gpuperf_magics.capture.progress import PRIOR_STEPS

    assert PRIOR_STEPS == PRIOR_ITERATIONS
