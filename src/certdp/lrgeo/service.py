"""LR-Geo as a service: the server's rounds behind HTTP (paper 003, Fig. 4, over a network).

:class:`RoundScheduler` is the server's state machine, with no web code: users ask for the
reference-table rows of their circle (and get an id and a secret token), upload the
coefficients of their LR-OMG problem, and are grouped into a *round* that closes after
``round_users`` uploads or ``round_wait`` seconds after its first upload, whichever comes
first; a worker thread solves CLR-Geo for each closed round, one after another, while the next
round fills. A user who leaves does not block a round (it closes on time without them), and
their state is dropped after ``result_ttl`` seconds.

Safe by construction, each rule with its reason:

- **Typed messages.** Every body is one of the protocol's pydantic models
  (:mod:`certdp.lrgeo.messages`): strict types, finite and bounded numbers, shapes checked.
  The same models are the service's OpenAPI schema.
- **What an honest user can send, checked against the public world.** An upload's rows are
  locations of the world inside the user's circle, so: at most as many rows as the circle has
  locations; no row with more neighbours within eta, or more locations within r_exp, than any
  location of the world has; no two rows at distance 0; distances within the circle's
  diameter; and every cost at most ``p_i`` times the server's own bound for its column (the
  longest travel to it from the circle, which Eq. 27's estimate never exceeds). A table
  request's centre is a location of the world and its radius at most the protocol's
  ``2 lr_radius + r_obf``.
- **A cost bound per user.** An upload's LP block may have at most ``user_rows`` rows
  (counted before anything is built), and is solved once alone at the exponential
  mechanism's point before it joins a round (every honest block is feasible there; see
  :func:`certdp.lrgeo.server.core_point`), within ``user_seconds``. A round's solve may take
  ``user_seconds`` per user in it; at that limit Benders returns its best feasible point,
  which the users certify as always.
- **A bad upload fails only its own user.** Should a round's solve fail all the same, each
  of its users is solved alone; those that fail alone are told so (HTTP 422 for them), and the
  round is solved again without them.
- **Ids and tokens.** The table request's answer carries the user's id and a secret token;
  upload and result need the token (``Authorization: Bearer``), compared in constant time and
  stored only as a digest. Whoever learns an id cannot act in that user's place.
- **Per-client limits.** Each client address has a request rate (a token bucket) and a number
  of users in flight; the server as a whole a number of users in flight. A client over its
  own limits gets 429 and nobody else is affected.
- **Requests before parsing.** A body is refused above ``max_body_mb`` (413), or when its JSON
  nests deeper than 32 levels (422), before any parser sees it. ``wait`` is a finite number of
  seconds up to ``max_result_wait``, and waiting holds no thread.

:func:`create_app` puts the scheduler behind FastAPI (the ``service`` extra):

==================  ====================================================================
``GET /``           the browser page: a person picks a location on the map; the page runs
                    the user's side of the protocol itself (``static/user.js``)
``GET /docs``       the OpenAPI documentation (Swagger UI served from this server)
``GET /health``     :class:`Health`
``GET /info``       :class:`Info`: the world's spec, the parameters (the CLI's names), the limits
``GET /world``      :class:`WorldMap`: the public world (locations, road graph) for the page
``POST /table``     a :class:`TableRequest` -> :class:`TableGrant` (id, token, table rows)
``POST /upload/U``  user U's :class:`ObfuscationRequest` -> 202 :class:`Accepted`
``GET /result/U``   U's :class:`ObfuscationResponse` (200), or 202 :class:`Pending`
``GET /stats``      :class:`Stats`: rounds solved, their sizes and seconds, users in flight
==================  ====================================================================

Errors are :class:`ErrorBody` with one line: 401/403 (no or wrong token), 404 (an id this
server instance never issued: it was restarted, or the result was already collected), 409 (a
second, different upload), 413 (a body above the limit), 422 (a message that is malformed,
inconsistent, too costly, or that could not be solved), 429 (this client is over its limits),
503 (too many users in flight), 500 (a round failed for a reason of the server's own; logged).
The service logs each access and each round through :mod:`logging` (``certdp.lrgeo.service``);
a client's error is one line, never a traceback.
"""

import asyncio
import hashlib
import hmac
import logging
import math
import secrets
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import scipy.sparse as sp
from pydantic import BaseModel, ConfigDict, Field

from .. import __version__
from .._io import load_json
from .._optional import require
from ..datasets.city import World, fingerprint, pairs_within
from ..lp.benders import BlockSolver
from ..lp.highs import INF
from ..space import EARTH_RADIUS_KM, haversine_km
from .messages import (
    NAME_PATTERN, LatLons, Nodes, ObfuscationRequest, ObfuscationResponse, ProtocolError, TableRequest,
    TableResponse,
)
from .memory import check_round, upload_bytes
from .server import METHODS, LRGeoServer, core_point
from .table import build_table
from .user import LRGeoParams

log = logging.getLogger("certdp.lrgeo.service")
STATIC = Path(__file__).parent / "static"


# ------------------------------------------------------------------------------ errors
class UnknownUser(LookupError):
    """An id this server instance did not issue (or whose result was already collected)."""


class Forbidden(PermissionError):
    """The token does not belong to the id."""


