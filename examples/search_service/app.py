"""The FastAPI application: the routes, and the one path every search and lookup request takes.

That path (`Service.governed`) counts the request as in flight and applies the knobs in a fixed
order; the first that fires decides the answer:

1. `fail_first`: the first N requests after the knobs were set fail with `fail_status` (counted
   by arrival, whatever they ask);
2. `delay_ms`: every answer, failed or not, waits (an `asyncio.sleep`, so concurrent requests
   really overlap);
3. the request is parsed in its dialect, so the counters record its query text, k and filters
   even when it is then failed;
4. `require_headers`: a request without each named header and value gets 401;
5. a request the dialect cannot parse gets 400 in that dialect's error shape;
6. `fail_queries` (by query text) or `fail_documents` (by id) answer with their status;
7. the engine answers; `malformed_queries` (by query text) or else `malformed` spoils a search's
   answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from importlib.metadata import version
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from examples.search_service.dialects import DIALECTS, BadRequest, Native, SearchRequest
from examples.search_service.engine import Engine, source
from examples.search_service.knobs import Knobs, Stats

NOT_JSON = "<html><body><h1>Not JSON</h1><p>the malformed knob is set</p></body></html>"
EDITED = " [edited at run time]"


def _error(error: Callable[[int, str], dict], status: int, message: str) -> Response:
    return JSONResponse(error(status, message), status_code=status)


class Service:
    """The engine, the knobs in force, and the counters."""

    def __init__(self, engine: Engine, knobs: Knobs):
        self.engine = engine
        self.stats = Stats()
        self.set_knobs(knobs)

    def set_knobs(self, knobs: Knobs) -> None:
        """Replace every knob and zero the counters (the `fail_first` countdown starts again)."""
        self.knobs = knobs
        self.fail_first_remaining = knobs.fail_first
        self.stats.reset()

    def stats_dict(self) -> dict:
        return self.stats.as_dict(self.fail_first_remaining)

    async def governed(self, endpoint: str, request: Request, error: Callable[[int, str], dict],
                       parse: Callable[[dict], Any], answer: Callable[[Any, dict], Response]
                       ) -> Response:
        """Steps 1-5 of the module's list around `parse` (which fills the record) and `answer`."""
        knobs = self.knobs
        peer = tuple(request.client) if request.client else None  # one per connection
        received = self.stats.begin(endpoint, peer)
        record: dict = {"endpoint": endpoint, "method": request.method, "path": request.url.path,
                        "received_s": round(received, 6)}
        response: Response | None = None
        try:
            fail_first = self.fail_first_remaining > 0
            if fail_first:
                self.fail_first_remaining -= 1
            if knobs.delay_ms:
                await asyncio.sleep(knobs.delay_ms / 1000)
            try:
                parsed, refusal = await parse(record), None
            except BadRequest as exc:
                parsed, refusal = None, str(exc)
            missing = [name for name, value in knobs.require_headers.items()
                       if request.headers.get(name) != value]
            if fail_first:
                response = _error(error, knobs.fail_status, "injected failure (fail_first)")
            elif missing:
                response = _error(error, 401, f"missing or wrong header {missing[0]}")
            elif refusal is not None:
                response = _error(error, 400, refusal)
            else:
                response = answer(parsed, record)
            return response
        finally:
            self.stats.end(response.status_code if response is not None else 500, record)

    async def search(self, dialect, request: Request) -> Response:
        async def parse(record: dict) -> SearchRequest:
            params = list(request.query_params.multi_items())
            body = await request.body()
            if getattr(dialect, "takes_form", False) and request.headers.get(
                    "content-type", "").startswith("application/x-www-form-urlencoded"):
                params, body = params + parse_qsl(body.decode()), b""
            req = dialect.parse(params, body, request.path_params)
            record.update(query=req.text, k=req.k, offset=req.offset,
                          filters={k: v for k, v in vars(req.filters).items() if v is not None})
            return req

        def answer(req: SearchRequest, record: dict) -> Response:
            knobs = self.knobs
            if req.text in knobs.fail_queries:
                return _error(dialect.error, knobs.fail_queries[req.text],
                              "injected failure (fail_queries)")
            started = time.perf_counter()
            results = self.engine.search(req.text, req.k, req.filters, offset=req.offset,
                                         exclude=frozenset(knobs.gone_documents))
            took_ms = (time.perf_counter() - started) * 1000
            record["ids"] = [h.id for h in results.hits]
            mode = knobs.malformed_queries.get(req.text, knobs.malformed)
            if mode:
                self.stats.malformed += 1
            if mode == "not_json":
                return HTMLResponse(NOT_JSON)
            if mode == "object_id" and results.hits:
                first = dataclasses.replace(results.hits[0], id={"id": results.hits[0].id})
                results = dataclasses.replace(results, hits=[first, *results.hits[1:]])
            body = dialect.render(req, results, took_ms)
            if mode == "no_hits":
                del body[dialect.hits_key]
            return JSONResponse(body)

        return await self.governed(dialect.name, request, dialect.error, parse, answer)

    async def document(self, doc_id: str, request: Request) -> Response:
        async def parse(record: dict) -> str:
            record["document"] = doc_id
            return doc_id

        def answer(doc_id: str, record: dict) -> Response:
            knobs = self.knobs
            resource = self.engine.documents.get(doc_id)
            if resource is None or doc_id in knobs.gone_documents:
                return _error(Native.error, 404, f"no document {doc_id!r}")
            if doc_id in knobs.fail_documents:
                return _error(Native.error, knobs.fail_documents[doc_id],
                              "injected failure (fail_documents)")
            if doc_id in knobs.edited_documents:
                resource = dataclasses.replace(resource, description=resource.description + EDITED)
            return JSONResponse({**source(resource), "content_hash": resource.content_hash})

        return await self.governed("documents", request, Native.error, parse, answer)


def create_app(engine: Engine, knobs: Knobs | None = None) -> FastAPI:
    service = Service(engine, knobs or Knobs())
    app = FastAPI(title="searcheval example search service",
                  description="tantivy behind the request and response shapes of six search APIs")
    app.state.service = service
    both = ["GET", "POST"]

    def route(path: str, dialect, methods=both):
        async def endpoint(request: Request) -> Response:
            return await service.search(dialect, request)
        app.add_api_route(path, endpoint, methods=methods, name=f"{dialect.name}:{path}")

    route("/search", DIALECTS["native"])
    route("/es/{index}/_search", DIALECTS["es"])
    route("/solr/{core}/select", DIALECTS["solr"])
    route("/vespa/search/", DIALECTS["vespa"])
    route("/vespa/search", DIALECTS["vespa"])  # no redirect: a client need not follow one
    route("/typesense/collections/{collection}/documents/search", DIALECTS["typesense"], ["GET"])
    route("/meili/indexes/{index}/search", DIALECTS["meili"])

    @app.get("/documents/{doc_id:path}")
    async def document(doc_id: str, request: Request) -> Response:
        return await service.document(doc_id, request)

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "collection": engine.name, "documents": len(engine.documents),
                "engine": f"tantivy {version('tantivy')}"}

    @app.get("/_knobs")
    async def get_knobs() -> dict:
        return service.knobs.model_dump()

    @app.post("/_knobs")
    async def set_knobs(knobs: Knobs) -> dict:
        service.set_knobs(knobs)
        return {"knobs": knobs.model_dump(), "stats": service.stats_dict()}

    @app.get("/_stats")
    async def stats() -> dict:
        return service.stats_dict()

    return app
