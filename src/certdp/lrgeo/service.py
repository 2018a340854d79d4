"""LR-Geo as a service: the server's rounds behind HTTP (paper 003, Fig. 4, over a network).

:class:`RoundScheduler` is the server's state machine, with no web code: users ask for the
reference-table rows of their circle (and get an id), upload the coefficients of their LR-OMG
problem, and are grouped into a *round* that closes after ``round_users`` uploads or
``round_wait`` seconds after its first upload, whichever comes first; a worker thread solves
CLR-Geo for each closed round, one after another, while the next round fills. A user who
leaves does not block a round (it closes on time without them), and their result is dropped
after ``result_ttl`` seconds. Every message is validated by its own dataclass
(:mod:`certdp.lrgeo.messages`) before anything is stored, so a bad message changes nothing for
the other users; the number of users in flight is bounded.

:func:`create_app` puts the scheduler behind FastAPI (the ``service`` extra); the messages keep
their own JSON and validation, so the HTTP layer only maps errors to status codes:

=================  ======================================================================
``GET /health``    ``{"status": "ok", "instance": ...}``
``GET /info``      the world (its spec and fingerprint), the parameters, the limits
``POST /table``    a :class:`TableRequest` -> ``{"user", "instance", "table"}`` (a TableResponse)
``POST /upload/U`` user U's :class:`ObfuscationRequest` -> 202
``GET /result/U``  U's :class:`ObfuscationResponse` (200), or 202 while its round is open or solving
``GET /stats``     rounds solved, their sizes and seconds, users in flight
=================  ======================================================================

Errors: 400 (a malformed or inconsistent message, with the reason), 404 (an id this server
instance never issued: it was restarted, or the result was already collected), 413 (a body
above the limit), 503 (too many users in flight), 500 (the round's solve failed).
"""

import json
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from .._optional import require
from ..datasets.city import World, fingerprint
from .messages import ObfuscationRequest, ProtocolError, TableRequest
from .server import LRGeoServer
from .table import build_table
from .user import LRGeoParams


class UnknownUser(LookupError):
    """An id this server instance did not issue (or whose result was already collected)."""


class Busy(RuntimeError):
    """Too many users in flight."""


@dataclass
class _User:
    state: str                       # 'table' | 'waiting' | 'solving' | 'done' | 'failed'
    since: float
    round: int | None = None
    response: str | None = None      # ObfuscationResponse JSON
    error: str | None = None


@dataclass
class RoundRecord:
    """One solved (or failed) round, for ``/stats`` and the load benchmark."""

    round: int
    users: int
    closed_by: str                   # 'size' | 'time'
    wait_seconds: float              # from its first upload to its close
    solve_seconds: float
    method: str
    status: str


@dataclass
class Limits:
    round_users: int = 4
    round_wait: float = 5.0
    max_pending: int = 1000
    max_body_bytes: int = 32 * 1024 * 1024
    result_ttl: float = 600.0
    max_result_wait: float = 30.0