class Conflict(RuntimeError):
    """A second upload, different from the first, for the same user."""


class Busy(RuntimeError):
    """Too many users in flight on the server."""


class TooMany(RuntimeError):
    """This client is over its own limits (users in flight, request rate)."""

    def __init__(self, message: str, retry_after: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TooCostly(ProtocolError):
    """An upload whose LP block exceeds the per-user cost bound."""


# ------------------------------------------------------------------------------ models
class _Model(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True, extra="forbid")


class _ArrayModel(_Model):
    """A model with numpy array fields (:class:`certdp.lrgeo.messages.Array`)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="forbid", arbitrary_types_allowed=True)


class Limits(_Model):
    """The service's limits; the names are the ``certdp lrgeo serve`` options'."""

    round_users: int = Field(4, ge=1, le=10_000, description="a round closes after this many uploads")
    round_wait: float = Field(5.0, gt=0, le=86_400, description="... or this many seconds after its first upload")
    max_pending: int = Field(1000, ge=1, le=1_000_000, description="users in flight on the server")
    client_users: int = Field(16, ge=1, le=1_000_000, description="users in flight per client address")
    client_rate: float = Field(20.0, gt=0, le=1e6,
                               description="requests per second per client address (bursts of twice that, at least 10)")
    max_body_mb: float = Field(32.0, gt=0, le=4096, description="the largest request body, MiB")
    user_rows: int = Field(500_000, ge=1, le=100_000_000, description="LP rows one upload may add")
    user_seconds: float = Field(10.0, gt=0, le=86_400, description="solver seconds one upload may cost")
    result_ttl: float = Field(600.0, gt=0, le=86_400, description="seconds a user's state is kept")
    max_result_wait: float = Field(30.0, gt=0, le=600, description="the longest wait= of GET /result")

    @property
    def max_body_bytes(self) -> int:
        """The largest request body accepted, in bytes."""
        return int(self.max_body_mb * 1024 * 1024)


class Params(_Model):
    """LR-Geo's parameters, named as the ``certdp lrgeo`` options (km and 1/km)."""

    epsilon: float = Field(gt=0, le=1e6, description="--epsilon: Geo-Ind budget per km")
    eta: float | None = Field(gt=0, le=1e6, description="--eta: Geo-Ind neighbour threshold; null: every pair "
                                                        "(LR-Geo-F)")
    lr_radius: float = Field(gt=0, le=1e6, description="--lr-radius: the LR set's radius Gamma")
    r_obf: float = Field(gt=0, le=1e6, description="--r-obf: obfuscation range")
    r_exp: float = Field(ge=0, le=1e6, description="--r-exp: entries beyond it follow the exponential mechanism")
    table_cell: float = Field(gt=0, le=1e6, description="--table-cell: the reference table's cell")
    hide: float = Field(ge=0, le=1e6, description="--hide: the LR set's centre is drawn within this of the user")

    @classmethod
    def of(cls, P: LRGeoParams) -> "Params":
        """The parameters of ``P`` under the command line's names."""
        return cls(epsilon=P.epsilon, eta=P.gamma if math.isfinite(P.gamma) else None, lr_radius=P.Gamma,
                   r_obf=P.r_obf, r_exp=P.r_exp, table_cell=P.cell, hide=P.hide)

    def lrgeo(self) -> LRGeoParams:
        """These parameters as the protocol's :class:`LRGeoParams`."""
        return LRGeoParams(epsilon=self.epsilon, gamma=math.inf if self.eta is None else self.eta,
                           Gamma=self.lr_radius, r_obf=self.r_obf, r_exp=self.r_exp, cell=self.table_cell,
                           hide=self.hide)


class WorldSpec(_Model):
    """How a client rebuilds the world (``dataset`` or ``network``, ``bbox`` and ``grid``) and
    checks it."""

    dataset: str | None = None
    network: str | None = None
    bbox: tuple[float, float, float, float] | None = None
    grid: tuple[int, int]
    fingerprint: str
    K: int = Field(ge=1)
    name: str


class Info(_Model):
    """What ``/info`` answers: instance, version, world, parameters, circle radius, limits, method."""

    instance: str
    version: str
    world: WorldSpec
    params: Params
    circle_radius_km: float = Field(description="the radius of every table request: 2 lr_radius + r_obf")
    limits: Limits
    method: Literal["benders", "lp"]          # lrgeo.server.METHODS


class RoadGraph(_ArrayModel):
    """The road graph as compressed sparse rows (scipy's ``csr_matrix``): the edges of node i
    are ``indices[indptr[i]:indptr[i+1]]`` with lengths ``length_km`` (used in both directions)."""

    latlon: LatLons
    indptr: Nodes
    indices: Nodes
    length_km: list[float]


class WorldMap(_ArrayModel):
    """The public world, all a user's side of the protocol needs (the browser page reads it)."""

    name: str
    fingerprint: str
    shape: tuple[int, int]
    lat0: float = Field(description="the latitude of the local projection used for nearest-cell searches")
    earth_radius_km: float
    latlon: LatLons
    node: Nodes
    road: RoadGraph

    @classmethod
    def of(cls, world: World) -> "WorldMap":
        """The public map of ``world``: its cells, their road nodes and the road graph."""
        g = sp.csr_matrix(world.road.graph)
        return cls(name=world.name, fingerprint=fingerprint(world), shape=(world.shape[0], world.shape[1]),
                   lat0=world.lat0,
                   earth_radius_km=EARTH_RADIUS_KM, latlon=world.latlon, node=world.node.astype(np.int64),
                   road=RoadGraph(latlon=world.road.latlon, indptr=g.indptr.astype(np.int64),
                                  indices=g.indices.astype(np.int64), length_km=g.data.astype(float).tolist()))


class TableGrant(_ArrayModel):
    """The answer to a table request: the user's id and secret token, and its table rows."""

    user: str = Field(pattern=NAME_PATTERN)
    token: str = Field(description="send as 'Authorization: Bearer TOKEN' with the upload and the result")
    instance: str
    table: TableResponse


class Accepted(_Model):
    """The answer to an accepted upload: the user it was filed under."""

    user: str
    status: Literal["accepted"] = "accepted"


class Pending(_Model):
    """The answer while a user's round has not been solved yet."""

    user: str
    status: Literal["pending"] = "pending"


class Health(_Model):
    """The answer of ``/health``."""

    status: Literal["ok"] = "ok"
    instance: str


class ErrorBody(_Model):
    """The body of every refusal: one sentence saying what was wrong."""

    error: str
    instance: str


class RoundRecord(_Model):
    """One solved (or failed) round."""

    round: int
    users: int
    closed_by: Literal["size", "time"]
    wait_seconds: float = Field(description="from its first upload to its close")
    solve_seconds: float
    method: str
    status: str
    refused: int = Field(0, description="users whose uploads could not be solved, solved without")


class Stats(_Model):
    """What ``/stats`` answers: users in flight by state, rounds solved and the latest rounds."""

    instance: str
    table_seconds: float
    users_in_flight: dict[str, int]
    rounds_total: int
    rounds: list[RoundRecord] = Field(description="the latest rounds (at most 1000)")


# --------------------------------------------------------------------- the world's bounds
@dataclass(frozen=True)
class WorldBounds:
    """What an honest upload cannot exceed, from the public world: the most locations any
    location has within eta (itself included) and within r_exp."""

    neighbours: int
    free: int

    @classmethod
    def of(cls, world: World, P: LRGeoParams) -> "WorldBounds":
        """The bounds the service checks uploads against, from ``world`` and ``P``."""
        def most_within(r: float) -> int:
            if not math.isfinite(r):
                return world.K
            E, _ = pairs_within(world.latlon, r * (1 + 1e-9) + 1e-12, world.lat0)
            deg = np.bincount(E.reshape(-1), minlength=world.K) if len(E) else np.zeros(world.K, dtype=np.int64)
            return int(deg.max()) + 1

        return cls(neighbours=most_within(P.gamma), free=most_within(P.r_exp))


def lp_rows(req: ObfuscationRequest, P: LRGeoParams) -> int:
    """The rows of the user's LP block (:func:`certdp.lrgeo.server.build_block`), counted
    without building it: a unit row per LR row, per Geo-Ind pair (both directions) one row per
    column where both entries are free, and one upper-bound row per free entry with a Geo-Ind
    neighbour whose entry in that column is exponential."""
    D = req.D_NN
    n = D.shape[0]
    near = np.triu(D <= P.gamma, 1) & (P.epsilon * D < 700.0)
    i, j = np.nonzero(near)
    F = sp.csr_matrix(req.D_NO <= P.r_exp, dtype=np.int64)
    both = np.asarray((F @ F.T)[i, j]).ravel() if len(i) else np.zeros(0)
    A = sp.csr_matrix(near | near.T, dtype=np.int64)
    degree = np.asarray(A.sum(axis=1)).ravel()
    free_neighbours = (A @ F).tocsr()                 # per entry: neighbours whose entry is free too
    r, c = F.nonzero()
    bounded = int(np.sum(np.asarray(free_neighbours[r, c]).ravel() < degree[r]))
    return int(n + 2 * np.sum(both) + bounded)


# ----------------------------------------------------------------------------- scheduler
@dataclass
class _User:
    client: str
    token_digest: bytes
    state: str                       # 'table' | 'waiting' | 'solving' | 'done' | 'failed'
    since: float
    round: int | None = None
    upload_digest: bytes | None = None
    response: ObfuscationResponse | None = None
    error: str | None = None
    own_fault: bool = False          # failed because of its own upload


def _digest(text: str | bytes) -> bytes:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).digest()


