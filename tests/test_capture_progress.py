"""The live line of a profiled cell: the estimate on a fake clock, one ``tqdm`` bar per
cell (a real tqdm, drawn into a buffer)."""

from __future__ import annotations

import datetime as dt
import io
import threading

import pytest
from tqdm import tqdm

from gpuperf_magics.capture import progress
from gpuperf_magics.capture.progress import WARMUP_STEPS, LiveLine, RemainingEstimator
from gpuperf_magics.prediction.live import PRIOR_ITERATIONS, blend

NOON = dt.datetime(2026, 12, 1, 12, 0, 0)


class Bars:
    """Real tqdm bars that draw into a buffer, and the texts they were given."""

    def __init__(self, on_draw=None):
        self.made, self.texts, self.buffer = [], [], io.StringIO()
        self._on_draw = on_draw

    def __call__(self, **keywords):
        bars = self

        class Bar(tqdm):
            def set_description_str(self, desc=None, refresh=True):
                bars.texts.append(desc)
                if bars._on_draw is not None:
                    bars._on_draw(desc)
                super().set_description_str(desc, refresh)

        bar = Bar(file=self.buffer, **keywords)
        self.made.append(bar)
        return bar


def blending(model):
    """A prior as the prediction layer's: the model's time, blended by the one rule."""
    return lambda own, steady, configuration: blend(own, steady, model)[0]


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
    est = RemainingEstimator(total=100, start=0.0,
                             per_step=lambda own, n: blend(own, n, 0.2)[0])
    assert est.update(0.1, 1, NOON).per_step_s == 0.2  # warm-up: the model alone
    est.update(1.0, WARMUP_STEPS, NOON)
    young = est.update(1.0 + 0.1 * 5, WARMUP_STEPS + 5, NOON)
    weight = 5 / (5 + PRIOR_ITERATIONS)  # blend's rule, the one of stopped runs
    assert young.per_step_s == pytest.approx(weight * 0.1 + (1 - weight) * 0.2)
    old = est.update(1.0 + 0.1 * 500, WARMUP_STEPS + 500, NOON)
    assert abs(old.per_step_s - 0.1) < abs(young.per_step_s - 0.1)


def test_the_line_says_steps_rate_elapsed_remaining_and_finish_time():
    job = FakeJob(total=1000)
    bars = Bars()
    live = LiveLine(job.progress, bar=bars, clock=job.clock, wall=job.wall)
    job.steps, job.now = WARMUP_STEPS, 2.0
    live.tick()
    job.steps, job.now = 102, 12.0  # 100 steps in 10 s: 100 ms each, 898 left
    text = ("102/1,000 it · 100.0 ms/it · elapsed 12.0 s · 0:01:30 left · done at 12:01:41")
    assert live.tick() == text
    assert live.tick() is None  # nothing changed: nothing redrawn
    assert len(bars.made) == 1 and bars.texts[-1] == text and len(bars.texts) == 2
    bar = bars.made[0]
    assert (bar.n, bar.total) == (102, 1000)
    assert bars.buffer.getvalue().rstrip().endswith(f"| {text}")  # tqdm drew it
    assert " 10%|" in bars.buffer.getvalue().split("\r")[-1]


def test_no_line_until_the_job_length_is_known():
    job = FakeJob(total=None)
    bars = Bars()
    live = LiveLine(job.progress, bar=bars, clock=job.clock, wall=job.wall)
    job.steps = 50
    assert live.tick() is None and bars.made == []
    job.total = 200  # --epochs: known once the DataLoader is iterated
    assert live.tick().startswith("50/200 it") and bars.made[0].total == 200
    job.total, job.steps = 400, 51  # a second loader: the bar's length follows
    live.tick()
    assert len(bars.made) == 1 and bars.made[0].total == 400


