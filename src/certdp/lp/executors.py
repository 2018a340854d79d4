"""Executors for Benders subproblems: threads of this process, local worker processes, and
Dask; the one vocabulary of executors (:data:`EXECUTORS`) of every engine; how every worker
process of the library is started (:func:`worker_context`); and what happens when one is lost
(:class:`ReplayedGroups`).

Every executor keeps each block's HiGHS model alive in one place for the whole run (a worker
process, or a Dask actor), sends it only the coupled master values each iteration, and gets
back its :class:`~certdp.lp.benders.BlockResult`. Each block sees the same sequence of
right-hand sides whatever the executor, so the run, its cuts and its result do not depend on
the executor.

**Signals.** Worker processes are started with SIGINT and SIGHUP blocked (a blocked signal
stays blocked across fork and exec): Ctrl-C and a closing terminal reach the whole process
group, and the parent alone must handle them and end its workers, also while they are still
starting. The parent blocks them only in the thread that starts the children and only while it
does, so a signal that arrives meanwhile is delivered to it when they are unblocked, never
lost. SIGTERM is left alone: a Dask nanny stops its workers with it.

**A lost worker** (killed by hand or by the kernel's out-of-memory killer, its machine gone)
takes the live models it held. Both executors recover (:class:`ReplayedGroups`): the group is
rebuilt on a new worker and replayed through every call it had answered, which restores its
models exactly (HiGHS is deterministic given the same calls), and the call in hand is sent
again; the run, and its certified result, are those of an undisturbed run. They differ in how
long they keep trying, because the causes differ:

- ``process``: one replacement per group and round. A local process dies for a reason of this
  machine, most often memory; a replacement that dies again at the same point would die a
  third time, so the second loss is reported (:class:`WorkerLost`, exit status 5 of the
  command, with the signal that killed it).
- ``dask``: up to :data:`DASK_RETRIES` replacements per group and round, as long as the
  cluster has a worker. A cluster loses workers in the ordinary course (preempted machines,
  the nanny's restarts at its memory limit) and replaces them by design.

No worker is replaced once the process is stopping (:func:`certdp._interrupt.stop_requested`).
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import signal
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from .._interrupt import stop_requested
from .._optional import require
from .benders import BlockResult, BlockSolver, BlockSpec, SerialRunner, solve_in_turn

EXECUTORS = ("threads", "process", "dask")
"""Where an engine's parallel work (Benders subproblems, the outputs decomposition's pricing)
runs: on ``workers`` threads of this process (one: in turn), on ``workers`` local worker
processes, or on a Dask cluster. The result does not depend on it."""

PROCESS_RETRIES = 1
"""Replacements of a lost worker process per group and round (the module docstring says why)."""

DASK_RETRIES = 3
"""Replacements of a lost Dask actor per group and round."""


class WorkerLost(RuntimeError):
    """A worker was lost and could not be replaced: ``what`` it held, ``how`` it was lost."""


def _balance(blocks: Sequence[BlockSpec], workers: int) -> list[list[int]]:
    """Longest-processing-time assignment of blocks to workers (size = non-zeros)."""
    order = sorted(range(len(blocks)), key=lambda i: -blocks[i].W.nnz)
    load = [0] * workers
    groups: list[list[int]] = [[] for _ in range(workers)]
    for i in order:
        w = min(range(workers), key=lambda t: load[t])
        groups[w].append(i)
        load[w] += blocks[i].W.nnz
    return [g for g in groups if g]


class BlockGroup:
    """A set of live block models (lives in a worker process or as a Dask actor)."""

    def __init__(self, items: list[tuple[int, BlockSpec]], tolerance: float) -> None:
        self.solvers = {i: BlockSolver(i, spec, tolerance) for i, spec in items}

    def solve(self, payload: dict[int, tuple[np.ndarray, float]], time_limit: float | None = None) -> list[BlockResult]:
        """Solve the group's blocks for the master values in ``payload`` (block -> (y, theta))."""
        return solve_in_turn(((self.solvers[i], y, th) for i, (y, th) in payload.items()), time_limit)


# ------------------------------------------------------------------- processes
_GROUP_SIGNALS = {getattr(signal, n) for n in ("SIGINT", "SIGHUP") if hasattr(signal, n)}