class RoundScheduler:
    """The server's side of LR-Geo for many users and many rounds (see the module docstring).

    Args:
        world, params: the public world and the protocol's parameters.
        spec: how clients rebuild the world (``dataset``/``network`` and ``grid``).
        limits: :class:`Limits`.
        method, gap, time_limit: how each round is solved (``time_limit`` caps a round, on top
            of ``limits.user_seconds`` per user).
        max_memory: bytes the server may use (default: the memory available). Before the
            table is built, a round of ``round_users`` users with ``max_pending`` users' uploads
            held meanwhile is estimated (:func:`certdp.lrgeo.memory.check_round`); a setting
            above it is refused with the estimate and the most users in flight that fit.
    """

    def __init__(self, world: World, params: LRGeoParams, *, spec: dict[str, Any] | None = None,
                 limits: Limits | None = None, method: str = "benders", gap: float = 1e-4,
                 time_limit: float | None = None, max_memory: float | None = None) -> None:
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        self.world, self.params = world, params
        self.limits = limits or Limits()
        self.memory = check_round(world, params, self.limits.round_users, limit=max_memory,
                                  pending=self.limits.max_pending, what="pending")
        largest = upload_bytes(self.memory.counts)
        if largest > self.limits.max_body_bytes:
            raise ValueError(f"max_body_mb (--max-body-mb): an honest upload can take up to {largest / 2**20:.0f} MiB on this grid "
                             f"(an LR set of {self.memory.counts.lr} locations); allow at least that")
        self.method, self.gap, self.time_limit = method, gap, time_limit
        t0 = time.perf_counter()
        self.server = LRGeoServer(world, build_table(world, params.cell, params.table_band), params)
        self.bounds = WorldBounds.of(world, params)
        self.table_seconds = time.perf_counter() - t0
        self.instance = uuid.uuid4().hex[:12]
        spec = spec or {}
        bbox = spec.get("bbox")
        self.world_spec = WorldSpec(dataset=spec.get("dataset"), network=spec.get("network"),
                                    bbox=None if bbox is None else cast(tuple[float, float, float, float], tuple(float(v) for v in bbox)),
                                    grid=cast(tuple[int, int], tuple(int(v) for v in spec.get("grid", world.shape))),
                                    fingerprint=fingerprint(world), K=world.K, name=world.name)
        self._map_json: str | None = None
        self._cv = threading.Condition()
        self._users: dict[str, _User] = {}
        self._open: list[str] = []
        self._opened_at: float | None = None
        self._rounds: deque[tuple[int, list[str], str, float]] = deque()   # closed, not yet solved
        self._next_round = 0
        self.records: deque[RoundRecord] = deque(maxlen=1000)
        self.rounds_total = 0
        self._stop = False
        self.stopping = False            # set when the server begins to shut down: waits end now
        self._worker = threading.Thread(target=self._work, name="lrgeo-rounds", daemon=True)
        self._worker.start()

    # ------------------------------------------------------------ public state
    def info(self) -> Info:
        """What ``/info`` reports."""
        return Info(instance=self.instance, version=__version__, world=self.world_spec, params=Params.of(self.params),
                    circle_radius_km=self.params.circle_radius, limits=self.limits,
                    method=self.method)   # type: ignore[arg-type]

    def world_map_json(self) -> str:
        """The world's map as JSON, built once."""
        if self._map_json is None:
            self._map_json = WorldMap.of(self.world).model_dump_json()
        return self._map_json

    def stats(self) -> Stats:
        """Counts of users by state and of rounds, for ``/stats``."""
        with self._cv:
            states: dict[str, int] = {}
            for u in self._users.values():
                states[u.state] = states.get(u.state, 0) + 1
            return Stats(instance=self.instance, table_seconds=self.table_seconds, users_in_flight=states,
                         rounds_total=self.rounds_total, rounds=list(self.records))

    # ------------------------------------------------------------ messages
    def table(self, req: TableRequest, client: str = "local") -> TableGrant:
        """A user's first message: its circle. Returns its id, its token and the table rows."""
        P = self.params
        if req.radius_km > P.circle_radius * (1 + 1e-9):
            raise ProtocolError(f"radius_km {req.radius_km:g} is above what the protocol's users need "
                                f"(2 lr_radius + r_obf = {P.circle_radius:g} km)")
        nearest = int(self.world.nearest(req.center)[0])
        if float(haversine_km(req.center, self.world.latlon[nearest])) > 1e-6:
            raise ProtocolError("center must be a location of the world (the table request's centre is one of the "
                                "user's LR locations)")
        with self._cv:
            self._expire()
            self._admit_user(client)
        rows = self.server.table_rows(req.center, req.radius_km)
        token = secrets.token_urlsafe(32)
        with self._cv:
            self._admit_user(client)          # the limits again: others may have come in meanwhile
            uid = "u-" + uuid.uuid4().hex[:16]
            self.server.circles[uid] = (req.center.copy(), req.radius_km)
            self._users[uid] = _User(client, _digest(token), "table", time.monotonic())
        return TableGrant(user=uid, token=token, instance=self.instance, table=rows)

    def upload(self, uid: str, token: str, req: ObfuscationRequest) -> None:
        """A user's coefficients: checked, costed and probed, then it joins the open round. The
        same upload twice is accepted once (a client's retry); a different second one is a
        :class:`Conflict`."""
        if req.user != uid:
            raise ProtocolError(f"the request names user {req.user!r} but was sent for {uid!r}")
        digest = _digest(req.to_json())
        with self._cv:
            if self._uploaded(uid, token, digest):
                return
            circle = self.server.circles[uid]
        self._check_upload(uid, req, circle)
        with self._cv:         # checked again: the lock was let go while the upload was costed
            if self._uploaded(uid, token, digest):
                return
            u = self._auth(uid, token)
            self.server.submit(req)          # the server's own checks; raises before storing
            u.state, u.since, u.upload_digest = "waiting", time.monotonic(), digest
            if not self._open:
                self._opened_at = time.monotonic()
            self._open.append(uid)
            if len(self._open) >= self.limits.round_users:
                self._close("size")
            self._cv.notify_all()

    def poll(self, uid: str, token: str) -> tuple[str, ObfuscationResponse | str | None]:
        """('done', response) or ('failed', reason) once, then the user is forgotten;
        ('pending', None) while its round is open or solving."""
        with self._cv:
            u = self._auth(uid, token)
            if u.state not in ("done", "failed"):
                return "pending", None
            self._forget(uid)
            if u.state == "done":
                return "done", u.response
            return ("refused" if u.own_fault else "failed"), u.error

    def result(self, uid: str, token: str, wait: float = 0.0) -> tuple[str, ObfuscationResponse | str | None]:
        """:meth:`poll`, waiting up to ``wait`` seconds (at most ``max_result_wait``) in this
        thread (the HTTP layer waits without a thread)."""
        wait = _seconds("wait", wait, self.limits.max_result_wait)
        deadline = time.monotonic() + wait
        with self._cv:
            while True:
                state, payload = self.poll(uid, token)
                left = deadline - time.monotonic()
                if state != "pending" or left <= 0:
                    return state, payload
                self._cv.wait(timeout=left)

    def close(self) -> None:
        """Stop the scheduler's round thread."""
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._worker.join(timeout=2)
        if self._worker.is_alive():
            log.warning("a round's solve was still running at shutdown; its users get no result")

    def __enter__(self) -> "RoundScheduler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ checks
    def _admit_user(self, client: str) -> None:
        if len(self._users) >= self.limits.max_pending:
            raise Busy(f"{len(self._users)} users in flight (limit {self.limits.max_pending}); retry later")
        mine = sum(u.client == client for u in self._users.values())
        if mine >= self.limits.client_users:
            raise TooMany(f"this client has {mine} users in flight (limit {self.limits.client_users}); finish or "
                          "let them expire first", retry_after=min(self.limits.result_ttl, 30.0))

    def _uploaded(self, uid: str, token: str, digest: bytes) -> bool:
        """Under the lock: True when this very upload is already in (a client's retry), a
        :class:`Conflict` when another one is, False when the user may upload."""
        u = self._auth(uid, token)
        if u.state == "table":
            return False
        if u.upload_digest == digest:
            return True
        raise Conflict(f"{uid}: already uploaded (state {u.state})")

    def _auth(self, uid: str, token: str) -> _User:
        u = self._users.get(uid)
        if u is None:
            raise UnknownUser(f"unknown user {uid!r} for server instance {self.instance}: the server was restarted, "
                              "or the result was already collected; start again with a table request")
        if not hmac.compare_digest(_digest(token), u.token_digest):
            raise Forbidden(f"the token does not belong to user {uid!r}")
        return u

    def _check_upload(self, uid: str, req: ObfuscationRequest, circle: tuple[np.ndarray, float]) -> None:
        """What an honest upload satisfies (module docstring), then its cost: LP rows, and one
        solve of its block alone at the exponential mechanism's point within user_seconds."""
        P, W, B, L = self.params, self.world, self.bounds, self.limits
        center, radius = circle
        n = req.n
        if req.columns.max() >= W.K:
            raise ProtocolError(f"columns must index locations 0..{W.K - 1}")
        inside = haversine_km(center[None, :], W.latlon) <= radius * (1 + 1e-9)
        if n > int(inside.sum()):
            raise ProtocolError(f"{n} LR rows, but the requested circle holds {int(inside.sum())} locations")
        span = 2 * radius * (1 + 1e-9)
        if req.D_NN.max() > span or req.D_NO.max() > span:
            raise ProtocolError(f"a distance is above the circle's diameter ({2 * radius:g} km)")
        if np.any(req.D_NN[~np.eye(n, dtype=bool)] <= 0):
            raise ProtocolError("two LR rows at distance 0: the LR set holds distinct locations")
        near = (req.D_NN <= P.gamma * (1 + 1e-9)).sum(axis=1).max()
        if near > B.neighbours:
            raise ProtocolError(f"an LR row has {near} rows within eta; no location of this world has more than "
                                f"{B.neighbours} locations within eta")
        free = (req.D_NO <= P.r_exp * (1 + 1e-9)).sum(axis=1).max()
        if free > B.free:
            raise ProtocolError(f"an LR row has {free} columns within r_exp; no location of this world has more than "
                                f"{B.free} locations within r_exp")
        cout = W.travel[inside].max(axis=0)[req.columns]
        if np.any(np.nan_to_num(req.C_NO) > req.p[:, None] * cout[None, :] * (1 + 1e-9) + 1e-12):
            raise ProtocolError("a cost is above p_i times the longest travel from the circle to its column, which "
                                "no estimate of Eq. 27 exceeds")
        rows = lp_rows(req, P)
        if rows > L.user_rows:
            raise TooCostly(f"the upload's LP block has {rows} rows; the limit per user is {L.user_rows}")
        srv = LRGeoServer(W, self.server.table, P)
        srv.circles, srv.requests = {uid: circle}, {uid: req}
        _, blocks, H, _ = srv.build()
        core = core_point(blocks, P, H)
        spec = blocks[0].spec
        t0 = time.perf_counter()
        r = BlockSolver(0, spec).solve(core[spec.coupling], -INF, time_limit=L.user_seconds)
        if r.status == "time_limit":
            raise TooCostly(f"the upload's LP block takes more than {L.user_seconds:g} s of solver time alone")
        if r.status not in ("optimal", "elastic"):
            raise ProtocolError(f"the upload's LP block is {r.status} at the exponential mechanism's point, which "
                                "every consistent upload admits: its distances are not those of locations")
        log.debug("%s: %d LR rows, %d columns, %d LP rows, probe %.3f s", uid, n, len(req.columns), rows,
                  time.perf_counter() - t0)

    # ------------------------------------------------------------ rounds
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

    def _next(self) -> tuple[int, list[str], str, float, LRGeoServer] | None:
        """The next closed round and a snapshot of its messages (None: stop). Uploads for the
        next round go on meanwhile."""
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
                    self._expire()
            if self._stop:
                return None
            rid, names, why, waited = self._rounds.popleft()
            srv = LRGeoServer(self.world, self.server.table, self.params)
            srv.circles = {n: self.server.circles[n] for n in names}
            srv.requests = {n: self.server.requests[n] for n in names}
        return rid, names, why, waited, srv

    def _solve(self, srv: LRGeoServer, names: list[str]) -> tuple[dict[str, ObfuscationResponse], str, str]:
        sub = LRGeoServer(self.world, self.server.table, self.params)
        sub.circles = {n: srv.circles[n] for n in names}
        sub.requests = {n: srv.requests[n] for n in names}
        budget = len(names) * self.limits.user_seconds
        limit = budget if self.time_limit is None else min(self.time_limit, budget)
        resp, info = sub.solve(method=self.method, gap=self.gap, time_limit=limit)
        return resp, info.method, info.status

    def _solve_round(self, srv: LRGeoServer, names: list[str]) -> tuple[dict[str, tuple[str, Any]], str, str, int]:
        """Every user's outcome: the joint solve; should it fail, each user alone, and the
        joint solve again without those that fail alone."""
        try:
            resp, method, status = self._solve(srv, names)
            return {n: ("done", r) for n, r in resp.items()}, method, status, 0
        except Exception as exc:
            joint = f"{type(exc).__name__}: {exc}"
        log.warning("a round of %d users failed to solve (%s); solving each alone to find the cause", len(names),
                    joint)
        out: dict[str, tuple[str, Any]] = {}
        for n in names:
            try:
                self._solve(srv, [n])
            except Exception as exc:
                out[n] = ("refused", f"your upload could not be solved ({type(exc).__name__}: {exc})")
        rest = [n for n in names if n not in out]
        if not out:
            log.error("the round failed with every user solvable alone: %s", joint)
            return {n: ("failed", f"the round's solve failed: {joint}") for n in names}, self.method, "failed", 0
        if not rest:
            return out, self.method, "refused", len(out)
        try:
            resp, method, status = self._solve(srv, rest)
            out.update({n: ("done", r) for n, r in resp.items()})
        except Exception as exc:
            log.error("the round failed again without its %d unsolvable users: %s: %s", len(out), type(exc).__name__,
                      exc)
            out.update({n: ("failed", f"the round's solve failed: {type(exc).__name__}: {exc}") for n in rest})
            method, status = self.method, "failed"
        return out, method, status, len(names) - len(rest)

    def _work(self) -> None:
        while True:
            nxt = self._next()
            if nxt is None:
                return
            rid, names, why, waited, srv = nxt
            t0 = time.perf_counter()
            out, method, status, refused = self._solve_round(srv, names)
            rec = RoundRecord(round=rid, users=len(names), closed_by=why, wait_seconds=waited,  # type: ignore[arg-type]
                              solve_seconds=time.perf_counter() - t0, method=method, status=status, refused=refused)
            with self._cv:
                for n, (state, payload) in out.items():
                    u = self._users.get(n)
                    if u is None:
                        continue
                    u.state, u.since = ("failed" if state == "refused" else state), time.monotonic()
                    u.own_fault = state == "refused"
                    if state == "done":
                        u.response = payload
                    else:
                        u.error = payload
                self.records.append(rec)
                self.rounds_total += 1
                self._cv.notify_all()
            log.info("round %d: %d users (closed by %s after %.2f s), %s %s in %.2f s%s", rid, len(names), why, waited,
                     method, status, rec.solve_seconds, f", {refused} refused" if refused else "")


