"""Executors for Benders subproblems: threads of this process, local worker processes, and
Dask; the one vocabulary of executors (:data:`EXECUTORS`) of every engine; and how every worker
process of the library is started (:func:`worker_context`).

Every executor keeps each block's HiGHS model alive in one place for the whole run (a worker
process, or a Dask actor), sends it only the coupled master values each iteration, and gets
back its :class:`~certdp.lp.benders.BlockResult`. Each block sees the same sequence of
right-hand sides whatever the executor, so the run, its cuts and its result do not depend on
the executor.
"""

from __future__ import annotations

import logging

import multiprocessing as mp
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import numpy as np

from .._optional import require
from .benders import BlockResult, BlockSolver, BlockSpec, SerialRunner, solve_in_turn

EXECUTORS = ("threads", "process", "dask")
"""Where an engine's parallel work (Benders subproblems, the outputs decomposition's pricing)
runs: on ``workers`` threads of this process (one: in turn), on ``workers`` local worker
processes, or on a Dask cluster. The result does not depend on it."""


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


@contextmanager
def _children_ignore_sigint() -> Iterator[None]:
    """Start processes with SIGINT ignored (an ignored signal stays ignored across their exec):
    Ctrl-C reaches the whole process group, and the parent alone must handle it and close the
    workers, also while they are still importing. The parent ignores it only for the few
    milliseconds of the fork and exec calls."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def worker_context() -> Any:
    """The multiprocessing context for worker processes: forkserver where the platform has it,
    spawn elsewhere. The fork server imports certdp once and forks every worker from that clean
    state, so a worker starts in milliseconds (spawn re-imports numpy, scipy and HiGHS in each,
    about 0.5 s), and, unlike a plain fork of the caller, never inherits a thread (HiGHS's
    scheduler, BLAS, a thread pool) stopped in the middle of holding a lock."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["certdp"])   # takes effect when the server starts
        return ctx
    return mp.get_context("spawn")


def start_worker_server() -> None:
    """Start the fork server now, if :func:`worker_context` uses one, so that its imports run
    while the caller builds its models; its first worker then starts at once. Idempotent."""
    ctx = worker_context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with _children_ignore_sigint():
            forkserver.ensure_running()