@contextmanager
def children_immune_to_group_signals() -> Iterator[None]:
    """Block SIGINT and SIGHUP in this thread while it starts processes (or a thread that will,
    as Dask's event loop), which inherit the block (module docstring)."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    # multiprocessing's resource tracker unblocks SIGINT in the starting thread after it starts
    # (bpo-33613): start it first, then block
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _GROUP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def worker_context() -> Any:
    """The multiprocessing context for worker processes: forkserver where the platform has it,
    spawn elsewhere. The fork server imports this module (numpy, scipy, HiGHS) once and forks
    every worker from that clean state, so a worker starts in milliseconds (spawn re-imports
    them in each, about 0.5 s; what a worker's object needs besides takes a few tens of
    milliseconds), and, unlike a plain fork of the caller, never inherits a thread (HiGHS's
    scheduler, BLAS, a thread pool) stopped in the middle of holding a lock. The server is
    started (immune to the process group's signals, as the module docstring says) before the
    context is returned, so that every process started from it is immune too, whoever starts
    it (a ``multiprocessing`` Pool as well)."""
    if "forkserver" in mp.get_all_start_methods():
        from multiprocessing import forkserver

        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload([__name__])   # takes effect when the server starts
        with children_immune_to_group_signals():
            forkserver.ensure_running()
        return ctx
    return mp.get_context("spawn")


def start_worker_server() -> None:
    """Start the fork server now, if :func:`worker_context` uses one, so that its imports run
    while the caller builds its models; its first worker then starts at once. Idempotent."""
    worker_context()


def _serve(conn: Any, factory: Any, args: tuple, method: str) -> None:
    """The body of a :class:`WorkerProcess`: build ``factory(*args)`` and say "ready" (or send
    the exception the build raised), then answer each argument tuple received with that
    object's ``method`` (or the exception it raised) until None arrives, or until the parent
    is gone (its end of the pipe closed): then the worker leaves quietly."""
    try:
        try:
            obj = factory(*args)
        except Exception as exc:
            conn.send(exc)
            return
        conn.send("ready")
        call = getattr(obj, method)
        while True:
            msg = conn.recv()
            if msg is None:
                break
            try:
                answer = call(*msg)
            except Exception as exc:  # report, do not hang the parent
                answer = exc
            conn.send(answer)
    except (EOFError, OSError):   # the parent is gone
        pass
    finally:
        conn.close()


def _how(exitcode: int | None) -> str:
    """How a worker process ended, from its exit code."""
    if exitcode is None:
        return "it stopped answering"
    if exitcode < 0:
        name = signal.Signals(-exitcode).name if -exitcode in signal.valid_signals() else f"signal {-exitcode}"
        hint = " (the out-of-memory killer sends it)" if -exitcode == getattr(signal, "SIGKILL", 9) else ""
        return f"killed by {name}{hint}"
    return f"it exited with status {exitcode}"


class WorkerProcess:
    """An object that lives in a worker process (forked as :func:`worker_context` says) and
    answers calls of one method over a pipe; its state stays there between calls. ``submit``
    sends a call and ``result`` waits for its answer, so the parent can keep several workers
    busy at once. A dead worker is a :class:`WorkerLost` naming how it died."""

    def __init__(self, factory: Any, args: tuple, method: str, ctx: Any = None, what: str = "a worker") -> None:
        ctx = ctx or worker_context()
        self.what = what
        self.busy = 0            # calls sent and not yet answered
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_serve, args=(child, factory, args, method), daemon=True)
        if ctx.get_start_method() == "forkserver":
            # the server was started immune (worker_context); this only asks it for a fork, and
            # waits (while its imports finish) with the signals open, so Ctrl-C is answered
            self.proc.start()
        else:
            with children_immune_to_group_signals():
                self.proc.start()
        child.close()   # the parent keeps no copy of the child's end: a dead child reads as EOF

    def _lost(self) -> WorkerLost:
        self.proc.join(timeout=1.0)
        return WorkerLost(f"the worker process holding {self.what} (pid {self.proc.pid}) was lost: "
                          f"{_how(self.proc.exitcode)}")

    def ready(self) -> "WorkerProcess":
        """Wait until the object is built (self); raises what the build raised, or WorkerLost
        if the process died first."""
        try:
            answer = self.conn.recv()
        except (EOFError, OSError):
            raise self._lost() from None
        if isinstance(answer, Exception):
            raise answer
        return self

    def submit(self, *args: Any) -> "WorkerProcess":
        """Send one call; self, whose :meth:`result` is its answer (WorkerLost if the process is
        gone)."""
        self.busy += 1
        try:
            self.conn.send(args)
        except (OSError, ValueError):
            pass          # the process is gone: result() says how
        return self

    def result(self) -> Any:
        """The answer to the oldest call sent; raises what the call raised, or WorkerLost if the
        process died."""
        try:
            answer = self.conn.recv()
        except (EOFError, OSError):
            raise self._lost() from None
        self.busy -= 1
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        """End the worker: an idle one is asked to leave (and killed if it does not within 5 s);
        a busy one (the caller is unwinding from an error or Ctrl-C), or any while the process
        is stopping, is killed at once rather than waited for."""
        if self.busy or stop_requested():
            self.proc.kill()
        else:
            try:
                self.conn.send(None)
            except (OSError, ValueError):
                pass
            self.proc.join(timeout=5)
            if self.proc.is_alive():
                self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


# ------------------------------------------------------------ replayed groups
class _Failed:
    """A call that could not be sent: its result raises."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def result(self) -> Any:
        raise self.exc


class ProcessHolders:
    """Group ``i``'s object ``factory(*args_of(i))`` in a :class:`WorkerProcess`."""

    retries = PROCESS_RETRIES

    def __init__(self, factory: Any, args_of: Callable[[int], tuple], method: str, what: Callable[[int], str]) -> None:
        self.factory, self.args_of, self.method, self.what = factory, args_of, method, what
        self.ctx = worker_context()

    def launch(self, i: int) -> WorkerProcess:
        """Start a process building group ``i``'s object (:meth:`ready` waits for it)."""
        return WorkerProcess(self.factory, self.args_of(i), self.method, self.ctx, what=self.what(i))

    def ready(self, launched: WorkerProcess) -> WorkerProcess:
        """The process once its object is built."""
        return launched.ready()

    def send(self, holder: WorkerProcess, args: tuple) -> Any:
        """Send a call; its ``result()`` is the answer."""
        return holder.submit(*args)

    def lost(self, exc: BaseException, holder: WorkerProcess) -> bool:
        """Whether ``exc`` says the process is gone."""
        return isinstance(exc, WorkerLost)

    def stop(self, holder: WorkerProcess) -> None:
        """End a lost holder (what is left of it)."""
        holder.close()

    def close(self, holders: list[Any]) -> None:
        """End every holder."""
        for h in holders:
            h.close()


class DaskHolders:
    """Group ``i``'s object as a Dask actor on ``client``'s cluster."""

    retries = DASK_RETRIES

    def __init__(self, client: Any, cluster: Any, factory: Any, args_of: Callable[[int], tuple], method: str,
                 what: Callable[[int], str]) -> None:
        self.client, self.cluster = client, cluster
        self.factory, self.args_of, self.method, self.what = factory, args_of, method, what

    def launch(self, i: int) -> Any:
        """Submit group ``i``'s object as an actor (:meth:`ready` waits for it)."""
        if not self.client.scheduler_info().get("workers"):
            raise WorkerLost(f"no Dask worker is left to hold {self.what(i)}")
        return self.client.submit(self.factory, *self.args_of(i), actor=True, pure=False)

    def ready(self, launched: Any) -> Any:
        """The actor once it is built."""
        return launched.result()

    def send(self, holder: Any, args: tuple) -> Any:
        """Call the actor; its ``result()`` is the answer, or raises why it is not."""
        try:
            return getattr(holder, self.method)(*args)
        except Exception as exc:   # distributed raises on the attribute of an actor whose worker is gone
            return _Failed(exc)

    def lost(self, exc: BaseException, holder: Any) -> bool:
        """Whether ``exc`` says the actor's worker is gone: the connection failed (OSError,
        which the objects held never raise themselves) or distributed says the actor was lost."""
        return isinstance(exc, OSError) or "Actor was lost" in str(exc) or type(exc).__name__ in (
            "KilledWorker", "CancelledError", "FutureCancelledError")

    def stop(self, holder: Any) -> None:
        """Nothing: a lost actor's worker is the cluster's to replace."""

    def close(self, holders: list[Any]) -> None:
        """Close the client and the cluster this executor made (:func:`close_dask`)."""
        close_dask(self.client, self.cluster)


class ReplayedGroups:
    """``n`` stateful objects, one per group, each held by a worker (``holders``: processes or
    Dask actors) and answering calls of one method. Every call a group has answered is kept;
    when its worker is lost, the group is rebuilt on a new worker and replayed through those
    calls before the call in hand is sent again (module docstring). ``replays`` counts the
    rebuilds."""

    def __init__(self, holders: Any, n: int) -> None:
        self.holders = holders
        self.calls: list[list[tuple]] = [[] for _ in range(n)]
        self.replays = 0
        self.held: list[Any] = []
        launched = [holders.launch(i) for i in range(n)]     # every object builds at once
        try:
            for x in launched:
                self.held.append(holders.ready(x))
        except BaseException:
            holders.close(launched)
            raise

    def call_all(self, args: Sequence[tuple]) -> list[Any]:
        """Group ``i`` called with ``args[i]``, all at once; the answers in group order."""
        sent = [self.holders.send(h, a) for h, a in zip(self.held, args)]
        out = [self._answer(i, f, args[i]) for i, f in enumerate(sent)]
        for i, a in enumerate(args):
            self.calls[i].append(a)
        return out

    def _answer(self, i: int, sent: Any, args: tuple) -> Any:
        """Group ``i``'s answer to ``args`` (``sent``), rebuilding the group as often as its
        holders allow when its worker is lost (also while it is being rebuilt)."""
        losses = 0
        while True:
            try:
                if sent is None:
                    self._rebuild(i)
                    sent = self.holders.send(self.held[i], args)
                return sent.result()
            except Exception as exc:
                if not self.holders.lost(exc, self.held[i]):
                    raise
                losses += 1
                if losses > self.holders.retries or stop_requested():
                    if isinstance(exc, WorkerLost):
                        raise
                    raise WorkerLost(f"the worker holding {self.holders.what(i)} was lost: {exc}") from None
                sent = None

    def _rebuild(self, i: int) -> None:
        """Group ``i`` on a new worker, replayed through the calls it had answered."""
        self.replays += 1
        self.holders.stop(self.held[i])
        self.held[i] = self.holders.ready(self.holders.launch(i))
        for a in self.calls[i]:
            self.holders.send(self.held[i], a).result()

    def close(self) -> None:
        """End every worker (a busy process is killed: the caller is unwinding from an error)."""
        held, self.held = self.held, []
        self.holders.close(held)


# ------------------------------------------------------------ Benders runners
class _GroupRunner:
    """Blocks spread over groups, each held by a worker that keeps its models alive
    (``work``, a :class:`ReplayedGroups`)."""

    work: ReplayedGroups

    def __init__(self, blocks: Sequence[BlockSpec], groups: list[list[int]], tolerance: float) -> None:
        self.blocks = list(blocks)
        self.groups = groups
        self.tolerance = tolerance

    def _items(self, g: int) -> tuple:
        return ([(i, self.blocks[i]) for i in self.groups[g]], self.tolerance)

    def _what(self, g: int) -> str:
        return f"Benders blocks {self.groups[g]}"

    @property
    def replays(self) -> int:
        return self.work.replays

    def solve_all(self, y: np.ndarray, theta: np.ndarray, time_limit: float | None = None) -> list[BlockResult]:
        """Send each group its blocks' master values and gather the results in block order."""
        args = [({i: (y[self.blocks[i].coupling], float(theta[i])) for i in g}, time_limit) for g in self.groups]
        out: list[BlockResult] = []
        for part in self.work.call_all(args):
            out.extend(part)
        return sorted(out, key=lambda r: r.block)

    def close(self) -> None:
        """End the workers (killed at once when busy: the caller is unwinding from an error)."""
        self.work.close()


class ProcessRunner(_GroupRunner):
    """Blocks spread over ``workers`` local processes, each keeping its models alive."""

    def __init__(self, blocks: Sequence[BlockSpec], workers: int = 2, tolerance: float = 1e-9) -> None:
        super().__init__(blocks, _balance(list(blocks), max(1, workers)), tolerance)
        self.work = ReplayedGroups(ProcessHolders(BlockGroup, self._items, "solve", self._what), len(self.groups))


def dask_client(workers: int, address: str | None, purpose: str, connect_timeout: float) -> tuple[Any, Any]:
    """``(client, cluster)``: a client of the scheduler at ``address`` (cluster None), or of a
    new LocalCluster of ``workers`` single-threaded processes, immune to the process group's
    signals (module docstring) and quiet: a lost worker is this module's to report. A scheduler
    that does not answer within ``connect_timeout`` seconds is a ValueError naming it."""
    distributed = require("dask.distributed", "distributed", purpose)
    if address:
        try:
            return distributed.Client(address, timeout=f"{connect_timeout}s"), None
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"Dask scheduler at {address!r} did not answer within {connect_timeout:g} s: "
                             f"{exc}") from None
    with children_immune_to_group_signals():
        cluster = distributed.LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                                           host="127.0.0.1", dashboard_address=":0",   # no port to collide on
                                           silence_logs=logging.CRITICAL)
    return distributed.Client(cluster), cluster