def _seconds(name: str, v: Any, most: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= most:
        raise ValueError(f"{name} must be a number of seconds in [0, {most:g}], got {v!r}")
    return float(v)


# ---------------------------------------------------------------------------------- HTTP
_STATUS: tuple[tuple[type[Exception], int], ...] = (
    (TooMany, 429), (ProtocolError, 422), (UnknownUser, 404), (Forbidden, 403), (Conflict, 409), (Busy, 503))
_CSP_PAGE = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
             "frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
_CSP_DOCS = ("default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
             "img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'")


class _Unauthorized(Exception):
    """No bearer token with a request that needs one."""


class _RateLimiter:
    """A token bucket per client address: ``rate`` requests per second, bursts of
    ``max(10, 2 rate)``."""

    def __init__(self, rate: float) -> None:
        self.rate, self.burst = rate, max(10.0, 2.0 * rate)
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, client: str) -> float:
        """0 when the request may go on, else the seconds until it could."""
        now = time.monotonic()
        with self._lock:
            if len(self._buckets) > 10_000:   # forget the clients whose buckets are full again
                idle = self.burst / self.rate
                self._buckets = {c: b for c, b in self._buckets.items() if now - b[1] < idle}
            tokens, last = self._buckets.get(client, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate)
            if tokens >= 1.0:
                self._buckets[client] = (tokens - 1.0, now)
                return 0.0
            self._buckets[client] = (tokens, now)
            return (1.0 - tokens) / self.rate


