"""LR-Geo over HTTP: the round scheduler in process, then real server processes with several
concurrent user processes, hostile clients, and a fuzzer that reads the service's own OpenAPI
schema."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from certdp.datasets.city import grid_city
from certdp.lp.outcome import relative_gap
from certdp.lrgeo.client import LRGeoClient, ServiceError
from certdp.lrgeo.messages import ObfuscationRequest, ProtocolError, TableRequest, TableResponse
from certdp.lrgeo.server import build_block, column_scale
from certdp.lrgeo.service import (
    Busy, Forbidden, Limits, RoundScheduler, TooCostly, TooMany, UnknownUser, WorldBounds, lp_rows,
)
from certdp.lrgeo.user import LRGeoParams, LRGeoUser


@pytest.fixture(scope="module")
def world():
    return grid_city(6, 6)


@pytest.fixture(scope="module")
def params(world):
    return LRGeoParams.scaled(world.cell, eps_cell=1.0)


def _grant(sched, world, params, location, seed, client="local"):
    """A user's table request, in process: (user, its token, its upload)."""
    u = LRGeoUser(world, location, params, name="unassigned", rng=seed)
    grant = sched.table(u.table_request(), client)
    u.name = grant.user
    return u, grant.token, u.obfuscation_request(grant.table)


def _enrol(sched, world, params, location, seed, client="local"):
    u, token, req = _grant(sched, world, params, location, seed, client)
    sched.upload(u.name, token, req)
    return u, token


def test_a_round_closes_on_size_and_every_user_gets_a_certified_matrix(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=3, round_wait=30.0)) as sched:
        users = [_enrol(sched, world, params, loc, s) for s, loc in enumerate((3, 14, 30))]
        for u, token in users:
            state, resp = sched.result(u.name, token, wait=20.0)
            assert state == "done"
            mech, _ = u.mechanism(resp)
            assert mech.verification.passed
            with pytest.raises(UnknownUser):   # collected once, then forgotten
                sched.result(u.name, token)
        stats = sched.stats()
        assert len(stats.rounds) == 1 and stats.rounds[0].users == 3 and stats.rounds[0].closed_by == "size"
        assert not sched.server.requests and not sched.server.circles


def test_a_round_closes_on_time_without_the_users_who_left(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=4, round_wait=0.5)) as sched:
        a = _enrol(sched, world, params, 7, 1)
        b = _enrol(sched, world, params, 20, 2)
        _grant(sched, world, params, 25, 3)      # asks for its table, never uploads
        for u, token in (a, b):
            assert sched.result(u.name, token, wait=30.0)[0] == "done"
        # what the scheduler reports: the round of two (of four) closed on its timer, and not
        # before the wait had passed since its first upload
        (rnd,) = sched.stats().rounds
        assert rnd.closed_by == "time" and rnd.users == 2 and rnd.wait_seconds >= 0.5


def test_only_the_token_holder_acts_for_a_user(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=2, round_wait=30.0)) as sched:
        a, ta = _enrol(sched, world, params, 8, 4)
        b, tb, req_b = _grant(sched, world, params, 27, 5)
        with pytest.raises(Forbidden):
            sched.upload(b.name, ta, req_b)            # a's token, b's id
        with pytest.raises(Forbidden):
            sched.result(a.name, tb)
        with pytest.raises(UnknownUser, match="restarted"):
            sched.result("u-0000", ta)
        sched.upload(b.name, tb, req_b)
        sched.upload(b.name, tb, req_b)                # a retried upload is accepted once
        assert sched.result(a.name, ta, wait=20.0)[0] == "done" and sched.result(b.name, tb, wait=20.0)[0] == "done"
        with pytest.raises(ValueError, match="wait"):
            sched.result(a.name, ta, wait=float("nan"))


