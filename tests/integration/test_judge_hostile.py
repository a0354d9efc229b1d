"""A model judge's endpoint is a backend like any other (issue 28): its answers are read through
the bounded reader, and a credential the endpoint quotes back never reaches the pair's error.
A real HTTP server on loopback plays the hostile endpoint."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from searcheval.judging.grading import PairInput, grade_openai
from searcheval.judging.judges import judges_from
from searcheval.types import Query

KEY = "sk-planted-judge-key-0123456789"


class Hostile(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        mode = self.path.split("/")[1]
        if mode == "echo":  # a 401 that quotes the credential it was sent
            body = json.dumps({"error": f"bad key {self.headers.get('Authorization')}"})
            self.send_response(401)
        else:  # a valid answer buried in 8 MiB of padding: over the judge's 4 MiB bound
            body = json.dumps({"choices": [{"message": {"content": '{"grade": 2}'}}],
                               "padding": "x" * (8 * 1024 * 1024)})
            self.send_response(200)
        data = body.encode()
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture(scope="module")
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def judge(base_url: str):
    return judges_from({"judges": {"j": {
        "kind": "openai", "model": "m",
        "params": {"base_url": base_url, "api_key": {"env": "JUDGE_KEY"}, "retries": 0,
                   "prompt": "{query} / {title}: {text}"}}}}, "judges.yaml")["j"]


def pair() -> PairInput:
    return PairInput(query=Query(id="q1", text="weather"), doc_id="d1",
                     document={"doc_id": "d1", "title": "Rain", "text": "rain tomorrow"},
                     content_hash="h")


def test_a_credential_quoted_by_the_endpoint_is_redacted_from_the_pair_error(endpoint,
                                                                            monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    [(_, answer)] = list(grade_openai(judge(f"{endpoint}/echo/v1"), [pair()], (0, 3),
                                      "guideline", {}))
    assert answer.grade is None and answer.error.startswith("HTTP 401")
    assert KEY not in answer.error and "[redacted]" in answer.error


def test_an_answer_over_the_bound_is_the_pairs_error_never_a_grade(endpoint, monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", KEY)
    [(_, answer)] = list(grade_openai(judge(f"{endpoint}/big/v1"), [pair()], (0, 3),
                                      "guideline", {}))
    assert answer.grade is None
    assert "max_response_bytes" in answer.error, answer.error
