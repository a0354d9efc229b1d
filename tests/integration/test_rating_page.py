"""The rating page in a real headless Chromium (the session's `browser`), served by uvicorn on a
free loopback port over the embedded Postgres: grading with the keyboard, undo, the rows it
writes, and bad input (unknown query, a grade out of the scale, a forged judge field, a second
tab grading the same pair)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from searcheval.errors import InputError
from searcheval.io.fixtures import load_fixtures
from searcheval.judging.app import RatingSession, check_binding, create_app
from searcheval.judging.pool import assign, build_pool
from searcheval.store import judgments as jstore
from searcheval.store.database import connect

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
POOLED = {"q04": ["weather-forecast", "nimbus-outlook", "geocoding"],
          "q05": ["email-validation", "document-ocr"]}


class Served:
    """uvicorn in a thread on a socket bound to a free loopback port; `stop()` ends it."""

    def __init__(self, app) -> None:
        import uvicorn

        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run,
                                       kwargs={"sockets": [self.socket]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the rating page did not start")
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()


def save_pool(conn, pool_id: str, catalog: str, run_id: str, pooled: dict) -> None:
    """`pooled` ({query: [doc, ...]}) saved as pool `pool_id` of one configuration, depth 10,
    one judge a pair."""
    items = assign(build_pool({"any": pooled}, set(), 10), 0.0, [], pool_id)
    jstore.save_pool(conn, {"pool_id": pool_id, "catalog": catalog, "run_id": run_id,
                            "depth": 10, "configurations": ["any"], "overlap": 0.0,
                            "judges": []},
                     [{"position": n, "query_id": i.query_id, "doc_id": i.doc_id,
                       "best_rank": i.best_rank, "configurations": i.configurations,
                       "judges_needed": 1, "assigned": []}
                      for n, i in enumerate(items, start=1)])


def make_session(url: str, judge: str, token: str | None = None) -> RatingSession:
    collection = load_fixtures(ROOT / "fixtures")
    with connect(url) as conn:
        found = jstore.load_pool(conn, "rating-test")
        if found is None:
            save_pool(conn, "rating-test", "fixtures", "r", POOLED)
            found = jstore.load_pool(conn, "rating-test")
    pool, items = found
    return RatingSession(database_url=url, collection=collection, pool=pool, items=items,
                         judge=judge, token=token)


@pytest.fixture(scope="module")
def served(database_module_url):
    server = Served(create_app(make_session(database_module_url, "ann")))
    yield server
    server.stop()


@contextmanager
def page_client(url: str, first: str = "/q/q04", **kwargs):
    """An httpx client that opened `first` (its session cookie) and sends the page's CSRF token
    with every request, as the page's own script does."""
    with httpx.Client(base_url=url, **kwargs) as client:
        opened = client.get(first)
        assert opened.status_code == 200, opened.text
        client.headers["X-CSRF-Token"] = csrf_of(opened.text)
        yield client


def csrf_of(html: str) -> str:
    import re

    return re.search(r'<meta name="csrf-token" content="([^"]+)">', html)[1]


def rows_of(url: str, judge: str, retracted: bool = False):
    with connect(url) as conn:
        return [r for r in jstore.load_judgment_rows(conn, "fixtures", include_retracted=True)
                if r.judge == judge and (r.retracted_at is not None) == retracted]


def test_grade_three_with_the_keyboard_undo_one_and_the_rows_are_in_postgres(
        served, browser, database_module_url, tmp_path):
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(served.url + "/")
        assert page.url.endswith("/q/q04"), page.content()[:2000]
        assert page.locator("#query-text").inner_text() == "is it going to rain tomorrow"
        assert page.locator("#category").inner_text() == "paraphrase"
        assert page.locator(".doc").count() == 3
        assert page.locator("#progress").inner_text() == "0 judged / 5 left"
        shown = page.locator("body").inner_text().lower()
        for hidden in ("score", "rank", "bm25", "dense", "fused", "configuration"):
            assert hidden not in shown
        order = [page.locator(f"#doc-{i}").get_attribute("data-doc") for i in range(3)]
        page.keyboard.press("3")
        page.wait_for_selector("#progress[data-judged='1']")
        page.keyboard.press("1")
        page.wait_for_selector("#progress[data-judged='2']")
        page.keyboard.press("0")
        page.wait_for_selector("#progress[data-judged='3']")
        assert page.locator("#progress").inner_text() == "3 judged / 2 left"
        graded = {r.doc_id: r.grade for r in rows_of(database_module_url, "ann")}
        assert graded == {order[0]: 3, order[1]: 1, order[2]: 0}
        page.keyboard.press("u")
        page.wait_for_selector("#message:has-text('undone')")  # the next page shows it
        assert f"undone: {order[2]} (was 0)" in page.locator("#message").inner_text()
        assert page.locator("#progress").inner_text() == "2 judged / 3 left"
        live = rows_of(database_module_url, "ann")
        assert {r.doc_id: r.grade for r in live} == {order[0]: 3, order[1]: 1}
        assert all(r.source == "human" and r.guideline == "1" and r.judged_at is not None
                   and r.content_hash for r in live)
        assert [r.doc_id for r in rows_of(database_module_url, "ann", retracted=True)] \
            == [order[2]]
        # n / p move the focus; past the last document n goes to the next query
        page.keyboard.press("n")
        page.keyboard.press("n")
        page.keyboard.press("n")
        page.wait_for_url("**/q/q05")
        shot = tmp_path / "rating-page.png"
        page.screenshot(path=str(shot), full_page=True)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        review = os.environ.get("SEARCHEVAL_SCREENSHOTS")
        if review:
            Path(review).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(review) / "rating-page.png")
    finally:
        context.close()


