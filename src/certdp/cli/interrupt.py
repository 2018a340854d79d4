"""What the ``certdp`` command does when it is asked to stop: Ctrl-C (SIGINT), ``kill``
(SIGTERM) or a closed terminal (SIGHUP).

One mechanism covers every command and every phase. :func:`stop_guard` is entered by the
program (:func:`certdp.cli.run`) before it imports anything heavy, and by the command group
around every command run in-process; while it is in force:

- The main thread raises :class:`~certdp._interrupt.Interrupted` (a KeyboardInterrupt) at its
  next bytecode and unwinds: ``with`` blocks close what they opened (scratch folders, worker
  processes, which are killed when busy), and the command's error handler calls
  :func:`finish`.
- A watchdog thread wakes on the same signal at once, whatever the main thread is doing:
  Python's C-level handler writes the signal's number to a socket it waits on
  (``signal.set_wakeup_fd``), and the kernel stamps the time of that write. If the main
  thread has not finished :data:`GRACE` seconds after the signal (it is inside a long native
  call: a HiGHS solve, a k-means, a sparse product), the watchdog finishes for it. Native
  calls therefore need not poll for a stop (:func:`certdp._interrupt.stops_enforced`).
- :func:`finish` runs once, from whichever thread gets there first: it kills every process
  descended from this one (worker processes, the fork server, a Dask LocalCluster; not
  multiprocessing's resource tracker, which exits by itself once they are gone and frees
  their semaphores), removes the temporary file of every write under way
  (:func:`certdp._io.abandon_writes`), prints one line on stderr and exits with status 128 +
  the signal's number: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP.

The line says which signal arrived, where the main thread was (its innermost function in
certdp), how long the stop took and what was written::

    interrupted by SIGINT during pmo.benders:solve_benders: stopped in 0.012 s, nothing was written

A program that drives certdp can ask for the same as JSON: with ``CERTDP_INTERRUPT_REPORT``
set to a file name, :func:`finish` writes there the signal, the exit status, the main thread's
certdp frames (innermost first), the signal's arrival and the stop's end (``time.time()``
seconds; the arrival as stamped by the kernel where the platform can), the latency between
them, which thread finished, how many processes it ended and the files written before it. The
command also notes there when its stop handling is in place (``started``) and when it returns
(``completed``), and a stop signal that arrives after that, while the process exits, adds
itself (``late``): every signal the command received is on record, which is how
``benchmarks/cli/interrupt_latency.py`` tells a signal that came too late to stop anything
from one that was lost.

A signal ignored when the command starts (``nohup``, a background job of a non-interactive
shell) stays ignored.
"""

from __future__ import annotations

import os
import signal
import socket
import struct
import sys
import threading
import time
from contextlib import contextmanager

TYPE_CHECKING = False       # typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    from typing import Any, Iterator

from .. import _interrupt
from .._interrupt import STOP_SIGNALS, Interrupted

GRACE = 0.3
"""Seconds the main thread has to unwind after a stop signal before the watchdog finishes for
it."""

REPORT_ENV = "CERTDP_INTERRUPT_REPORT"

_TIMESTAMP = 29 if sys.platform == "linux" else None
"""SO_TIMESTAMP (the kernel stamps each datagram with the time it was queued, as a struct
timeval; Python's socket module does not name it), where the watchdog uses it."""


class _Stop:
    """The first stop signal and where it found the main thread."""

    def __init__(self) -> None:
        self.lock = threading.RLock()      # the main thread's handler may take it while the thread holds it
        self.finishing = threading.Lock()
        self.signum: int | None = None
        self.done = False                  # the command has returned; the process is exiting
        self.completed = False             # ... and it returned normally
        self.completed_at: float | None = None
        self.late_noted = False
        self.watched = threading.Event()   # the watchdog has recorded the kernel's timestamp
        self.arrival: float | None = None
        self.arrival_source = ""
        self.stack: list[str] = []

    def record(self, signum: int, arrival: float | None, source: str, frame: Any = None) -> bool:
        """Record a stop signal; True for the first one. A kernel timestamp replaces an
        arrival noted later by Python."""
        with self.lock:
            first = self.signum is None
            if first:
                self.signum = signum
                self.stack = _certdp_frames(frame if frame is not None else _main_frame())
            if arrival is not None and (self.arrival is None or arrival < self.arrival):
                self.arrival, self.arrival_source = arrival, source
            return first


_stop: _Stop | None = None


