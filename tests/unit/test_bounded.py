"""searcheval.rankers.bounded and searcheval.redaction without a network: JSON depth counted as
stated, NUL and long numbers refused, the deadline shared by every read of a thread, secrets
redacted in their encoded forms and in log records."""

from __future__ import annotations

import base64
import logging
import time
from urllib.parse import quote

import pytest

from searcheval import redaction
from searcheval.rankers.bounded import (
    AnswerRefused,
    Bounds,
    bounded_client,
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
