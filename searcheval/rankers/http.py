"""The `http` kind: a team's own search service (Elasticsearch, OpenSearch, Solr, Vespa,
Typesense, Meilisearch, an in-house API), asked once per query over HTTP with httpx.

Parameters (templates and paths: `searcheval.rankers.templates`):

| param | default | what |
| --- | --- | --- |
| `base_url` | none | prefix of `url` (so one `--set NAME.base_url=...` moves a configuration) |
| `url` | required | URL template, e.g. `/es/products/_search` or `/search?q={text}` |
| `method` | GET | GET or POST |
| `query_params` | {} | name -> template (a list: the parameter repeated) |
| `body` | none | JSON body template (POST) |
| `headers` | {} | name -> a plain value, `{env: VAR}` or `{secret: BLOCK}` (a Prefect Secret block), with an optional `prefix` ("Bearer "); a value that looks like a credential must come from the environment or a block |
| `id` | required | path of a hit's id, e.g. `hits.hits[*]._id` |
| `score` | none | path of a hit's score; none: the response's order |
| `missing_hits_empty` | false | a missing last key of the hits path is an empty result (Vespa) |
| `notes` | [] | query notes (`intent`, `persona`) the service may receive |
| `timeout_s` | 10 | per request; a timeout is a failed query (not retried) |
| `retries` | 2 | further attempts after a connection error, a 429 or a 5xx |
| `backoff_s` | 0.2 | first wait before a retry, doubled each time (a 429's Retry-After wins, up to `max_backoff_s`) |
| `max_backoff_s` | 5 | longest wait |
| `concurrency` | 4 | requests in flight at once, across all shards of the configuration (threads or Dask workers) |
| `rate_limit` | none | most requests started per second, across all shards of the configuration |

The two limits hold for the configuration as a whole, however many shards run it and wherever
they run (`searcheval.rankers.limits`): shards in one process share one semaphore and clock;
shards on a Dask cluster each own a part of them (at most `concurrency` shards, each with its own
slots and its own points of the rate's grid), so no coordination is needed and the sum is the
limit.

A query that still fails after its retries is an error of that query with its cause (status,
timeout, connection error, or a response that is not JSON, lacks the hits path or holds an id that
is neither string nor number); it is never an empty result. Header values are read at run time
and never stored in the configuration, its hash, results, logs or artifacts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from searcheval.errors import InputError
from searcheval.rankers.limits import Limits, limits_for
from searcheval.rankers.params import Param
from searcheval.rankers.registry import Kind, RunContext, register_kind
from searcheval.rankers.templates import (
    FIELDS,
    NOTE_FIELDS,
    BadResponse,
    extract_hits,
    fill_body,
    fill_params,
    fill_string,
    parse_path,
    placeholders,
)
from searcheval.types import Query, RankedRun

CREDENTIAL_WORDS = ("auth", "key", "token", "secret", "password", "cookie")
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})

PARAMS = {
    "base_url": Param("string", None, nullable=True),
    "url": Param("string"),
    "method": Param("string", "GET", choices=("GET", "POST")),
    "query_params": Param("mapping", {}),
    "body": Param("any", None, nullable=True),
    "headers": Param("mapping", {}),
    "id": Param("string"),
    "score": Param("string", None, nullable=True),
    "missing_hits_empty": Param("boolean", False),
    "notes": Param("names", [], choices=NOTE_FIELDS),
    "timeout_s": Param("number", 10.0, above=0.0, maximum=600.0),
    "retries": Param("integer", 2, minimum=0, maximum=10),
    "backoff_s": Param("number", 0.2, minimum=0.0, maximum=60.0),
    "max_backoff_s": Param("number", 5.0, minimum=0.0, maximum=300.0),
    "concurrency": Param("integer", 4, minimum=1, maximum=256),
    "rate_limit": Param("number", None, above=0.0, nullable=True),
}


def _validate(params: dict, entry: str, file: str | None) -> None:
    for name in ("id", "score"):
        if params[name] is not None:
            try:
                parse_path(params[name])
            except ValueError as exc:
                raise InputError(f"{exc}, got {params[name]!r}", file=file,
                                 field=f"{entry}.{name}") from None
    if params["score"] is not None and \
            parse_path(params["score"]).to_list != parse_path(params["id"]).to_list:
        raise InputError(f"expected the score in the same list of hits as the id "
                         f"({params['id']}), got {params['score']!r}", file=file,
                         field=f"{entry}.score")
    allowed = set(FIELDS) | set(params["notes"])
    for name in ("base_url", "url", "query_params", "body"):
        unknown = sorted(placeholders(params[name]) - allowed)
        if unknown:
            hint = (f"; a query note must be opted in with notes: [{unknown[0]}]"
                    if unknown[0] in NOTE_FIELDS else "")
            raise InputError(f"unknown placeholder {{{unknown[0]}}}; expected some of "
                             f"{', '.join(sorted(allowed))}{hint}", file=file,
                             field=f"{entry}.{name}")
    if params["body"] is not None and params["method"] == "GET":
        raise InputError("a body needs method: POST", file=file, field=f"{entry}.body")
    for header, spec in params["headers"].items():
        where = f"{entry}.headers.{header}"
        if isinstance(spec, Mapping):
            sources = [k for k in ("env", "secret") if k in spec]
            extra = [k for k in spec if k not in ("env", "secret", "prefix")]
            if len(sources) != 1 or extra or not all(isinstance(spec[k], str) for k in spec):
                raise InputError("expected {env: VARIABLE} or {secret: BLOCK}, with an optional "
                                 f"prefix, got {spec!r}", file=file, field=where)
        elif isinstance(spec, str):
            if any(word in header.lower() for word in CREDENTIAL_WORDS):
                raise InputError("a credential is never written in the configurations file: "
                                 "use {env: VARIABLE} or {secret: BLOCK}", file=file,
                                 field=where)
        else:
            raise InputError(f"expected a string or {{env: VARIABLE}}, got {spec!r}",
                             file=file, field=where)


def _secrets(params: dict) -> list[str]:
    return [spec["secret"] for spec in params["headers"].values()
            if isinstance(spec, Mapping) and "secret" in spec]


def resolve_headers(configuration, secrets: Mapping[str, str]) -> dict[str, str]:
    """The headers' values, read now from the environment or the resolved Secret blocks; a
    missing one is refused naming the header and where it was looked for (never its value)."""
    out = {}
    for header, spec in configuration.params["headers"].items():
        if isinstance(spec, str):
            out[header] = spec
            continue
        if "env" in spec:
            value = os.environ.get(spec["env"])
            where = f"the environment variable {spec['env']}"
        else:
            value = secrets.get(spec["secret"])
            where = f"the Prefect Secret block {spec['secret']}"
        if not value:
            raise InputError(f"{where} is not set (the value of header {header})",
                             field=f"{configuration.name}.headers.{header}")
        out[header] = spec.get("prefix", "") + value
    return out


# -- one query --------------------------------------------------------------------------------

def query_values(query: Query, k: int, notes: Sequence[str]) -> dict[str, Any]:
    f = query.filters
    values = {"text": query.text, "k": k, "id": query.id, "category": query.category,
              "network": f.network, "asset": f.asset, "max_price_usd": f.max_price_usd}
    values.update(query.notes(tuple(notes)))
    return values


def build_request(configuration, query: Query, k: int) -> dict:
    """method, url, params and json of the request for one query."""
    p = configuration.params
    values = query_values(query, k, p["notes"])
    from urllib.parse import quote

    encoded = {name: (None if v is None else quote(str(v), safe=""))
               for name, v in values.items()}
    url = fill_string((p["base_url"] or "").rstrip("/") + p["url"] if p["base_url"]
                      else p["url"], encoded, absent_as_empty=True)
    request = {"method": p["method"], "url": url,
               "params": fill_params(p["query_params"], values) or None}
    if p["body"] is not None:
        request["json"] = fill_body(p["body"], values)
    return request


class QueryFailed(Exception):
    def __init__(self, cause: str, attempts: int):
        super().__init__(cause)
        self.cause = cause
        self.attempts = attempts


def endpoint(configuration) -> str:
    """Where a configuration's requests go, safe to print: scheme, host, port and path of its URL
    template (placeholders left as they are), never a user, password or query string."""
    from urllib.parse import urlsplit

    p = configuration.params
    url = (p.get("base_url") or "").rstrip("/") + "/" + (p.get("url") or "").lstrip("/") \
        if p.get("base_url") else (p.get("url") or "")
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:  # a templated port
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else parts.path


def transport_cause(exc: BaseException) -> str:
    """A transport failure in words: `connection refused`, `name not resolved`, else the kind of
    error (never its message: it may hold the URL, and with it a credential)."""
    import errno

    seen, chain = set(), exc
    while chain is not None and id(chain) not in seen:  # httpx wraps the socket's OSError
        seen.add(id(chain))
        if isinstance(chain, ConnectionRefusedError) or \
                getattr(chain, "errno", None) == errno.ECONNREFUSED:
            return "connection refused"
        if isinstance(chain, OSError) and chain.__class__.__name__ == "gaierror":
            return "name not resolved"
        chain = chain.__cause__ or chain.__context__
    text = str(exc).lower()
    if "connection refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text:
        return "name not resolved"
    return f"connection error: {type(exc).__name__}"


class Breaker:
    """Fail fast when the backend is down: after `after` queries failed in a row with no answer
    yet, the queries not yet sent are not sent (`fail_fast_after`; 0: never). Shared by the
    threads of one shard."""

    def __init__(self, after: int):
        import threading

        self.after = after
        self.failed_in_a_row = 0
        self.answered = 0
        self.first_cause: str | None = None
        self._lock = threading.Lock()

    @property
    def open(self) -> bool:
        return bool(self.after) and not self.answered and self.failed_in_a_row >= self.after

    def record(self, failed: bool, cause: str | None = None) -> None:
        with self._lock:
            if failed:
                self.failed_in_a_row += 1
                self.first_cause = self.first_cause or cause
            else:
                self.answered += 1
                self.failed_in_a_row = 0

    def skipped(self) -> dict:
        return {"cause": f"not sent: the service looks down ({self.failed_in_a_row} queries "
                         f"failed in a row, none answered; first: {self.first_cause})",
                "attempts": 0, "not_sent": True}


def _retry_after(response, fallback: float, ceiling: float) -> float:
    raw = response.headers.get("retry-after") if response is not None else None
    try:
        return min(ceiling, max(0.0, float(raw))) if raw is not None else fallback
    except ValueError:
        return fallback


def ask(client, configuration, limits: Limits, query: Query, k: int
        ) -> tuple[list[tuple[str, float]], float, float, int]:
    """One query through its retries: (hits, latency ms, round trip ms, attempts); QueryFailed
    with the cause otherwise. The latency is that of the attempt that answered, from sending the
    request to the parsed hits (waiting for a free slot is not the service's time)."""
    import httpx

    p = configuration.params
    id_path = parse_path(p["id"])
    score_path = parse_path(p["score"]) if p["score"] else None
    request = build_request(configuration, query, k)
    delay = p["backoff_s"]
    attempts = 0
    while True:
        attempts += 1
        response = None
        with limits.slots:
            limits.wait_turn()  # in the slot: the request starts when its turn comes
            started = time.perf_counter()
            try:
                response = client.request(**request)
                cause = None if response.status_code not in RETRY_STATUSES \
                    else f"HTTP {response.status_code}"
            except httpx.TimeoutException:
                raise QueryFailed(f"timeout after {p['timeout_s']:g} s", attempts) from None
            except httpx.TransportError as exc:
                cause = transport_cause(exc)
            if cause is None:
                return _parse(response, configuration, query, id_path, score_path, started,
                              attempts)
        if attempts > p["retries"]:
            raise QueryFailed(cause + (f" after {attempts} attempts" if attempts > 1 else ""),
                              attempts)
        time.sleep(_retry_after(response, min(delay, p["max_backoff_s"]), p["max_backoff_s"])
                   if response is not None and response.status_code == 429
                   else min(delay, p["max_backoff_s"]))
        delay *= 2


def _parse(response, configuration, query, id_path, score_path, started, attempts):
    if response.status_code >= 400:
        text = " ".join(response.text.split())[:160]
        raise QueryFailed(f"HTTP {response.status_code}: {text}", attempts)
    try:
        document = response.json()
    except ValueError:
        kind = response.headers.get("content-type", "no content type")
        raise QueryFailed(f"bad response: not JSON (HTTP {response.status_code}, {kind}) "
                          f"at path {id_path.text}", attempts) from None
    try:
        hits = extract_hits(document, id_path, score_path,
                            configuration.params["missing_hits_empty"])
    except BadResponse as exc:
        raise QueryFailed(f"bad response: {exc}", attempts) from None
    latency = (time.perf_counter() - started) * 1000.0
    return hits, latency, response.elapsed.total_seconds() * 1000.0, attempts


def run_http(configuration, context: RunContext, queries: Sequence[Query], query_vectors,
             k: int) -> RankedRun:
    """Every query of the shard, as many at a time as its limits allow (`context.lanes`: the
    part of the configuration's limits this shard owns; None: the limits the configuration
    shares in this process); failures kept per query."""
    import httpx

    p = configuration.params
    headers = resolve_headers(configuration, context.secrets)
    limits = limits_for((configuration.name, configuration.sha256), p["concurrency"],
                        p["rate_limit"], context.lanes)
    ids = [q.id for q in queries]
    if len(set(ids)) != len(ids):
        raise InputError("expected distinct query ids", field="queries")
    results: dict[str, list[tuple[str, float]]] = {}
    latency: dict[str, float] = {}
    errors: dict[str, dict] = {}
    timing: dict[str, dict] = {}
    connections = limits.concurrency  # this shard's slots
    with httpx.Client(headers=headers, timeout=httpx.Timeout(p["timeout_s"]),
                      limits=httpx.Limits(max_connections=connections,
                                          max_keepalive_connections=connections),
                      follow_redirects=False) as client:

        breaker = Breaker(getattr(configuration, "fail_fast_after", 0))

        def one(query: Query):
            if breaker.open:  # the service is down: fail fast, never a long wait per query
                return query.id, None, breaker.skipped()
            started = time.perf_counter()
            try:
                hits, ms, round_trip, attempts = ask(client, configuration, limits, query, k)
            except QueryFailed as exc:
                breaker.record(True, exc.cause)
                return query.id, None, {"cause": exc.cause, "attempts": exc.attempts}
            breaker.record(False)
            return query.id, (hits[:k], ms, round_trip, attempts,
                              (time.perf_counter() - started) * 1000.0), None

        with ThreadPoolExecutor(max_workers=min(connections, max(1, len(queries)))) as pool:
            for qid, answer, error in pool.map(one, queries):
                if error is not None:
                    errors[qid] = error
                    continue
                hits, ms, round_trip, attempts, total = answer
                results[qid] = hits
                latency[qid] = ms
                timing[qid] = {"round_trip_ms": round_trip, "attempts": attempts,
                               "total_ms": total}
    requests = sum(t["attempts"] for t in timing.values()) \
        + sum(e["attempts"] for e in errors.values())
    return RankedRun(configuration=configuration.name, results=results, latency_ms=latency,
                     errors=errors, timing=timing, usage={"requests": float(requests)})


KIND = register_kind(Kind(name="http", params=PARAMS, run=run_http, validate=_validate,
                          secrets=_secrets, lanes=lambda params: params["concurrency"],
                          description="a search service over HTTP (httpx)"))