def close_dask(client: Any, cluster: Any) -> None:
    """Close a :func:`dask_client` pair quietly. The client goes first, releasing the data it
    scattered: a worker that leaves while it still holds scattered data makes the scheduler log
    an ERROR about data "that can't be recovered", though the run is over and nothing is lost.
    Then our own cluster (its workers, then its scheduler), with Dask's loggers held at CRITICAL:
    connections that close while the processes stop are the normal end of a run, not errors.
    While the process is stopping nothing is closed: the command ends the cluster's processes
    itself, at once, where a graceful close takes a second or more."""
    if stop_requested():
        return
    quiet = [logging.getLogger(n) for n in ("distributed", "distributed.scheduler", "distributed.core",
                                            "distributed.nanny", "distributed.worker", "tornado", "asyncio")]
    levels = [lg.level for lg in quiet]
    try:
        for lg in quiet:
            lg.setLevel(logging.CRITICAL)
        client.close()
        if cluster is not None:
            cluster.close()
    finally:
        for lg, lv in zip(quiet, levels):
            lg.setLevel(lv)


class DaskRunner(_GroupRunner):
    """Blocks held by Dask actors, on an existing cluster (``address``) or a LocalCluster."""

    def __init__(self, blocks: Sequence[BlockSpec], workers: int = 2, address: str | None = None,
                 tolerance: float = 1e-9, connect_timeout: float = 5.0) -> None:
        client, cluster = dask_client(workers, address, "the Dask executor", connect_timeout)
        self.client, self.cluster = client, cluster
        try:
            n_workers = max(1, len(client.scheduler_info().get("workers", {})) or workers)
            super().__init__(blocks, _balance(list(blocks), n_workers), tolerance)
            holders = DaskHolders(client, cluster, BlockGroup, self._items, "solve", self._what)
            self.work = ReplayedGroups(holders, len(self.groups))
        except BaseException:
            close_dask(client, cluster)
            raise