def test_the_thread_stops_draws_the_last_state_and_closes_the_bar():
    job = FakeJob(total=10)
    bars = Bars()
    live = LiveLine(job.progress, bar=bars, clock=job.clock, wall=job.wall,
                    interval=3600).start()
    job.steps, job.now = 10, 1.0
    live.stop()
    assert bars.texts == ["10/10 it · elapsed 1.0 s"]  # the block ended: nothing to estimate
    assert bars.made[0].disable  # closed: tqdm marks a closed bar disabled


@pytest.mark.parametrize("outcome", ["interrupted", "failed"])
def test_an_interrupted_block_s_last_state_says_so_not_a_finish_time(outcome):
    """Issue 19: the last "… left · done at …" stayed above the traceback."""
    job = FakeJob(total=1000)
    bars = Bars()
    live = LiveLine(job.progress, bar=bars, clock=job.clock, wall=job.wall, interval=3600)
    job.steps, job.now = WARMUP_STEPS, 2.0
    live.tick()
    job.steps, job.now = 102, 12.0
    assert "left · done at" in live.tick()
    job.now = 13.0  # Ctrl-C, a second after the last step: 11 s for 100 steps
    live.stop(outcome)
    assert bars.texts[-1] == f"102/1,000 it · 110.0 ms/it mean so far · elapsed 13.0 s · {outcome}"
    assert "left" not in bars.texts[-1] and "done at" not in bars.texts[-1]
    assert bars.made[0].disable


def test_the_last_state_names_its_figure_a_mean_the_run_s_line_a_median():
    """Issue 19, "one run, three figures": the two figures are labelled."""
    from gpuperf_magics.run import IterationRecord, Run

    job = FakeJob(total=100)
    bars = Bars()
    live = LiveLine(job.progress, bar=bars, clock=job.clock, wall=job.wall, interval=3600,
                    prior=blending(0.5))  # the prior led the line, not the last state
    job.steps, job.now = WARMUP_STEPS, 1.0
    live.tick()
    job.steps, job.now = 100, 10.8
    live.stop()
    assert bars.texts[-1] == "100/100 it · 100.0 ms/it mean so far · elapsed 10.8 s"
    run = Run("net", iterations=[IterationRecord(i, 0.04) for i in range(5)])
    assert "40.0 ms/it median" in run.summary_line()


def test_the_line_asks_the_prior_with_the_loops_configuration():
    job = FakeJob(total=1000)
    seen = []

    def prior(own, steady, configuration):
        seen.append((own, steady, configuration()))
        return blend(own, steady, 0.2)[0]

    bars = Bars()
    live = LiveLine(job.progress, configuration=lambda: ("lin", 8, None, 0), prior=prior,
                    bar=bars, clock=job.clock, wall=job.wall)
    job.steps, job.now = 1, 0.5
    assert "200.0 ms/it" in live.tick()  # warm-up: the prior alone
    job.steps, job.now = WARMUP_STEPS, 1.0
    live.tick()
    job.steps, job.now = WARMUP_STEPS + 5, 1.5  # 5 steps of 0.1 s
    line = live.tick()
    weight = 5 / (5 + PRIOR_ITERATIONS)
    assert f"{1e3 * (weight * 0.1 + (1 - weight) * 0.2):.1f} ms/it" in line
    assert seen[-1] == (pytest.approx(0.1), 5, ("lin", 8, None, 0))


def test_a_failing_prior_leaves_the_line_to_the_run(caplog):
    job = FakeJob(total=100)
    calls = []

    def prior(own, steady, configuration):
        calls.append(1)
        raise RuntimeError("the store went away")

    live = LiveLine(job.progress, bar=Bars(), clock=job.clock, wall=job.wall, prior=prior)
    job.steps, job.now = WARMUP_STEPS, 1.0
    live.tick()
    job.steps, job.now = WARMUP_STEPS + 10, 2.0
    assert "100.0 ms/it" in live.tick() and calls == [1]  # dropped after its failure
    assert "the live line's prior failed" in caplog.text  # and said so in the log


