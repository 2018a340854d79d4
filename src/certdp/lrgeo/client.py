"""An LR-Geo user talking to a server over HTTP (:mod:`certdp.lrgeo.service`).

The client rebuilds the public world from the server's ``/info`` (or is given it), checks its
fingerprint, builds its LR set and its coefficients locally, uploads only those (never its
location), waits for its round, certifies the matrix it gets back on its LR pairs, and draws
its reported location from its own row, locally. Standard library HTTP only: a client needs
no extra.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..datasets.city import World, fingerprint, load_world
from ..randomness import RNGLike, as_generator
from .messages import ObfuscationResponse, ProtocolError, TableResponse
from .user import LRGeoParams, LRGeoUser


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
        timeout: seconds for each HTTP request; ``wait``: seconds to wait for a round.
        on_send: called with (path, body) before every request (tests inspect the bodies).
    """

    def __init__(self, url: str, *, world: World | None = None, data_dir: str | Path | None = None,
                 timeout: float = 60.0, on_send: Callable[[str, bytes | None], None] | None = None) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.data_dir = data_dir
        self.on_send = on_send
        self._world = world
        self._info: dict[str, Any] | None = None

    # ------------------------------------------------------------------ http
    def _call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        if self.on_send is not None:
            self.on_send(path, body)
        req = urllib.request.Request(self.url + path, data=body, method=method,
                                     headers={"Content-Type": "application/json"} if body is not None else {})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return r.status, json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            try:
                why = json.loads(exc.read().decode("utf-8")).get("error", exc.reason)
            except (ValueError, AttributeError):
                why = exc.reason
            raise ServiceError(f"{method} {path}: HTTP {exc.code}: {why}", exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            raise ServiceError(f"{method} {path}: cannot reach {self.url} ({exc})") from None

    def info(self) -> dict[str, Any]:
        if self._info is None:
            self._info = self._call("GET", "/info")[1]
        return self._info

    def world(self) -> World:
        """The server's world, rebuilt here from its spec and checked against its fingerprint."""
        info = self.info()["world"]
        if self._world is None:
            spec = info
            if spec.get("dataset") is None and spec.get("network") is None:
                raise ServiceError("the server does not say how to rebuild its world; pass world= to the client")
            self._world = load_world(spec.get("dataset") or "gridcity", *spec["grid"],
                                     data_dir=self.data_dir, network=spec.get("network"))
        if fingerprint(self._world) != info["fingerprint"]:
            raise ServiceError(f"this client's world ({self._world.name}) differs from the server's "
                               f"(fingerprint {fingerprint(self._world)} != {info['fingerprint']})")
        return self._world

    # ------------------------------------------------------------------ user
    def obfuscate(self, location: int | None = None, *, latlon: tuple[float, float] | None = None,
                  rng: RNGLike = None, wait: float = 300.0) -> dict[str, Any]:
        """Run one user at ``location`` (an index of the world's locations, or the location
        nearest to ``latlon``) through a round; returns the reported location and what the
        user measured. The location itself is never sent."""
        if (location is None) == (latlon is None):
            raise ValueError("give exactly one of location and latlon")
        world = self.world()
        if latlon is not None:
            location = int(world.nearest(np.asarray(latlon, dtype=np.float64))[0])
        assert location is not None
        params = LRGeoParams(**self.info()["params"])
        gen = as_generator(rng)
        t = {"start": time.perf_counter()}
        user = LRGeoUser(world, int(location), params, name="unassigned", rng=gen)
        status, got = self._call("POST", "/table", user.table_request().to_json().encode())
        t["table"] = time.perf_counter()
        user.name = got["user"]
        table = TableResponse.from_dict(got["table"])
        request = user.obfuscation_request(table)
        self._call("POST", f"/upload/{user.name}", request.to_json().encode())
        t["upload"] = time.perf_counter()
        deadline = time.monotonic() + wait
        while True:
            status, body = self._call("GET", f"/result/{user.name}?wait={min(10.0, max(0.0, wait)):g}")
            if status == 200:
                break
            if time.monotonic() > deadline:
                raise ServiceError(f"{user.name}: no result within {wait:g} s")
        t["result"] = time.perf_counter()
        try:
            resp = ObfuscationResponse.from_dict(body)
        except ProtocolError as exc:
            raise ServiceError(f"{user.name}: the server's response is malformed ({exc})") from None
        mech, mixing = user.mechanism(resp)
        out = int(mech.sample(user.row_of_location, rng=gen)[0])
        t["done"] = time.perf_counter()
        return {"output": out, "lat": float(world.latlon[out, 0]), "lon": float(world.latlon[out, 1]),
                "user": user.name, "status": resp.status, "verified": bool(mech.verification.passed),
                "certify_mixing": mixing, "lr_set_size": user.n,
                "seconds": {"table": t["table"] - t["start"], "upload": t["upload"] - t["table"],
                            "wait": t["result"] - t["upload"], "certify": t["done"] - t["result"],
                            "total": t["done"] - t["start"]}}