class ThreadRunner(SerialRunner):
    """All blocks in this process, spread over ``workers`` threads, each solving its blocks in
    turn (HiGHS releases the GIL while it solves, and each block's model is only ever used by
    its own thread)."""

    def __init__(self, blocks: Sequence[BlockSpec], workers: int, tolerance: float = 1e-9) -> None:
        super().__init__(blocks, tolerance)
        self.groups = _balance(list(blocks), max(1, workers))
        self.pool = ThreadPoolExecutor(len(self.groups)) if self.groups else None

    def solve_all(self, y: np.ndarray, theta: np.ndarray, time_limit: float | None = None) -> list[BlockResult]:
        """Every block's answer for ``y``, in block order; each thread's blocks within
        ``time_limit`` seconds."""
        if self.pool is None:
            return []
        futs = [self.pool.submit(solve_in_turn, [(self.solvers[i], y[self.solvers[i].spec.coupling], float(theta[i]))
                                                 for i in g], time_limit) for g in self.groups]
        return sorted((r for f in futs for r in f.result()), key=lambda r: r.block)

    def close(self) -> None:
        """Stop the threads and drop the models."""
        if self.pool is not None:
            self.pool.shutdown()
            self.pool = None
        super().close()


def make_runner(blocks: Sequence[BlockSpec], *, executor: str = "threads", workers: int = 1,
                address: str | None = None, tolerance: float = 1e-9) -> Any:
    """Build the executor named ``executor`` (one of :data:`EXECUTORS`)."""
    if executor == "threads":
        return SerialRunner(blocks, tolerance) if workers <= 1 else ThreadRunner(blocks, workers, tolerance)
    if executor == "process":
        return ProcessRunner(blocks, workers, tolerance)
    if executor == "dask":
        return DaskRunner(blocks, workers, address, tolerance)
    raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
