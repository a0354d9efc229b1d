"""Document lookup: the documents of an engine that holds its own (http, python, trec), by id,
for titles and text in the report, the diff, the pool and the rating page, and for staleness.

A configuration names its lookup under `documents:`

    documents:
      url: http://127.0.0.1:8900/documents/{id}   # an HTTP GET by id ({id} URL-encoded) ...
      # file: documents.jsonl                     # ... or a JSONL file, one object per document
      id: id                 # file: the key of a document's id
      title: title           # keys (dotted paths) in a document
      text: text
      content_hash: content_hash   # optional: its hash (else: sha256 of the whole document)
      depth: 10              # results of every query looked up (beside every judged document)
      headers: {Authorization: {env: DOCS_TOKEN}}  # http: as the http kind's headers
      timeout_s: 5           # http: the deadline of one request (connect to last byte)
      concurrency: 8
      max_response_bytes: 4194304  # http: most bytes of one answer (wire and decoded)
      max_json_depth: 64     # deepest nesting of a document's JSON (http and file)
      max_id_chars: 512      # a longer id is not looked up (a failure of that id)
      max_title_chars: 500   # a title is cut to this many characters

A run looks up every judged document and the top `depth` results of every query (10: the diff's
and the pool's depth) once per distinct lookup, and keeps what came back in Postgres
(`store.documents`): per run, what its diff shows; per dataset and document, the versions the
lookup reported (`judging.versions`), what the pool, the rating page and staleness read. Headers
are read from the environment when the lookup runs and are never kept (they are remembered by
`searcheval.redaction`, so no cause or text kept quotes them).

Every answer is bounded (`searcheval.rankers.bounded`): its time, its bytes, its JSON's nesting;
an id over `max_id_chars` is not asked for; a title is cut at `max_title_chars` characters and a
text at 2,000 (`TEXT_KEPT`). Going over a bound is a failure of that document, named in
`failed`, never a crash of the run.

A document's content hash is the value at `content_hash` when the configuration names that path
and the document has it; otherwise the sha256 of the document's canonical JSON (keys sorted, no
whitespace, UTF-8) as the lookup returned it, so any change of any field is a change (name a
`content_hash` when the answer carries fields that change on their own, such as a fetch time).

Staleness from the lookup: a judged document the lookup says is gone (HTTP 404 or 410, or not in
the file) makes its judgments stale (`document-gone`). Without a catalog, a judgment is stale
(`document-changed`) when the version it was made on has another hash than the latest one
(`judging.versions` says which version a judgment is of). With a catalog, the catalog is the
truth for content: a named `content_hash` that differs from the catalog's hash of the same id
makes the judgments stale (`document-changed`). Stale judgments are left out of scoring, counted
and alerted as validation's are.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

from searcheval.defaults import DIFF_TOP_K, POOL_DEPTH
from searcheval.errors import InputError
from searcheval.rankers.params import Param, check_params

PARAMS = {
    "url": Param("string", None, nullable=True),
    "file": Param("string", None, nullable=True),
    "id": Param("string", "id"),
    "title": Param("string", "title"),
    "text": Param("string", "text"),
    "content_hash": Param("string", None, nullable=True),
    "headers": Param("mapping", {}),
    "timeout_s": Param("number", 5.0, above=0.0, maximum=600.0),
    "concurrency": Param("integer", 8, minimum=1, maximum=64),
    "max_response_bytes": Param("integer", 4 * 1024 * 1024, minimum=1024,
                                maximum=1024 * 1024 * 1024),
    "max_json_depth": Param("integer", 64, minimum=2, maximum=10_000),
    "max_id_chars": Param("integer", 512, minimum=1, maximum=1_000_000),
    "max_title_chars": Param("integer", 500, minimum=1, maximum=1_000_000),
    # what the diff and the pool show of every query by default
    "depth": Param("integer", max(DIFF_TOP_K, POOL_DEPTH), minimum=0, maximum=1000),
}
TEXT_KEPT = 2000  # characters of a document's text kept (what a judge reads on the rating page)
#: what makes two configurations' lookups one: the same documents, asked for the same way
IDENTITY = ("url", "file", "id", "title", "text", "content_hash", "headers")


def check_lookup(raw: Any, entry: str, file: str | None) -> dict:
    params = check_params(PARAMS, raw or {}, f"{entry}.documents", file)
    if (params["url"] is None) == (params["file"] is None):
        raise InputError("expected exactly one of url (an HTTP GET by {id}) or file (JSONL)",
                         file=file, field=f"{entry}.documents")
    if params["url"] is not None and "{id}" not in params["url"]:
        raise InputError("expected {id} in the lookup URL", file=file,
                         field=f"{entry}.documents.url")
    if params["url"] is not None:
        from searcheval.rankers.http import check_url_credentials

        check_url_credentials(params, f"{entry}.documents", file, names=("url",))
    if params["file"] is not None:
        path = Path(params["file"])
        if not path.is_absolute() and file and not file.startswith("<"):
            path = Path(file).resolve().parent / path
        if not path.is_file():
            raise InputError(f"no such documents file {str(path)!r}", file=file,
                             field=f"{entry}.documents.file")
        params["file"] = str(path)
    for header, spec in params["headers"].items():
        if not (isinstance(spec, Mapping) and len(spec) == 1 and "env" in spec):
            raise InputError("expected {env: VARIABLE}", file=file,
                             field=f"{entry}.documents.headers.{header}")
    return params


def _get(document: Any, path: str | None) -> Any:
    if path is None:
        return None
    node = document
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def lookup_key(params: dict) -> str:
    """One string per distinct lookup (configurations with equal keys share one)."""
    return json.dumps({k: params.get(k) for k in IDENTITY}, sort_keys=True)


def document_hash(document: Any) -> str:
    """sha256 of a document's canonical JSON (keys sorted, no whitespace, UTF-8)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _shown(document: Mapping, params: dict) -> dict:
    text = _get(document, params["text"])
    title = _get(document, params["title"])
    named = _get(document, params["content_hash"])
    return {"title": None if title is None else _cut(str(title), params["max_title_chars"]),
            "text": None if text is None else _cut(str(text), TEXT_KEPT),
            "content_hash": str(named) if named is not None else document_hash(document),
            "hash_source": "field" if named is not None else "document"}


