"""LR-Geo over HTTP: the round scheduler in process, then a real server process with several
concurrent user processes."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from certdp.datasets.city import grid_city
from certdp.lrgeo.client import LRGeoClient, ServiceError
from certdp.lrgeo.messages import ObfuscationResponse, ProtocolError, TableResponse
from certdp.lrgeo.service import Busy, Limits, RoundScheduler, UnknownUser
from certdp.lrgeo.user import LRGeoParams, LRGeoUser


@pytest.fixture(scope="module")
def world():
    return grid_city(6, 6)


@pytest.fixture(scope="module")
def params(world):
    return LRGeoParams.scaled(world.cell, eps_cell=1.0)


def _enrol(sched, world, params, location, seed):
    """A user's first two messages, in process: returns (user, its id)."""
    u = LRGeoUser(world, location, params, name="unassigned", rng=seed)
    got = json.loads(sched.table(u.table_request().to_json()))
    u.name = got["user"]
    sched.upload(u.name, u.obfuscation_request(TableResponse.from_json(json.dumps(got["table"]))).to_json())
    return u


def test_a_round_closes_on_size_and_every_user_gets_a_certified_matrix(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=3, round_wait=30.0)) as sched:
        users = [_enrol(sched, world, params, loc, s) for s, loc in enumerate((3, 14, 30))]
        for u in users:
            state, body = sched.result(u.name, wait=20.0)
            assert state == "done"
            mech, _ = u.mechanism(ObfuscationResponse.from_json(body))
            assert mech.verification.passed
            with pytest.raises(UnknownUser):   # collected once, then forgotten
                sched.result(u.name)
        rec = sched.stats()["rounds"]
        assert len(rec) == 1 and rec[0]["users"] == 3 and rec[0]["closed_by"] == "size"
        assert not sched.server.requests and not sched.server.circles


def test_a_round_closes_on_time_without_the_users_who_left(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=4, round_wait=0.5)) as sched:
        a = _enrol(sched, world, params, 7, 1)
        b = _enrol(sched, world, params, 20, 2)
        left = LRGeoUser(world, 25, params, rng=3)    # asks for its table, never uploads
        json.loads(sched.table(left.table_request().to_json()))
        t0 = time.monotonic()
        for u in (a, b):
            assert sched.result(u.name, wait=10.0)[0] == "done"
        assert time.monotonic() - t0 < 5.0
        assert sched.stats()["rounds"][0]["closed_by"] == "time"


def test_a_bad_message_is_refused_and_changes_nothing(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=2, round_wait=30.0)) as sched:
        a = _enrol(sched, world, params, 8, 4)
        before = dict(sched.server.requests)
        u = LRGeoUser(world, 27, params, name="unassigned", rng=5)
        got = json.loads(sched.table(u.table_request().to_json()))
        u.name = got["user"]
        req = json.loads(u.obfuscation_request(TableResponse.from_json(json.dumps(got["table"]))).to_json())
        for field, value in (("D_NO", [[float("nan")]]), ("p", [1.0]), ("columns", [-1, 0]),
                             ("D_NN", [[0.0, 1.0], [2.0, 0.0]])):
            with pytest.raises(ProtocolError):
                sched.upload(u.name, json.dumps({**req, field: value}))
        with pytest.raises(ProtocolError):
            sched.upload(u.name, json.dumps({**req, "user": a.name}))      # someone else's id
        with pytest.raises(ProtocolError):
            sched.table("{not json")
        assert sched.server.requests == before and sched.stats()["users_in_flight"] == {"waiting": 1, "table": 1}
        sched.upload(u.name, json.dumps(req))                                # the real one closes the round
        assert sched.result(a.name, wait=20.0)[0] == "done" and sched.result(u.name, wait=20.0)[0] == "done"


def test_users_in_flight_are_bounded_and_unknown_ids_explained(world, params):
    with RoundScheduler(world, params, limits=Limits(round_users=10, round_wait=30.0, max_pending=2)) as sched:
        u = LRGeoUser(world, 5, params, rng=6)
        sched.table(u.table_request().to_json())
        sched.table(u.table_request().to_json())
        with pytest.raises(Busy):
            sched.table(u.table_request().to_json())
        with pytest.raises(UnknownUser, match="restarted"):
            sched.result("u-0000")


