"""The rating page: a small FastAPI app over one pool, for one judge.

One query at a time (its text, category, intent and persona notes), each pooled document with its
title and text, the grading guideline, a progress count (judged / left) and an undo. Keys: the
grades (0-3 on the fixtures' scale) grade the focused document, `n` / `p` move to the next /
previous document (past the last one, to the next query), `u` undoes the last grade. Plain HTML
forms work without the script; the script posts the same forms with `fetch`.

What the page never shows: scores, ranks, configuration names (they would bias the grade); the
documents of a query are in an order of their own (a hash of judge and document), not the pool's.

Which text: the catalog's; a document the catalog does not hold (a dataset without one: the
engine holds the documents) shows the latest version its document lookup reported, as the runs
kept it (`store.documents`; the engine is not asked). The page names that version in its form, so
a grade records the content hash of the version the judge saw, even when a run has seen a newer
one since the page was loaded (that grade is then stale, as it should be).

Who grades: the judge is the server's (`--judge`), never a form field; a form that names one is
refused. Each grade is one new row (source `human`, the guideline's version, the content hash of
the document the judge saw), written at once; a page that is out of date (another tab graded the
pair since it was loaded) is refused with 409 and writes nothing; so is a form that names a version
of the document the page never showed (400). Undo retracts the judge's latest grade of this
session (the row stays, marked retracted).

This module imports FastAPI (its handlers' annotations must resolve at module level): only
`searcheval rate` and the tests import it.

Access: bound to a loopback address it needs nothing; bound to any other address it needs a token
(`searcheval rate` reads it from SEARCHEVAL_RATE_TOKEN or a Prefect Secret block), given once as
`?token=` and kept in a same-site cookie.
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from searcheval.defaults import GUIDELINE_VERSION
from searcheval.errors import InputError
from searcheval.judging.judgments import JudgmentRow, check_judge, judgment_set, latest_by_judge
from searcheval.judging.pool import shown_document
from searcheval.store import documents as looked_up
from searcheval.store import judgments as store
from searcheval.store.database import connect
from searcheval.types import Collection

COOKIE = "searcheval_rate"
FORM_FIELDS = {"query_id", "doc_id", "grade", "expected", "version"}

NO_GUIDELINE = ("No guideline is set for this dataset: name one in the project settings "
                "(`guideline: FILE` of the dataset, searcheval.yaml), with its `grade_labels`.")


@dataclass(frozen=True)
class Guideline:
    """The judging guideline a rating page shows: the text of the file the project settings name,
    its version (file name and sha256 prefix, stored with each grade), and the dataset's own grade
    labels."""

    text: str = NO_GUIDELINE
    version: str = GUIDELINE_VERSION
    labels: dict = field(default_factory=dict)  # grade -> label

    @classmethod
    def from_file(cls, path: str | Path | None, labels: dict | None = None) -> "Guideline":
        if path is None:
            return cls(labels=dict(labels or {}))
        from searcheval.io.files import read_text

        path = Path(path)
        if not path.is_file():
            raise InputError("no guideline file there (the dataset's `guideline` setting)",
                             file=path, field="guideline")
        text = read_text(path)
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
        return cls(text=text, version=f"{path.name}@{digest}", labels=dict(labels or {}))


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_binding(host: str, token: str | None) -> None:
    """Refuse a non-loopback address without a token."""
    if not is_loopback(host) and not token:
        raise InputError(f"the rating page on {host} (not a loopback address) needs a token: set "
                         "SEARCHEVAL_RATE_TOKEN or pass --token-secret BLOCK", field="host")


@dataclass
class RatingSession:
    """Everything the app serves: the pool's items for this judge, and where to write."""

    database_url: str
    collection: Collection
    pool: dict
    items: list[dict]
    judge: str
    token: str | None = None
    guideline: Guideline = field(default_factory=Guideline)
    started_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))

    def __post_init__(self) -> None:
        self.judge = check_judge(self.judge)
        self.catalog = judgment_set(self.collection)
        self.queries = {q.id: q for q in self.collection.queries}
        self.resources = {r.id: r for r in self.collection.resources}
        mine = [i for i in self.items if not i["assigned"] or self.judge in i["assigned"]]
        self.mine = mine
        self.order: list[str] = list(dict.fromkeys(i["query_id"] for i in mine))
        self.pairs = {(i["query_id"], i["doc_id"]): i for i in mine}
        lo, hi = self.collection.grade_scale
        self.grades = list(range(int(lo), int(hi) + 1))

    # -- reads ------------------------------------------------------------------------------

    def _latest(self, conn) -> dict[tuple[str, str], dict[str, JudgmentRow]]:
        return latest_by_judge(store.load_judgment_rows(conn, self.catalog,
                                                        judge=self.judge))

    def progress(self, conn) -> dict:
        latest = self._latest(conn)
        judged = sum(1 for pair in self.pairs if self.judge in latest.get(pair, {}))
        return {"judged": judged, "left": len(self.pairs) - judged, "total": len(self.pairs)}

    def documents(self, conn, query_id: str) -> list[dict]:
        latest = self._latest(conn)
        docs = [i["doc_id"] for i in self.mine if i["query_id"] == query_id]
        docs.sort(key=lambda d: hashlib.sha256(f"{self.judge}\x1f{d}".encode()).hexdigest())
        versions = looked_up.latest_versions(conn, self.catalog,
                                             [d for d in docs if d not in self.resources])
        out = []
        for doc in docs:
            r = self.resources.get(doc)
            v = None if r is not None else versions.get(doc)
            shown = shown_document(r, v)
            mine = latest.get((query_id, doc), {}).get(self.judge)
            out.append({"doc_id": doc, "title": shown["title"] or doc, "text": shown["text"],
                        "tags": shown["tags"], "gone": v is not None and v.gone,
                        "version": str(v.version) if v is not None and not v.gone else "",
                        "grade": mine.grade if mine else None,
                        "expected": str(mine.id) if mine and mine.id is not None else ""})
        return out

    def seen_hash(self, conn, doc: str, version: str) -> tuple[bool, str | None]:
        """(known, the content hash of what the judge saw): the catalog's, the looked-up version
        the page named, or (a form that names none) the latest one."""
        resource = self.resources.get(doc)
        if resource is not None:
            return True, resource.content_hash
        if version:
            found = looked_up.load_version(conn, self.catalog, doc, int(version)) \
                if _small_number(version) is not None else None
            return found is not None, found.content_hash if found else None
        latest = looked_up.latest_versions(conn, self.catalog, [doc]).get(doc)
        return True, latest.content_hash if latest else None

    def first_open_query(self, conn) -> str | None:
        latest = self._latest(conn)
        for qid in self.order:
            if any(self.judge not in latest.get(p, {}) for p in self.pairs if p[0] == qid):
                return qid
        return self.order[0] if self.order else None

    # -- writes -----------------------------------------------------------------------------

    def grade(self, conn, form: dict[str, list[str]]) -> tuple[int, dict]:
        """(HTTP status, JSON body) of one grade."""
        extra = sorted(set(form) - FORM_FIELDS)
        if "judge" in form:
            return 400, {"error": "the judge is the server's (searcheval rate --judge); a form "
                                  "cannot name one: nothing was written"}
        if extra:
            return 400, {"error": f"unknown form field(s) {', '.join(extra)}: nothing was written"}
        values = {}
        for name in ("query_id", "doc_id", "grade"):
            got = form.get(name) or [""]
            if len(got) != 1 or not got[0].strip():
                return 400, {"error": f"expected one value of {name}: nothing was written"}
            values[name] = got[0].strip()
        qid, doc = values["query_id"], values["doc_id"]
        if qid not in self.queries or not any(p[0] == qid for p in self.pairs):
            return 404, {"error": f"unknown query {qid!r}: it is not in pool "
                                  f"{self.pool['pool_id']} for {self.judge}; nothing was written"}
        if (qid, doc) not in self.pairs:
            return 404, {"error": f"document {doc!r} is not pooled for query {qid!r}; nothing "
                                  "was written"}
        raw = values["grade"]
        if _small_number(raw) not in self.grades:
            return 422, {"error": f"expected a whole grade in {self.grades[0]}..{self.grades[-1]}, "
                                  f"got {raw!r}: nothing was written"}
        expected_raw = (form.get("expected") or [""])[0].strip()
        expected = _small_number(expected_raw) if expected_raw else None
        if expected_raw and expected is None:
            return 400, {"error": "expected the id of the grade the page showed: nothing was "
                                  "written"}
        version = (form.get("version") or [""])[0].strip()
        known, seen = self.seen_hash(conn, doc, version)
        if not known:
            return 400, {"error": f"expected a version of {doc!r} the page showed, got "
                                  f"{version!r}: nothing was written"}
        row = JudgmentRow(query_id=qid, doc_id=doc, grade=int(raw), judge=self.judge,
                          judged_at=datetime.now(timezone.utc), source="human",
                          guideline=self.guideline.version, content_hash=seen,
                          origin=f"rate:{self.pool['pool_id']}")
        done = store.record_grade(conn, self.catalog, row, expected)
        if done.id is None:
            current = done.conflict or {}
            shown = "no grade" if expected is None else "an older grade"
            return 409, {"error": f"this page showed {shown} for ({qid}, {doc}), but it has been "
                                  f"graded {current.get('grade')} since (another tab?): nothing "
                                  "was written; reload the page",
                         "grade": current.get("grade"),
                         "expected": str(current.get("id", ""))}
        return 200, {"ok": True, "id": done.id, "grade": row.grade, "query_id": qid,
                     "doc_id": doc, "expected": str(done.id), "progress": self.progress(conn)}

    def undo(self, conn) -> tuple[int, dict]:
        last = store.undo_last(conn, self.catalog, self.judge, self.started_at)
        if last is None:
            return 409, {"error": "nothing to undo in this session"}
        return 200, {"ok": True, "undone": {"query_id": last["query_id"],
                                            "doc_id": last["doc_id"], "grade": last["grade"]},
                     "progress": self.progress(conn)}