@dataclass
class RoundScheduler:
    """The server's side of LR-Geo for many users and many rounds (see the module docstring)."""

    world: World
    params: LRGeoParams
    spec: dict[str, Any] = field(default_factory=dict)   # how clients rebuild the world
    limits: Limits = field(default_factory=Limits)
    method: str = "benders"
    gap: float = 1e-4
    time_limit: float | None = None

    def __post_init__(self) -> None:
        if self.limits.round_users < 1 or not self.limits.round_wait > 0 or self.limits.max_pending < 1:
            raise ValueError("round_users and max_pending must be >= 1 and round_wait > 0")
        t0 = time.perf_counter()
        self.server = LRGeoServer(self.world, build_table(self.world, self.params.cell, self.params.table_band),
                                  self.params)
        self.table_seconds = time.perf_counter() - t0
        self.instance = uuid.uuid4().hex[:12]
        self.fingerprint = fingerprint(self.world)
        self._cv = threading.Condition()
        self._users: dict[str, _User] = {}
        self._open: list[str] = []
        self._opened_at: float | None = None
        self._rounds: list[tuple[int, list[str], str, float]] = []   # closed, not yet solved
        self._next_round = 0
        self.records: list[RoundRecord] = []
        self._stop = False
        self._worker = threading.Thread(target=self._work, name="lrgeo-rounds", daemon=True)
        self._worker.start()

    # ------------------------------------------------------------ messages
    def info(self) -> dict[str, Any]:
        return {"instance": self.instance, "world": {**self.spec, "fingerprint": self.fingerprint, "K": self.world.K,
                                                     "name": self.world.name},
                "params": asdict(self.params), "limits": asdict(self.limits), "method": self.method}

    def table(self, body: str) -> str:
        """A user's first message: its circle. Returns its id and the table rows (JSON)."""
        req = TableRequest.from_json(body)
        with self._cv:
            self._expire()
            if len(self._users) >= self.limits.max_pending:
                raise Busy(f"{len(self._users)} users in flight (limit {self.limits.max_pending}); retry later")
            uid = "u-" + uuid.uuid4().hex[:16]
            resp = self.server.handle_table_request(TableRequest(user=uid, center=req.center,
                                                                 radius_km=req.radius_km))
            self._users[uid] = _User("table", time.monotonic())
        return f'{{"user": {json.dumps(uid)}, "instance": {json.dumps(self.instance)}, "table": {resp.to_json()}}}'

    def upload(self, uid: str, body: str) -> None:
        """A user's coefficients; it joins the open round (which may close now)."""
        req = ObfuscationRequest.from_json(body)
        if req.user != uid:
            raise ProtocolError(f"the request names user {req.user!r} but was sent for {uid!r}")
        with self._cv:
            u = self._user(uid)
            if u.state != "table":
                raise ProtocolError(f"{uid}: already uploaded (state {u.state})")
            self.server.submit(req)          # validates against the circle; raises before storing
            u.state, u.since = "waiting", time.monotonic()
            if not self._open:
                self._opened_at = time.monotonic()
            self._open.append(uid)
            if len(self._open) >= self.limits.round_users:
                self._close("size")
            self._cv.notify_all()

    def result(self, uid: str, wait: float = 0.0) -> tuple[str, str | None]:
        """('done', response JSON) once, then the user is forgotten; ('pending', None) while its
        round is open or solving after ``wait`` seconds; ('failed', reason)."""
        deadline = time.monotonic() + min(max(wait, 0.0), self.limits.max_result_wait)
        with self._cv:
            u = self._user(uid)
            while u.state not in ("done", "failed"):
                left = deadline - time.monotonic()
                if left <= 0:
                    return "pending", None
                self._cv.wait(timeout=min(left, 0.25))
                u = self._user(uid)
            self._forget(uid)
            return (u.state, u.response if u.state == "done" else u.error)

    def stats(self) -> dict[str, Any]:
        with self._cv:
            states: dict[str, int] = {}
            for u in self._users.values():
                states[u.state] = states.get(u.state, 0) + 1
            return {"instance": self.instance, "table_seconds": self.table_seconds, "users_in_flight": states,
                    "rounds": [asdict(r) for r in self.records]}

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._worker.join(timeout=10)

    def __enter__(self) -> "RoundScheduler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ internals
    def _user(self, uid: str) -> _User:
        u = self._users.get(uid)
        if u is None:
            raise UnknownUser(f"unknown user {uid!r} for server instance {self.instance}: the server was restarted, "
                              "or the result was already collected; start again with a table request")
        return u

    def _forget(self, uid: str) -> None:
        self._users.pop(uid, None)
        self.server.requests.pop(uid, None)
        self.server.circles.pop(uid, None)

    def _expire(self) -> None:
        """Drop users who never uploaded, or never collected their result, within result_ttl."""
        now = time.monotonic()
        for uid, u in list(self._users.items()):
            if u.state in ("table", "done", "failed") and now - u.since > self.limits.result_ttl:
                self._forget(uid)

    def _close(self, why: str) -> None:
        rid = self._next_round
        self._next_round += 1
        waited = time.monotonic() - (self._opened_at or time.monotonic())
        for uid in self._open:
            self._users[uid].state, self._users[uid].round = "solving", rid
        self._rounds.append((rid, list(self._open), why, waited))
        self._open, self._opened_at = [], None
        self._cv.notify_all()

    def _work(self) -> None:
        while True:
            with self._cv:
                while not self._rounds and not self._stop:
                    if self._open and self._opened_at is not None:
                        left = self.limits.round_wait - (time.monotonic() - self._opened_at)
                        if left <= 0:
                            self._close("time")
                            continue
                        self._cv.wait(timeout=left)
                    else:
                        self._cv.wait(timeout=1.0)
                if self._stop:
                    return
                rid, names, why, waited = self._rounds.pop(0)
                # a snapshot of the round's messages: uploads for the next round go on meanwhile
                srv = LRGeoServer(self.world, self.server.table, self.params)
                srv.circles = {n: self.server.circles[n] for n in names}
                srv.requests = {n: self.server.requests[n] for n in names}
            t0 = time.perf_counter()
            try:
                resp, info = srv.solve(method=self.method, gap=self.gap, time_limit=self.time_limit)
                out = {n: ("done", r.to_json()) for n, r in resp.items()}
                method, status = info.method, str(info.status)
            except Exception as exc:   # reported to each user of the round; the server goes on
                out = {n: ("failed", f"the round's solve failed: {type(exc).__name__}: {exc}") for n in names}
                method, status = self.method, "failed"
            with self._cv:
                for n, (state, payload) in out.items():
                    u = self._users.get(n)
                    if u is None:
                        continue
                    u.state, u.since = state, time.monotonic()
                    if state == "done":
                        u.response = payload
                    else:
                        u.error = payload
                self.records.append(RoundRecord(rid, len(names), why, waited, time.perf_counter() - t0, method,
                                                status))
                self._cv.notify_all()


