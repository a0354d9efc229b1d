"""The `http` kind: a team's own search service (Elasticsearch, OpenSearch, Solr, Vespa,
Typesense, Meilisearch, an in-house API), asked once per query over HTTP with httpx.

Parameters (templates and paths: `searcheval.rankers.templates`):

| param | default | what |
| --- | --- | --- |
| `base_url` | none | prefix of `url` (so one `--set NAME.base_url=...` moves a configuration) |
| `url` | required | URL template, e.g. `/es/products/_search` or `/search?q={text}` |
| `method` | GET | GET or POST |
| `query_params` | {} | name -> template (a list: the parameter repeated), or `{env: VAR}` / `{secret: BLOCK}` for a key the service takes in the URL; a parameter named like a credential must come from the environment or a block |
| `body` | none | JSON body template (POST) |
| `headers` | {} | name -> a plain value, `{env: VAR}` or `{secret: BLOCK}` (a Prefect Secret block), with an optional `prefix` ("Bearer "); a value that looks like a credential must come from the environment or a block |
| `id` | required | path of a hit's id, e.g. `hits.hits[*]._id` |
| `score` | none | path of a hit's score; none: the response's order |
| `missing_hits_empty` | false | a missing last key of the hits path is an empty result (Vespa) |
| `notes` | [] | query notes (`intent`, `persona`) the service may receive |
| `timeout_s` | 10 | the deadline of one request, from connecting to its last byte (not a per-read timeout: an answer dripped slowly fails at it); a timeout is a failed query (not retried) |
| `max_response_bytes` | 16777216 | most bytes of one answer, on the wire and once decoded (gzip, deflate) |
| `max_hits` | 10000 | most hits in one answer |
| `max_json_depth` | 64 | deepest nesting of the answer's JSON |
| `max_id_chars` | 512 | longest id of a hit |
| `retries` | 2 | further attempts after a connection error, a 429 or a 5xx |
| `backoff_s` | 0.2 | first wait before a retry, doubled each time (a 429's Retry-After wins, up to `max_backoff_s`) |
| `max_backoff_s` | 5 | longest wait |
| `concurrency` | 4 | requests in flight at once, across all shards of the configuration (threads or Dask workers); a shard sends them from as many threads, each keeping one connection alive (`bounded.ClientPerThread`) |
| `rate_limit` | none | most requests started per second, across all shards of the configuration |

The two limits hold for the configuration as a whole, however many shards run it and wherever
they run (`searcheval.rankers.limits`): shards in one process share one semaphore and clock;
shards on a Dask cluster each own a part of them (at most `concurrency` shards, each with its own
slots and its own points of the rate's grid), so no coordination is needed and the sum is the
limit.

A query that still fails after its retries is an error of that query with its cause (status,
timeout, connection error, or a response that is not JSON, lacks the hits path or holds an id that
is neither string nor number, or an answer over one of its bounds, `searcheval.rankers.bounded`);
it is never an empty result. Header values and secret query parameters are read at run time and
never stored in the configuration, its hash, results, logs or artifacts; every one is remembered
by `searcheval.redaction`, so an answer that quotes it (a 401 body echoing the credential) is
kept with `[redacted]` in its place. A password in a URL (`https://user:pass@host`) or a literal
key in the URL's query string is refused like a credential written in a header.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from typing import Any
from urllib.parse import quote

from searcheval.errors import InputError
from searcheval.rankers.bounded import (
    AnswerRefused,
    Bounds,
    ClientPerThread,
    json_answer,
    read_answer,
)
from searcheval.rankers.breaker import Breaker
from searcheval.rankers.limits import Limits, limits_for
from searcheval.rankers.params import Param
from searcheval.rankers.registry import Kind, RunContext, register_kind
from searcheval.rankers.templates import (
    FIELDS,
    Absent,
    NOTE_FIELDS,
    BadResponse,
    extract_hits,
    fill_body,
    fill_params,
    fill_string,
    parse_path,
    placeholders,
)
from searcheval.redaction import redact, remember
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
    "max_response_bytes": Param("integer", 16 * 1024 * 1024, minimum=1024,
                                maximum=1024 * 1024 * 1024),
    "max_hits": Param("integer", 10_000, minimum=1, maximum=10_000_000),
    "max_json_depth": Param("integer", 64, minimum=2, maximum=10_000),
    "max_id_chars": Param("integer", 512, minimum=1, maximum=1_000_000),
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
    check_url_credentials(params, entry, file)
    if params["body"] is not None and params["method"] == "GET":
        raise InputError("a body needs method: POST", file=file, field=f"{entry}.body")
    for header, spec in params["headers"].items():
        where = f"{entry}.headers.{header}"
        if isinstance(spec, Mapping):
            _check_secret_spec(spec, file, where)
        elif isinstance(spec, str):
            if is_credential_name(header):
                raise InputError("a credential is never written in the configurations file: "
                                 "use {env: VARIABLE} or {secret: BLOCK}", file=file,
                                 field=where)
        else:
            raise InputError(f"expected a string or {{env: VARIABLE}}, got {spec!r}",
                             file=file, field=where)
    for name, spec in params["query_params"].items():
        where = f"{entry}.query_params.{name}"
        if _is_secret_spec(spec):
            _check_secret_spec(spec, file, where)
        elif is_credential_name(name) and not _only_placeholders(spec):
            raise InputError("a credential is never written in the configurations file: use "
                             "{env: VARIABLE} or {secret: BLOCK}", file=file, field=where)


# -- credentials and secrets (issue 28: nothing that came from a secret ever leaves) ----------

def is_credential_name(name: str) -> bool:
    return any(word in str(name).lower() for word in CREDENTIAL_WORDS)


def _is_secret_spec(spec: Any) -> bool:
    return isinstance(spec, Mapping) and ("env" in spec or "secret" in spec)


def _only_placeholders(spec: Any) -> bool:
    """A value that is nothing but placeholders (`{text}`): data of the query, not a key."""
    return isinstance(spec, str) and bool(placeholders(spec)) and \
        not re.sub(r"\{[A-Za-z_][A-Za-z0-9_]*\}", "", spec).strip()


def _check_secret_spec(spec: Mapping, file, where: str) -> None:
    sources = [k for k in ("env", "secret") if k in spec]
    extra = [k for k in spec if k not in ("env", "secret", "prefix")]
    if len(sources) != 1 or extra or not all(isinstance(spec[k], str) for k in spec):
        raise InputError("expected {env: VARIABLE} or {secret: BLOCK}, with an optional "
                         f"prefix, got {spec!r}", file=file, field=where)


def check_url_credentials(params: Mapping, entry: str, file, names=("base_url", "url")) -> None:
    """Refuse a password in a URL's userinfo and a literal credential in its query string."""
    from urllib.parse import parse_qsl, urlsplit

    for name in names:
        url = params.get(name)
        if not isinstance(url, str):
            continue
        parts = urlsplit(url)
        if "@" in parts.netloc:
            raise InputError("credentials in a URL (user:password@) are refused: send them in a "
                             "header from {env: VARIABLE} or {secret: BLOCK}", file=file,
                             field=f"{entry}.{name}")
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if is_credential_name(key) and not _only_placeholders(value):
                raise InputError(f"a credential ({key}=...) is never written in a URL: use "
                                 "query_params with {env: VARIABLE} or {secret: BLOCK}",
                                 file=file, field=f"{entry}.{name}")


