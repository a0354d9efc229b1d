"""The `openai` judge end to end against a real local chat-completions server (a subprocess:
searcheval.bench.chat_server), through a real Postgres: answers, 429 with Retry-After, 500,
malformed answers, a grade outside the scale, slow answers; the cache; a rerun after a run was
stopped; the dry run's estimate; credentials from the environment only."""

from __future__ import annotations

import time

import httpx
import pytest

from searcheval.bench.chat_server import serve_chat
from searcheval.errors import InputError
from searcheval.judging.judges import judges_from
from searcheval.judging.labelling import label
from searcheval.store import judgments as rows_store
from searcheval.types import Collection, Query, Resource

PROMPT = ("Query: {query}\nDocument: {title}\n{text}\nGuideline:\n{guideline}\n"
          'Answer as JSON {"grade": <{scale_min}..{scale_max}>, "rationale": "..."}')


def collection(name: str, texts: dict[str, str]) -> Collection:
    resources = [Resource(id=doc, name=f"Doc {doc}", description=text) for doc, text in
                 texts.items()]
    queries = [Query(id="q1", text="weather forecast api", category="exact-name"),
               Query(id="q2", text="email validation", category="capability")]
    return Collection(name=name, resources=resources, queries=queries, judgments=[])


def judge(base_url: str, **params):
    raw = {"judges": {"small": {"kind": "openai", "model": "test-small", "params": {
        "base_url": base_url, "api_key": {"env": "JUDGE_TEST_KEY"}, "prompt": PROMPT,
        "retries": 2, "backoff_s": 0.05, "max_backoff_s": 2.0, "timeout_s": 2.0,
        "concurrency": 4, **params},
        "prices": {"per_1000_input_tokens": 0.5, "per_1000_output_tokens": 2.0}}}}
    return judges_from(raw, "judges.yaml")["small"]


@pytest.fixture(scope="module")
def chat(monkeypatch_module):
    monkeypatch_module.setenv("JUDGE_TEST_KEY", "sk-test-123")
    with serve_chat(delay_ms=5, api_key_env="JUDGE_TEST_KEY") as url:
        yield url


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def stats(url: str) -> dict:
    return httpx.get(url.rsplit("/v1", 1)[0] + "/stats").json()


def test_label_grades_faults_cache_and_cost(conn, chat):
    texts = {"d1": "Hourly forecasts.", "d2": "Validates email addresses.",
             "d3": "FAULT:429 a rate-limited answer, then a grade",
             "d4": "FAULT:500 always failing", "d5": "FAULT:MALFORMED prose only",
             "d6": "FAULT:GRADE9 a grade outside the scale", "d7": "FAULT:SLOW too slow"}
    c = collection("judge_faults", texts)
    pairs = [("q1", d) for d in texts]
    j = judge(chat)
    before = stats(chat)["requests"]
    started = time.perf_counter()
    result = label(conn, j, c, pairs)
    took = time.perf_counter() - started
    assert result.pairs == 7 and result.requested == 7 and result.from_cache == 0
    assert result.graded == 3 and result.failed == 4  # d1, d2, d3 (after its 429)
    causes = {e["doc_id"]: e["cause"] for e in result.errors}
    assert causes["d4"] == "HTTP 500 after 3 attempts"
    assert causes["d5"].startswith("malformed answer")
    assert causes["d6"] == "grade 9 outside the scale 0..3"
    assert causes["d7"] == "timeout after 2 s"
    # d3: its 429 said Retry-After: 1, so its answer came after a second's wait at least
    assert took >= 1.0
    # requests: d1, d2, d5, d6, d7 once; d3 twice (429 then the answer); d4 three times (500s)
    assert result.requests == 5 + 2 + 3
    assert stats(chat)["requests"] - before == 10
    assert stats(chat)["authorized"] == stats(chat)["requests"]  # the key from the environment
    # tokens and cost are the server's usage: 12 completion tokens per answered request
    answered = 5  # d1, d2, d3, d5, d6 (d7 timed out, the 429 and 500s carry no usage)
    assert result.output_tokens == 12 * answered
    assert result.cost == pytest.approx(0.5 * result.input_tokens / 1000
                                        + 2.0 * result.output_tokens / 1000)
    rows = [r for r in rows_store.load_judgment_rows(conn, "judge_faults") if r.judge == "small"]
    assert sorted(r.doc_id for r in rows) == ["d1", "d2", "d3"]
    for r in rows:
        assert r.source == "model" and r.judge_hash == j.sha256 and r.prompt_version == "1"
        assert r.rationale.startswith("graded ") and r.content_hash
        assert r.grade == int(r.rationale.split()[1])

    # a rerun asks only for what failed; the graded pairs are done and cost nothing
    again = label(conn, j, c, pairs)
    assert again.done_before == 3 and again.requested == 4 and again.graded == 0
    assert len(rows_store.load_judgment_rows(conn, "judge_faults")) == 3  # no duplicate

    # the same pairs in another judgment set: every answer from the cache, no request
    other = collection("judge_faults_copy", texts)
    before = stats(chat)["requests"]
    cached = label(conn, j, other, [("q1", "d1"), ("q1", "d2"), ("q1", "d3")])
    assert cached.from_cache == 3 and cached.requested == 0 and cached.cost == 0
    assert stats(chat)["requests"] == before
    copied = rows_store.load_judgment_rows(conn, "judge_faults_copy")
    assert sorted((r.doc_id, r.grade) for r in copied) == sorted((r.doc_id, r.grade) for r in rows)


