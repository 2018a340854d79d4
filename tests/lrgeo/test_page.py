"""The LR-Geo page in a real headless Chromium (Debian's ``chromium``, driven by playwright): a
person picks a location on the map, the page runs the user's side of the protocol, and the
requests it makes are inspected. Skipped when chromium or playwright is absent."""

from __future__ import annotations

import json
import os
import shutil
from urllib.parse import urlsplit

import numpy as np
import pytest

from certdp.lrgeo.client import LRGeoClient
from certdp.lrgeo.user import LRGeoUser
from certdp.randomness import CounterRNG

from .test_service import _start, _stop

CHROMIUM = os.environ.get("CERTDP_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--disable-sync"]

pytestmark = pytest.mark.skipif(not (os.path.exists(CHROMIUM) or shutil.which("chromium")),
                                reason="no chromium (apt-get install chromium)")


@pytest.fixture(scope="module")
def browser():
    sync = pytest.importorskip("playwright.sync_api")
    with sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium"),
                              args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def server():
    # rounds of one user, so that the page's user and the Python user each solve the same LP alone
    url, proc = _start("--round-users", "1", "--round-wait", "0.5")
    yield url
    code, log = _stop(proc)
    assert code == 143 and "Traceback" not in log, log[-3000:]     # SIGTERM stops it as every command


def _open(browser, url: str):
    """A page that records every request it makes, and refuses (and records) any request that
    leaves the server."""
    page = browser.new_page()
    requests, outside, errors = [], [], []
    host = urlsplit(url).netloc

    def route(r):
        if urlsplit(r.request.url).netloc != host:
            outside.append(r.request.url)
            r.abort()
        else:
            r.continue_()

    page.route("**/*", route)
    page.on("request", lambda r: requests.append((r.method, r.url, r.post_data)))
    page.on("pageerror", lambda e: errors.append(str(e)))
    return page, requests, outside, errors


def _pick_and_run(page, url: str, location: int, seed: int | None) -> int:
    page.goto(url + ("/" if seed is None else f"/?seed={seed}"))
    page.wait_for_selector("#status[data-state=idle]")       # the city is drawn
    xy = page.evaluate(f"window.lrgeoPage.pixelOf({location})")
    page.locator("#map").click(position=xy)            # a person picks the cell on the map
    assert f"cell {location} " in page.inner_text("#picked")
    page.click("#go")
    page.wait_for_selector("#status[data-state=done], #status[data-state=error]", timeout=120_000)
    assert page.get_attribute("#status", "data-state") == "done", page.inner_text("#status")
    return int(page.get_attribute("#result", "data-output"))


def _walk(value):
    """Every list in a JSON value (to look for coordinate pairs)."""
    if isinstance(value, list):
        yield value
        for v in value:
            yield from _walk(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _walk(v)


def test_the_page_and_the_python_user_report_the_same_location_and_the_page_keeps_it(server, browser):
    url = server
    client = LRGeoClient(url)
    world, params = client.world(), client.info().params.lrgeo()
    location = 27
    # a seed whose table request is centred on another LR location than the user's own (the
    # centre is drawn from the LR set, so it may be the user's; the server cannot tell)
    seed = next(s for s in range(100) if LRGeoUser(world, location, params, rng=CounterRNG(s)).anchor != location)
    sent: list[tuple[str, bytes | None]] = []
    py = LRGeoClient(url, on_send=lambda path, body: sent.append((path, body))).obfuscate(location, rng=seed)
    py_bodies = [json.loads(b) for _, b in sent if b is not None]

    page, requests, outside, errors = _open(browser, url)
    out = _pick_and_run(page, url, location, seed)
    assert not errors and not outside
    assert out == py["output"]

    posts = [json.loads(body) for method, _, body in requests if method == "POST"]
    assert [b["type"] for b in posts] == ["TableRequest", "ObfuscationRequest"]
    assert set(posts[0]) == {"type", "user", "center", "radius_km"}
    assert set(posts[1]) == {"type", "user", "D_NN", "columns", "D_NO", "C_NO", "p"}
    true = world.latlon[location]
    for body in posts:          # no coordinate pair in any body is the true location's
        assert not any(len(v) == 2 and all(isinstance(x, float) for x in v) and np.allclose(v, true, rtol=0, atol=1e-9)
                       for v in _walk(body))
    for method, req_url, _ in requests:     # nor any URL: only the protocol's paths and wait=
        parts = urlsplit(req_url)
        assert parts.path in ("/", "/info", "/world") or parts.path.startswith(("/static/", "/table", "/upload/u-",
                                                                                "/result/u-"))
        assert parts.query in ("", f"seed={seed}", "wait=10")
    # the same messages as the Python user's, to float rounding (sin, exp and Dijkstra's sums
    # may differ by an ulp between JavaScript and numpy)
    table_py, upload_py = py_bodies
    assert posts[0]["center"] == table_py["center"] and posts[0]["radius_km"] == pytest.approx(table_py["radius_km"])
    assert posts[1]["columns"] == upload_py["columns"]
    for key in ("D_NN", "D_NO", "p"):
        np.testing.assert_allclose(posts[1][key], upload_py[key], rtol=1e-12, atol=1e-15)
    js_c = np.array(posts[1]["C_NO"], dtype=float)
    py_c = np.array(upload_py["C_NO"], dtype=float)
    np.testing.assert_array_equal(np.isnan(js_c), np.isnan(py_c))
    np.testing.assert_allclose(js_c[~np.isnan(js_c)], py_c[~np.isnan(py_c)], rtol=1e-9, atol=1e-15)
    # what the page shows: the reported location and the user's distribution (a certified row)
    row = page.evaluate("Array.from(window.lrgeoPage.result().row)")
    assert len(row) == world.K and abs(sum(row) - 1) < 1e-9 and row[out] > 0
    assert "passes the exact Geo-Ind check" in page.inner_text("#result")
    page.close()


def test_without_a_seed_the_page_draws_from_the_devices_randomness(server, browser):
    page, _, outside, errors = _open(browser, server)
    outs = {_pick_and_run(page, server, 12, None) for _ in range(2)}
    assert not errors and not outside and all(0 <= o < 64 for o in outs)
    page.close()


def test_the_api_docs_load_from_the_server_alone(server, browser):
    page, _, outside, errors = _open(browser, server)
    page.goto(server + "/docs")
    page.wait_for_selector(".opblock", timeout=60_000)
    operations = page.locator(".opblock-summary-path").all_inner_texts()
    assert {"/table", "/upload/{user}", "/result/{user}", "/info"} <= {o.strip() for o in operations}
    assert not outside and not errors
    page.close()