def create_app(session: RatingSession):
    """The FastAPI app of one rating session."""
    templates = Environment(loader=PackageLoader("searcheval.judging", "templates"),
                            autoescape=select_autoescape(["html"]))
    app = FastAPI(title="searcheval rating page", docs_url=None, redoc_url=None,
                  openapi_url=None)

    def authorised(request: Request) -> bool:
        if not session.token:
            return True
        given = request.cookies.get(COOKIE) or request.query_params.get("token") or ""
        return secrets.compare_digest(given.encode(), session.token.encode())

    def denied() -> Response:
        return HTMLResponse("<h1>401</h1><p>This rating page needs its token: open it with "
                            "<code>?token=...</code>.</p>", status_code=401)

    def with_cookie(response: Response, request: Request) -> Response:
        if session.token and request.query_params.get("token"):
            response.set_cookie(COOKIE, session.token, httponly=True, samesite="strict")
        return response

    def wants_json(request: Request) -> bool:
        return "application/json" in request.headers.get("accept", "")

    async def read_form(request: Request) -> dict[str, list[str]]:
        body = (await request.body()).decode("utf-8", errors="replace")
        return parse_qs(body, keep_blank_values=True)

    @app.get("/", response_class=HTMLResponse)
    def home(request: Request):
        if not authorised(request):
            return denied()
        with connect(session.database_url) as conn:
            qid = session.first_open_query(conn)
        if qid is None:
            return with_cookie(HTMLResponse(templates.get_template("empty.html").render(
                pool=session.pool, judge=session.judge)), request)
        return with_cookie(RedirectResponse(f"/q/{qid}", status_code=303), request)

    @app.get("/q/{query_id}", response_class=HTMLResponse)
    def query_page(query_id: str, request: Request, message: str | None = None):
        if not authorised(request):
            return denied()
        if query_id not in session.order:
            return HTMLResponse(templates.get_template("error.html").render(
                message=f"unknown query {query_id!r}: it is not in pool "
                        f"{session.pool['pool_id']} for {session.judge}"), status_code=404)
        with connect(session.database_url) as conn:
            docs = session.documents(conn, query_id)
            progress = session.progress(conn)
        i = session.order.index(query_id)
        query = session.queries[query_id]
        html = templates.get_template("query.html").render(
            query=query, docs=docs, progress=progress, judge=session.judge,
            grades=session.grades,
            labels={g: session.guideline.labels.get(g, "") for g in session.grades},
            guideline=[(g, session.guideline.labels.get(g, "")) for g in
                       reversed(session.grades)],
            guideline_text=session.guideline.text,
            guideline_version=session.guideline.version, number=i + 1, of=len(session.order),
            previous=session.order[i - 1] if i > 0 else None,
            next=session.order[i + 1] if i + 1 < len(session.order) else None,
            message=message)
        return with_cookie(HTMLResponse(html), request)

    @app.post("/grade")
    async def grade(request: Request):
        if not authorised(request):
            return denied()
        form = await read_form(request)
        with connect(session.database_url) as conn:
            status, body = session.grade(conn, form)
        if wants_json(request):
            return JSONResponse(body, status_code=status)
        qid = (form.get("query_id") or [""])[0]
        if status == 200:
            return RedirectResponse(f"/q/{qid}", status_code=303)
        return HTMLResponse(templates.get_template("error.html").render(message=body["error"]),
                            status_code=status)

    @app.post("/undo")
    async def undo(request: Request):
        if not authorised(request):
            return denied()
        with connect(session.database_url) as conn:
            status, body = session.undo(conn)
        if wants_json(request):
            return JSONResponse(body, status_code=status)
        if status == 200:
            return RedirectResponse(f"/q/{body['undone']['query_id']}", status_code=303)
        return HTMLResponse(templates.get_template("error.html").render(message=body["error"]),
                            status_code=status)

    return app


def _small_number(raw: str) -> int | None:
    """A form's whole number: ASCII digits only (str.isdigit also takes "²" and "٣"), at most 9
    of them (a Postgres integer holds it); None for anything else."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else None
