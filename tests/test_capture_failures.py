"""Ways a profiled loop can go wrong after or around the timings: none may lose or corrupt
the run (issue 10). Real training on tiny CPU models, real SQLite stores."""

from __future__ import annotations

import contextlib

import pytest
import torch
from test_capture import assert_no_hooks_left, mlp, train
from torch import nn

import gpuperf_magics as gm


class FlakySGD(torch.optim.SGD):
    """An optimizer whose ``step`` raises once, as a NaN guard or a custom check would."""

    fail_at = -1
    calls = 0

    def step(self, closure=None):
        self.calls += 1
        if self.calls == self.fail_at:
            raise FloatingPointError("non-finite gradient")
        return super().step(closure)


def test_a_caught_exception_inside_step_leaves_every_later_step_counted():
    model = mlp()
    opt = FlakySGD(model.parameters(), lr=0.01)
    opt.fail_at = 11
    caught = 0
    with gm.profile_training(save=False) as run:
        for _ in range(50):
            try:
                train(model, opt, steps=1, batch=8)
            except FloatingPointError:
                caught += 1
    assert caught == 1
    # 50 steps, one raised: its forward and backward belong to the next iteration.
    assert run.status == "ok" and len(run.iterations) == 49
    assert run.batch_size == 8
    assert run.quality["raised_steps"] == 1
    assert any("raised" in note for note in run.notes)
    assert_no_hooks_left(model)


def test_a_closure_that_raises_inside_step_is_not_a_nested_step():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    with gm.profile_training(save=False) as run:
        for i in range(20):
            x, y = torch.randn(8, 32), torch.randint(0, 10, (8,))

            def closure(i=i, x=x, y=y):
                opt.zero_grad()
                loss = loss_fn(model(x), y)
                loss.backward()
                if i == 4:
                    raise FloatingPointError("nan loss")
                return loss

            with contextlib.suppress(FloatingPointError):  # the loop skips a bad batch
                opt.step(closure)
    assert len(run.iterations) == 19
    assert run.quality["raised_steps"] == 1


class MetaShy(nn.Module):
    """Trains normally; a Ctrl-C lands while its FLOPs are counted on meta tensors (the
    moment the issue's trials hit with a second Ctrl-C after the loop)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.device.type == "meta":
            raise KeyboardInterrupt
        return self.body(x)


def test_ctrl_c_during_post_processing_still_stores_the_run(tmp_path):
    store = tmp_path / "runs.sqlite"
    model = MetaShy()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with pytest.raises(KeyboardInterrupt), gm.profile_training(store=store) as run:
        train(model, opt, steps=8)
    assert run.run_id is not None
    assert run.network == "MetaShy-2.76K"  # named before the slow part began
    stored = gm.Store(store).runs()
    assert list(stored["iterations"] + stored["warmup_iterations"]) == [8]
    assert any("post-processing stopped by KeyboardInterrupt" in n for n in run.notes)
    assert run not in gm.capture.unsaved_runs()
    assert_no_hooks_left(model)


def test_ctrl_c_during_post_processing_in_a_cell_shows_and_keeps_the_run(ip, capsys,
                                                                        _isolated_store):
    ip.user_ns.update(MetaShy=MetaShy, train=train, torch=torch)
    ip.run_cell("m = MetaShy(); o = torch.optim.SGD(m.parameters(), lr=0.01)")
    result = ip.run_cell("%%profile_training -v late_run\ntrain(m, o, steps=6)\n")
    out = capsys.readouterr().out
    assert isinstance(result.error_in_exec, KeyboardInterrupt)
    assert "profile_training: MetaShy-2.76K · 6 it" in out
    run = ip.user_ns["late_run"]
    assert run.run_id is not None
    assert len(gm.Store(_isolated_store).runs()) == 1


class Unprintable:
    """A tag value whose text cannot be made: the store's JSON encoder fails on it."""

    def __str__(self) -> str:
        raise RuntimeError("no text for this value")


def test_any_exception_while_saving_keeps_the_run_in_memory(tmp_path):
    store = tmp_path / "runs.sqlite"
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(store=store, tags={"owner": Unprintable()}) as run:
        train(model, opt, steps=5)
    assert run.run_id is None and len(run.iterations) == 5
    assert run in gm.capture.unsaved_runs()
    assert any(n.startswith("not saved: RuntimeError") for n in run.notes)
    run.tags["owner"] = "me"
    run.save()
    assert run.run_id is not None and run not in gm.capture.unsaved_runs()
    assert gm.Store(store).get_run(run.run_id).tags == {"owner": "me"}


def test_tags_with_keys_of_mixed_types_are_stored(tmp_path):
    store = tmp_path / "runs.sqlite"
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with gm.profile_training(store=store, tags={1: "one", "lr": "0.01"}) as run:
        train(model, opt, steps=4)
        run.tags[2.5] = "added inside the block"
    assert run.run_id is not None
    assert gm.Store(store).get_run(run.run_id).tags == {
        "1": "one", "lr": "0.01", "2.5": "added inside the block"}



class CtrlCOnLen(torch.utils.data.Dataset):
    """A dataset whose ``len()`` sends a real SIGINT once the loop is over: the capture asks
    for it while it interprets the run, in the milliseconds before the run is kept."""

    def __init__(self) -> None:
        self.x, self.y = torch.randn(32, 32), torch.randint(0, 10, (32,))
        self.loop_done = False

    def __len__(self) -> int:
        if self.loop_done:
            import os
            import signal

            os.kill(os.getpid(), signal.SIGINT)
        return 32

    def __getitem__(self, i: int):
        return self.x[i], self.y[i]


def test_a_real_ctrl_c_before_the_run_is_kept_waits_until_it_is(tmp_path):
    import signal

    store = tmp_path / "runs.sqlite"
    data = CtrlCOnLen()
    loader = torch.utils.data.DataLoader(data, batch_size=8)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    # Python's own handler (a harness may start pytest with SIGINT ignored).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), gm.profile_training(store=store) as run:
            for x, y in loader:
                opt.zero_grad()
                loss_fn(model(x), y).backward()
                opt.step()
            data.loop_done = True
    finally:
        data.loop_done = False
        signal.signal(signal.SIGINT, previous)
    assert len(run.iterations) == 4
    assert run.run_id is not None  # held until kept, then raised: saved on the way out
    assert any("post-processing stopped by KeyboardInterrupt" in n for n in run.notes)
    assert signal.getsignal(signal.SIGINT) is previous
