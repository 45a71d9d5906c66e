"""SignalHold: a signal noted while a run is kept, given back afterwards."""

from __future__ import annotations

import os
import signal
import threading

import pytest

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