def test_the_thread_redraws_the_line_as_the_job_moves():
    """The thread, not the test, calls tick(): each update shows new content."""
    job = FakeJob(total=10)
    drawn = threading.Event()

    def steps():
        job.steps = min(job.steps + 1, 10)  # one step per update, a second each
        job.now += 1.0
        return job.progress()

    bars = Bars(on_draw=lambda text: len(bars.texts) >= 4 and drawn.set())
    live = LiveLine(steps, bar=bars, clock=job.clock, wall=job.wall, interval=0.001).start()
    assert drawn.wait(30), "the live line's thread never drew"
    live.stop()
    shown = bars.texts
    assert len(set(shown)) == len(shown) >= 4  # every redraw says something new
    assert [t.split(" it")[0] for t in shown[:3]] == ["1/10", "2/10", "3/10"]
    assert len(bars.made) == 1  # one bar, redrawn


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
def bars(ip, monkeypatch):
    """The bars the magic's cells draw (real tqdm bars into a buffer)."""
    from gpuperf_magics.skins import magics

    updated = threading.Event()
    made = Bars(on_draw=lambda text: updated.set())

    def wait_for_the_line():
        updated.clear()
        assert updated.wait(30), "the live line was not redrawn while the loop ran"

    monkeypatch.setattr(progress, "_tqdm", made)
    monkeypatch.setattr(magics, "_live_wanted", lambda shell: True)
    monkeypatch.setattr(progress, "INTERVAL_S", 0.01)
    ip.user_ns["wait_for_the_line"] = wait_for_the_line
    yield made
    ip.user_ns.pop("wait_for_the_line", None)


def test_the_magic_shows_one_updating_bar_per_cell(ip, bars, tmp_path):
    store = tmp_path / "runs.sqlite"
    ip.run_cell_magic("profile_training", f"--store {store} --total-iterations 300", CELL)
    assert len(bars.made) == 1  # one bar for the cell, redrawn in place
    lines = bars.texts
    assert 2 <= len(lines) < 300  # redrawn while it ran, never once per iteration
    assert len(set(lines)) == len(lines)  # each redraw changed what it says
    done = [int(t.split("/")[0].replace(",", "")) for t in lines]
    assert done[0] <= 150 and done == sorted(done)
    assert lines[-1].startswith("300/300 it")
    for line in ("", " -q"):
        bars.made.clear()
        # No job length (first), or -q: no bar at all.
        args = f"--store {store}" + (" --total-iterations 300" + line if line else "")
        ip.run_cell_magic("profile_training", args,
                          CELL.replace("wait_for_the_line()", "pass"))
        assert bars.made == []


def test_the_line_starts_from_the_stores_model_of_the_network(ip, bars, tmp_path,
                                                              monkeypatch):
    from gpuperf_magics.capture import session as session_module

    priors = []

    class Recording(session_module.ProfileSession):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            priors.append(kwargs["live"])

    monkeypatch.setattr("gpuperf_magics.capture.profile_training", Recording)
    store = tmp_path / "runs.sqlite"
    for _ in range(2):  # the second cell finds the first one's run in the store
        ip.run_cell_magic("profile_training",
                          f"--store {store} -n lin --total-iterations 300", CELL)
    first, second = priors
    assert first.model_per_step is None and first.reason  # an empty store: the run alone
    assert second.model_per_step is not None and second.model_per_step > 0
    # Another network, unnamed: the store's model of 'lin' is not this one's.
    ip.run_cell_magic("profile_training", f"--store {store} --total-iterations 300",
                      CELL.replace("nn.Linear(4, 2)", "nn.Linear(4, 3)"))
    assert priors[-1].model_per_step is None


def test_no_live_line_outside_a_kernel(ip):
    from gpuperf_magics.skins.magics import _live_wanted

    assert not _live_wanted(ip)  # a terminal IPython: the cell's own output only


def test_the_capture_imports_no_prediction_module():
    import ast
    from pathlib import Path

    import gpuperf_magics.capture as capture

    above = {"prediction", "skins"}
    for path in Path(capture.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                parts = node.module.split(".")
                assert not (parts[0] == "gpuperf_magics" and len(parts) > 1
                            and parts[1] in above), (path.name, node.module)
