"""Bounded reading of an answer over HTTP: what any client of a service that searcheval does not
control (the `http` kind, the document lookup, a model judge) reads its answers through.

An answer is bounded in

- **time**: one deadline for the whole request, from connecting to the last byte
  (`deadline_s`). It is not a per-read timeout: every read of the socket gets only the time left
  until the deadline, so an answer dripped at one byte a second fails at the deadline, in its
  headers or in its body;
- **bytes**: at most `max_bytes` read off the wire *and* at most `max_bytes` once decoded (gzip
  and deflate are decoded here, a chunk at a time with a bounded output, so a gzip bomb stops at
  the limit; any other content encoding is refused, and only `gzip, deflate` are asked for);
- **nesting**: the JSON is measured before it is parsed: deeper than `max_depth` is refused
  (Python's parser would recurse until a RecursionError);
- **content**: NUL anywhere in the decoded text is refused (Postgres text cannot hold it).

Going over a bound raises `AnswerRefused` with a message naming the bound and its setting; the
caller turns it into that query's (or that document's) named failure. `Bounds` holds the limits;
`read_json` is the one call:

    with bounded_client(headers=..., concurrency=4) as client:
        status, headers, document = read_json(client, bounds, "GET", url, params=...)

`read_json` returns the parsed JSON, or (for a status >= 400, or an answer that is not JSON) the
first `excerpt` characters of the decoded text in `AnswerRefused.excerpt` for the error message.
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

__all__ = ["AnswerRefused", "Bounds", "bounded_client", "check_depth", "deadline", "excerpt",
           "json_depth", "parse_json", "read_body", "read_json"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class Bounds:
    """The limits of one answer (see the module docstring); `names` maps each to the setting a
    message names (the configuration's parameter)."""

    deadline_s: float = 10.0
    max_bytes: int = 16 * MiB
    max_depth: int = 64
    chunk: int = 64 * 1024
    names: tuple[tuple[str, str], ...] = (("deadline_s", "timeout_s"),
                                          ("max_bytes", "max_response_bytes"),
                                          ("max_depth", "max_json_depth"))

    def setting(self, name: str) -> str:
        return dict(self.names).get(name, name)


class AnswerRefused(Exception):
    """An answer over a bound, or unreadable; `excerpt`: its decoded start (for a status >= 400
    or a body that is not JSON), `status` when the headers came."""

    def __init__(self, message: str, status: int | None = None, excerpt: str = "",
                 headers: Any = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.excerpt = excerpt
        self.headers = headers


# -- the deadline: every socket operation of this thread gets the time left ------------------

_local = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[float]:
    """Every socket read, write and connect of this thread (through a `bounded_client`) within
    the block gets at most the time left until `seconds` from now; yields the deadline
    (time.monotonic())."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = time.monotonic() + seconds
    try:
        yield _local.deadline
    finally:
        _local.deadline = previous


def _left(timeout: float | None, exc_type) -> float | None:
    end = getattr(_local, "deadline", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise exc_type("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


def _backend():
    import httpcore

    class DeadlineStream(httpcore.NetworkStream):
        def __init__(self, inner):
            self._inner = inner

        def read(self, max_bytes, timeout=None):
            return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

        def write(self, buffer, timeout=None):
            return self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

        def close(self):
            self._inner.close()

        def start_tls(self, ssl_context, server_hostname=None, timeout=None):
            return DeadlineStream(self._inner.start_tls(
                ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)))

        def get_extra_info(self, info):
            return self._inner.get_extra_info(info)

    class DeadlineBackend(httpcore.NetworkBackend):
        def __init__(self):
            self._inner = httpcore.SyncBackend()

        def connect_tcp(self, host, port, timeout=None, local_address=None,
                        socket_options=None):
            return DeadlineStream(self._inner.connect_tcp(
                host, port, _left(timeout, httpcore.ConnectTimeout), local_address,
                socket_options))

        def connect_unix_socket(self, path, timeout=None, socket_options=None):
            return DeadlineStream(self._inner.connect_unix_socket(
                path, _left(timeout, httpcore.ConnectTimeout), socket_options))

        def sleep(self, seconds):
            self._inner.sleep(seconds)

    return DeadlineBackend()


def bounded_client(*, headers=None, concurrency: int = 4, read_timeout: float = 600.0):
    """An httpx.Client whose sockets keep the calling thread's `deadline` (through proxies from
    the environment too); redirects are not followed; only gzip and deflate are accepted as
    content encodings."""
    import httpcore
    import httpx

    merged = {"accept-encoding": "gzip, deflate"}
    merged.update(headers or {})
    client = httpx.Client(headers=merged, follow_redirects=False,
                          timeout=httpx.Timeout(read_timeout),
                          limits=httpx.Limits(max_connections=concurrency,
                                              max_keepalive_connections=concurrency))
    transports = [client._transport, *client._mounts.values()]
    for transport in transports:
        if transport is None:
            continue
        pool = getattr(transport, "_pool", None)
        if not isinstance(pool, httpcore.ConnectionPool) or \
                not hasattr(pool, "_network_backend"):
            client.close()
            raise RuntimeError("httpx's transport changed: searcheval cannot bound its "
                               "requests' time (searcheval.rankers.bounded)")
        pool._network_backend = _backend()
    return client


# -- bytes ----------------------------------------------------------------------------------

def _decoder(encoding: str):
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib or gzip header, auto
    raise AnswerRefused(f"content encoding {encoding[:40]!r} refused (gzip and deflate are read)")


def read_body(client, bounds: Bounds, method: str, url, **request) -> tuple[int, Any, bytes]:
    """(status, headers, decoded body) of one request under `bounds`; AnswerRefused when it goes
    over one; httpx's exceptions for transport failures (a passed deadline is httpx's
    TimeoutException)."""
    with deadline(bounds.deadline_s) as end:
        with client.stream(method, url, **request) as response:
            length = response.headers.get("content-length", "")
            if length.isdigit() and int(length) > bounds.max_bytes:
                raise AnswerRefused(f"answer of {int(length):,} bytes is over "
                                    f"{bounds.setting('max_bytes')} ({bounds.max_bytes:,} bytes)",
                                    response.status_code, headers=response.headers)
            encodings = [e for e in response.headers.get("content-encoding", "").split(",")
                         if e.strip()]
            if len(encodings) > 1:
                raise AnswerRefused("more than one content encoding refused",
                                    response.status_code, headers=response.headers)
            decoder = _decoder(encodings[0]) if encodings else None
            wire = 0
            parts: list[bytes] = []
            size = 0
            for raw in response.iter_raw(bounds.chunk):
                wire += len(raw)
                if wire > bounds.max_bytes:
                    raise AnswerRefused(f"answer over {bounds.setting('max_bytes')} "
                                        f"({bounds.max_bytes:,} bytes) on the wire",
                                        response.status_code, headers=response.headers)
                if time.monotonic() > end:
                    import httpx
                    raise httpx.ReadTimeout("the request's deadline passed")
                if decoder is None:
                    size += len(raw)
                    _over(size, bounds, response, "")
                    parts.append(raw)
                    continue
                data = raw
                while data:
                    out = decoder.decompress(data, bounds.max_bytes - size + 1)
                    size += len(out)
                    _over(size, bounds, response, encodings[0])
                    parts.append(out)
                    data = decoder.unconsumed_tail
            if decoder is not None:
                try:
                    tail = decoder.flush()
                except zlib.error:
                    tail = b""
                size += len(tail)
                _over(size, bounds, response, encodings[0])
                parts.append(tail)
            return response.status_code, response.headers, b"".join(parts)


def _over(size: int, bounds: Bounds, response, encoding: str) -> None:
    if size > bounds.max_bytes:
        raise AnswerRefused(f"answer over {bounds.setting('max_bytes')} ({bounds.max_bytes:,} "
                            "bytes) once decoded" + (f" ({encoding.strip()})" if encoding else ""),
                            response.status_code, headers=response.headers)


# -- JSON -----------------------------------------------------------------------------------

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_DEPTH = bytes.maketrans(b"", b"")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in JSON text (strings skipped): `[[1]]` is 2."""
    skeleton = _STRING.sub(b"", data).translate(_DEPTH, delete=bytes(
        b for b in range(256) if b not in _STEP))
    if not skeleton:
        return 0
    return max(0, max(accumulate(_STEP[b] for b in skeleton)))


