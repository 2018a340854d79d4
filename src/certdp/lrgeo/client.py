"""An LR-Geo user talking to a server over HTTP (:mod:`certdp.lrgeo.service`).

The client rebuilds the public world from the server's ``/info`` (or is given it), checks its
fingerprint, builds its LR set and its coefficients locally, uploads only those (never its
location), waits for its round, certifies the matrix it gets back on its LR pairs, and draws
its reported location from its own row, locally. Standard library HTTP only: a client needs
no extra.

Requests that fail for a passing reason (the server unreachable, 429, 502, 503, 504) are
retried with exponential backoff and jitter, honouring ``Retry-After``; a retried upload is
safe, since the server accepts the same upload twice as one. With a seed, the user's draws
come from :class:`certdp.randomness.CounterRNG`, which the browser page reproduces exactly, so
the page and this client report the same location for the same seed; without one, from the
operating system.
"""

from __future__ import annotations

import random
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from .._io import load_json
from ..datasets.city import World, fingerprint, load_world
from ..randomness import CounterRNG, RNGLike, as_generator
from .messages import ObfuscationResponse, ProtocolError, TableResponse
from .service import Info
from .user import LRGeoUser

RETRY_STATUS = (429, 502, 503, 504)


class ServiceError(RuntimeError):
    """The server refused a request or could not be reached; the message says why."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LRGeoClient:
    """One server; any number of :meth:`obfuscate` calls (one user each).

    Args:
        url: the server's base URL, e.g. ``http://127.0.0.1:8000``.
        world: the public world, when the client has it already (otherwise rebuilt from the
            server's spec, with ``data_dir`` for the Helsinki files).
        timeout: seconds for each HTTP request.
        retries: how many times a request is tried again after a passing failure;
            ``backoff``: the first pause, doubled at each retry (with jitter) up to 30 s.
        on_send: called with (path, body) before every request (tests inspect the bodies).
    """

    def __init__(self, url: str, *, world: World | None = None, data_dir: str | Path | None = None,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 0.5,
                 on_send: Callable[[str, bytes | None], None] | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.retries, self.backoff = retries, backoff
        self.data_dir = data_dir
        self.on_send = on_send
        self._world = world
        self._info: Info | None = None

    # ------------------------------------------------------------------ http
    def _call(self, method: str, path: str, body: bytes | None = None, token: str | None = None) -> tuple[int, bytes]:
        """(status, body) of a request that succeeded, after retries; a refusal is a ServiceError."""
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        for attempt in range(self.retries + 1):
            if self.on_send is not None:
                self.on_send(path, body)
            req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=self.timeout) as r:
                    return r.status, r.read()
            except urllib.error.HTTPError as exc:
                try:
                    why = load_json(exc.read(), "the error").get("error", exc.reason)
                except (ValueError, AttributeError):
                    why = exc.reason
                failure = ServiceError(f"{method} {path}: HTTP {exc.code}: {why}", exc.code)
                if exc.code not in RETRY_STATUS:
                    raise failure from None
                after = exc.headers.get("Retry-After")
            except (urllib.error.URLError, OSError) as exc:
                failure = ServiceError(f"{method} {path}: cannot reach {self.url} ({exc})")
                after = None
            if attempt == self.retries:
                raise failure
            pause = min(30.0, self.backoff * 2 ** attempt) * (0.5 + random.random() / 2)
            if after is not None and after.isdigit():
                pause = max(pause, min(float(after), 60.0))
            time.sleep(pause)
        raise AssertionError("unreachable")

    def info(self) -> Info:
        """The server's ``/info`` (instance, world, parameters, limits), fetched once."""
        if self._info is None:
            try:
                self._info = Info.model_validate_json(self._call("GET", "/info")[1])
            except ValidationError as exc:
                e = exc.errors()[0]
                raise ServiceError(f"the server's /info is not this client's protocol ({'.'.join(map(str, e['loc']))}: "
                                   f"{e['msg']})") from None
        return self._info

    def world(self) -> World:
        """The server's world, rebuilt here from its spec and checked against its fingerprint."""
        spec = self.info().world
        if self._world is None:
            if spec.dataset is None and spec.network is None:
                raise ServiceError("the server does not say how to rebuild its world; pass world= to the client")
            self._world = load_world(spec.dataset or "gridcity", *spec.grid, data_dir=self.data_dir,
                                     network=spec.network, bbox=spec.bbox)
        if fingerprint(self._world) != spec.fingerprint:
            raise ServiceError(f"this client's world ({self._world.name}) differs from the server's "
                               f"(fingerprint {fingerprint(self._world)} != {spec.fingerprint})")
        return self._world

    # ------------------------------------------------------------------ user
    def obfuscate(self, location: int | None = None, *, latlon: tuple[float, float] | None = None,
                  rng: RNGLike = None, wait: float = 300.0) -> dict[str, Any]:
        """Run one user at ``location`` (an index of the world's locations, or the location
        nearest to ``latlon``) through a round; returns the reported location and what the
        user measured. The location itself is never sent. ``rng``: an int seed (a
        :class:`~certdp.randomness.CounterRNG`, as the browser page draws), a generator, or
        None for the operating system's randomness."""
        if (location is None) == (latlon is None):
            raise ValueError("give exactly one of location and latlon")
        world = self.world()
        if latlon is not None:
            location = int(world.nearest(np.asarray(latlon, dtype=np.float64))[0])
        assert location is not None
        info = self.info()
        params = info.params.lrgeo()
        if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
            draws: RNGLike = CounterRNG(int(rng))
        else:
            draws = rng if isinstance(rng, CounterRNG) else as_generator(rng)
        t = {"start": time.perf_counter()}
        user = LRGeoUser(world, int(location), params, name="unassigned", rng=draws)
        got = _table_reply(self._call("POST", "/table", user.table_request().to_json().encode())[1])
        t["table"] = time.perf_counter()
        user.name, token, table = got
        request = user.obfuscation_request(table)
        self._call("POST", f"/upload/{user.name}", request.to_json().encode(), token)
        t["upload"] = time.perf_counter()
        deadline = time.monotonic() + wait
        step = min(10.0, info.limits.max_result_wait)
        while True:
            status, body = self._call("GET", f"/result/{user.name}?wait={step:g}", token=token)
            if status == 200:
                break
            if time.monotonic() > deadline:
                raise ServiceError(f"{user.name}: no result within {wait:g} s")
        t["result"] = time.perf_counter()
        try:
            resp = ObfuscationResponse.from_json(body)
        except ProtocolError as exc:
            raise ServiceError(f"{user.name}: the server's response is malformed ({exc})") from None
        mech, mixing = user.mechanism(resp)
        out = int(mech.sample(user.row_of_location, rng=None if rng is None else draws)[0])
        t["done"] = time.perf_counter()
        return {"output": out, "lat": float(world.latlon[out, 0]), "lon": float(world.latlon[out, 1]),
                "user": user.name, "status": resp.status, "verified": bool(mech.verification.passed),
                "upper_bound": resp.upper_bound, "lower_bound": resp.lower_bound,
                "certify_mixing": mixing, "lr_set_size": user.n,
                "seconds": {"table": t["table"] - t["start"], "upload": t["upload"] - t["table"],
                            "wait": t["result"] - t["upload"], "certify": t["done"] - t["result"],
                            "total": t["done"] - t["start"]}}


def _table_reply(body: bytes) -> tuple[str, str, TableResponse]:
    """The user name, token and table of the server's answer to ``/table``, read as certdp reads
    all JSON from outside; anything else is a ServiceError naming what is wrong."""
    try:
        got = load_json(body, "the server's /table answer")
        if not isinstance(got, dict) or not isinstance(got.get("user"), str) or not isinstance(got.get("token"), str):
            raise ValueError("the server's /table answer has no user name and token")
        return got["user"], got["token"], TableResponse.from_dict(got.get("table"))
    except ValueError as exc:                      # ProtocolError is a ValueError
        raise ServiceError(str(exc)) from None