def test_dry_run_sends_and_writes_nothing(conn, chat):
    c = collection("judge_dry", {"d1": "Hourly forecasts.", "d2": "Emails."})
    j = judge(chat, max_tokens=100)
    before = stats(chat)["requests"]
    dry = label(conn, j, c, [("q1", "d1"), ("q2", "d2")], dry_run=True)
    assert dry.dry_run and dry.requested == 2 and dry.requests == 2
    assert dry.output_tokens == 2 * 100  # max_tokens: the most an answer takes
    assert dry.cost == pytest.approx(0.5 * dry.input_tokens / 1000 + 2.0 * 200 / 1000)
    assert stats(chat)["requests"] == before
    assert rows_store.load_judgment_rows(conn, "judge_dry") == []


def test_stopped_run_keeps_what_it_paid_for(conn, chat, monkeypatch):
    """A run stopped after 3 answers: a rerun asks for the rest only, and writes no duplicate."""
    texts = {f"d{i}": f"Document number {i}." for i in range(8)}
    c = collection("judge_stopped", texts)
    pairs = [("q2", d) for d in texts]
    j = judge(chat, concurrency=1)
    from searcheval.judging import labelling

    real = labelling.answers

    def stop_after_three(*args, **kwargs):
        for n, item in enumerate(real(*args, **kwargs)):
            if n == 3:
                raise KeyboardInterrupt
            yield item

    monkeypatch.setattr(labelling, "answers", stop_after_three)
    with pytest.raises(KeyboardInterrupt):
        label(conn, j, c, pairs)
    monkeypatch.setattr(labelling, "answers", real)
    assert len(rows_store.load_judgment_rows(conn, "judge_stopped")) == 3
    before = stats(chat)["requests"]
    rest = label(conn, j, c, pairs)
    assert rest.done_before == 3 and rest.requested == 5 and rest.graded == 5
    assert stats(chat)["requests"] - before == 5
    stored = rows_store.load_judgment_rows(conn, "judge_stopped")
    assert sorted(r.doc_id for r in stored) == sorted(texts)  # each pair once


def test_missing_credential_refused_before_any_request(conn, chat, monkeypatch):
    monkeypatch.delenv("JUDGE_TEST_KEY")
    c = collection("judge_nokey", {"d1": "x"})
    before = stats(chat)["requests"]
    with pytest.raises(InputError, match="JUDGE_TEST_KEY is not set") as caught:
        label(conn, judge(chat), c, [("q1", "d1")])
    assert "sk-test" not in str(caught.value)
    assert stats(chat)["requests"] == before


def test_prompt_naming_a_missing_field_refused_before_any_request(conn, chat):
    c = collection("judge_field", {"d1": "x"})
    j = judge(chat, prompt="{query} {brand}")
    before = stats(chat)["requests"]
    with pytest.raises(InputError) as caught:
        label(conn, j, c, [("q1", "d1")])
    assert caught.value.file == "judges.yaml" and caught.value.field == "small.prompt"
    assert "{brand}" in caught.value.message
    assert stats(chat)["requests"] == before


def test_rate_limit_spaces_the_requests(conn, chat):
    """rate_limit 20/s: 10 requests start at least 9 x 1/20 s = 0.45 s apart from first to last."""
    texts = {f"r{i}": f"rate limited document {i}" for i in range(10)}
    c = collection("judge_rate", texts)
    started = time.perf_counter()
    result = label(conn, judge(chat, rate_limit=20.0, concurrency=8), c,
                   [("q1", d) for d in texts])
    assert result.graded == 10 and time.perf_counter() - started >= 9 / 20
