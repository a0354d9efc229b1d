"""Issue 28: the rating page under attack, in a real headless Chromium. An attacker page served on
another loopback port (another origin, the same site) tries a cross-site form POST, a no-cors
fetch to /grade and /undo, and framing the page; a foreign Host header (DNS rebinding), a 400 MB
POST (memory of a real `searcheval rate` process, sampled), a query id with `/`, `?message=`
reflection, short tokens and a stale cookie beside a correct `?token=`."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psutil
import pytest

from searcheval.errors import InputError
from searcheval.io.fixtures import load_fixtures
from searcheval.judging.app import RatingSession, check_binding, create_app
from searcheval.store import judgments as jstore
from searcheval.store.database import connect
from test_rating_page import Served, csrf_of, make_session, page_client, rows_of, save_pool

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


class AttackerPage:
    """One HTML page served on its own loopback port (another origin than the rating page)."""

    def __init__(self, html: str) -> None:
        body = html.encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def served(database_module_url):
    server = Served(create_app(make_session(database_module_url, "vic")))
    yield server
    server.stop()


def attack_html(target: str) -> str:
    return f"""<!doctype html><html><body>
<form id="f" method="post" action="{target}/grade" target="sink">
  <input name="query_id" value="q05"><input name="doc_id" value="document-ocr">
  <input name="grade" value="0">
</form>
<iframe name="sink"></iframe>
<iframe id="framed" src="{target}/q/q04"></iframe>
<script>
  fetch("{target}/grade", {{method: "POST", mode: "no-cors", credentials: "include",
    body: new URLSearchParams({{query_id: "q05", doc_id: "email-validation", grade: "0"}})}});
  fetch("{target}/undo", {{method: "POST", mode: "no-cors", credentials: "include"}});
  document.getElementById("f").submit();
  setTimeout(() => {{ document.title = "done"; }}, 1500);