def test_a_second_tab_grading_the_same_pair_is_refused_and_writes_nothing(
        served, browser, database_module_url):
    context = browser.new_context()
    try:
        first, second = context.new_page(), context.new_page()
        first.goto(served.url + "/q/q05")
        second.goto(served.url + "/q/q05")
        doc = first.locator("#doc-0").get_attribute("data-doc")
        first.keyboard.press("2")
        first.wait_for_selector("#doc-0[data-grade='2']")
        second.keyboard.press("0")
        second.wait_for_selector("#message:not(:empty)")
        assert "another tab" in second.locator("#message").inner_text()
        assert [(r.doc_id, r.grade) for r in rows_of(database_module_url, "ann")
                if r.query_id == "q05"] == [(doc, 2)]
    finally:
        context.close()


def test_bad_input_gets_a_clear_answer_and_writes_nothing(served, database_module_url):
    before = len(rows_of(database_module_url, "ann"))
    with page_client(served.url) as client:
        page = client.get("/q/zz99")
        assert page.status_code == 404 and "unknown query" in page.text
        json = {"Accept": "application/json"}
        unknown = client.post("/grade", data={"query_id": "zz99", "doc_id": "geocoding",
                                              "grade": "1"}, headers=json)
        assert unknown.status_code == 404 and "unknown query 'zz99'" in unknown.json()["error"]
        seven = client.post("/grade", data={"query_id": "q04", "doc_id": "geocoding",
                                            "grade": "7"}, headers=json)
        assert seven.status_code == 422
        assert seven.json()["error"].startswith("expected a whole grade in 0..3, got '7'")
        forged = client.post("/grade", data={"query_id": "q04", "doc_id": "geocoding",
                                             "grade": "1", "judge": "mallory"}, headers=json)
        assert forged.status_code == 400 and "the judge is the server's" in forged.json()["error"]
        other = client.post("/grade", data={"query_id": "q04", "doc_id": "not-pooled",
                                            "grade": "1"}, headers=json)
        assert other.status_code == 404
        html = client.post("/grade", data={"query_id": "q04", "doc_id": "geocoding",
                                           "grade": "9"})
        assert html.status_code == 422 and "nothing was written" in html.text
        # digits that are not ASCII: "²" made int() fail (a 500), Arabic-Indic "٣" read as 3
        for raw in ("²", "\u0663", "1" * 40):
            odd = client.post("/grade", data={"query_id": "q04", "doc_id": "geocoding",
                                              "grade": raw}, headers=json)
            assert odd.status_code == 422 and odd.json()["error"].startswith(
                "expected a whole grade in 0..3"), raw
        for raw in ("²", "9" * 30):
            odd = client.post("/grade", data={"query_id": "q04", "doc_id": "geocoding",
                                              "grade": "1", "expected": raw}, headers=json)
            assert odd.status_code == 400 and "the id of the grade" in odd.json()["error"], raw
    assert len(rows_of(database_module_url, "ann")) == before
    assert rows_of(database_module_url, "mallory") == []


def test_another_address_needs_a_token_and_the_token_is_checked(database_module_url):
    with pytest.raises(InputError, match="needs a token") as err:
        check_binding("0.0.0.0", None)
    assert err.value.field == "host"
    check_binding("127.0.0.1", None)
    token = "s3cret-of-the-test-page"
    check_binding("0.0.0.0", token)
    server = Served(create_app(make_session(database_module_url, "tok", token=token)))
    try:
        with httpx.Client(base_url=server.url) as client:
            assert client.get("/q/q04").status_code == 401
            assert client.post("/grade", data={"query_id": "q04", "doc_id": "geocoding",
                                               "grade": "1"}).status_code == 401
            assert client.get("/q/q04?token=wrong").status_code == 401
            opened = client.get(f"/q/q04?token={token}")
            assert opened.status_code == 200 and token not in opened.text
            assert token not in str(client.cookies.get("searcheval_rate"))
            graded = client.post("/grade", data={"query_id": "q04", "doc_id": "geocoding",
                                                 "grade": "1"},
                                 headers={"Accept": "application/json",  # the cookie, and
                                          "X-CSRF-Token": csrf_of(opened.text)})  # the page's
            assert graded.status_code == 200
        assert [(r.doc_id, r.grade) for r in rows_of(database_module_url, "tok")] \
            == [("geocoding", 1)]
    finally:
        server.stop()