def _error_bytes(message: str, instance: str) -> bytes:
    return ErrorBody(error=message, instance=instance).model_dump_json().encode()


class _Guard:
    """ASGI middleware in front of every route: the per-client request rate, the body's size
    and JSON depth (before any parser), security headers, and one access line per request."""

    def __init__(self, app: Any, scheduler: RoundScheduler) -> None:
        self.app, self.scheduler = app, scheduler
        self.limiter = _RateLimiter(scheduler.limits.client_rate)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        client = (scope.get("client") or ("-", 0))[0]
        path = scope.get("path", "")
        seen = {"status": 500, "bytes": 0}
        csp = _CSP_DOCS if path.startswith("/docs") else _CSP_PAGE

        async def send_seen(msg: dict) -> None:
            if msg["type"] == "http.response.start":
                seen["status"] = msg["status"]
                msg = {**msg, "headers": [*msg.get("headers", []), (b"content-security-policy", csp.encode()),
                                          (b"x-content-type-options", b"nosniff"),
                                          (b"referrer-policy", b"no-referrer")]}
            elif msg["type"] == "http.response.body":
                seen["bytes"] += len(msg.get("body", b""))
            await send(msg)

        try:
            await self._guarded(scope, receive, send_seen, client)
        finally:
            q = scope.get("query_string", b"").decode("latin-1")
            log.info('%s "%s %s%s" %d %d B %.3f s', client, scope.get("method", "-"), path, f"?{q}" if q else "",
                     seen["status"], seen["bytes"], time.perf_counter() - t0)

    async def _guarded(self, scope: dict, receive: Any, send: Any, client: str) -> None:
        wait = self.limiter.take(client)
        if wait > 0:
            await self._error(send, 429, f"this client is over {self.scheduler.limits.client_rate:g} requests per "
                                         "second; retry later", [(b"retry-after", str(math.ceil(wait)).encode())])
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        limit = self.scheduler.limits.max_body_bytes
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._error(send, 413, f"a body of {declared.decode('latin-1')} bytes; the limit is {limit}")
            return
        chunks, total = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                return
            chunk = msg.get("body", b"")
            total += len(chunk)
            if total > limit:
                await self._error(send, 413, f"a body above the limit of {limit} bytes")
                return
            chunks.append(chunk)
            if not msg.get("more_body", False):
                break
        body = b"".join(chunks)
        # read as certdp reads all JSON from outside (UTF-8, depth before parsing, no key twice,
        # no NaN): FastAPI's own parse keeps the last of two equal keys. Off the event loop, so a
        # large upload does not hold the other requests.
        from starlette.concurrency import run_in_threadpool

        try:
            await run_in_threadpool(load_json, body, "the body")
        except ValueError as exc:
            await self._error(send, 422, str(exc))
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _error(self, send: Any, code: int, message: str, headers: list | None = None) -> None:
        body = _error_bytes(message, self.scheduler.instance)
        await send({"type": "http.response.start", "status": code,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                *(headers or [])]})
        await send({"type": "http.response.body", "body": body})


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    what = {401: "no bearer token", 403: "the token is not this user's", 404: "an id this instance never issued",
            409: "a second, different upload", 413: "a body above the limit", 422: "a message that is malformed, "
            "inconsistent or too costly", 429: "this client is over its limits", 500: "the round failed on the server",
            503: "too many users in flight, or the server is shutting down"}
    return {c: {"model": ErrorBody, "description": what[c]} for c in codes}


