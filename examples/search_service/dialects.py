"""The request and response shapes of the service's native API and of five real engines.

Each dialect turns an HTTP request into one `SearchRequest` (query text, k, offset, filters) and
renders the engine's `Results` the way that engine answers, so that a searcheval configuration
written for Elasticsearch, Solr, Vespa, Typesense or Meilisearch runs unchanged against this
service. Every dialect asks the same engine the same question, so all six return the same ids in
the same order; only the envelope differs. Each understands the part of its engine's query
language that says "this text, these filters, this many hits"; anything else is refused with a
400 in that engine's error shape rather than silently ignored.

Every dialect but Solr and Vespa reads a POST body as JSON whatever its Content-Type; Solr and
Vespa also take a form-encoded body (`application/x-www-form-urlencoded`), as the real ones do.

Filters everywhere name the document fields `network`, `asset` (exact match) and `price_usd` (at
most a value); the native API names the last `max_price_usd`, as the fixtures' queries do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from searcheval import Filters

from examples.search_service.engine import Results, source

DEFAULT_K = 10
MAX_K = 10_000


class BadRequest(Exception):
    """The request does not say what to search for in a way this dialect understands."""


@dataclass(frozen=True)
class SearchRequest:
    text: str
    k: int
    offset: int = 0
    filters: Filters = Filters()
    options: dict[str, Any] = field(default_factory=dict)  # what the renderer echoes back


# ---------------------------------------------------------------- small parsing helpers


def _int(value: Any, name: str, default: int, high: int = MAX_K) -> int:
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name} must be an integer, got {value!r}") from None
    if isinstance(value, bool) or not 0 <= number <= high or str(number) != str(value).strip():
        raise BadRequest(f"{name} must be an integer in 0..{high}, got {value!r}")
    return number


def _float(value: Any, name: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name} must be a number, got {value!r}") from None


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string, got {value!r}")
    return value


def json_object(body: bytes) -> dict:
    """The request body as a JSON object ({} when empty)."""
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return data


def _filter(filters: dict, name: str, value: Any) -> None:
    """Record one filter on a document field; refuse fields the service cannot filter on."""
    name = name.removesuffix(".keyword")  # Elasticsearch mappings often filter on name.keyword
    if name in ("network", "asset"):
        filters[name] = _text(value, name)
    elif name == "price_usd":
        filters["max_price_usd"] = _float(value, name)
    else:
        raise BadRequest(f"cannot filter on {name!r}: the filterable fields are network, asset "
                         "(exact match) and price_usd (at most)")


def _first_hit_score(results: Results) -> float | None:
    return results.hits[0].score if results.hits else None


# ---------------------------------------------------------------- native


class Native:
    """`GET /search?q=...&k=10&network=...&asset=...&max_price_usd=...`, or the same as a JSON
    body to `POST /search`. Empty or null filters are unconstrained."""

    name = "native"
    hits_key = "hits"

    @staticmethod
    def parse(params: list[tuple[str, str]], body: bytes, path: dict) -> SearchRequest:
        data: dict[str, Any] = dict(params)
        data.update(json_object(body))
        unknown = sorted(set(data) - {"q", "k", "network", "asset", "max_price_usd"})
        if unknown:
            raise BadRequest(f"unknown parameter {unknown[0]!r}: expected q, k, network, asset, "
                             "max_price_usd")
        filters = Filters(network=_text(data.get("network"), "network") or None,
                          asset=_text(data.get("asset"), "asset") or None,
                          max_price_usd=_float(data.get("max_price_usd"), "max_price_usd"))
        return SearchRequest(text=_text(data.get("q"), "q"), k=_int(data.get("k"), "k", DEFAULT_K),
                             filters=filters)

    @staticmethod
    def render(req: SearchRequest, results: Results, took_ms: float) -> dict:
        return {"query": req.text, "k": req.k,
                "filters": {k: v for k, v in vars(req.filters).items() if v is not None},
                "total": results.total, "took_ms": round(took_ms, 3),
                "hits": [{"id": h.id, "score": h.score, "title": h.document.name}
                         for h in results.hits]}

    @staticmethod
    def error(status: int, message: str) -> dict:
        return {"error": message, "status": status}


# ---------------------------------------------------------------- Elasticsearch / OpenSearch


class Elasticsearch:
    """`POST /es/{index}/_search` (or GET) with a query DSL body, as Elasticsearch and OpenSearch
    take it: `match`, `multi_match`, `query_string`, `simple_query_string` give the text; `term`
    and `range` (`lte`) on network, asset, price_usd filter; `bool` combines them (`must`,
    `should`, `filter`); `size` and `from` page; `_source` (true, false, a list of fields) says
    what each hit carries. URI search `?q=...&size=...` works too."""

    name = "es"
    hits_key = "hits"

    @staticmethod
    def parse(params: list[tuple[str, str]], body: bytes, path: dict) -> SearchRequest:
        data = json_object(body)
        query_params = dict(params)
        texts: list[str] = []
        filters: dict[str, Any] = {}
        if "query" in data:
            Elasticsearch._walk(data["query"], texts, filters)
        else:
            texts.append(_text(query_params.get("q"), "q"))
        size = data.get("size", query_params.get("size"))
        start = data.get("from", query_params.get("from"))
        wanted = data.get("_source", True)
        if not isinstance(wanted, (bool, list)):
            raise BadRequest("_source is true, false or a list of field names")
        return SearchRequest(text=" ".join(dict.fromkeys(t for t in texts if t)),
                             k=_int(size, "size", DEFAULT_K), offset=_int(start, "from", 0),
                             filters=Filters(**filters),
                             options={"index": path["index"], "source": wanted})

    @staticmethod
    def _walk(clause: Any, texts: list[str], filters: dict) -> None:
        if not isinstance(clause, dict) or len(clause) != 1:
            raise BadRequest(f"a query clause is an object with one key, got {clause!r}")
        (kind, spec), = clause.items()
        if not isinstance(spec, dict):
            raise BadRequest(f"[{kind}] takes an object, got {spec!r}")
        if kind == "bool":
            unknown = set(spec) - {"must", "should", "filter", "minimum_should_match", "boost"}
            if unknown:
                raise BadRequest(f"[bool] does not support [{sorted(unknown)[0]}]")
            for occur in ("must", "should", "filter"):
                inner = spec.get(occur, [])
                for c in inner if isinstance(inner, list) else [inner]:
                    Elasticsearch._walk(c, texts, filters)
        elif kind in ("match", "match_phrase"):
            if len(spec) != 1:
                raise BadRequest(f"[{kind}] names one field")
            (_, value), = spec.items()
            texts.append(_text(value.get("query") if isinstance(value, dict) else value, kind))
        elif kind in ("multi_match", "query_string", "simple_query_string"):
            texts.append(_text(spec.get("query"), f"{kind}.query"))
        elif kind == "term":
            if len(spec) != 1:
                raise BadRequest("[term] names one field")
            (name, value), = spec.items()
            _filter(filters, name, value.get("value") if isinstance(value, dict) else value)
        elif kind == "range":
            if len(spec) != 1 or not isinstance(next(iter(spec.values())), dict):
                raise BadRequest("[range] names one field with its bounds")
            (name, bounds), = spec.items()
            if set(bounds) != {"lte"}:
                raise BadRequest("[range] supports only an upper bound [lte]")
            _filter(filters, name, bounds["lte"])
        else:
            raise BadRequest(f"unknown query [{kind}]")

    @staticmethod
    def render(req: SearchRequest, results: Results, took_ms: float) -> dict:
        return {
            "took": int(took_ms), "timed_out": False,
            "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
            "hits": {
                "total": {"value": results.total, "relation": "eq"},
                "max_score": _first_hit_score(results),
                "hits": [Elasticsearch._hit(req, h) for h in results.hits],
            },
        }

    @staticmethod
    def _hit(req: SearchRequest, h) -> dict:
        hit = {"_index": req.options["index"], "_id": h.id, "_score": h.score}
        wanted = req.options["source"]
        if wanted is not False:  # `"_source": false` leaves it out, a list keeps those fields
            stored = source(h.document)
            hit["_source"] = stored if wanted is True else {
                k: v for k, v in stored.items() if k in wanted}
        return hit

    @staticmethod
    def error(status: int, message: str) -> dict:
        kind = "parsing_exception" if status == 400 else "search_service_exception"
        return {"error": {"root_cause": [{"type": kind, "reason": message}], "type": kind,
                          "reason": message}, "status": status}


# ---------------------------------------------------------------- Solr


_SOLR_TERM = re.compile(r'^(\w+(?:\.keyword)?):"?([^"]*)"?$')
_SOLR_RANGE = re.compile(r"^(\w+):\[\s*\*\s+TO\s+([^\]\s]+)\s*\]$")


class Solr:
    """`GET /solr/{core}/select?q=...&rows=10&start=0&fq=network:solana&fq=price_usd:[* TO 0.01]
    &fl=id,score` (or POST as a form), answered as `wt=json`. `q` is free text, as with
    defType=edismax (Lucene syntax is not parsed); `fl` chooses the returned fields as in Solr:
    the default `*` returns every stored field and no score, so ask for `fl=*,score`."""

    name = "solr"
    hits_key = "response"
    takes_form = True

    @staticmethod
    def parse(params: list[tuple[str, str]], body: bytes, path: dict) -> SearchRequest:
        single = dict(params)
        filters: dict[str, Any] = {}
        for fq in (v for k, v in params if k == "fq"):
            fq = fq.strip()
            if m := _SOLR_RANGE.match(fq):
                _filter(filters, m[1], m[2])
            elif m := _SOLR_TERM.match(fq):
                _filter(filters, m[1], m[2])
            else:
                raise BadRequest(f"cannot parse fq {fq!r}: expected field:value or "
                                 "price_usd:[* TO x]")
        echo: dict[str, Any] = {}  # responseHeader.params: a repeated parameter as a list
        for k, v in params:
            if k not in echo:
                echo[k] = v
            elif isinstance(echo[k], list):
                echo[k].append(v)
            else:
                echo[k] = [echo[k], v]
        fl = [f for f in re.split(r"[,\s]+", single.get("fl") or "*") if f]
        return SearchRequest(text=single.get("q", ""), k=_int(single.get("rows"), "rows", DEFAULT_K),
                             offset=_int(single.get("start"), "start", 0), filters=Filters(**filters),
                             options={"fl": fl, "params": echo})

    @staticmethod
    def render(req: SearchRequest, results: Results, took_ms: float) -> dict:
        fl = req.options["fl"]
        docs = []
        for h in results.hits:
            stored = {**source(h.document), "id": h.id}
            doc = {k: v for k, v in stored.items() if "*" in fl or k in fl}
            if "score" in fl:
                doc["score"] = h.score
            docs.append(doc)
        response: dict[str, Any] = {"numFound": results.total, "start": req.offset}
        if "score" in fl:
            response["maxScore"] = _first_hit_score(results)
        response.update(numFoundExact=True, docs=docs)
        return {"responseHeader": {"status": 0, "QTime": int(took_ms),
                                   "params": req.options["params"]},
                "response": response}

    @staticmethod
    def error(status: int, message: str) -> dict:
        return {"responseHeader": {"status": status, "QTime": 0},
                "error": {"metadata": ["error-class", "org.apache.solr.common.SolrException",
                                       "root-error-class", "org.apache.solr.common.SolrException"],
                          "msg": message, "code": status}}


# ---------------------------------------------------------------- Vespa


_YQL = re.compile(r"^\s*select\s+.+?\s+from\s+.+?\s+where\s+(?P<where>.+?)\s*;?\s*$",
                  re.IGNORECASE | re.DOTALL)
_YQL_TERM = re.compile(r"""\s*(?:
      (?P<user_query>userQuery\(\s*\))
    | userInput\(\s*(?:@(?P<variable>\w+)|"(?P<literal>(?:[^"\\]|\\.)*)")\s*\)
    | (?P<contains_field>\w+)\s+contains\s+"(?P<contains_value>(?:[^"\\]|\\.)*)"
    | (?P<range_field>\w+)\s*<=\s*(?P<range_value>[-+0-9.eE]+)
    | (?P<true>true)
    )\s*(?:\band\b|$)""", re.IGNORECASE | re.VERBOSE)


class Vespa:
    """`GET /vespa/search/?yql=...&query=...&hits=10`, or the same as a JSON body to
    `POST /vespa/search/`, as Vespa's query API takes it. The YQL `where` clause is a conjunction
    (`and`) of `userQuery()` (the `query` parameter), `userInput(@name)` (the parameter `name`),
    `userInput("text")`, `network contains "solana"`, `asset contains "USDC"`, `price_usd <= 0.01`
    and `true`. As in Vespa, a result with no hits has no `root.children`."""

    name = "vespa"
    hits_key = "root"
    takes_form = True

    @staticmethod
    def parse(params: list[tuple[str, str]], body: bytes, path: dict) -> SearchRequest:
        data: dict[str, Any] = dict(params)
        data.update(json_object(body))
        yql = _text(data.get("yql"), "yql")
        m = _YQL.match(yql)
        if not m:
            raise BadRequest(f"cannot parse yql {yql!r}: expected select ... from ... where ...")
        where, pos, texts, filters = m["where"], 0, [], {}
        while pos < len(where):
            term = _YQL_TERM.match(where, pos)
            if not term or term.end() == pos:
                raise BadRequest(f"cannot parse yql at {where[pos:]!r}: this service understands "
                                 "userQuery(), userInput(...), contains, <= and true joined by and")
            if term["user_query"]:
                texts.append(_text(data.get("query"), "query"))
            elif term["variable"]:
                texts.append(_text(data.get(term["variable"]), term["variable"]))
            elif term["literal"] is not None:
                texts.append(term["literal"])
            elif term["contains_field"]:
                _filter(filters, term["contains_field"], term["contains_value"])
            elif term["range_field"]:
                _filter(filters, term["range_field"], term["range_value"])
            pos = term.end()
        return SearchRequest(text=" ".join(t for t in texts if t),
                             k=_int(data.get("hits"), "hits", DEFAULT_K),
                             offset=_int(data.get("offset"), "offset", 0), filters=Filters(**filters))

    @staticmethod
    def render(req: SearchRequest, results: Results, took_ms: float) -> dict:
        root: dict[str, Any] = {
            "id": "toplevel", "relevance": 1.0, "fields": {"totalCount": results.total},
            "coverage": {"coverage": 100, "documents": results.documents, "full": True, "nodes": 1,
                         "results": 1, "resultsFull": 1},
        }
        if results.hits:
            root["children"] = [
                {"id": f"id:searcheval:doc::{h.id}", "relevance": h.score, "source": "content",
                 "fields": {"sddocname": "doc", "documentid": f"id:searcheval:doc::{h.id}",
                            **source(h.document), "id": h.id}}
                for h in results.hits]
        return {"root": root}

    @staticmethod
    def error(status: int, message: str) -> dict:
        return {"root": {"id": "toplevel", "relevance": 1.0, "fields": {"totalCount": 0},
                         "errors": [{"code": 4 if status == 400 else 10,
                                     "summary": "Invalid query parameter" if status == 400
                                     else "Backend communication error", "message": message}]}}


# ---------------------------------------------------------------- Typesense


_TS_CLAUSE = re.compile(r"^(\w+):(<=|:?=)?\s*`?([^`]*?)`?$")


class Typesense:
    """`GET /typesense/collections/{c}/documents/search?q=...&query_by=title,text
    &filter_by=network:=solana && price_usd:<=0.01&per_page=10&page=1`, as Typesense takes it.
    `query_by` is accepted and not used (the engine always searches title and text); `text_match`
    carries the BM25 score (a float here, a large integer in Typesense: both rank descending)."""

    name = "typesense"
    hits_key = "hits"

    @staticmethod
    def parse(params: list[tuple[str, str]], body: bytes, path: dict) -> SearchRequest:
        data = dict(params)
        filters: dict[str, Any] = {}
        for clause in filter(None, (c.strip() for c in data.get("filter_by", "").split("&&"))):
            m = _TS_CLAUSE.match(clause)
            if not m or (m[1] == "price_usd") != (m[2] == "<="):
                raise BadRequest(f"Could not parse the filter query {clause!r}: expected "
                                 "field:=value or price_usd:<=x")
            _filter(filters, m[1], m[3])
        per_page = _int(data.get("per_page"), "per_page", DEFAULT_K, high=250)
        page = _int(data.get("page"), "page", 1)
        if page < 1:
            raise BadRequest("page must be at least 1")
        return SearchRequest(text=data.get("q", ""), k=per_page, offset=(page - 1) * per_page,
                             filters=Filters(**filters),
                             options={"collection": path["collection"], "page": page})

    @staticmethod
    def render(req: SearchRequest, results: Results, took_ms: float) -> dict:
        return {
            "facet_counts": [], "found": results.total, "out_of": results.documents,
            "page": req.options["page"],
            "request_params": {"collection_name": req.options["collection"], "per_page": req.k,
                               "q": req.text},
            "search_cutoff": False, "search_time_ms": int(took_ms),
            "hits": [{"document": {**source(h.document), "id": h.id}, "highlight": {},
                      "highlights": [], "text_match": h.score,
                      "text_match_info": {"score": str(h.score)}} for h in results.hits],
        }

    @staticmethod
    def error(status: int, message: str) -> dict:
        return {"message": message}


# ---------------------------------------------------------------- Meilisearch


_MEILI_CLAUSE = re.compile(r"""^(\w+)\s*(=|<=)\s*(?:"([^"]*)"|'([^']*)'|(\S+))$""")