def test_a_bad_message_is_refused_and_changes_nothing(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=2, round_wait=30.0)) as sched:
        a, _ = _enrol(sched, world, params, 8, 4)
        before = dict(sched.server.requests)
        u, token, req = _grant(sched, world, params, 27, 5)
        body = json.loads(req.to_json())
        for field, value in (("D_NO", [[float("nan")]]), ("p", [1.0]), ("columns", [-1, 0]),
                             ("D_NN", [[0.0, 1.0], [2.0, 0.0]]), ("columns", [1.0, 2.0]), ("p", ["0.5", "0.5"]),
                             ("p", [True, False])):
            with pytest.raises(ProtocolError):
                sched.upload(u.name, token, ObfuscationRequest.from_json(json.dumps({**body, field: value})))
        with pytest.raises(ProtocolError):
            sched.upload(u.name, token, ObfuscationRequest.from_dict({**body, "user": a.name}))   # another's id
        with pytest.raises(ProtocolError, match="nests"):
            TableRequest.from_json("[" * 40 + "]" * 40)
        for field in body:              # a key twice: one value for another reader, another for the server
            text = "{" + json.dumps(field) + ": " + json.dumps(body[field]) + ", " + req.to_json()[1:]
            with pytest.raises(ProtocolError, match="twice"):
                sched.upload(u.name, token, ObfuscationRequest.from_json(text))
        with pytest.raises(ProtocolError, match="not a JSON number"):
            TableRequest.from_json('{"type": "TableRequest", "user": "a", "center": [NaN, 0], "radius_km": 1}')
        assert sched.server.requests == before and sched.stats().users_in_flight == {"waiting": 1, "table": 1}
        sched.upload(u.name, token, req)                                       # the real one closes the round


def test_users_in_flight_are_bounded_per_server_and_per_client(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=10, round_wait=30.0, max_pending=3,
                                                     client_users=2)) as sched:
        u = LRGeoUser(world, 5, params, rng=6)
        sched.table(u.table_request(), "greedy")
        sched.table(u.table_request(), "greedy")
        with pytest.raises(TooMany):
            sched.table(u.table_request(), "greedy")
        sched.table(u.table_request(), "someone else")      # another client is still served
        with pytest.raises(Busy):
            sched.table(u.table_request(), "a third")


def test_table_requests_stay_within_what_users_need(world, params):
    with RoundScheduler(world, params) as sched:
        u = LRGeoUser(world, 5, params, rng=6)
        req = u.table_request()
        with pytest.raises(ProtocolError, match="radius"):
            sched.table(TableRequest(user="x", center=req.center, radius_km=req.radius_km * 2))
        with pytest.raises(ProtocolError, match="location of the world"):
            sched.table(TableRequest(user="x", center=req.center + 0.01, radius_km=req.radius_km))


def test_the_row_bound_is_the_lp_blocks_own(world, params):
    """lp_rows counts, without building it, the rows build_block builds."""
    with RoundScheduler(world, params) as sched:
        for loc, seed in ((0, 1), (14, 2), (35, 3)):
            _, _, req = _grant(sched, world, params, loc, seed)
            block = build_block(req, params, world.K, np.zeros(world.K), column_scale([req], params, world.K))
            assert lp_rows(req, params) == block.spec.W.shape[0]


def _flood(body: dict, n: int) -> dict:
    """An upload of n rows all at distance 0 from each other, every entry free: the LP grows as
    n squared times the columns, from a body of a few hundred kB."""
    o = len(body["columns"])
    return {**body, "D_NN": [[0.0] * n for _ in range(n)], "D_NO": [[0.0] * o for _ in range(n)],
            "C_NO": [[0.001] * o for _ in range(n)], "p": [1.0 / n] * n}


