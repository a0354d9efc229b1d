"""A small OpenAI-compatible chat-completions server (POST /v1/chat/completions), for the `openai`
judge's tests and `searcheval benchmark judge`: asyncio, HTTP/1.1 with keep-alive, each answer
after `--delay-ms`.

Its answer to a prompt is a grade from the prompt's text (sha256 of the user message, modulo the
scale `--max-grade` + 1, unless the prompt holds `TRUTH:<g>`), as JSON `{"grade": g,
"rationale": "..."}` with `usage` (characters / 4 prompt tokens, 12 completion tokens). Markers in
the prompt make it misbehave, per prompt:

| marker | answer |
| --- | --- |
| `FAULT:429` | 429 with `Retry-After: 1` the first time, then the answer |
| `FAULT:500` | 500 every time |
| `FAULT:MALFORMED` | 200 with prose and no JSON |
| `FAULT:GRADE9` | 200 with grade 9 |
| `FAULT:SLOW` | the answer after 5 s |

`GET /stats` returns {"requests": n, "authorized": n with the expected `--api-key`}. Run it as
`python -m searcheval.bench.chat_server --port 0` (it prints `PORT <n>`), or with `serve_chat`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter

_TRUTH = re.compile(r"TRUTH:(\d+)")


class ChatServer:
    def __init__(self, delay_ms: float, max_grade: int, api_key: str | None):
        self.delay = delay_ms / 1000.0
        self.max_grade = max_grade
        self.api_key = api_key
        self.seen: Counter = Counter()
        self.requests = 0
        self.authorized = 0

    def answer(self, body: dict) -> tuple[int, dict, dict, float]:
        """(status, headers, JSON body, delay) of one request."""
        messages = body.get("messages") or []
        prompt = "\n".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
        key = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
        self.seen[key] += 1
        delay = self.delay
        if "FAULT:500" in prompt:
            return 500, {}, {"error": {"message": "internal error"}}, delay
        if "FAULT:429" in prompt and self.seen[key] == 1:
            return 429, {"Retry-After": "1"}, {"error": {"message": "rate limited"}}, delay
        if "FAULT:SLOW" in prompt:
            delay = 5.0
        truth = _TRUTH.search(prompt)
        grade = int(truth.group(1)) if truth else int(key[:8], 16) % (self.max_grade + 1)
        if "FAULT:GRADE9" in prompt:
            grade = 9
        content = json.dumps({"grade": grade, "rationale": f"graded {grade} by the test server"})
        if "FAULT:MALFORMED" in prompt:
            content = "I think this document is quite relevant to the query."
        return 200, {}, {
            "id": "chatcmpl-test", "object": "chat.completion", "model": body.get("model"),
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": max(1, len(prompt) // 4), "completion_tokens": 12,
                      "total_tokens": max(1, len(prompt) // 4) + 12}}, delay

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        name, value = line.split(":", 1)
                        headers[name.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                raw = await reader.readexactly(length) if length else b""
                status, extra, payload, delay = 404, {}, {"error": "not found"}, 0.0
                if method == "POST" and path.rstrip("/").endswith("/chat/completions"):
                    self.requests += 1
                    if self.api_key and headers.get("authorization") == f"Bearer {self.api_key}":
                        self.authorized += 1
                    try:
                        status, extra, payload, delay = self.answer(json.loads(raw or b"{}"))
                    except ValueError:
                        status, payload = 400, {"error": "bad JSON"}
                elif method == "GET" and path == "/stats":
                    status, payload = 200, {"requests": self.requests,
                                            "authorized": self.authorized}
                if delay:
                    await asyncio.sleep(delay)
                data = json.dumps(payload).encode("utf-8")
                reason = {200: "OK", 400: "Bad Request", 404: "Not Found",
                          429: "Too Many Requests", 500: "Internal Server Error"}[status]
                out = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                       f"Content-Length: {len(data)}"]
                out += [f"{k}: {v}" for k, v in extra.items()]
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()


async def _main(port: int, delay_ms: float, max_grade: int, api_key: str | None) -> None:
    server = ChatServer(delay_ms, max_grade, api_key)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=512)
    print(f"PORT {listener.sockets[0].getsockname()[1]}", flush=True)
    async with listener:
        await listener.serve_forever()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--delay-ms", type=float, default=0.0)
    p.add_argument("--max-grade", type=int, default=3)
    p.add_argument("--api-key-env", help="environment variable of the expected API key")
    args = p.parse_args(argv)
    key = os.environ.get(args.api_key_env) if args.api_key_env else None
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.port, args.delay_ms, args.max_grade, key))


@contextlib.contextmanager
def serve_chat(delay_ms: float = 0.0, max_grade: int = 3, api_key_env: str | None = None):
    """A chat server in a process of its own; yields its base URL (`http://127.0.0.1:N/v1`) and
    stops it on exit."""
    command = [sys.executable, "-m", "searcheval.bench.chat_server", "--delay-ms", str(delay_ms),
               "--max-grade", str(max_grade)]
    if api_key_env:
        command += ["--api-key-env", api_key_env]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the chat server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


if __name__ == "__main__":
    main()