def _secrets(params: dict) -> list[str]:
    specs = list(params["headers"].values()) + list(params["query_params"].values())
    return [spec["secret"] for spec in specs if isinstance(spec, Mapping) and "secret" in spec]


def resolve_headers(configuration, secrets: Mapping[str, str]) -> dict[str, str]:
    """The headers' values, read now from the environment or the resolved Secret blocks; a
    missing one is refused naming the header and where it was looked for (never its value)."""
    out = {}
    for header, spec in configuration.params["headers"].items():
        if isinstance(spec, str):
            out[header] = spec
            continue
        out[header] = spec.get("prefix", "") + secret_value(
            spec, secrets, f"header {header}", f"{configuration.name}.headers.{header}")
    return out


def resolve_query_secrets(configuration, secrets: Mapping[str, str]) -> dict[str, str]:
    """The query parameters given as {env:} or {secret:}, read now (remembered for redaction)."""
    return {name: spec.get("prefix", "") + secret_value(
                spec, secrets, f"query parameter {name}",
                f"{configuration.name}.query_params.{name}")
            for name, spec in configuration.params["query_params"].items()
            if _is_secret_spec(spec)}


def secret_value(spec: Mapping, secrets: Mapping[str, str], what: str, field: str, *,
                 file=None) -> str:
    """The value of an {env:} or {secret:} spec, read now and remembered for redaction; a
    missing one is refused naming where it was looked for, never echoed."""
    if "env" in spec:
        value = os.environ.get(spec["env"])
        where = f"the environment variable {spec['env']}"
    else:
        value = secrets.get(spec["secret"])
        where = f"the Prefect Secret block {spec['secret']}"
    if not value:
        raise InputError(f"{where} is not set (the value of {what})", file=file, field=field)
    remember(value)
    return value