def test_an_upload_that_would_hold_the_solver_is_refused_before_it_is_solved(world, params):
    bounds = WorldBounds.of(world, params)
    with RoundScheduler(world, params, limits=Limits(round_users=2, round_wait=0.2, user_rows=5_000)) as sched:
        honest, t_h = _enrol(sched, world, params, 14, 1)
        u, token, req = _grant(sched, world, params, 20, 2)
        body = json.loads(req.to_json())
        flood = ObfuscationRequest.from_dict(_flood(body, 12))
        with pytest.raises(ProtocolError, match="distance 0"):
            sched.upload(u.name, token, flood)
        # rows spread just above eta: every pair a neighbour no location of the world has as many of
        n = bounds.neighbours + 2
        D = np.full((n, n), params.gamma * 0.99)
        np.fill_diagonal(D, 0.0)
        crowd = ObfuscationRequest.from_dict({**_flood(body, n), "D_NN": D.tolist()})
        with pytest.raises(ProtocolError, match="within eta"):
            sched.upload(u.name, token, crowd)
        def costs(c: float) -> dict:
            return {**body, "C_NO": [[c if v is not None else None for v in row] for row in body["C_NO"]]}

        with pytest.raises(ProtocolError, match="C_NO"):                  # not a number the protocol bounds
            ObfuscationRequest.from_dict(costs(1e300))
        with pytest.raises(ProtocolError, match="longest travel"):        # above what Eq. 27 can give
            sched.upload(u.name, token, ObfuscationRequest.from_dict(costs(1e5)))
        assert sched.result(honest.name, t_h, wait=20.0)[0] == "done"
    with RoundScheduler(world, params, limits=Limits(user_rows=10)) as sched:
        u, token, req = _grant(sched, world, params, 20, 2)
        with pytest.raises(TooCostly, match="rows"):
            sched.upload(u.name, token, req)


def test_a_round_that_fails_is_solved_again_without_the_user_who_broke_it(world, params, monkeypatch):
    with RoundScheduler(world, params, limits=Limits(round_users=3, round_wait=30.0), method="lp") as sched:
        broken = {}
        solve = RoundScheduler._solve

        def failing(self, srv, names):
            if broken["name"] in names:
                raise RuntimeError("HiGHS could not solve a block")
            return solve(self, srv, names)

        monkeypatch.setattr(RoundScheduler, "_solve", failing)
        a = _enrol(sched, world, params, 3, 1)
        b = _enrol(sched, world, params, 14, 2)
        u, token, req = _grant(sched, world, params, 30, 3)
        broken["name"] = u.name
        sched.upload(u.name, token, req)
        assert sched.result(a[0].name, a[1], wait=20.0)[0] == "done"
        assert sched.result(b[0].name, b[1], wait=20.0)[0] == "done"
        state, why = sched.result(u.name, token, wait=20.0)
        assert state == "refused" and "could not be solved" in why
        assert sched.stats().rounds[0].refused == 1


# ------------------------------------------------------------------ generated uploads
_FIELDS = ("D_NN", "columns", "D_NO", "C_NO", "p")
_ODD = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30), st.booleans(),
                 st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=2))


def _mutate(body: dict, draw) -> dict:
    field = draw(st.sampled_from(_FIELDS))
    a = body[field]
    op = draw(st.sampled_from(["scale", "entry", "constant", "rows", "drop", "transpose", "shuffle"]))
    out = dict(body)
    arr = np.array([[np.nan if v is None else v for v in r] for r in a] if isinstance(a[0], list) else
                   [np.nan if v is None else v for v in a], dtype=float)
    if op == "scale":
        arr = arr * 10.0 ** draw(st.integers(-3, 300))
    elif op == "constant":
        arr = np.full(arr.shape, draw(st.floats(0, 1e6)))
    elif op == "rows":
        arr = np.repeat(arr, draw(st.integers(2, 4)), axis=0)
    elif op == "drop":
        arr = arr[: max(0, len(arr) - draw(st.integers(1, 3)))]
    elif op == "transpose" and arr.ndim == 2:
        arr = arr.T
    elif op == "shuffle":
        arr = arr[np.random.default_rng(draw(st.integers(0, 99))).permutation(len(arr))]
    if op == "entry":
        lst = json.loads(json.dumps(a))
        if isinstance(lst[0], list):
            lst[draw(st.integers(0, len(lst) - 1))][0] = draw(_ODD)
        else:
            lst[draw(st.integers(0, len(lst) - 1))] = draw(_ODD)
        out[field] = lst
    else:
        if field == "columns":
            arr = np.round(arr)
        lst = np.where(np.isnan(arr), None, arr).tolist() if arr.size else arr.tolist()
        out[field] = [[int(v) for v in r] for r in lst] if field == "columns" and arr.ndim == 2 else (
            [int(v) for v in lst] if field == "columns" else lst)
    return out