def check_depth(data: bytes, limit: int, setting: str = "max_json_depth") -> None:
    depth = json_depth(data)
    if depth > limit:
        raise AnswerRefused(f"JSON nested {depth:,} levels deep, over {setting} ({limit})")


def excerpt(body: bytes, chars: int = 160) -> str:
    return " ".join(body[:chars * 4].decode("utf-8", errors="replace").split())[:chars]


def parse_json(body: bytes, bounds: Bounds, status: int | None = None) -> Any:
    """The JSON of a decoded body, refused when it is too deep, holds NUL, or is not JSON."""
    try:
        check_depth(body, bounds.max_depth, bounds.setting("max_depth"))
    except AnswerRefused as exc:
        exc.status = status
        raise
    if b"\x00" in body or _NUL.search(body):
        raise AnswerRefused("NUL (\\u0000) in the answer refused", status)
    try:
        return json.loads(body, parse_int=_whole)
    except (ValueError, RecursionError):
        raise AnswerRefused("not JSON", status, excerpt=excerpt(body)) from None


_NUL = re.compile(rb'(?:^|[^\\])(?:\\\\)*\\u0000')
MAX_DIGITS = 100


def _whole(text: str) -> int:
    if len(text) > MAX_DIGITS:
        raise AnswerRefused(f"a number of {len(text):,} digits in the answer (at most "
                            f"{MAX_DIGITS} are read)")
    return int(text)


def read_json(client, bounds: Bounds, method: str, url, **request) -> tuple[int, Any, Any]:
    """(status, headers, parsed JSON) of one request; a status >= 400 or a body that is not JSON
    raises AnswerRefused with the body's excerpt and the status."""
    status, headers, body = read_body(client, bounds, method, url, **request)
    if status >= 400:
        raise AnswerRefused(f"HTTP {status}", status, excerpt=excerpt(body), headers=headers)
    try:
        return status, headers, parse_json(body, bounds, status)
    except AnswerRefused as exc:
        exc.headers = headers
        raise