def test_searcheval_rate_serves_the_pool_until_it_is_stopped(served, database_module_url,
                                                             tmp_path):
    import subprocess
    import sys

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    log = open(tmp_path / "rate.log", "w")
    process = subprocess.Popen(
        [str(Path(sys.executable).with_name("searcheval")), "rate", "--judge", "cli-judge", "--pool",
         "rating-test", "--port", str(port), "--fixtures", str(ROOT / "fixtures"),
         "--database-url", database_module_url], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/q/q04", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise AssertionError((tmp_path / "rate.log").read_text())
                time.sleep(0.2)
        assert page.status_code == 200 and "Judge <strong id=\"judge\">cli-judge</strong>" in page.text
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def test_without_a_catalog_the_page_shows_the_looked_up_version_and_a_grade_keeps_its_hash(
        browser, database_module_url, example_service, tmp_path):
    """A dataset of queries and judgments only: the page shows what the document lookup returned
    (from Postgres: the engine is not asked), and a grade records the hash of the version shown,
    even when a run has seen a newer one since the page was loaded."""
    from datetime import datetime, timezone

    from searcheval.io.collection import load_collection
    from searcheval.judging.versions import Observed, record_versions
    from searcheval.rankers.documents import check_lookup, look_up

    example_service.set_knobs()
    dataset = tmp_path / "rated-engine"
    dataset.mkdir()
    for name in ("golden_queries.json", "judgments.csv"):
        shutil.copy(ROOT / "fixtures" / name, dataset / name)
    collection = load_collection(dataset=dataset)
    assert not collection.has_catalog
    pooled = POOLED["q04"]
    lookup = check_lookup({"url": f"{example_service.url}/documents/{{id}}",
                           "content_hash": "content_hash"}, "native", None)
    found = look_up(lookup, pooled)["documents"]
    with connect(database_module_url) as conn:
        with conn.transaction(), conn.cursor() as cur:
            record_versions(cur, "rated-engine", Observed(
                at=datetime.now(timezone.utc), documents=found), "run-1")
        save_pool(conn, "engine-pool", "rated-engine", "run-1", {"q04": pooled})
        pool, pool_items = jstore.load_pool(conn, "engine-pool")
    server = Served(create_app(RatingSession(database_url=database_module_url,
                                             collection=collection, pool=pool, items=pool_items,
                                             judge="eve")))
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(server.url + "/q/q04")
        docs = [page.locator(f"#doc-{i}") for i in range(len(pooled))]
        shown = {d.get_attribute("data-doc"): (d.locator("h3").inner_text(),
                                               d.locator("p").first.inner_text()) for d in docs}
        served = {d: httpx.get(f"{example_service.url}/documents/{d}").json() for d in pooled}
        assert shown == {d: (served[d]["title"], served[d]["text"]) for d in pooled}
        # a run reports a newer version of the focused document while the judge reads it
        first = docs[0].get_attribute("data-doc")
        with connect(database_module_url) as conn, conn.transaction(), conn.cursor() as cur:
            record_versions(cur, "rated-engine", Observed(
                at=datetime.now(timezone.utc), documents={first: {"content_hash": "newer",
                                                                  "title": "New"}}), "run-2")
        page.keyboard.press("2")
        page.wait_for_selector("#progress[data-judged='1']")
        with connect(database_module_url) as conn:
            rows = [r for r in jstore.load_judgment_rows(conn, "rated-engine")
                    if r.judge == "eve"]
        assert [(r.doc_id, r.grade, r.content_hash) for r in rows] \
            == [(first, 2, served[first]["content_hash"])]
        # reloaded, the page shows the newer version, and a grade is of that one
        page.goto(server.url + "/q/q04")
        newer = page.locator(f".doc[data-doc='{first}']")
        assert newer.locator("h3").inner_text() == "New"
        newer.locator("button[value='1']").click()
        page.wait_for_url("**/q/q04")
        with connect(database_module_url) as conn:
            rows = [r for r in jstore.load_judgment_rows(conn, "rated-engine")
                    if r.judge == "eve"]
        assert sorted((r.grade, r.content_hash) for r in rows) \
            == [(1, "newer"), (2, served[first]["content_hash"])]
    finally:
        context.close()
        server.stop()