def _cut(text: str, chars: int) -> str:
    """At most `chars` characters, NUL removed (Postgres text cannot hold it)."""
    return text[:chars].replace("\x00", "")


def look_up(params: dict, ids: Iterable[str]) -> dict:
    """{"documents": {id: {title, text, content_hash, hash_source}}, "gone": [ids],
    "failed": {id: cause}}; `hash_source` says where the hash is from: `field` (the document's
    `content_hash`) or `document` (the sha256 of the whole document)."""
    from searcheval.rankers.bounded import AnswerRefused, Bounds, check_depth

    params = {**{k: p.default for k, p in PARAMS.items()}, **params}
    ids = sorted(set(ids))
    out: dict = {"documents": {}, "gone": [], "failed": {}}
    for doc_id in [d for d in ids if len(d) > params["max_id_chars"]]:
        out["failed"][doc_id] = (f"id of {len(doc_id):,} characters, over max_id_chars "
                                 f"({params['max_id_chars']}): not looked up")
    ids = [d for d in ids if len(d) <= params["max_id_chars"]]
    if params["file"] is not None:
        held = {}
        with open(params["file"], encoding="utf-8") as fh:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    check_depth(line.encode(), params["max_json_depth"])
                    document = json.loads(line)
                except AnswerRefused as exc:
                    raise InputError(f"expected one JSON object per line: {exc}",
                                     file=params["file"], line=number) from None
                except (ValueError, RecursionError):
                    raise InputError("expected one JSON object per line", file=params["file"],
                                     line=number) from None
                doc_id = _get(document, params["id"])
                if doc_id is not None:
                    held[str(doc_id)] = document
        for doc_id in ids:
            if doc_id in held:
                out["documents"][doc_id] = _shown(held[doc_id], params)
            else:
                out["gone"].append(doc_id)
        return out
    import httpx

    from searcheval.rankers.bounded import bounded_client, read_json
    from searcheval.redaction import redact, remember

    headers = {}
    for header, spec in params["headers"].items():
        value = os.environ.get(spec["env"])
        if not value:
            raise InputError(f"the environment variable {spec['env']} is not set (the value of "
                             f"header {header})", field=f"documents.headers.{header}")
        remember(value)
        headers[header] = value
    bounds = Bounds(deadline_s=params["timeout_s"], max_bytes=params["max_response_bytes"],
                    max_depth=params["max_json_depth"])
    with bounded_client(headers=headers, concurrency=params["concurrency"],
                        read_timeout=params["timeout_s"]) as client:
        def one(doc_id: str):
            try:
                _, _, document = read_json(client, bounds, "GET",
                                           params["url"].replace("{id}", quote(doc_id, safe="")))
            except AnswerRefused as exc:
                if exc.status in (404, 410):
                    return doc_id, "gone", None
                if exc.status is not None and 300 <= exc.status < 400:
                    return doc_id, None, (f"HTTP {exc.status}: a redirect (redirects are not "
                                          "followed: point the lookup's url at the final "
                                          "address)")
                if exc.message.startswith("HTTP "):
                    return doc_id, None, exc.message
                return doc_id, None, redact(exc.message)
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                return doc_id, None, f"{type(exc).__name__}"
            if not isinstance(document, Mapping):
                return doc_id, None, f"expected a JSON object, got {type(document).__name__}"
            return doc_id, document, None

        with ThreadPoolExecutor(max_workers=params["concurrency"]) as pool:
            for doc_id, document, error in pool.map(one, ids):
                if error is not None:
                    out["failed"][doc_id] = error
                elif document == "gone":
                    out["gone"].append(doc_id)
                else:
                    out["documents"][doc_id] = _shown(document, params)
    return out


def stale_from_lookup(lookup: dict, judgments, catalog_hashes: Mapping[str, str]) -> list[tuple]:
    """(query_id, doc_id, reason) of the judgments the lookup makes stale: gone, or (with a
    catalog) a named content hash that differs from the catalog's."""
    gone = set(lookup["gone"])
    out = []
    for j in judgments:
        if j.doc_id in gone:
            out.append((j.query_id, j.doc_id, "document-gone"))
            continue
        found = lookup["documents"].get(j.doc_id)
        if found and found.get("hash_source") == "field" and j.doc_id in catalog_hashes \
                and found["content_hash"] != catalog_hashes[j.doc_id]:
            out.append((j.query_id, j.doc_id, "document-changed"))
    return out
