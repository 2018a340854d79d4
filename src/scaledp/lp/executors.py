"""Executors for Benders subproblems: serial, a local process pool, and Dask; and how every
worker process of the library is started (:func:`worker_context`).

Every executor keeps each block's HiGHS model alive in one place for the whole run (a worker
process, or a Dask actor), sends it only the coupled master values each iteration, and gets
back its :class:`~scaledp.lp.benders.BlockResult`. Each block sees the same sequence of
right-hand sides whatever the executor, so the run, its cuts and its result do not depend on
the executor.
"""

from __future__ import annotations

import multiprocessing as mp
import signal
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

import numpy as np

from .._optional import require
from .benders import BlockResult, BlockSolver, BlockSpec, SerialRunner, solve_in_turn

EXECUTORS = ("serial", "process", "dask")


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
        return solve_in_turn(((self.solvers[i], y, th) for i, (y, th) in payload.items()), time_limit)


@contextmanager
def children_ignore_sigint() -> Iterator[None]:
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
    spawn elsewhere. The fork server imports scaledp once and forks every worker from that clean
    state, so a worker starts in milliseconds (spawn re-imports numpy, scipy and HiGHS in each,
    about 0.5 s), and, unlike a plain fork of the caller, never inherits a thread (HiGHS's
    scheduler, BLAS, a thread pool) stopped in the middle of holding a lock."""
    if "forkserver" in mp.get_all_start_methods():
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["scaledp"])   # takes effect when the server starts
        return ctx
    return mp.get_context("spawn")


def start_worker_server() -> None:
    """Start the fork server now, if :func:`worker_context` uses one, so that its imports run
    while the caller builds its models; its first worker then starts at once. Idempotent."""
    ctx = worker_context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        with children_ignore_sigint():
            forkserver.ensure_running()


def _worker(conn: Any, items: list[tuple[int, BlockSpec]], tolerance: float) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the parent handles Ctrl-C (see children_ignore_sigint)
    group = BlockGroup(items, tolerance)
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            break
        try:
            conn.send(group.solve(*msg))
        except Exception as exc:  # report, do not hang the master
            conn.send(exc)
    conn.close()


class ProcessRunner:
    """Blocks spread over ``workers`` local processes, each keeping its models alive."""

    def __init__(self, blocks: Sequence[BlockSpec], workers: int = 2, tolerance: float = 1e-9) -> None:
        self.blocks = list(blocks)
        self.groups = _balance(self.blocks, max(1, workers))
        ctx = worker_context()
        self.procs = []
        self.conns = []
        with children_ignore_sigint():
            for g in self.groups:
                parent, child = ctx.Pipe()
                p = ctx.Process(target=_worker, args=(child, [(i, self.blocks[i]) for i in g], tolerance), daemon=True)
                p.start()
                self.procs.append(p)
                self.conns.append(parent)
        for c in self.conns:
            if c.recv() != "ready":
                raise RuntimeError("a worker process failed to start")

    def solve_all(self, y: np.ndarray, theta: np.ndarray, time_limit: float | None = None) -> list[BlockResult]:
        for c, g in zip(self.conns, self.groups):
            c.send(({i: (y[self.blocks[i].coupling], float(theta[i])) for i in g}, time_limit))
        out: list[BlockResult] = []
        for c in self.conns:
            res = c.recv()
            if isinstance(res, Exception):
                raise res
            out.extend(res)
        return sorted(out, key=lambda r: r.block)

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(None)
            except (OSError, BrokenPipeError):
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
        self.procs, self.conns = [], []


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
                                       host="127.0.0.1", dashboard_address=None)
    return distributed.Client(cluster), cluster


def close_dask(client: Any, cluster: Any) -> None:
    """Close a :func:`dask_client` pair; our own cluster first, so that no worker heartbeats
    into a scheduler that has gone."""
    if cluster is not None:
        cluster.close()
    client.close()


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
        futs = [a.solve({i: (y[self.blocks[i].coupling], float(theta[i])) for i in g}, time_limit)
                for a, g in zip(self.actors, self.groups)]
        out: list[BlockResult] = []
        for f in futs:
            out.extend(f.result())
        return sorted(out, key=lambda r: r.block)

    def close(self) -> None:
        self.actors = []
        close_dask(self.client, self.cluster)


def make_runner(blocks: Sequence[BlockSpec], *, executor: str = "serial", workers: int = 2,
                address: str | None = None, tolerance: float = 1e-9) -> Any:
    """Build the executor named ``executor`` ('serial', 'process' or 'dask')."""
    if executor == "serial":
        return SerialRunner(blocks, tolerance)
    if executor == "process":
        return ProcessRunner(blocks, workers, tolerance)
    if executor == "dask":
        return DaskRunner(blocks, workers, address, tolerance)
    raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