class Meilisearch:
    """`POST /meili/indexes/{i}/search` with `{"q", "limit": 20, "offset", "filter",
    "showRankingScore"}` (or GET with the same as parameters), as Meilisearch takes it. `filter`
    is `network = solana AND price_usd <= 0.01`, or a list of such strings (all must hold).
    `_rankingScore` (only with showRankingScore, as in Meilisearch) is score / (1 + score): in
    [0, 1) and in the same order as the BM25 score."""

    name = "meili"
    hits_key = "hits"

    @staticmethod
    def parse(params: list[tuple[str, str]], body: bytes, path: dict) -> SearchRequest:
        data: dict[str, Any] = dict(params)
        data.update(json_object(body))
        expressions = data.get("filter") or []
        if isinstance(expressions, str):
            expressions = [expressions]
        filters: dict[str, Any] = {}
        for expression in expressions:
            if not isinstance(expression, str):
                raise BadRequest("filter is a string or a list of strings (OR lists are not "
                                 "supported here)")
            for clause in re.split(r"\s+AND\s+", expression.strip()):
                m = _MEILI_CLAUSE.match(clause.strip())
                if not m or (m[1] == "price_usd") != (m[2] == "<="):
                    raise BadRequest(f"invalid filter {clause!r}: expected field = value or "
                                     "price_usd <= x")
                _filter(filters, m[1], next(g for g in m.groups()[2:] if g is not None))
        show = data.get("showRankingScore", False)
        return SearchRequest(text=_text(data.get("q"), "q"), k=_int(data.get("limit"), "limit", 20),
                             offset=_int(data.get("offset"), "offset", 0), filters=Filters(**filters),
                             options={"show_score": show is True or show == "true"})

    @staticmethod
    def render(req: SearchRequest, results: Results, took_ms: float) -> dict:
        hits = []
        for h in results.hits:
            hit = {**source(h.document), "id": h.id}
            if req.options["show_score"]:
                hit["_rankingScore"] = h.score / (1.0 + h.score)
            hits.append(hit)
        return {"hits": hits, "query": req.text, "processingTimeMs": int(took_ms),
                "limit": req.k, "offset": req.offset, "estimatedTotalHits": results.total}

    @staticmethod
    def error(status: int, message: str) -> dict:
        code = "invalid_search_filter" if status == 400 else "internal"
        return {"message": message, "code": code,
                "type": "invalid_request" if status < 500 else "internal",
                "link": f"https://docs.meilisearch.com/errors#{code}"}


DIALECTS = {d.name: d for d in (Native, Elasticsearch, Solr, Vespa, Typesense, Meilisearch)}