def _serve(conn: Any, factory: Any, args: tuple, method: str) -> None:
    """The body of a :class:`WorkerProcess`: build ``factory(*args)``, say "ready", then answer
    each argument tuple received with that object's ``method`` (or the exception it raised)
    until None arrives."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the parent handles Ctrl-C (see _children_ignore_sigint)
    obj = factory(*args)
    conn.send("ready")
    call = getattr(obj, method)
    while True:
        msg = conn.recv()
        if msg is None:
            break
        try:
            conn.send(call(*msg))
        except Exception as exc:  # report, do not hang the parent
            conn.send(exc)
    conn.close()


class WorkerProcess:
    """An object that lives in a worker process (forked as :func:`worker_context` says) and
    answers calls of one method over a pipe; its state stays there between calls. ``submit``
    sends a call and ``result`` waits for its answer, so the parent can keep several workers
    busy at once."""

    def __init__(self, factory: Any, args: tuple, method: str, ctx: Any = None) -> None:
        ctx = ctx or worker_context()
        self.conn, child = ctx.Pipe()
        with _children_ignore_sigint():
            self.proc = ctx.Process(target=_serve, args=(child, factory, args, method), daemon=True)
            self.proc.start()
        child.close()   # the parent keeps no copy of the child's end: a dead child reads as EOF

    def ready(self) -> None:
        """Wait until the object is built; RuntimeError if the process failed first."""
        try:
            ok = self.conn.recv() == "ready"
        except EOFError:
            ok = False
        if not ok:
            raise RuntimeError("a worker process failed to start")

    def submit(self, *args: Any) -> "WorkerProcess | None":
        """Send one call; self (whose :meth:`result` is its answer), or None if the process is gone."""
        try:
            self.conn.send(args)
        except (OSError, ValueError):
            return None
        return self

    def result(self) -> Any:
        """The answer to the oldest call sent; raises what the call raised, or EOFError if the
        process died."""
        answer = self.conn.recv()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        """Ask the worker to stop and wait for it."""
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.proc.join(timeout=5)
        if self.proc.is_alive():
            self.proc.terminate()
        self.conn.close()


class ProcessRunner:
    """Blocks spread over ``workers`` local processes, each keeping its models alive."""

    def __init__(self, blocks: Sequence[BlockSpec], workers: int = 2, tolerance: float = 1e-9) -> None:
        self.blocks = list(blocks)
        self.groups = _balance(self.blocks, max(1, workers))
        ctx = worker_context()
        self.workers = [WorkerProcess(BlockGroup, ([(i, self.blocks[i]) for i in g], tolerance), "solve", ctx)
                        for g in self.groups]
        for w in self.workers:
            w.ready()

    def solve_all(self, y: np.ndarray, theta: np.ndarray, time_limit: float | None = None) -> list[BlockResult]:
        """Send each worker process its blocks and gather the results in block order."""
        for w, g in zip(self.workers, self.groups):
            w.submit({i: (y[self.blocks[i].coupling], float(theta[i])) for i in g}, time_limit)
        out: list[BlockResult] = []
        for w in self.workers:
            out.extend(w.result())
        return sorted(out, key=lambda r: r.block)

    def close(self) -> None:
        """Stop the worker processes."""
        for w in self.workers:
            w.close()
        self.workers = []


def dask_client(workers: int, address: str | None, purpose: str, connect_timeout: float) -> tuple[Any, Any]:
    """``(client, cluster)``: a client of the scheduler at ``address`` (cluster None), or of a
    new LocalCluster of ``workers`` single-threaded processes. A scheduler that does not answer
    within ``connect_timeout`` seconds is a ValueError naming it."""
    distributed = require("dask.distributed", "distributed", purpose)
    if address:
        try:
            return distributed.Client(address, timeout=f"{connect_timeout}s"), None
        except (OSError, TimeoutError) as exc:
            raise ValueError(f"Dask scheduler at {address!r} did not answer within {connect_timeout:g} s: "
                             f"{exc}") from None
    cluster = distributed.LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=":0")   # no dashboard port to collide on
    return distributed.Client(cluster), cluster


def close_dask(client: Any, cluster: Any) -> None:
    """Close a :func:`dask_client` pair quietly. The client goes first, releasing the data it
    scattered: a worker that leaves while it still holds scattered data makes the scheduler log
    an ERROR about data "that can't be recovered", though the run is over and nothing is lost.
    Then our own cluster (its workers, then its scheduler), with Dask's loggers held at CRITICAL:
    connections that close while the processes stop are the normal end of a run, not errors."""
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


class DaskRunner:
    """Blocks held by Dask actors, on an existing cluster (``address``) or a LocalCluster."""

    def __init__(self, blocks: Sequence[BlockSpec], workers: int = 2, address: str | None = None,
                 tolerance: float = 1e-9, connect_timeout: float = 5.0) -> None:
        self.client, self.cluster = dask_client(workers, address, "the Dask executor", connect_timeout)
        self.blocks = list(blocks)
        n_workers = max(1, len(self.client.scheduler_info().get("workers", {})) or workers)
        self.groups = _balance(self.blocks, n_workers)
        futures = [self.client.submit(BlockGroup, [(i, self.blocks[i]) for i in g], tolerance, actor=True)
                   for g in self.groups]
        self.actors = [f.result() for f in futures]

    def solve_all(self, y: np.ndarray, theta: np.ndarray, time_limit: float | None = None) -> list[BlockResult]:
        """Solve the block groups on the Dask actors and gather the results in block order."""
        futs = [a.solve({i: (y[self.blocks[i].coupling], float(theta[i])) for i in g}, time_limit)
                for a, g in zip(self.actors, self.groups)]
        out: list[BlockResult] = []
        for f in futs:
            out.extend(f.result())
        return sorted(out, key=lambda r: r.block)

    def close(self) -> None:
        """Drop the actors (the cluster is closed by its owner)."""
        self.actors = []
        close_dask(self.client, self.cluster)


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