def create_app(scheduler: RoundScheduler) -> Any:
    """The FastAPI application around ``scheduler`` (needs the ``service`` extra); its
    ``/openapi.json`` is the protocol's schema and ``/docs`` shows it, from this server alone."""
    require("fastapi", "service", "the LR-Geo HTTP service")
    offline = require("fastapi_offline", "service", "the LR-Geo service's documentation pages")
    from fastapi import Depends, Query, Request
    from fastapi import Path as PathParam
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse, JSONResponse, Response
    from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
    from fastapi.staticfiles import StaticFiles
    from starlette.exceptions import HTTPException

    inst = scheduler.instance
    app = offline.FastAPIOffline(
        title="certdp LR-Geo server", version=__version__, redoc_url=None, static_url="/docs-static",
        description="Paper 003's protocol over HTTP: a user's table request, upload and result. The browser page "
                    "at / runs the user's side itself; see docs/lrgeo.md.",
        swagger_ui_parameters={"validatorUrl": None})
    bearer = HTTPBearer(auto_error=False, description="the token that POST /table returned with the user's id")

    def json_error(code: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse(ErrorBody(error=message, instance=inst).model_dump(), status_code=code, headers=headers)

    def handler(code: int):
        def handle(request: Request, exc: Exception) -> JSONResponse:
            retry = {"Retry-After": str(math.ceil(exc.retry_after))} if isinstance(exc, TooMany) else None
            return json_error(code, str(exc), retry)
        return handle

    for exc_type, code in _STATUS:
        app.add_exception_handler(exc_type, handler(code))
    app.add_exception_handler(_Unauthorized, lambda request, exc: json_error(
        401, "this request needs 'Authorization: Bearer TOKEN' with the token from POST /table",
        {"WWW-Authenticate": "Bearer"}))
    app.add_exception_handler(RequestValidationError, lambda request, exc: json_error(422, _validation(exc)))
    app.add_exception_handler(HTTPException, lambda request, exc: json_error(exc.status_code, str(exc.detail),
                                                                             getattr(exc, "headers", None)))
    app.add_middleware(_Guard, scheduler=scheduler)

    def token(creds: HTTPAuthorizationCredentials | None = Depends(bearer)) -> str:
        if creds is None:
            raise _Unauthorized()
        return creds.credentials

    def client(request: Request) -> str:
        return request.client.host if request.client else "-"

    def user_path() -> Any:
        return PathParam(pattern=NAME_PATTERN, description="the user's id, from POST /table")

    def json_response(model: BaseModel, code: int = 200) -> Response:
        return Response(model.model_dump_json(), status_code=code, media_type="application/json")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/health", response_model=Health, responses=_errors(429))
    async def health() -> Health:
        return Health(instance=inst)

    @app.get("/info", response_model=Info, responses=_errors(429))
    async def info() -> Info:
        return scheduler.info()

    @app.get("/world", response_model=WorldMap, responses=_errors(429))
    async def world() -> Response:
        return Response(scheduler.world_map_json(), media_type="application/json")

    @app.get("/stats", response_model=Stats, responses=_errors(429))
    async def stats() -> Stats:
        return scheduler.stats()

    @app.post("/table", response_model=TableGrant, responses=_errors(413, 422, 429, 503))
    def table(req: TableRequest, request: Request) -> Response:
        return json_response(scheduler.table(req, client(request)))

    @app.post("/upload/{user}", status_code=202, response_model=Accepted,
              responses=_errors(401, 403, 404, 409, 413, 422, 429))
    def upload(req: ObfuscationRequest, user: str = user_path(), key: str = Depends(token)) -> Response:
        scheduler.upload(user, key, req)
        return json_response(Accepted(user=user), 202)

    @app.get("/result/{user}", response_model=ObfuscationResponse,
             responses={202: {"model": Pending, "description": "the user's round is open or solving"},
                        **_errors(401, 403, 404, 422, 429, 500, 503)})
    async def result(user: str = user_path(), key: str = Depends(token),
                     wait: float = Query(0.0, ge=0, le=scheduler.limits.max_result_wait, allow_inf_nan=False,
                                         description="seconds to wait for the round")) -> Response:
        deadline = time.monotonic() + wait
        pause = 0.02
        while True:
            state, payload = scheduler.poll(user, key)
            if state == "done":
                return json_response(payload)   # type: ignore[arg-type]
            if state in ("refused", "failed"):
                return json_error(422 if state == "refused" else 500, str(payload))
            if scheduler.stopping:
                return json_error(503, "the server is shutting down; its users' state ends with it")
            left = deadline - time.monotonic()
            if left <= 0:
                return json_response(Pending(user=user), 202)
            await asyncio.sleep(min(pause, left))
            pause = min(0.25, 2 * pause)

    return app


def _validation(exc: Any) -> str:
    """One line from FastAPI's validation error: where and what, for the first three problems."""
    errs = exc.errors()
    parts = [f"{'.'.join(str(p) for p in e.get('loc', ())) or 'request'}: "
             f"{str(e.get('msg', 'invalid')).removeprefix('Value error, ')}" for e in errs[:3]]
    return "; ".join(parts) + (f" (and {len(errs) - 3} more)" if len(errs) > 3 else "")


def serve(scheduler: RoundScheduler, host: str = "127.0.0.1", port: int = 8000) -> str | None:
    """Run the HTTP server until SIGINT or SIGTERM (needs the ``service`` extra): requests in
    progress get up to 3 s to finish, then the scheduler stops. Returns the name of the signal
    that stopped it."""
    uvicorn = require("uvicorn", "service", "the LR-Geo HTTP service")
    import contextlib
    import signal

    class Server(uvicorn.Server):
        """uvicorn's server, stopping on SIGINT and SIGTERM without raising the signal again
        afterwards (uvicorn does, which would turn a clean stop into an interrupt)."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            scheduler.stopping = True      # long polls answer at once instead of holding the shutdown
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self):
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            before = {s: signal.signal(s, self.handle_exit) for s in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for s, h in before.items():
                    signal.signal(s, h)

    config = uvicorn.Config(create_app(scheduler), host=host, port=port, access_log=False, log_config=None,
                            timeout_graceful_shutdown=3, server_header=False)
    server = Server(config)
    try:
        server.run()
    finally:
        scheduler.close()
    caught = getattr(server, "_captured_signals", [])
    return signal.Signals(caught[0]).name if caught else None