# -- one query --------------------------------------------------------------------------------

def query_values(query: Query, k: int, notes: Sequence[str]) -> dict[str, Any]:
    f = query.filters
    values = {"text": query.text, "k": k, "id": query.id, "category": query.category,
              "network": f.network, "asset": f.asset, "max_price_usd": f.max_price_usd}
    values.update(query.notes(tuple(notes)))
    return values


@lru_cache(maxsize=256)
def _url_fields(template: str) -> frozenset[str]:
    return frozenset(placeholders(template))


def build_request(configuration, query: Query, k: int,
                  secret_params: Mapping[str, str] | None = None) -> dict:
    """method, url, params and json of the request for one query; `secret_params`: the values of
    the query parameters given as {env:} or {secret:} (`resolve_query_secrets`)."""
    p = configuration.params
    values = query_values(query, k, p["notes"])
    template = (p["base_url"] or "").rstrip("/") + p["url"] if p["base_url"] else p["url"]
    encoded = {name: quote(str(values[name]), safe="") for name in _url_fields(template)
               if values.get(name) is not None}  # only what the URL holds (often nothing)
    url = fill_string(template, encoded, absent_as_empty=True)
    plain = {name: spec for name, spec in p["query_params"].items()
             if not _is_secret_spec(spec)}
    params = fill_params(plain, values) + [
        (name, value) for name, value in (secret_params or {}).items()]
    request = {"method": p["method"], "url": url, "params": params or None}
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


def _retry_after(headers, fallback: float, ceiling: float) -> float:
    raw = headers.get("retry-after") if headers is not None else None
    try:
        return min(ceiling, max(0.0, float(raw))) if raw is not None else fallback
    except ValueError:
        return fallback


def bounds_of(params: Mapping) -> Bounds:
    """The bounds of one answer of a configuration (`searcheval.rankers.bounded`)."""
    return Bounds(deadline_s=params["timeout_s"], max_bytes=params["max_response_bytes"],
                  max_depth=params["max_json_depth"])


def ask(client, configuration, limits: Limits, query: Query, k: int,
        secret_params: Mapping[str, str] | None = None
        ) -> tuple[list[tuple[str, float]], float, float, int]:
    """One query through its retries: (hits, latency ms, round trip ms, attempts); QueryFailed
    with the cause otherwise (its text redacted of every secret). The latency is that of the
    attempt that answered, from sending the request to the parsed hits (waiting for a free slot
    is not the service's time); its round trip is httpx's `response.elapsed` (request sent to
    the answer's last byte read), so that the rest, the client's own time (building the request,
    the bounded reader's checks, JSON decoding, the hits path), can be told apart."""
    try:
        return _ask(client, configuration, limits, query, k, secret_params)
    except QueryFailed as exc:
        raise QueryFailed(redact(exc.cause), exc.attempts) from None


@lru_cache(maxsize=256)
def _path(text: str):
    """`parse_path` once per path (a configuration asks thousands of queries with the same)."""
    return parse_path(text)


def _ask(client, configuration, limits, query, k, secret_params):
    import httpx

    p = configuration.params
    id_path = _path(p["id"])
    score_path = _path(p["score"]) if p["score"] else None
    try:
        request = build_request(configuration, query, k, secret_params)
    except Absent as exc:  # pragma: no cover - build_request drops absent fields
        raise QueryFailed(f"absent field {exc}", 0) from None
    bounds = bounds_of(p)
    delay = p["backoff_s"]
    attempts = 0
    while True:
        attempts += 1
        status = headers = None
        with limits.slots:
            limits.wait_turn()  # in the slot: the request starts when its turn comes
            started = time.perf_counter()
            try:
                status, headers, body, round_trip = read_answer(client, bounds, **request)
                status, headers, document = json_answer(status, headers, body, bounds)
                cause = None
            except AnswerRefused as exc:
                status, headers = exc.status, exc.headers
                if status is None or status < 400 or status not in RETRY_STATUSES:
                    raise QueryFailed(_refusal(exc, id_path), attempts) from None
                cause = f"HTTP {status}"
            except httpx.TimeoutException:
                raise QueryFailed(f"timeout after {p['timeout_s']:g} s", attempts) from None
            except httpx.InvalidURL:
                raise QueryFailed("invalid URL for this query (a field too long or not "
                                  "encodable)", attempts) from None
            except httpx.TransportError as exc:
                cause = transport_cause(exc)
            if cause is None:
                hits = _hits(document, configuration, id_path, score_path, attempts)
                latency = (time.perf_counter() - started) * 1000.0
                return hits, latency, round_trip * 1000.0, attempts
        if attempts > p["retries"]:
            raise QueryFailed(cause + (f" after {attempts} attempts" if attempts > 1 else ""),
                              attempts)
        time.sleep(_retry_after(headers, min(delay, p["max_backoff_s"]), p["max_backoff_s"])
                   if status == 429 else min(delay, p["max_backoff_s"]))
        delay *= 2