def _main_frame() -> Any:
    return sys._current_frames().get(threading.main_thread().ident or 0)


def _certdp_frames(frame: Any) -> list[str]:
    """The certdp functions on a thread's stack, innermost first, as 'module:qualname' with
    the 'certdp.' prefix dropped (the stop machinery's own frames left out)."""
    names = []
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("certdp.") and module not in (__name__, _interrupt.__name__):
            names.append(f"{module[len('certdp.'):]}:{frame.f_code.co_qualname}")
        frame = frame.f_back
    return names


def _on_signal(signum: int, frame: Any) -> None:
    """The main thread's handler: record the stop and raise, once, while the command runs;
    later signals are answered by the stop already under way, and a signal after the command
    has returned by the watchdog, if the process has not exited by then."""
    assert _stop is not None
    _interrupt.request_stop()
    if _stop.record(signum, time.time(), "handler", frame) and not _stop.done:
        raise Interrupted(signal.Signals(signum).name)
    if _stop.done:
        _late(signum)


def _receive(sock: socket.socket) -> tuple[int, float | None, str]:
    """A signal number from the wakeup socket, and when the kernel queued it."""
    data, ancillary, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(16))
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == _TIMESTAMP and len(value) == 16:
            sec, usec = struct.unpack("qq", value)
            return (data[0] if data else 0), sec + usec * 1e-6, "kernel"
    return (data[0] if data else 0), time.time(), "watchdog"


def _watch(sock: socket.socket) -> None:
    """The watchdog: for the first stop signal, give the main thread :data:`GRACE` seconds,
    then finish. A 0 byte ends it (the guard is leaving)."""
    while True:
        signum, arrival, source = _receive(sock)
        if signum == 0:
            return
        if signum not in STOP_SIGNALS or _stop is None:
            continue
        _interrupt.request_stop()
        _stop.record(signum, arrival, source)
        _stop.watched.set()
        if _stop.done:
            _late(signum)
        deadline = (_stop.arrival or arrival or time.time()) + GRACE
        time.sleep(max(0.0, deadline - time.time()))
        finish("watchdog")


