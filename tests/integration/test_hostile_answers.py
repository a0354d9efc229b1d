"""Issue 28: the `http` kind and the document lookup against a hostile search service
(tests/hostile_service.py): every answer bounded in bytes (wire and decoded), hits, nesting, id
and title length and total time, each bound a named failure of its query or document; memory
measured in a fresh process (tests/hostile_client.py) as its peak RSS; a secret a 401 body quotes
never kept; credentials in URLs refused; `{env:}` in a query parameter sent as its value."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hostile_service import gzip_bomb, hostile_service
from searcheval.errors import InputError
from searcheval.rankers.configs import configurations_from
from searcheval.rankers.documents import check_lookup, look_up
from searcheval.rankers.registry import RunContext, run_configuration
from searcheval.redaction import REDACTED
from searcheval.types import Query

ROOT = Path(__file__).resolve().parents[2]
CLIENT = ROOT / "tests" / "hostile_client.py"
#: the peak RSS a bounded client stays under, in MB, for answers of 200 MB and a 1 GB gzip bomb
#: at concurrency 2 (two answers of at most max_response_bytes = 16 MiB each in flight, plus the
#: interpreter and searcheval: about 50 MB measured alone); the unbounded reader reached 1.5-4.7 GB
PEAK_RSS_BOUND_MB = 200
QUERIES = [Query(id="q1", text="first"), Query(id="q2", text="second")]


@pytest.fixture(scope="module")
def service():
    gzip_bomb()  # made once, before any client's deadline runs (it takes seconds under load)
    with hostile_service() as running:
        yield running


def configuration(service, mode: str, **params):
    entry = {"kind": "http", "served": True,
             "params": {"base_url": service.base(mode), "url": "/search",
                        "query_params": {"q": "{text}"}, "id": "hits[*].id",
                        "score": "hits[*].score", "retries": 0, **params}}
    return configurations_from({"configurations": {"web": entry}}, "hostile.yaml")["web"]


def run(service, mode: str, **params):
    return run_configuration(configuration(service, mode, **params), RunContext(secrets={}),
                             QUERIES, None, 10)


def client(*args: str) -> dict:
    done = subprocess.run([sys.executable, str(CLIENT), *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# -- High 1: unbounded answers --------------------------------------------------------------

@pytest.mark.parametrize("mode, words", [
    ("big", "on the wire"),                  # 200 MB, no Content-Length
    ("big_length", "answer of 209,715,200 bytes is over max_response_bytes"),
    ("many_hits", "over max_response_bytes"),  # 3 million hits
    ("bomb", "once decoded (gzip)"),          # 1 MB of gzip, 1 GB decoded
])
def test_a_huge_answer_is_the_querys_named_failure_in_bounded_memory(service, mode, words):
    # a generous deadline: this test is about bytes, and the machine may be busy
    out = client("run", service.base(mode), json.dumps({"concurrency": 2, "timeout_s": 60}),
                 "q1,q2")
    assert out["results"] == {}
    assert set(out["errors"]) == {"q1", "q2"}
    for cause in out["errors"].values():
        assert cause.startswith("bad response: ") and "max_response_bytes" in cause, cause
        assert words in cause, cause
    assert out["peak_rss_mb"] < PEAK_RSS_BOUND_MB, out


def test_the_lookup_of_a_gzip_bomb_and_a_huge_document_is_a_failure_in_bounded_memory(service):
    for mode in ("bomb", "big"):
        out = client("lookup", service.base(mode) + "/documents/{id}",
                     json.dumps({"concurrency": 2, "timeout_s": 60}), "a,b")
        assert out["documents"] == {}
        assert set(out["failed"]) == {"a", "b"}
        assert all("max_response_bytes" in cause for cause in out["failed"].values()), out
        assert out["peak_rss_mb"] < PEAK_RSS_BOUND_MB, out


def test_more_hits_than_max_hits_is_a_named_failure(service):
    result = run(service, "ok", max_hits=1)  # the ok mode answers 2 hits
    assert result.results == {}
    assert {e["cause"] for e in result.errors.values()} == {
        "bad response: 2 hits at hits, over max_hits (1)"}


def test_the_depth_limit_counts_levels_of_arrays_and_objects(service):
    assert run(service, "ok").errors == {}
    # {"hits": [{"id": "d1", "score": 2.0}, ...]}: an object in a list in an object, 3 levels
    assert run(service, "ok", max_json_depth=3).errors == {}
    result = run(service, "ok", max_json_depth=2)
    assert {e["cause"] for e in result.errors.values()} == {
        "bad response: JSON nested 3 levels deep, over max_json_depth (2)"}


# -- High 2: a slow drip never timed out ----------------------------------------------------

@pytest.mark.parametrize("mode", ["drip", "drip_headers"])
def test_an_answer_dripped_at_one_byte_a_second_fails_at_the_deadline(service, mode):
    out = client("run", service.base(mode), json.dumps({"timeout_s": 2, "concurrency": 2}),
                 "q1,q2")
    assert out["errors"] == {"q1": "timeout after 2 s", "q2": "timeout after 2 s"}
    # the deadline is 2 s for the whole request; each read had at most 1 s of quiet, so a
    # per-read timeout would have waited for the whole (60-byte or 10 kB) answer
    assert out["seconds"] < 2 + 1.5, out


def test_the_lookup_of_a_dripped_document_fails_at_its_deadline(service):
    out = client("lookup", service.base("drip") + "/documents/{id}",
                 json.dumps({"timeout_s": 1.5}), "a")
    assert out["failed"] == {"a": "ReadTimeout"}
    assert out["seconds"] < 1.5 + 1.5, out


# -- High 3: oversized ids and titles -------------------------------------------------------

def test_an_id_over_max_id_chars_is_the_querys_named_failure(service):
    result = run(service, "long_id")
    assert {e["cause"] for e in result.errors.values()} == {
        "bad response: the id of hit 0 is 100,000 characters, over max_id_chars (512)"}


def test_the_lookup_cuts_titles_and_never_asks_for_an_id_too_long_for_a_url(service):
    params = check_lookup({"url": service.base("huge_title") + "/documents/{id}"}, "web",
                          "hostile.yaml")
    huge = "x" * 20 * 1024 * 1024  # a 20 MB id crashed the run with httpx.InvalidURL
    found = look_up(params, ["a", huge])
    assert len(found["documents"]["a"]["title"]) == 500  # max_title_chars' default
    assert len(found["documents"]["a"]["text"]) == 2000  # TEXT_KEPT
    assert found["failed"] == {huge: f"id of {len(huge):,} characters, over max_id_chars "
                                     "(512): not looked up"}
    cut = look_up({**params, "max_title_chars": 7}, ["a"])
    assert cut["documents"]["a"]["title"] == "TTTTTTT"


# -- Medium 7 and Low: nesting, NUL, whitespace in ids, long numbers, redirects --------------

@pytest.mark.parametrize("mode, cause", [
    ("deep", "bad response: JSON nested 100,001 levels deep, over max_json_depth (64)"),
    ("nul_id", "bad response: NUL (\\u0000) in the answer refused"),
    ("digits_id", "bad response: a number of 5,000 digits in the answer (at most 100 are read)"),
    ("space_id", "bad response: the id of hit 0 'd1 d2' is empty or holds whitespace or control "
                 "characters (ids are written to TREC run files, whose columns whitespace "
                 "separates)"),
    ("redirect", "HTTP 302: a redirect to http://127.0.0.1:9/elsewhere (redirects are not "
                 "followed: point base_url at the final address)"),
])
def test_a_hostile_answer_is_a_named_failure_of_its_query(service, mode, cause):
    result = run(service, mode)
    assert result.results == {}
    assert {q: e["cause"] for q, e in result.errors.items()} == {"q1": cause, "q2": cause}


def test_the_lookup_refuses_deep_json_and_drops_nul_from_a_title(service):
    params = check_lookup({"url": service.base("deep") + "/documents/{id}"}, "web", "h.yaml")
    assert look_up(params, ["a"])["failed"] == {
        "a": "JSON nested 100,001 levels deep, over max_json_depth (64)"}
    params = check_lookup({"url": service.base("nul_id") + "/documents/{id}"}, "web", "h.yaml")
    assert look_up(params, ["a"])["failed"] == {"a": "NUL (\\u0000) in the answer refused"}


def test_the_lookup_names_a_redirect(service):
    params = check_lookup({"url": service.base("redirect") + "/documents/{id}"}, "web", "h.yaml")
    assert look_up(params, ["a"])["failed"] == {
        "a": "HTTP 302: a redirect (redirects are not followed: point the lookup's url at the "
             "final address)"}


def test_a_lookup_file_nested_too_deep_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "documents.jsonl"
    path.write_text('{"id": "a", "title": "t"}\n' + "[" * 100_000 + "]" * 100_000 + "\n")
    params = check_lookup({"file": str(path)}, "web", str(tmp_path / "c.yaml"))
    with pytest.raises(InputError) as refused:
        look_up(params, ["a"])
    assert str(refused.value) == (f"{path}:2: expected one JSON object per line: JSON nested "
                                  "100,000 levels deep, over max_json_depth (64)")


# -- High 4 and Medium 11: secrets ----------------------------------------------------------

SECRET = "sk-planted-5a8f2c9e1d7b4a36"
KEY = "key-planted-77e1c0d9b2"


def test_a_secret_quoted_by_a_401_body_is_never_kept(service, monkeypatch):
    monkeypatch.setenv("HOSTILE_TOKEN", SECRET)
    monkeypatch.setenv("HOSTILE_KEY", KEY)
    config = configuration(service, "echo401",
                           headers={"Authorization": {"env": "HOSTILE_TOKEN",
                                                      "prefix": "Bearer "}},
                           query_params={"q": "{text}", "api_key": {"env": "HOSTILE_KEY"}})
    assert SECRET not in json.dumps(config.resolved()) and KEY not in json.dumps(
        config.resolved())
    result = run_configuration(config, RunContext(secrets={}), QUERIES, None, 10)
    causes = [e["cause"] for e in result.errors.values()]
    assert len(causes) == 2
    for cause in causes:
        assert cause.startswith("HTTP 401: unauthorized: the credential Bearer "
                                f"{REDACTED} and the query"), cause
        assert SECRET not in cause and KEY not in cause
        assert f"api_key={REDACTED}" in cause
    # {env: HOSTILE_KEY} in a query parameter is sent as its value, not as "{'env': ...}"
    sent = [r["path"] for r in service.requests if r["path"].startswith("/m/echo401/")]
    assert any(f"api_key={KEY}" in path for path in sent), sent


@pytest.mark.parametrize("params, field, words", [
    ({"base_url": "http://user:hunter2@127.0.0.1:9"}, "web.base_url", "credentials in a URL"),
    ({"url": "/search?api_key=abc123"}, "web.url", "a credential (api_key=...)"),
    ({"query_params": {"q": "{text}", "api_key": "abc123"}}, "web.query_params.api_key",
     "a credential is never written in the configurations file"),
    ({"query_params": {"q": "{text}", "token": {"env": "X", "extra": 1}}},
     "web.query_params.token", "expected {env: VARIABLE} or {secret: BLOCK}"),
])
def test_credentials_in_a_url_or_a_query_parameter_are_refused(params, field, words):
    entry = {"kind": "http", "params": {"base_url": "http://127.0.0.1:9", "url": "/search",
                                        "id": "hits[*].id", **params}}
    with pytest.raises(InputError) as refused:
        configurations_from({"configurations": {"web": entry}}, "c.yaml")
    assert refused.value.field == field
    assert words in refused.value.message


def test_a_lookup_url_with_a_password_is_refused():
    with pytest.raises(InputError) as refused:
        check_lookup({"url": "http://u:p@127.0.0.1:9/documents/{id}"}, "web", "c.yaml")
    assert refused.value.field == "web.documents.url"