# ---------------------------------------------------------------------- HTTP
def create_app(scheduler: RoundScheduler):
    """The FastAPI application around ``scheduler`` (needs the ``service`` extra). This module
    does not use postponed annotations: FastAPI reads the handlers' annotations at run time."""
    fastapi = require("fastapi", "service", "the LR-Geo HTTP service")
    from fastapi.concurrency import run_in_threadpool
    from fastapi.responses import JSONResponse, Response

    app = fastapi.FastAPI(title="certdp LR-Geo server", version="1")
    limits = scheduler.limits

    def error(code: int, exc: BaseException) -> JSONResponse:
        return JSONResponse({"error": str(exc), "instance": scheduler.instance}, status_code=code)

    async def read(request) -> str:
        size = request.headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > limits.max_body_bytes):
            raise _TooLarge(f"body of {size} bytes; the limit is {limits.max_body_bytes}")
        chunks, total = [], 0
        async for chunk in request.stream():
            total += len(chunk)
            if total > limits.max_body_bytes:
                raise _TooLarge(f"body above the limit of {limits.max_body_bytes} bytes")
            chunks.append(chunk)
        try:
            return b"".join(chunks).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("the body is not UTF-8 text") from None

    async def guarded(fn, *args):
        try:
            return await fn(*args)
        except _TooLarge as exc:
            return error(413, exc)
        except ProtocolError as exc:
            return error(400, exc)
        except UnknownUser as exc:
            return error(404, exc)
        except Busy as exc:
            return error(503, exc)
        except ValueError as exc:       # the server's own checks of a message
            return error(400, exc)

    @app.get("/health")
    async def health():
        return {"status": "ok", "instance": scheduler.instance}

    @app.get("/info")
    async def info():
        return scheduler.info()

    @app.get("/stats")
    async def stats():
        return scheduler.stats()

    @app.post("/table")
    async def table(request: fastapi.Request):
        async def go():
            text = await run_in_threadpool(scheduler.table, await read(request))
            return Response(text, media_type="application/json")
        return await guarded(go)

    @app.post("/upload/{user}")
    async def upload(user: str, request: fastapi.Request):
        async def go():
            await run_in_threadpool(scheduler.upload, user, await read(request))
            return JSONResponse({"user": user, "status": "accepted"}, status_code=202)
        return await guarded(go)

    @app.get("/result/{user}")
    async def result(user: str, wait: float = 0.0):
        async def go():
            state, payload = await run_in_threadpool(scheduler.result, user, wait)
            if state == "done":
                return Response(payload, media_type="application/json")
            if state == "pending":
                return JSONResponse({"user": user, "status": "pending"}, status_code=202)
            return JSONResponse({"error": payload, "instance": scheduler.instance}, status_code=500)
        return await guarded(go)

    return app


class _TooLarge(ValueError):
    pass


def serve(scheduler: RoundScheduler, host: str = "127.0.0.1", port: int = 8000, log_level: str = "warning") -> None:
    """Run the HTTP server until interrupted (needs the ``service`` extra)."""
    uvicorn = require("uvicorn", "service", "the LR-Geo HTTP service")
    try:
        uvicorn.run(create_app(scheduler), host=host, port=port, log_level=log_level)
    finally:
        scheduler.close()