def _refusal(exc: AnswerRefused, id_path) -> str:
    """The cause of an answer refused by the bounded reader."""
    status = exc.status
    if status is not None and 300 <= status < 400:
        location = (exc.headers or {}).get("location", "")
        return (f"HTTP {status}: a redirect{' to ' + location[:200] if location else ''} "
                "(redirects are not followed: point base_url at the final address)")
    if exc.message.startswith("HTTP "):
        return f"{exc.message}: {redact(exc.excerpt)}" if exc.excerpt else exc.message
    if exc.message == "not JSON":
        kind = (exc.headers or {}).get("content-type", "no content type") \
            if exc.headers is not None else "no content type"
        return (f"bad response: not JSON (HTTP {status}, {kind[:80]}) at path {id_path.text}")
    return f"bad response: {exc.message}"


def _hits(document, configuration, id_path, score_path, attempts) -> list[tuple[str, float]]:
    p = configuration.params
    try:
        hits = extract_hits(document, id_path, score_path, p["missing_hits_empty"],
                            max_hits=p["max_hits"])
    except BadResponse as exc:
        raise QueryFailed(f"bad response: {exc}", attempts) from None
    for i, (doc_id, _) in enumerate(hits):
        problem = id_problem(doc_id, p["max_id_chars"])
        if problem:
            raise QueryFailed(f"bad response: the id of hit {i} {problem}", attempts)
    return hits


# whitespace as str.isspace() has it (re's \s is the same test for str patterns), other control
# characters and DEL; one search in C instead of a Python step per character of every id
_BAD_ID_CHARACTER = re.compile(r"[\s\x00-\x1f\x7f]")


def id_problem(doc_id: str, max_chars: int) -> str | None:
    """Why an id from a service is refused (None: it is fine): too long, or holding whitespace or
    control characters (a TREC run file separates its columns by whitespace)."""
    if len(doc_id) > max_chars:
        return f"is {len(doc_id):,} characters, over max_id_chars ({max_chars})"
    if not doc_id or _BAD_ID_CHARACTER.search(doc_id):
        return (f"{doc_id[:40]!r} is empty or holds whitespace or control characters (ids are "
                "written to TREC run files, whose columns whitespace separates)")
    return None


def run_http(configuration, context: RunContext, queries: Sequence[Query], query_vectors,
             k: int) -> RankedRun:
    """Every query of the shard, as many at a time as its limits allow (`context.lanes`: the
    part of the configuration's limits this shard owns; None: the limits the configuration
    shares in this process); failures kept per query."""
    p = configuration.params
    headers = resolve_headers(configuration, context.secrets)
    secret_params = resolve_query_secrets(configuration, context.secrets)
    limits = limits_for((configuration.name, configuration.sha256), p["concurrency"],
                        p["rate_limit"], context.lanes)
    ids = [q.id for q in queries]
    if len(set(ids)) != len(ids):
        raise InputError("expected distinct query ids", field="queries")
    results: dict[str, list[tuple[str, float]]] = {}
    latency: dict[str, float] = {}
    errors: dict[str, dict] = {}
    timing: dict[str, dict] = {}
    connections = limits.concurrency  # this shard's slots: as many threads, one connection each
    with ClientPerThread(headers=headers, read_timeout=p["timeout_s"]) as clients:

        breaker = Breaker(configuration.fail_fast_after)

        def one(query: Query):
            if breaker.open:  # the service is down: fail fast, never a long wait per query
                return query.id, None, breaker.skipped()
            started = time.perf_counter()
            try:
                hits, ms, round_trip, attempts = ask(clients.get(), configuration, limits,
                                                     query, k, secret_params)
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
