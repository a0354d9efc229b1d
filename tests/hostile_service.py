"""A deliberately hostile search service for tests: one mode per attack of issue 28.

`hostile_service()` serves on a free loopback port in a thread of the test process and stops when
the block ends. Every path is `/m/<mode>/<anything>` (a search at `/m/<mode>/search`, a document
lookup at `/m/<mode>/documents/<id>`); the answer is the mode's attack, and every request is kept
in `service.requests` (method, path, headers) so a test can see what was sent.

Modes:

| mode | answer |
| --- | --- |
| `ok` | a well-formed answer: hits d1, d2 (a lookup: a small document) |
| `big` | 200 MB of JSON, no Content-Length (read until the connection closes) |
| `big_length` | 200 MB of JSON, announced by Content-Length |
| `many_hits` | 3 million hits, streamed |
| `bomb` | 1 MB of gzip that decodes to 1 GB (Content-Encoding: gzip) |
| `drip` | the headers at once, then the body at 1 byte per second |
| `drip_headers` | the status line and headers at 1 byte per second |
| `long_id` | one hit whose id is 100,000 characters |
| `space_id` | ids with a space and a newline (a TREC row injected) |
| `nul_id` | an id holding NUL |
| `digits_id` | an id of 5,000 digits (beyond Python's int limit) |
| `deep` | JSON nested 100,000 deep |
| `echo401` | 401 whose body quotes the request's Authorization header and query string |
| `echo401_if` | `/m/echo401_if/<word>/search`: `echo401` for a query whose text holds the word, else no hits |
| `redirect` | 302 to another address |
| `huge_title` | a lookup's document with a 100,000-character title |
| `markup` | hits and a document whose title is markdown and HTML (links, images, script) |
"""

from __future__ import annotations

import gzip
import io
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

MB = 1024 * 1024
BIG = 200 * MB
MARKUP_TITLE = ("[click](http://127.0.0.1:9/steal) ![img](http://127.0.0.1:9/pixel.png) "
                "<img src=x onerror=alert(1)> <script>alert(2)</script> | pipe `tick` **bold**")

_bomb: bytes | None = None
_bomb_lock = threading.Lock()


def gzip_bomb() -> bytes:
    """gzip of `{"hits": [` + 1 GB of spaces + `]}`: about 1 MB (made once per process)."""
    global _bomb
    with _bomb_lock:
        if _bomb is None:
            buffer = io.BytesIO()
            with gzip.GzipFile(fileobj=buffer, mode="wb", compresslevel=9) as gz:
                gz.write(b'{"hits": [')
                block = b" " * (16 * MB)
                for _ in range(64):
                    gz.write(block)
                gz.write(b"]}")
            _bomb = buffer.getvalue()
    return _bomb


