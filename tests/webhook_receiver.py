"""A loopback webhook receiver for tests: collects the JSON bodies POSTed to it, can be told to
fail the next N requests, and is always closed by the fixture that starts it."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.fail_next = 0
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    failing = receiver.fail_next > 0
                    if failing:
                        receiver.fail_next -= 1
                    else:
                        receiver.bodies.append(json.loads(body))
                self.send_response(503 if failing else 204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # a token in the query string, as real webhook URLs carry one: tests check it never leaks
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook?token=s3cret-token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, predicate, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                found = [b for b in self.bodies if predicate(b)]
            if found:
                return found[0]
            time.sleep(0.2)
        return None

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