def _children(pid: int) -> list[int]:
    """The children of ``pid``, from the list Linux keeps for each of its threads."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:           # it has exited
        return []
    out: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:       # the thread has exited
            pass
    return out


def _descendants() -> list[int]:
    """Every process descended from this one, parents before their children (from /proc
    where the kernel keeps children lists, else from psutil, which scans every process)."""
    me = os.getpid()
    if not os.path.exists(f"/proc/{me}/task/{me}/children"):
        import psutil

        return [p.pid for p in psutil.Process(me).children(recursive=True)]
    found: list[int] = []
    frontier = [me]
    while frontier:
        frontier = [c for pid in frontier for c in _children(pid)]
        found.extend(frontier)
    return found


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie waiting for its parent counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            pass
        return False


def _end_descendants(wait: float = 1.0) -> int:
    """Kill (SIGKILL) every process descended from this one, parents first, except
    multiprocessing's resource tracker, and wait at most ``wait`` seconds until they are gone;
    the number killed."""
    tracker = sys.modules.get("multiprocessing.resource_tracker")
    keep = {getattr(getattr(tracker, "_resource_tracker", None), "_pid", None)}
    killed: list[int] = []
    for _ in range(3):        # a fork server may have been forking while it was listed
        procs = [p for p in _descendants() if p not in keep and p not in killed]
        if not procs:
            break
        for pid in procs:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except OSError:
                pass
    deadline = time.monotonic() + wait
    while killed and time.monotonic() < deadline and not all(_gone(p) for p in killed):
        time.sleep(0.005)
    return len(killed)


def _message(signame: str, stack: list[str], latency: float, written: list[Any]) -> str:
    where = stack[0] if stack else "start-up"
    what = "nothing was written" if not written else "written before it: " + ", ".join(str(p) for p in written)
    return f"interrupted by {signame} during {where}: stopped in {latency:.3f} s, {what}"


def finish(by: str) -> None:
    """Stop the process for the stop signal recorded: end its descendants, remove unfinished
    writes, print one line on stderr, write the report asked for, exit with 128 + the signal's
    number. Runs once; a second caller waits for the first to exit the process."""
    assert _stop is not None and _stop.signum is not None
    if not _stop.finishing.acquire(blocking=False):
        threading.Event().wait()
    _interrupt.request_stop()
    _stop.watched.wait(0.2)     # the signal's arrival as the kernel stamped it
    signum = _stop.signum
    ended = _end_descendants()
    io = sys.modules.get("certdp._io")      # not imported: nothing was being written
    written = io.abandon_writes() if io is not None else []
    end = time.time()
    arrival = _stop.arrival if _stop.arrival is not None else end
    signame = signal.Signals(signum).name
    if _stop.completed:       # the command's output is complete: let it out
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    line = _message(signame, _stop.stack, end - arrival, written)
    prefix = "\r\x1b[2K\x1b[?25h" if os.isatty(2) else ""   # clear a spinner's line, show the cursor again
    os.write(2, (prefix + line + "\n").encode("utf-8", "replace"))
    _report(signal=signame, exit_status=128 + signum, stack=_stop.stack, arrival=arrival,
            arrival_source=_stop.arrival_source, finished=end, latency=end - arrival, finished_by=by,
            processes_ended=ended, written=[str(p) for p in written], completed=_stop.completed_at)
    os._exit(128 + signum)


def _report(**fields: Any) -> None:
    """Write the JSON report to the file named by :data:`REPORT_ENV`, if it is set."""
    path = os.environ.get(REPORT_ENV)
    if path:
        import json

        try:
            with open(path, "w") as f:
                f.write(json.dumps(fields))
        except OSError:
            pass


def _late(signum: int) -> None:
    """Record, once, a stop signal that arrived after the command had returned (the process is
    exiting; the watchdog ends it if it has not within :data:`GRACE` seconds)."""
    assert _stop is not None
    with _stop.lock:
        if not _stop.late_noted:
            _stop.late_noted = True
            _report(signal=signal.Signals(signum).name, completed=_stop.completed_at, arrival=_stop.arrival,
                    arrival_source=_stop.arrival_source, late=True)


def stop_requested() -> bool:
    """Whether a stop signal has arrived while the guard is in force."""
    return _stop is not None and _stop.signum is not None


def _returned() -> None:
    """The command has returned: a stop signal no longer raises; one that came before is
    answered now; the return is on record."""
    assert _stop is not None
    _stop.done = _stop.completed = True        # first: from here on a signal does not raise
    _stop.completed_at = time.time()
    if stop_requested():
        finish("main")
    with _stop.lock:
        if not _stop.late_noted:
            _report(completed=_stop.completed_at)


@contextmanager
def stop_guard(lasting: bool = False) -> Iterator[None]:
    """Handle SIGINT, SIGTERM and SIGHUP as this module describes while the block runs (in the
    main thread; elsewhere, and when a guard is already in force, it does nothing).

    With ``lasting`` (the program itself, which exits after the block) the handling stays in
    force until the process exits: a signal that arrives while it tears down is answered by
    the watchdog if the process has not exited :data:`GRACE` seconds later, instead of by
    Python's own handler, which would print a traceback. Otherwise (a command run inside a
    Python process, as by click's test runner) the handlers are put back."""
    global _stop
    if threading.current_thread() is not threading.main_thread() or _stop is not None:
        yield
        return
    receiver, sender = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    if _TIMESTAMP is not None:
        try:
            receiver.setsockopt(socket.SOL_SOCKET, _TIMESTAMP, 1)
        except OSError:
            pass
    sender.setblocking(False)
    _stop = _Stop()
    watchdog = threading.Thread(target=_watch, args=(receiver,), name="certdp-stop-watchdog", daemon=True)
    watchdog.start()
    saved: dict[int, Any] = {}
    saved_fd: int | None = None
    try:
        try:
            for s in STOP_SIGNALS:      # inside the try: a signal raising from here on is answered
                if signal.getsignal(s) is not signal.SIG_IGN:
                    saved[s] = signal.signal(s, _on_signal)
            saved_fd = signal.set_wakeup_fd(sender.fileno(), warn_on_full_buffer=False)
            _interrupt.enforce_stops()
            _report(started=time.time())
            yield
        except SystemExit:             # the command's own exit, with its status
            _returned()
            raise
        except BaseException:
            _stop.done = True          # first: from here on a signal does not raise
            if stop_requested():
                finish("main")
            raise
        _returned()
    finally:
        if not lasting:
            _interrupt.enforce_stops(False)
            for s, h in saved.items():
                signal.signal(s, h)
            if saved_fd is not None:
                signal.set_wakeup_fd(saved_fd)
            sender.send(b"\0")
            watchdog.join()
            receiver.close()
            sender.close()
            _stop = None