@dataclass
class HostileService:
    url: str
    requests: list[dict] = field(default_factory=list)

    def base(self, mode: str) -> str:
        return f"{self.url}/m/{mode}"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # the connection closes after each answer
    service: HostileService

    def log_message(self, *args):  # quiet
        pass

    def do_GET(self):
        self._answer()

    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(min(length, MB))
        self._answer()

    def _send(self, status: int, body: bytes, headers: dict | None = None,
              length: bool = True) -> None:
        self.send_response(status)
        for name, value in (headers or {"Content-Type": "application/json"}).items():
            self.send_header(name, value)
        if length:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _stream(self, parts: Iterator[bytes], headers: dict | None = None) -> None:
        self.send_response(200)
        for name, value in (headers or {"Content-Type": "application/json"}).items():
            self.send_header(name, value)
        self.end_headers()
        for part in parts:
            self.wfile.write(part)

    def _answer(self):
        parts = urlsplit(self.path)
        self.service.requests.append({"method": self.command, "path": self.path,
                                      "headers": dict(self.headers)})
        segments = parts.path.split("/")
        mode = segments[2] if len(segments) > 2 and segments[1] == "m" else "ok"
        lookup = "documents" in segments
        doc_id = unquote(segments[-1]) if lookup else ""
        try:
            getattr(self, f"_mode_{mode}")(lookup, doc_id, parts)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading: what a bounded client does

    # -- modes --------------------------------------------------------------------------------

    def _hits(self, hits: list) -> bytes:
        return json.dumps({"hits": hits}).encode()

    def _mode_ok(self, lookup, doc_id, parts):
        if lookup:
            body = {"id": doc_id, "title": f"title of {doc_id}", "text": "text"}
            return self._send(200, json.dumps(body).encode())
        self._send(200, self._hits([{"id": "d1", "score": 2.0}, {"id": "d2", "score": 1.0}]))

    def _big(self, length: bool):
        head = b'{"id": "d1", "title": "' if self.path.count("/documents/") else \
            b'{"hits": [{"id": "d1", "score": 1, "title": "'
        tail = b'"}' if self.path.count("/documents/") else b'"}]}'
        filler = BIG - len(head) - len(tail)
        block = b"x" * MB

        def parts():
            yield head
            left = filler
            while left > 0:
                yield block[:min(MB, left)]
                left -= MB
            yield tail

        headers = {"Content-Type": "application/json"}
        if length:
            headers["Content-Length"] = str(BIG)
        self._stream(parts(), headers)

    def _mode_big(self, lookup, doc_id, parts):
        self._big(length=False)

    def _mode_big_length(self, lookup, doc_id, parts):
        self._big(length=True)

    def _mode_many_hits(self, lookup, doc_id, parts):
        def chunks():
            yield b'{"hits": ['
            for start in range(0, 3_000_000, 10_000):
                yield b",".join(b'{"id": "d%d", "score": 1}' % i
                                for i in range(start, start + 10_000)) \
                    + (b"," if start + 10_000 < 3_000_000 else b"")
            yield b"]}"
        self._stream(chunks())

    def _mode_bomb(self, lookup, doc_id, parts):
        self._send(200, gzip_bomb(), {"Content-Type": "application/json",
                                      "Content-Encoding": "gzip"})

    def _mode_drip(self, lookup, doc_id, parts):
        body = self._hits([{"id": "d1", "score": 1.0}])
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        for byte in body:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(1.0)

    def _mode_drip_headers(self, lookup, doc_id, parts):
        head = b"HTTP/1.0 200 OK\r\n" + b"X-Slow: " + b"a" * 10_000 + b"\r\n\r\n"
        for byte in head:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(1.0)

    def _mode_long_id(self, lookup, doc_id, parts):
        self._send(200, self._hits([{"id": "x" * 100_000, "score": 1.0}]))

    def _mode_space_id(self, lookup, doc_id, parts):
        self._send(200, self._hits([{"id": "d1 d2", "score": 2.0},
                                    {"id": "d3\nq02 Q0 evil 1 99 injected", "score": 1.0}]))

    def _mode_nul_id(self, lookup, doc_id, parts):
        if lookup:
            body = {"id": doc_id, "title": "nul\u0000title", "text": "t"}
            return self._send(200, json.dumps(body).encode())
        self._send(200, self._hits([{"id": "d\u00001", "score": 1.0}]))

    def _mode_digits_id(self, lookup, doc_id, parts):
        self._send(200, b'{"hits": [{"id": ' + b"9" * 5000 + b', "score": 1}]}')

    def _mode_deep(self, lookup, doc_id, parts):
        depth = 100_000
        self._send(200, b'{"hits": ' + b"[" * depth + b"]" * depth + b"}")

    def _mode_echo401(self, lookup, doc_id, parts):
        body = (f"unauthorized: the credential {self.headers.get('Authorization')!s} and the "
                f"query {parts.query} are not valid here").encode()
        self._send(401, body, {"Content-Type": "text/plain"})

    def _mode_echo401_if(self, lookup, doc_id, parts):
        from urllib.parse import parse_qs

        word = unquote(parts.path.split("/")[3])
        if word in (parse_qs(parts.query).get("q") or [""])[0]:
            return self._mode_echo401(lookup, doc_id, parts)
        self._send(200, self._hits([]))

    def _mode_redirect(self, lookup, doc_id, parts):
        self._send(302, b"", {"Location": "http://127.0.0.1:9/elsewhere",
                              "Content-Type": "text/plain"})

    def _mode_huge_title(self, lookup, doc_id, parts):
        body = {"id": doc_id, "title": "T" * 100_000, "text": "t" * 100_000}
        self._send(200, json.dumps(body).encode())

    def _mode_markup(self, lookup, doc_id, parts):
        if lookup:
            body = {"id": doc_id, "title": MARKUP_TITLE, "text": MARKUP_TITLE}
            return self._send(200, json.dumps(body).encode())
        self._send(200, self._hits([{"id": "d1", "score": 2.0}]))


@contextmanager
def hostile_service() -> Iterator[HostileService]:
    """Serve the hostile modes on 127.0.0.1 (a free port) until the block ends."""
    service = HostileService(url="")
    handler = type("Handler", (_Handler,), {"service": service})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    service.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield service
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
