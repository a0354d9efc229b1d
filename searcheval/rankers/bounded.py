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

__all__ = ["AnswerRefused", "Bounds", "ClientPerThread", "bounded_client", "check_depth", "deadline", "excerpt",
           "json_answer", "json_depth", "parse_json", "read_answer", "read_body", "read_json"]

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


def bounded_client(*, headers=None, concurrency: int = 4, read_timeout: float = 600.0,
                   ssl_context=None):
    """An httpx.Client whose sockets keep the calling thread's `deadline` (through proxies from
    the environment too); redirects are not followed; only gzip and deflate are accepted as
    content encodings. `ssl_context`: one to share (httpx makes its own otherwise, tens of
    milliseconds of CPU)."""
    import httpcore
    import httpx

    merged = {"accept-encoding": "gzip, deflate"}
    merged.update(headers or {})
    client = httpx.Client(headers=merged, follow_redirects=False,
                          timeout=httpx.Timeout(read_timeout),
                          limits=httpx.Limits(max_connections=concurrency,
                                              max_keepalive_connections=concurrency),
                          **({} if ssl_context is None else {"verify": ssl_context}))
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


class ClientPerThread:
    """A `bounded_client` per thread, each with one connection kept alive, for a pool of
    threads that each send one request at a time: `concurrency` threads use at most
    `concurrency` connections, as one shared client of that size would, but never wait on each
    other for one. httpx's shared pool takes a lock and walks all its connections (polling each
    idle socket) twice per request: at 32 connections about 0.2 ms of CPU per request, and
    under load a queue at the lock, both counted in the client's time. The clients share one
    SSL context (made once: httpx makes one per client otherwise). `close()` (or the end of a
    `with` block) closes every client made."""

    def __init__(self, *, headers=None, read_timeout: float = 600.0):
        import httpx

        self._headers, self._read_timeout = headers, read_timeout
        self._ssl_context = httpx.create_ssl_context()  # verify=True, trust_env=True: httpx's
        self._local = threading.local()
        self._clients: list = []
        self._lock = threading.Lock()

    def get(self):
        """This thread's client, made at its first request."""
        client = getattr(self._local, "client", None)
        if client is None:
            client = bounded_client(headers=self._headers, concurrency=1,
                                    read_timeout=self._read_timeout,
                                    ssl_context=self._ssl_context)
            with self._lock:
                self._clients.append(client)
            self._local.client = client
        return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()

    def __enter__(self) -> "ClientPerThread":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


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
    return read_answer(client, bounds, method, url, **request)[:3]


def read_answer(client, bounds: Bounds, method: str, url,
                **request) -> tuple[int, Any, bytes, float]:
    """`read_body` and the round trip in seconds: httpx's `response.elapsed`, from sending the
    request to closing the answer once its last byte is read."""
    with deadline(bounds.deadline_s) as end:
        with client.stream(method, url, **request) as response:
            status, headers, body = _read_stream(response, bounds, end)
        return status, headers, body, response.elapsed.total_seconds()


def _read_stream(response, bounds: Bounds, end: float) -> tuple[int, Any, bytes]:
    """The answer of an open stream, within `bounds`, before `end` (time.monotonic())."""
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
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NOT_BRACKET = bytes(b for b in range(256) if b not in _STEP)
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in _STEP and b != ord('"'))
_AS_PARENTHESES = bytes.maketrans(b"[{]}", b"(())")


def json_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in JSON text (strings skipped): `[[1]]` is 2."""
    skeleton = _STRING.sub(b"", data).translate(None, _NOT_BRACKET)
    if not skeleton:
        return 0
    return max(0, max(accumulate(map(_STEP.__getitem__, skeleton))))


def _within(data: bytes, limit: int) -> bool:
    """True when `data` is surely nested at most `limit` deep, found cheaply (C-speed bytes
    operations, no Python step per character); False: not sure, count exactly (`json_depth`).

    The brackets outside strings: without a backslash in the text every quote opens or closes
    a string, so dropping the quote pairs with nothing but other characters between them
    (`""` once the rest is deleted) leaves only structural brackets, unless a string held a
    bracket (then a quote is left: not sure). Their depth: each pass that deletes every
    innermost `()` lowers the deepest nesting by one; empty after at most `limit` passes means
    balanced and at most `limit` deep."""
    if b"\\" in data:
        return False
    skeleton = data.translate(None, _NOT_STRUCTURE).replace(b'""', b"")
    if b'"' in skeleton:
        return False
    skeleton = skeleton.translate(_AS_PARENTHESES)
    for _ in range(limit):
        if not skeleton:
            return True
        shorter = skeleton.replace(b"()", b"")
        if len(shorter) == len(skeleton):
            return False  # unbalanced: not JSON, whatever its depth
        skeleton = shorter
    return not skeleton


def check_depth(data: bytes, limit: int, setting: str = "max_json_depth") -> None:
    if _within(data, limit):
        return
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
    if b"\x00" in body or (b"\\u0000" in body and _NUL.search(body)):
        raise AnswerRefused("NUL (\\u0000) in the answer refused", status)
    try:
        return _decoder_of_thread().decode(_text_of(body))
    except (ValueError, RecursionError):
        raise AnswerRefused("not JSON", status, excerpt=excerpt(body)) from None


_NUL = re.compile(rb'(?:^|[^\\])(?:\\\\)*\\u0000')
MAX_DIGITS = 100


def _whole(text: str) -> int:
    if len(text) > MAX_DIGITS:
        raise AnswerRefused(f"a number of {len(text):,} digits in the answer (at most "
                            f"{MAX_DIGITS} are read)")
    return int(text)


def _decoder_of_thread() -> json.JSONDecoder:
    """One decoder per thread, made once: `json.loads(body, parse_int=...)` builds a decoder
    and its scanner at every call (a third of the time of parsing a search engine's answer)."""
    decoder = getattr(_local, "decoder", None)
    if decoder is None:
        decoder = _local.decoder = json.JSONDecoder(parse_int=_whole)
    return decoder


def _text_of(body: bytes) -> str:
    """The text of a JSON body as `json.loads` reads bytes (UTF-8, -16 or -32, by its start)."""
    return body.decode(json.detect_encoding(body), "surrogatepass")


def read_json(client, bounds: Bounds, method: str, url, **request) -> tuple[int, Any, Any]:
    """(status, headers, parsed JSON) of one request; a status >= 400 or a body that is not JSON
    raises AnswerRefused with the body's excerpt and the status."""
    return json_answer(*read_body(client, bounds, method, url, **request), bounds)


def json_answer(status: int, headers, body: bytes, bounds: Bounds) -> tuple[int, Any, Any]:
    """The second half of `read_json`, apart so that a caller can time the answer's transfer
    (`read_body`) and its parsing separately."""
    if status >= 400:
        raise AnswerRefused(f"HTTP {status}", status, excerpt=excerpt(body), headers=headers)
    try:
        return status, headers, parse_json(body, bounds, status)
    except AnswerRefused as exc:
        exc.headers = headers
        raise
