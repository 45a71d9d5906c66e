"""SignalHold: a signal noted while a run is kept, given back afterwards (a real Ctrl-C in the
milliseconds before a profiled run is kept included)."""

from __future__ import annotations

import os
import signal
import threading

import pytest
import torch
from tiny_models import mlp_one_hidden_layer as mlp
from torch import nn

import gpuperf_magics as gm
from gpuperf_magics.capture.signals import SignalHold


@pytest.fixture
def python_sigint():
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_held_interrupt_is_noted_and_reported_once_released(python_sigint):
    hold = SignalHold(signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt unheld
    assert hold.release() is True
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_release_without_a_signal_says_none_came(python_sigint):
    assert SignalHold(signal.SIGINT).release() is False


def test_a_handler_of_someone_else_is_left_alone():
    def theirs(signum, frame):
        pass

    previous = signal.signal(signal.SIGINT, theirs)
    try:
        hold = SignalHold(signal.SIGINT)
        assert signal.getsignal(signal.SIGINT) is theirs
        assert hold.release() is False
    finally:
        signal.signal(signal.SIGINT, previous)


def test_sigterm_raises_until_held_then_waits():
    class Stopped(KeyboardInterrupt):
        pass

    previous = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        hold = SignalHold(signal.SIGTERM, raise_as=Stopped)
        with pytest.raises(Stopped):
            os.kill(os.getpid(), signal.SIGTERM)
        hold.hold()
        os.kill(os.getpid(), signal.SIGTERM)  # noted, not raised
        assert hold.release() is True
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_off_the_main_thread_nothing_is_taken_over(python_sigint):
    holds = []
    thread = threading.Thread(target=lambda: holds.append(SignalHold(signal.SIGINT)))
    thread.start()
    thread.join()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert holds[0].release() is False


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
