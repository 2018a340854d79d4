"""Stopping a run when the process is asked to stop (Ctrl-C, SIGTERM).

The library installs no signal handler of its own. The ``certdp`` command does
(:mod:`certdp.cli.interrupt`), and records here that the process is stopping, where the
lower layers read it: a lost worker is not replaced then, and a worker that is closed is
killed rather than waited for. The command's watchdog ends the process within a fraction of a
second whatever its threads are doing (:func:`stops_enforced`); elsewhere (the library in a
user's program or notebook) a large HiGHS solve polls for Ctrl-C instead
(:data:`certdp.lp.highs.INTERRUPTIBLE_NONZEROS`).

Python runs a signal handler in the main thread, between two bytecodes. While the main
thread is inside a native solver that calls back into Python (HiGHS's interrupt callbacks),
that moment can fall inside the callback, and an exception raised there (Python's own
handler raises KeyboardInterrupt) unwinds through the solver's C++ frames: HiGHS then
reports a solve error and crashes the process at its next solve. :func:`native_section`
holds such handlers back until the native call has returned, and asks the solver to stop
meanwhile.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager
TYPE_CHECKING = False       # typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any, Iterator

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))
"""The signals that ask the process to stop: Ctrl-C, ``kill`` (and service managers), and a
terminal that closes."""

_stopping = threading.Event()
_enforced = False


class Interrupted(KeyboardInterrupt):
    """The run was stopped because the process is stopping (a KeyboardInterrupt, so that it
    unwinds as Ctrl-C does)."""


def request_stop() -> None:
    """Record that the process is stopping (the command's signal handler calls this)."""
    _stopping.set()


def stop_requested() -> bool:
    """Whether the process is stopping."""
    return _stopping.is_set()


def enforce_stops(on: bool = True) -> None:
    """Record that a stop signal ends the process whatever its threads are doing (the
    command's watchdog does), so that native calls need not poll for it."""
    global _enforced
    _enforced = on


def stops_enforced() -> bool:
    """Whether a stop signal ends the process without the help of the code running."""
    return _enforced


class StopFlag:
    """What a native solve's callback polls: ``stop`` is set when a stop signal arrived during
    the section, or when the process is stopping."""

    __slots__ = ("_own",)

    def __init__(self) -> None:
        self._own = False

    @property
    def stop(self) -> bool:
        """Whether to stop: a stop signal came during the section, or the process is stopping."""
        return self._own or _stopping.is_set()


@contextmanager
def native_section(flag: StopFlag) -> Iterator[StopFlag]:
    """Run a native call whose callbacks poll ``flag.stop``. In the main thread, the Python
    handlers of :data:`STOP_SIGNALS` are replaced for the section by one that only sets the
    flag; when the section ends they are put back and called for each signal that arrived, so
    a handler that raises (KeyboardInterrupt) raises after the native call, never inside it.
    Elsewhere (signal handlers run only in the main thread) the section only clears the flag."""
    flag._own = False
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    arrived: list[int] = []

    def hold(signum: int, frame: Any) -> None:
        arrived.append(signum)
        flag._own = True

    saved = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    held = {s: h for s, h in saved.items() if callable(h)}
    for s in held:
        signal.signal(s, hold)
    try:
        yield flag
    finally:
        for s, h in held.items():
            signal.signal(s, h)
        for s in arrived:
            held[s](s, sys._getframe())