@pytest.fixture(scope="module")
def busy_scheduler(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=2, round_wait=0.3, max_pending=100_000,
                                                     client_users=100_000, user_seconds=5.0),
                        method="lp") as sched:
        yield sched


def _bad_upload_fails_only_its_user(sched, world, params, data) -> None:
    """A mutated upload and an honest one join the same round: the mutant is refused at upload
    (a one-line ProtocolError) or solved, and the honest user is always served."""
    honest, t_h = _enrol(sched, world, params, data.draw(st.integers(0, world.K - 1)), 0)
    u, token, req = _grant(sched, world, params, data.draw(st.integers(0, world.K - 1)), 1)
    body = _mutate(json.loads(req.to_json()), data.draw)
    try:
        sched.upload(u.name, token, ObfuscationRequest.from_json(json.dumps(body)))
    except ProtocolError as exc:
        assert "\n" not in str(exc)
        state = None
    else:
        state, _ = sched.result(u.name, token, wait=30.0)
        assert state in ("done", "refused")
    assert sched.result(honest.name, t_h, wait=30.0)[0] == "done"


@settings(max_examples=12, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_generated_bad_upload_fails_only_its_own_user(busy_scheduler, world, params, data):
    _bad_upload_fails_only_its_user(busy_scheduler, world, params, data)


@pytest.mark.slow
@settings(max_examples=500, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_a_generated_bad_upload_fails_only_its_own_user_at_length(busy_scheduler, world, params, data):
    _bad_upload_fails_only_its_user(busy_scheduler, world, params, data)


# ----------------------------------------------------------- real servers
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _certdp(*args: str) -> list[str]:
    return [sys.executable, "-m", "certdp.cli", *args]


def _start(*options: str):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    pytest.importorskip("fastapi_offline")
    port = _free_port()
    proc = subprocess.Popen(_certdp("lrgeo", "serve", "--grid", "8x8", "--port", str(port), *options),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return url, proc
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"the server exited: {proc.stderr.read().decode()}")
            time.sleep(0.2)
    proc.kill()
    pytest.fail("the server did not answer /health within 60 s")


def _stop(proc) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return proc.returncode, proc.stderr.read().decode()


@pytest.fixture(scope="module")
def server():
    url, proc = _start("--round-users", "2", "--round-wait", "3", "--client-users", "1000000", "--client-rate",
                       "1000000")
    yield url, proc
    _stop(proc)


def _request(url: str, method: str = "GET", body: bytes | None = None, headers: dict | None = None,
             source: str | None = None) -> tuple[int, dict, dict]:
    """(status, JSON body, headers), from ``source`` (a loopback address) when given."""
    host, port = url.removeprefix("http://").split("/")[0].split(":")
    path = "/" + url.removeprefix("http://").split("/", 1)[1] if url.count("/") > 2 else "/"
    conn = http.client.HTTPConnection(host, int(port), timeout=30,
                                      source_address=(source, 0) if source else None)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        data = r.read()
        return r.status, json.loads(data) if data else {}, dict(r.getheaders())
    finally:
        conn.close()


def test_concurrent_user_processes_against_one_server_process(server):
    url, proc = server
    users = [subprocess.Popen(_certdp("lrgeo", "user", "--server", url, "--location", str(loc), "--seed", str(loc),
                                       "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for loc in (3, 41)]
    bad = subprocess.Popen(_certdp("lrgeo", "user", "--server", url, "--location", "640"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # a malformed request while the round fills: refused with a reason, nobody else disturbed
    code, body, _ = _request(url + "/table", "POST", b'{"type": "TableRequest", "user": "x", "center": [0], '
                                                     b'"radius_km": 1}')
    assert code == 422 and "center" in body["error"]
    code, body, _ = _request(url + "/upload/u-unknown", "POST", b"[]", {"Authorization": "Bearer x"})
    assert code == 422
    outs = []
    for p in users:
        o, e = p.communicate(timeout=120)
        assert p.returncode == 0, e.decode()
        outs.append(json.loads(o))
    assert all(r["verified"] and 0 <= r["output"] < 64 and r["status"] == "optimal" for r in outs)
    # an optimal round's bounds, as each user received them, are within the server's gap (1e-4)
    assert all(relative_gap(r["upper_bound"], r["lower_bound"]) <= 1e-4 for r in outs)
    assert len({r["user"] for r in outs}) == 2
    _, e = bad.communicate(timeout=60)
    assert bad.returncode == 2 and "location" in e.decode()
    code, stats, _ = _request(url + "/stats")
    assert [x["users"] for x in stats["rounds"]] == [2] and stats["users_in_flight"] == {}
    assert proc.poll() is None


def test_the_location_never_leaves_the_client(server):
    url, _ = server
    sent: list[tuple[str, bytes | None]] = []
    client = LRGeoClient(url, on_send=lambda path, body: sent.append((path, body)))
    w = client.world()
    other = LRGeoClient(url)   # fills the round of two
    results = {}
    threads = [threading.Thread(target=lambda loc=loc: results.setdefault(loc, other.obfuscate(loc, rng=loc)))
               for loc in (50,)]
    for t in threads:
        t.start()
    res = client.obfuscate(27, rng=9)
    for t in threads:
        t.join(60)
    assert res["verified"] and len(results) == 1
    bodies = [json.loads(b) for _, b in sent if b is not None]
    assert [b["type"] for b in bodies] == ["TableRequest", "ObfuscationRequest"]
    assert set(bodies[0]) == {"type", "user", "center", "radius_km"}
    assert set(bodies[1]) == {"type", "user", "D_NN", "columns", "D_NO", "C_NO", "p"}
    # the table request's centre is a location of the LR set drawn at random (paper 003, 4.5);
    # with this seed it is not the user's own, and nothing else carries coordinates
    assert not np.allclose(bodies[0]["center"], w.latlon[27])
    assert all(path.startswith(("/info", "/table", "/upload/", "/result/")) for path, _ in sent)


def test_whoever_learns_an_id_cannot_act_for_its_user(server):
    url, _ = server
    client = LRGeoClient(url)
    w = client.world()
    u = LRGeoUser(w, 12, client.info().params.lrgeo(), name="unassigned", rng=1)
    code, grant, _ = _request(url + "/table", "POST", u.table_request().to_json().encode())
    assert code == 200
    upload = u.obfuscation_request(TableResponse.from_dict(grant["table"]))
    upload = ObfuscationRequest.from_dict({**json.loads(upload.to_json()), "user": grant["user"]})
    for headers, status in (({}, 401), ({"Authorization": "Bearer " + "x" * 43}, 403),
                            ({"Authorization": "Basic " + grant["token"]}, 401)):
        code, _, _ = _request(url + f"/upload/{grant['user']}", "POST", upload.to_json().encode(), headers)
        assert code == status
        code, _, _ = _request(url + f"/result/{grant['user']}", headers=headers)
        assert code == status
    code, _, _ = _request(url + f"/upload/{grant['user']}", "POST", upload.to_json().encode(),
                          {"Authorization": "Bearer " + grant["token"]})
    assert code == 202


def test_wait_is_a_bounded_finite_number_of_seconds(server):
    url, _ = server
    for wait in ("nan", "inf", "-1", "1e9", "true", "x"):
        code, body, _ = _request(url + f"/result/u-1?wait={wait}", headers={"Authorization": "Bearer x"})
        assert code == 422 and "wait" in body["error"]


def test_waiting_for_results_holds_no_thread(server):
    """Sixty clients waiting for a result that will not come (the user never uploads) do not
    keep the server from answering anyone else, even on the routes that run in its worker
    threads (a table request; there are 40 of them): a wait holds no thread."""
    url, _ = server
    client = LRGeoClient(url)
    u = LRGeoUser(client.world(), 9, client.info().params.lrgeo(), name="unassigned", rng=3)
    _, grant, _ = _request(url + "/table", "POST", u.table_request().to_json().encode())
    auth = {"Authorization": "Bearer " + grant["token"]}
    answers: list[int] = []
    polls = [threading.Thread(target=lambda: answers.append(
        _request(url + f"/result/{grant['user']}?wait=8", headers=auth)[0])) for _ in range(60)]
    for t in polls:
        t.start()
    time.sleep(1.0)
    assert _request(url + "/table", "POST", u.table_request().to_json().encode())[0] == 200
    assert not answers and sum(t.is_alive() for t in polls) == 60      # all still waiting meanwhile
    for t in polls:
        t.join(30)
    assert answers == [202] * 60


_json_like = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                          lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["user", "token", "table", "x"]),
                                                                                c, max_size=4), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(reply=_json_like, raw=st.binary(max_size=20))
def test_a_malformed_table_answer_is_a_service_error(reply, raw):
    """Whatever the server answers to /table (any JSON, any bytes, a key twice), the client
    either reads a user, a token and a table or raises one ServiceError: never a KeyError or a
    TypeError from deep inside."""
    from certdp.lrgeo.client import _table_reply

    for body in (json.dumps(reply).encode(), raw, b'{"user": "a", "user": "b", "token": "t", "table": {}}'):
        try:
            name, token, table = _table_reply(body)
        except ServiceError:
            continue
        assert isinstance(name, str) and isinstance(token, str) and isinstance(table, TableResponse)


def test_a_stale_client_is_told_the_server_restarted(server):
    url, _ = server
    client = LRGeoClient(url, retries=0)
    with pytest.raises(ServiceError, match="restarted") as exc:
        client._call("GET", "/result/u-from-an-old-instance", token="anything")
    assert exc.value.status == 404


def test_bodies_are_checked_before_parsing(server):
    url, _ = server
    code, body, _ = _request(url + "/table", "POST", b"[" * 100_000 + b"]" * 100_000)
    assert code == 422 and "nests" in body["error"]
    code, body, _ = _request(url + "/table", "POST", b'{"a": "\xff"}')
    assert code == 422
    code, body, _ = _request(url + "/table", "POST", b" " * (33 * 1024 * 1024))
    assert code == 413
    twice = b'{"type": "TableRequest", "user": "a", "user": "b", "center": [60.17, 24.94], "radius_km": 1}'
    code, body, _ = _request(url + "/table", "POST", twice)           # FastAPI alone would keep "b"
    assert code == 422 and "twice" in body["error"]
    code, body, _ = _request(url + "/table", "POST", b'{"radius_km": NaN}')
    assert code == 422 and "NaN" in body["error"]


def test_the_docs_are_served_from_the_server_itself(server):
    url, _ = server
    with urllib.request.urlopen(url + "/docs", timeout=10) as r:
        html = r.read().decode()
    assert "https://" not in html and "http://" not in html
    for asset in ("/docs-static/swagger-ui-bundle.js", "/docs-static/swagger-ui.css"):
        assert asset in html
        with urllib.request.urlopen(url + asset, timeout=10) as r:
            assert r.status == 200 and len(r.read()) > 10_000
    with urllib.request.urlopen(url + "/openapi.json", timeout=10) as r:
        schema = json.loads(r.read())
    body = schema["components"]["schemas"]["ObfuscationRequest"]
    assert body["properties"]["columns"]["items"]["type"] == "integer"
    assert set(body["required"]) >= {"user", "D_NN", "columns", "D_NO", "C_NO", "p"}
    info = schema["components"]["schemas"]["Params"]["properties"]
    assert set(info) == {"epsilon", "eta", "lr_radius", "r_obf", "r_exp", "table_cell", "hide"}


def test_a_client_over_its_limits_is_slowed_and_nobody_else():
    url, proc = _start("--client-users", "2", "--client-rate", "5")
    try:
        u = LRGeoUser(grid_city(8, 8), 20, LRGeoClient(url).info().params.lrgeo(), rng=1)
        body = u.table_request().to_json().encode()
        codes = [_request(url + "/table", "POST", body)[0] for _ in range(4)]
        assert codes[:2] == [200, 200] and codes[2:] == [429, 429]
        assert _request(url + "/table", "POST", body, source="127.0.0.2")[0] == 200
        answers = [_request(url + "/health") for _ in range(30)]
        assert answers[-1][0] == 429 and int(answers[-1][2]["retry-after"]) >= 1
        assert _request(url + "/health", source="127.0.0.3")[0] == 200
        retrying = LRGeoClient(url, retries=3, backoff=0.5)
        assert json.loads(retrying._call("GET", "/health")[1])["status"] == "ok"    # waits out the 429
    finally:
        code, log = _stop(proc)
    assert code == 143 and "Traceback" not in log     # SIGTERM stops it as every command (README)


# ----------------------------------------------------------- the schema's own fuzzer
def _fuzz(url: str, examples: int, derandomize: bool) -> None:
    """Every operation, with bodies, parameters and headers that schemathesis generates from
    the service's /openapi.json, valid and invalid: no 5xx, every status, header and body as
    documented, invalid data refused, no operation that needs the token done without it.

    Schema-valid data may still be refused (422): the protocol's messages have rules that JSON
    Schema cannot state (a symmetric distance matrix, a centre that is a location of the
    server's world), so the check that valid data is accepted is left out."""
    schemathesis = pytest.importorskip("schemathesis")
    from schemathesis.generation.modes import GenerationMode
    from schemathesis.specs.openapi.checks import positive_data_acceptance

    schema = schemathesis.openapi.from_url(url + "/openapi.json")
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        @settings(max_examples=examples, derandomize=derandomize, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=schema.as_strategy(mode))
        def call(case):
            case.call_and_validate(excluded_checks=[positive_data_acceptance])

        call()


def test_the_service_answers_its_own_schema(server):
    _fuzz(server[0], 40, derandomize=True)


@pytest.mark.slow
def test_the_service_answers_its_own_schema_at_length(server):
    _fuzz(server[0], 2000, derandomize=False)


def test_generated_json_bodies_never_reach_a_server_error(server):
    """Hypothesis-generated JSON in place of each protocol message, with a valid id and token:
    a documented refusal or an acceptance, never a 5xx; an honest user is served after it."""
    url = server[0]
    client = LRGeoClient(url)
    w, P = client.world(), client.info().params.lrgeo()
    u = LRGeoUser(w, 30, P, name="unassigned", rng=2)
    _, grant, _ = _request(url + "/table", "POST", u.table_request().to_json().encode())
    auth = {"Authorization": "Bearer " + grant["token"]}
    leaves = st.none() | st.booleans() | st.floats(allow_nan=False) | st.integers() | st.text(max_size=8)
    json_values = st.recursive(leaves, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
        st.text(max_size=6), kids, max_size=4), max_leaves=30)
    message = st.fixed_dictionaries({"type": st.sampled_from(["TableRequest", "ObfuscationRequest"]),
                                     "user": st.sampled_from([grant["user"], "x"])},
                                    optional={k: json_values for k in ("center", "radius_km", "D_NN", "columns",
                                                                       "D_NO", "C_NO", "p")})

    @settings(max_examples=40, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(body=st.one_of(message, json_values))
    def post(body):
        for path in ("/table", f"/upload/{grant['user']}"):
            code, answer, _ = _request(url + path, "POST", json.dumps(body).encode(), auth)
            assert code in (200, 202, 409, 413, 422), (code, answer)
            assert "\n" not in answer.get("error", "")

    post()
    pair = [threading.Thread(target=lambda: client.obfuscate(40, rng=5))]
    pair[0].start()
    res = client.obfuscate(12, rng=4)            # with another, a round of two
    pair[0].join(60)
    assert res["verified"]


def test_the_server_stops_cleanly_on_sigterm(server):
    url, proc = server
    waiting = LRGeoClient(url)
    u = LRGeoUser(waiting.world(), 5, waiting.info().params.lrgeo(), name="unassigned", rng=1)
    code, grant, _ = _request(url + "/table", "POST", u.table_request().to_json().encode())
    long_poll = threading.Thread(target=_request, args=(url + f"/result/{grant['user']}?wait=30",),
                                 kwargs={"headers": {"Authorization": "Bearer " + grant["token"]}})
    long_poll.start()
    time.sleep(0.5)
    code, log = _stop(proc)
    assert code == 143      # exited by itself as every command does (README: exit statuses), not killed after 20 s:
    assert log.count("interrupted by SIGTERM") == 1 and "Traceback" not in log     # the 30 s poll did not hold it
    assert '"POST /table" 200' in log and "round 0: 2 users" in log     # the access and round log
    long_poll.join(10)


def test_a_server_setting_that_would_not_fit_is_refused_with_what_fits(world, params):
    from certdp.lrgeo.memory import MemoryLimitError, estimate_round

    limits = Limits(round_users=4, max_pending=1000)
    need = estimate_round(world, params, 4, pending=1000).total
    with pytest.raises(MemoryLimitError) as info:
        RoundScheduler(world, params, limits=limits, max_memory=need - 1)
    msg = str(info.value)
    most = int(msg.split("at most ")[1].split(" user")[0])
    assert "(--max-pending)" in msg and 1 <= most < 1000
    assert estimate_round(world, params, 4, pending=most).total <= need - 1
    with RoundScheduler(world, params, limits=Limits(round_users=4, max_pending=most), max_memory=need - 1) as s:
        assert s.memory.total <= need - 1
    r = subprocess.run(_certdp("lrgeo", "serve", "--grid", "8x8", "--port", "0", "--max-pending", "1000000",
                               "--max-memory", "1", "--quiet"), capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2 and r.stderr.startswith("Error: a round of 4 users") and r.stderr.count("\n") == 1
    assert "users in flight (--max-pending)" in r.stderr


def test_a_round_through_serve_on_a_network_and_a_bbox(tmp_path):
    """`certdp lrgeo serve --network ... --bbox ...` and two `certdp lrgeo user` processes
    with their own copy of the network: the users rebuild the grid over the same box, and each
    gets a certified matrix."""
    from .test_lrgeo import _write_network

    city = grid_city(8, 8, cell_km=0.5, seed=2)
    net = _write_network(city, tmp_path)
    lon_min, lat_min, lon_max, lat_max = city.bbox
    box = f"{lon_min},{lat_min},{(lon_min + lon_max) / 2 + 0.001},{lat_max}"
    url, proc = _start("--network", net, "--bbox", box, "--grid", "5x5", "--scaled-settings", "--round-users", "2",
                       "--round-wait", "30")
    try:
        code, info, _ = _request(url + "/info")
        assert code == 200 and info["world"]["bbox"] == [float(v) for v in box.split(",")]
        users = [subprocess.Popen(_certdp("lrgeo", "user", "--server", url, "--network", net, "--location", str(loc),
                                           "--seed", str(loc), "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for loc in (6, 18)]
        outs = []
        for p in users:
            o, e = p.communicate(timeout=180)
            assert p.returncode == 0, e.decode()
            outs.append(json.loads(o))
        assert all(r["verified"] and 0 <= r["output"] < 25 and r["status"] == "optimal" for r in outs)
    finally:
        _stop(proc)


def test_a_body_limit_below_an_honest_upload_is_refused_at_start(world, params):
    """The largest upload an honest user can send on this grid (its JSON) is bounded from the
    grid; a server whose body limit is below it would answer 413 to such a user, so it does not
    start. Each honest upload is within the bound."""
    from certdp.lrgeo.memory import estimate_round, upload_bytes

    largest = upload_bytes(estimate_round(world, params, 1).counts)
    with pytest.raises(ValueError, match="max_body_mb"):
        RoundScheduler(world, params, limits=Limits(max_body_mb=largest / 2**20 / 2))
    with RoundScheduler(world, params, limits=Limits(max_body_mb=largest / 2**20)) as sched:
        for loc in range(0, world.K, 5):
            _, _, req = _grant(sched, world, params, loc, loc)
            assert len(req.to_json().encode()) <= largest
