"""Hold a signal while a run is kept, so that a stop that lands then does not lose it.

Two signals end a profiled block early: SIGINT (Ctrl-C, a kernel's interrupt) and SIGTERM
(torchrun stops every rank once one fails). Either may land in the few milliseconds in which
the loop's figures are interpreted and saved; acted on there, it would drop everything
measured. :class:`SignalHold` notes such a signal instead and says at :meth:`~SignalHold.release`
whether one came, so the caller can act on it once the run is safe.

A hold takes over only a signal left to its default action (Python's ``default_int_handler``
for SIGINT, ``SIG_DFL`` for the others) and only on the main thread, where Python runs signal
handlers; a handler of the user's, a kernel's or a launcher's is left alone, and off the main
thread the hold does nothing.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any


class SignalHold:
    """Take over one signal: raise it as an exception until :meth:`hold`, then note it.

    Parameters
    ----------
    signum : int
        The signal, e.g. ``signal.SIGINT``.
    raise_as : callable, optional
        Makes the exception to raise while the signal is not held (SIGTERM raised as an
        interrupt, so that a stopped rank still saves its partial run). Without it the signal
        is held from the start.
    """

    def __init__(self, signum: int,
                 *, raise_as: Callable[[], BaseException] | None = None) -> None:
        self.signum = signum
        self.pending = False
        self._raise_as = raise_as
        self._holding = raise_as is None
        self._previous: Any = None
        self._installed = False
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            previous = signal.getsignal(signum)
            if previous not in self._defaults():
                return  # SIG_IGN, or someone's handler: theirs to act on
            signal.signal(signum, self._handle)
        except (ValueError, OSError):
            return
        # None: a handler not set from Python; the default action is what it meant.
        self._previous = signal.SIG_DFL if previous is None else previous
        self._installed = True

    def _defaults(self) -> tuple[Any, ...]:
        if self.signum == signal.SIGINT:
            return (signal.default_int_handler,)
        return (signal.SIG_DFL, None)

    def _handle(self, signum: int, frame: Any) -> None:
        if self._holding or self._raise_as is None:
            self.pending = True
        else:
            raise self._raise_as()

    def hold(self) -> None:
        """From now on the signal is noted, not raised."""
        self._holding = True

    def release(self) -> bool:
        """Give the signal back to what handled it before; whether one came while held."""
        if self._installed:
            self._installed = False
            try:
                if signal.getsignal(self.signum) == self._handle:  # not replaced since
                    signal.signal(self.signum, self._previous)
            except (ValueError, OSError):
                pass
        return self.pending
