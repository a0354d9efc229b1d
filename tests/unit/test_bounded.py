"""searcheval.rankers.bounded and searcheval.redaction without a network: JSON depth counted as
stated, NUL and long numbers refused, the deadline shared by every read of a thread, secrets
redacted in their encoded forms and in log records."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searcheval import redaction
from searcheval.rankers import bounded
from searcheval.rankers.bounded import (
    AnswerRefused,
    Bounds,
    ClientPerThread,
    bounded_client,
    check_depth,
    deadline,
    json_depth,
    parse_json,
)


@pytest.mark.parametrize("text, depth", [
    (b"1", 0), (b"[]", 1), (b"[[1]]", 2), (b'{"a": [{"b": 1}]}', 3),
    (b'{"a": "[[[[ \\" [[["}', 1),  # brackets in strings (and escaped quotes) do not count
    (b'{"a": "\\\\", "b": [[1]]}', 3),  # an escaped backslash ends no string early
    (b"[" * 100_000 + b"]" * 100_000, 100_000),
])
def test_json_depth(text, depth):
    assert json_depth(text) == depth


@settings(max_examples=3000, deadline=None)
@given(st.binary(max_size=24).map(lambda b: bytes(b"[]{}\"\\,:a "[x % 10] for x in b)),
       st.integers(0, 5))
def test_the_cheap_depth_check_never_passes_what_the_exact_count_refuses(data, limit):
    """`check_depth`'s shortcut (bytes operations in C) says "at most `limit` deep" only when
    the exact count (strings skipped, escapes honoured) agrees; else the exact count decides."""
    if bounded._within(data, limit):
        assert json_depth(data) <= limit


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(alphabet='ab[]{}" ', max_size=4),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(alphabet="k[}", max_size=2), inner, max_size=3)),
       st.integers(1, 6))
def test_check_depth_refuses_exactly_what_is_deeper_than_its_limit(value, limit):
    data = json.dumps(value).encode()
    if json_depth(data) > limit:
        with pytest.raises(AnswerRefused, match="levels deep"):
            check_depth(data, limit)
    else:
        check_depth(data, limit)


def test_a_search_engines_answer_takes_the_shortcut():
    """No backslash, no bracket in a string: the common answer is measured without a Python step
    per character (the exact count took longer than parsing the JSON)."""
    answer = json.dumps({"hits": [{"id": f"d{i}", "score": 1 / (i + 1), "title": "a b"}
                                  for i in range(100)], "took": 3}).encode()
    assert bounded._within(answer, 3) and not bounded._within(answer, 2)
    assert json_depth(answer) == 3
    assert not bounded._within(b'{"a": "\\"}', 64)  # an escape: the exact count decides
    assert not bounded._within(b'["[", 1]', 64)  # a bracket in a string: the exact count decides


def test_parse_json_refuses_depth_nul_and_long_numbers_and_reads_the_rest():
    with pytest.raises(AnswerRefused, match=r"JSON nested 3 levels deep, over max_json_depth \(2\)"):
        parse_json(b'{"a": [{}]}', Bounds(max_depth=2))
    with pytest.raises(AnswerRefused, match="NUL"):
        parse_json(b'{"a": "x\\u0000"}', Bounds())
    assert parse_json(b'{"a": "x\\\\u0000"}', Bounds()) == {"a": "x\\u0000"}  # an escaped \\
    with pytest.raises(AnswerRefused, match="a number of 101 digits"):
        parse_json(b"[" + b"1" * 101 + b"]", Bounds())
    assert parse_json(b"[" + b"1" * 100 + b"]", Bounds()) == [int("1" * 100)]
    with pytest.raises(AnswerRefused, match="not JSON") as refused:
        parse_json(b"<html>oops</html>", Bounds())
    assert refused.value.excerpt == "<html>oops</html>"


def test_the_deadline_covers_the_whole_request_and_nests():
    from searcheval.rankers import bounded

    with deadline(0.2):
        assert 0 < bounded._left(10.0, TimeoutError) <= 0.2
        time.sleep(0.25)
        with pytest.raises(TimeoutError):
            bounded._left(10.0, TimeoutError)
    assert bounded._left(10.0, TimeoutError) == 10.0  # outside a deadline: the read timeout


def test_the_client_keeps_the_deadline_on_every_transport(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    with bounded_client() as client:
        pools = [t._pool for t in [client._transport, *client._mounts.values()] if t]
        assert len(pools) >= 2  # the proxy's transport too
        assert all(type(p._network_backend).__name__ == "DeadlineBackend" for p in pools)
        assert client.headers["accept-encoding"] == "gzip, deflate"
        assert client.follow_redirects is False


def test_each_thread_gets_its_own_one_connection_client_and_all_are_closed():
    seen: dict[str, object] = {}
    with ClientPerThread(headers={"x-a": "1"}, read_timeout=5) as clients:
        def grab(name):
            seen[name] = clients.get()
            assert clients.get() is seen[name]  # the same thread: the same client

        threads = [threading.Thread(target=grab, args=(f"t{i}",)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        made = list(seen.values())
        assert len({id(c) for c in made}) == 3
        for client in made:
            assert client._transport._pool._max_connections == 1
            assert client.headers["x-a"] == "1" and client.follow_redirects is False
            assert type(client._transport._pool._network_backend).__name__ == "DeadlineBackend"
        assert len({id(c._transport._pool._ssl_context) for c in made}) == 1  # made once
    assert all(c.is_closed for c in made)


@pytest.fixture
def clean():
    redaction.forget_all()
    yield
    redaction.forget_all()


def test_redaction_covers_the_encoded_forms_and_log_records(clean, caplog):
    secret = "s3cr3t value/+="
    assert redaction.redact(f"x {secret} y") == f"x {secret} y"  # nothing remembered yet
    redaction.remember(secret)
    redaction.remember("ab")  # too short to redact safely: not remembered
    for form in (secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode()):
        assert redaction.redact(f"<{form}>") in ("<[redacted]>", "<[redacted]=>"), form
    assert redaction.redact("ab cd") == "ab cd"
    assert redaction.redact_deep({"k": [f"a {secret}"]}) == {"k": ["a [redacted]"]}
    with caplog.at_level(logging.INFO, logger="httpx"):
        logging.getLogger("httpx").info("GET /search?key=%s", quote(secret, safe=""))
    assert caplog.records[-1].getMessage() == "GET /search?key=[redacted]"