# ----------------------------------------------------------- a real server
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _certdp(*args: str) -> list[str]:
    return [sys.executable, "-m", "certdp.cli", *args]


@pytest.fixture(scope="module")
def server():
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    port = _free_port()
    proc = subprocess.Popen(_certdp("lrgeo", "serve", "--grid", "8x8", "--port", str(port), "--round-users", "4",
                                     "--round-wait", "3", "--quiet"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    break
        except OSError:
            if proc.poll() is not None:
                pytest.fail(f"the server exited: {proc.stderr.read().decode()}")
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("the server did not answer /health within 60 s")
    yield url, proc
    if proc.poll() is None:
        proc.kill()


def _post(url: str, body: bytes) -> tuple[int, dict]:
    req = urllib.request.Request(url, data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_concurrent_user_processes_against_one_server_process(server):
    url, proc = server
    users = [subprocess.Popen(_certdp("lrgeo", "user", "--server", url, "--location", str(loc), "--seed", str(loc),
                                       "--json"), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for loc in (3, 20, 41, 60)]
    bad = subprocess.Popen(_certdp("lrgeo", "user", "--server", url, "--location", "640"),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # a malformed request while the round fills: refused with a reason, nobody else disturbed
    code, body = _post(url + "/table", b'{"type": "TableRequest", "user": "x", "center": [0], "radius_km": 1}')
    assert code == 400 and "center" in body["error"]
    code, body = _post(url + "/upload/u-unknown", b"[]")
    assert code == 400
    outs = []
    for p in users:
        o, e = p.communicate(timeout=120)
        assert p.returncode == 0, e.decode()
        outs.append(json.loads(o))
    assert all(r["verified"] and 0 <= r["output"] < 64 and r["status"] == "optimal" for r in outs)
    assert len({r["user"] for r in outs}) == 4
    _, e = bad.communicate(timeout=60)
    assert bad.returncode == 2 and "location" in e.decode()
    with urllib.request.urlopen(url + "/stats", timeout=5) as r:
        stats = json.loads(r.read())
    assert [x["users"] for x in stats["rounds"]] == [4] and stats["users_in_flight"] == {}
    assert proc.poll() is None


def test_the_location_never_leaves_the_client(server):
    url, _ = server
    sent: list[tuple[str, bytes | None]] = []
    client = LRGeoClient(url, on_send=lambda path, body: sent.append((path, body)))
    w = client.world()
    other = LRGeoClient(url)   # fills the round of four
    import threading

    results = {}
    threads = [threading.Thread(target=lambda loc=loc: results.setdefault(loc, other.obfuscate(loc, rng=loc)))
               for loc in (10, 33, 50)]
    for t in threads:
        t.start()
    res = client.obfuscate(27, rng=9)
    for t in threads:
        t.join(60)
    assert res["verified"] and len(results) == 3
    bodies = [json.loads(b) for _, b in sent if b is not None]
    assert [b["type"] for b in bodies] == ["TableRequest", "ObfuscationRequest"]
    assert set(bodies[0]) == {"type", "user", "center", "radius_km"}
    assert set(bodies[1]) == {"type", "user", "D_NN", "columns", "D_NO", "C_NO", "p"}
    # the table request's centre is a location of the LR set drawn at random (paper 003, 4.5);
    # with this seed it is not the user's own, and nothing else carries coordinates
    assert not np.allclose(bodies[0]["center"], w.latlon[27])
    assert all(path.startswith(("/info", "/table", "/upload/", "/result/")) for path, _ in sent)


def test_a_stale_client_is_told_the_server_restarted(server):
    url, _ = server
    client = LRGeoClient(url)
    with pytest.raises(ServiceError, match="restarted") as exc:
        client._call("GET", "/result/u-from-an-old-instance")
    assert exc.value.status == 404


def test_the_server_shuts_down_cleanly(server):
    """Ctrl-C stops the server as it stops every command (README: exit statuses): one line,
    status 130, no traceback."""
    _, proc = server
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=20)
    err = proc.stderr.read().decode()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and err.count("interrupted by SIGINT") == 1, err