</script></body></html>"""


def test_a_page_on_another_port_can_neither_grade_nor_undo_nor_frame_the_page(
        served, browser, database_module_url):
    attacker = AttackerPage(attack_html(served.url))
    context = browser.new_context()
    try:
        # the judge opens the rating page and grades one document (the session cookie is set)
        page = context.new_page()
        page.goto(served.url + "/q/q05")
        page.keyboard.press("3")
        page.wait_for_selector("#progress[data-judged='1']")
        before = [(r.query_id, r.doc_id, r.grade) for r in rows_of(database_module_url, "vic")]
        assert len(before) == 1
        # then visits the attacker's page, on another port of the same host, in the same browser
        evil = context.new_page()
        evil.goto(attacker.url)
        evil.wait_for_function("document.title === 'done'", timeout=20_000)
        time.sleep(0.5)
        after = [(r.query_id, r.doc_id, r.grade) for r in rows_of(database_module_url, "vic")]
        assert after == before  # no grade written by the form POST or the fetch
        assert rows_of(database_module_url, "vic", retracted=True) == []  # /undo did nothing
        # the framed rating page did not render (X-Frame-Options: DENY, frame-ancestors 'none')
        for frame in evil.frames[1:]:
            assert not frame.url.startswith(served.url + "/q/") or \
                frame.locator("#query-text").count() == 0
        assert all(frame.locator("#query-text").count() == 0 for frame in evil.frames)
    finally:
        context.close()
        attacker.stop()


def test_a_state_changing_request_needs_the_session_and_its_csrf_token(served,
                                                                       database_module_url):
    before = len(rows_of(database_module_url, "vic"))
    form = {"query_id": "q04", "doc_id": "geocoding", "grade": "1"}
    json = {"Accept": "application/json"}
    with httpx.Client(base_url=served.url) as client:  # no session at all
        refused = client.post("/grade", data=form, headers=json)
        assert refused.status_code == 403 and "no session" in refused.json()["error"]
        assert client.post("/undo", headers=json).status_code == 403
    with page_client(served.url) as client:
        real = client.headers.pop("X-CSRF-Token")
        wrong = client.post("/grade", data={**form, "csrf": "x" * 43}, headers=json)
        assert wrong.status_code == 403 and "CSRF token" in wrong.json()["error"]
        other_site = client.post("/grade", data={**form, "csrf": real},
                                 headers={**json, "Sec-Fetch-Site": "same-site"})
        assert other_site.status_code == 403 and "another site" in other_site.json()["error"]
        other_origin = client.post("/grade", data={**form, "csrf": real},
                                   headers={**json, "Origin": "http://127.0.0.1:1"})
        assert other_origin.status_code == 403
        assert len(rows_of(database_module_url, "vic")) == before
        ok = client.post("/grade", data={**form, "csrf": real},
                         headers={**json, "Sec-Fetch-Site": "same-origin",
                                  "Origin": served.url})
        assert ok.status_code == 200, ok.text
    assert len(rows_of(database_module_url, "vic")) == before + 1


def test_a_foreign_host_header_is_refused(served):
    with httpx.Client(base_url=served.url) as client:
        rebound = client.get("/q/q04", headers={"Host": "attacker.example:8765"})
        assert rebound.status_code == 421
        assert "q04" not in rebound.text and "rain" not in rebound.text
        assert client.get("/q/q04", headers={"Host": "localhost"}).status_code == 200


def test_security_headers_and_no_reflected_message(served):
    with httpx.Client(base_url=served.url) as client:
        page = client.get("/q/q04", params={"message": "INJECTED <b>bold</b>"})
    assert page.status_code == 200
    assert "INJECTED" not in page.text
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
    assert "script-src 'nonce-" in csp and "unsafe-inline" not in csp
    nonce = csp.split("script-src 'nonce-")[1].split("'")[0]
    assert f'<script nonce="{nonce}">' in page.text
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "same-origin"
    assert page.headers["x-content-type-options"] == "nosniff"
    cookie = page.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")


def test_a_query_id_with_a_slash_is_reachable_from_its_links(database_module_url, browser):
    fixtures = load_fixtures(ROOT / "fixtures")
    renamed = {"q04": "q/04", "q05": "q 05?#"}
    queries = tuple(dataclasses.replace(q, id=renamed.get(q.id, q.id)) for q in fixtures.queries)
    collection = dataclasses.replace(fixtures, queries=queries)
    with connect(database_module_url) as conn:
        save_pool(conn, "slash-pool", "fixtures", "r",
                  {"q/04": ["geocoding"], "q 05?#": ["document-ocr"]})
        pool, items = jstore.load_pool(conn, "slash-pool")
    server = Served(create_app(RatingSession(database_url=database_module_url,
                                             collection=collection, pool=pool, items=items,
                                             judge="slash")))
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(server.url + "/q/q%2F04")
        assert page.locator("#query-text").get_attribute("data-query") == "q/04"
        link = page.locator("#next, #previous")
        assert link.get_attribute("href") == "/q/q%2005%3F%23"  # "q 05?#", encoded
        link.click()
        page.wait_for_selector("#query-text[data-query='q 05?#']")
        back = page.locator("#next, #previous")
        assert back.get_attribute("href") == "/q/q%2F04"
        page.keyboard.press("2")
        page.wait_for_selector("#progress[data-judged='1']")
        assert [(r.query_id, r.doc_id, r.grade) for r in rows_of(database_module_url, "slash")] \
            == [("q 05?#", "document-ocr", 2)]
    finally:
        context.close()
        server.stop()


def test_tokens_are_long_and_a_correct_token_beats_a_stale_cookie(database_module_url):
    with pytest.raises(InputError) as short:
        check_binding("0.0.0.0", "s3cret")
    assert short.value.field == "token" and "at least 16 characters" in short.value.message
    with pytest.raises(InputError):
        make_session(database_module_url, "tok2", token="a")
    token = "a-long-enough-token-for-the-test"
    server = Served(create_app(make_session(database_module_url, "tok2", token=token)))
    try:
        with httpx.Client(base_url=server.url, cookies={"searcheval_rate": "stale"}) as client:
            assert client.get("/q/q04").status_code == 401
            opened = client.get("/q/q04", params={"token": token})
            assert opened.status_code == 200
            session_id = opened.cookies["searcheval_rate"]
            assert session_id != token and token not in session_id
            assert client.get("/q/q04").status_code == 200  # the new session's cookie
            assert client.get("/q/q04", params={"token": "wrong" * 5}).status_code == 401
            graded = client.post("/grade", headers={"Accept": "application/json",
                                                    "X-CSRF-Token": csrf_of(opened.text)},
                                 data={"query_id": "q04", "doc_id": "geocoding", "grade": "2"})
            assert graded.status_code == 200, graded.text
    finally:
        server.stop()


def _free_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


#: growth of the rating server's RSS allowed while a 400 MB body is sent to it, in MB (the
#: unbounded reader went from 80 MB to 2.13 GB)
BODY_RSS_GROWTH_MB = 40


def test_a_400_mb_post_is_refused_without_reaching_memory(served, database_module_url,
                                                          tmp_path):
    port = _free_port()
    log = open(tmp_path / "rate.log", "w")
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("searcheval")), "rate", "--judge", "big-post", "--pool",
         "rating-test", "--port", str(port), "--fixtures", str(ROOT / "fixtures"),
         "--database-url", database_module_url], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(url + "/q/q04", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise AssertionError((tmp_path / "rate.log").read_text())
                time.sleep(0.2)
        watched = psutil.Process(process.pid)
        start = watched.memory_info().rss
        peak = [start]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                peak[0] = max(peak[0], watched.memory_info().rss)
                time.sleep(0.02)

        sampler = threading.Thread(target=sample)
        sampler.start()
        size = 400 * 1024 * 1024
        block = b"a" * (1024 * 1024)
        try:
            with page_client(url) as client:
                # announced by Content-Length: refused before a byte of the body is read
                with httpx.Client(base_url=url) as raw:
                    request = raw.build_request("POST", "/grade", content=iter([block] * 400),
                                                headers={"Content-Length": str(size)})
                    try:
                        announced = raw.send(request)
                        assert announced.status_code == 413
                    except httpx.TransportError:
                        pass  # the server answered 413 and closed before the upload ended
                # streamed without a length (chunked): refused once the cap is passed
                try:
                    streamed = client.post("/grade", content=iter([block] * 400))
                    assert streamed.status_code == 413
                except httpx.TransportError:
                    pass
                assert client.get("/q/q04").status_code == 200  # still serving
        finally:
            stop.set()
            sampler.join()
        growth = (peak[0] - start) / 1024 / 1024
        assert growth < BODY_RSS_GROWTH_MB, f"RSS grew by {growth:.0f} MB"
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()
