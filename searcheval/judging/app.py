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
of at least 16 characters (`searcheval rate` reads it from SEARCHEVAL_RATE_TOKEN or a Prefect
Secret block), given once as `?token=`; a correct `?token=` wins over any cookie.

What a browser can trust (issue 28; docs/security.md):

- **sessions**: the first page a browser opens starts a session; its cookie (`searcheval_rate`,
  HttpOnly, SameSite=Strict) holds a random session id, never the token;
- **CSRF**: every state-changing request (`POST /grade`, `POST /undo`) must carry the session's
  CSRF token (the form's hidden `csrf` field, or the `X-CSRF-Token` header the script sends),
  must not come from another site or port (`Sec-Fetch-Site` other than same-origin or none is
  refused; so is an `Origin` that is not the page's own), and must have the session cookie;
- **Host**: a request whose Host header is not a name the page serves (`allowed_hosts`: the
  loopback names and the bound address, or what `searcheval rate --allowed-host` adds) is refused
  with 421, so a DNS-rebinding page cannot read the queue;
- **bodies**: at most `MAX_BODY` bytes (refused with 413 by Content-Length, and by counting what
  is streamed, so a 400 MB POST never reaches memory);
- **headers**: a Content-Security-Policy with a nonce per page (no other script, no framing, forms
  post only here), X-Frame-Options: DENY, Referrer-Policy: same-origin,
  X-Content-Type-Options: nosniff, Cache-Control: no-store;
- ids in links are URL-encoded (a query id may hold `/`); the undo's message is kept in the
  session, never read from the URL.
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
CSRF_FIELD = "csrf"
CSRF_HEADER = "x-csrf-token"
MIN_TOKEN_LENGTH = 16
MAX_BODY = 64 * 1024  # bytes of one request body: a grade's form is a few hundred
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_SESSIONS = 1000  # browser sessions kept; the oldest is dropped past it

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
    """Refuse a non-loopback address without a token, and a token shorter than
    MIN_TOKEN_LENGTH characters anywhere."""
    if not is_loopback(host) and not token:
        raise InputError(f"the rating page on {host} (not a loopback address) needs a token: set "
                         "SEARCHEVAL_RATE_TOKEN or pass --token-secret BLOCK", field="host")
    check_token(token)


def check_token(token: str | None) -> None:
    if token is not None and len(token) < MIN_TOKEN_LENGTH:
        raise InputError(f"expected a token of at least {MIN_TOKEN_LENGTH} characters, got "
                         f"{len(token)} (e.g. python -c 'import secrets; "
                         "print(secrets.token_urlsafe(24))')", field="token")


def allowed_hosts_for(host: str, extra=()) -> frozenset[str]:
    """The Host names the page answers: the loopback names, the bound address, and `extra`; bound
    to every address (0.0.0.0, ::), also this machine's name."""
    import socket

    names = set(LOOPBACK_NAMES) | {host.strip("[]").lower()} | {h.lower() for h in extra}
    if host in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


def host_name(header: str) -> str:
    """The name of a Host header: `127.0.0.1:8765` -> 127.0.0.1, `[::1]:80` -> ::1."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


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
        check_token(self.token)

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


class BodyTooLarge(Exception):
    pass


@dataclass
class BrowserSession:
    """One browser's session: its CSRF token and the message its next page shows."""

    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    flash: str = ""


def create_app(session: RatingSession, allowed_hosts=None, max_body: int = MAX_BODY):
    """The FastAPI app of one rating session; `allowed_hosts`: the Host names it answers
    (default: the loopback names)."""
    from urllib.parse import quote

    templates = Environment(loader=PackageLoader("searcheval.judging", "templates"),
                            autoescape=select_autoescape(["html"]))
    templates.filters["path"] = lambda value: quote(str(value), safe="")
    hosts = frozenset(h.lower() for h in (allowed_hosts or LOOPBACK_NAMES))
    browsers: dict[str, BrowserSession] = {}
    app = FastAPI(title="searcheval rating page", docs_url=None, redoc_url=None,
                  openapi_url=None)

    @app.middleware("http")
    async def guard(request: Request, call_next):
        if host_name(request.headers.get("host", "")) not in hosts:
            return security_headers(HTMLResponse(
                "<h1>421</h1><p>This rating page does not serve that host name.</p>",
                status_code=421), "")
        length = request.headers.get("content-length", "")
        if length and (not length.isdigit() or int(length) > max_body):
            return security_headers(refusal(request, 413, f"a request body over {max_body:,} "
                                            "bytes: nothing was written"), "")
        return await call_next(request)

    def security_headers(response: Response, nonce: str) -> Response:
        script = f"'nonce-{nonce}'" if nonce else "'none'"
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; script-src {script}; style-src {script}; "
            "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
            "img-src 'none'")
        response.headers["X-Frame-Options"] = "DENY"
        # same-origin, not no-referrer: with no-referrer Chromium sends `Origin: null` on the
        # page's own form posts; same-origin still sends nothing (no ?token=) to another site
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-store"
        return response

    def page(name: str, status_code: int = 200, **values) -> Response:
        nonce = secrets.token_urlsafe(16)
        return security_headers(HTMLResponse(templates.get_template(name).render(
            nonce=nonce, **values), status_code=status_code), nonce)

    def browser(request: Request) -> BrowserSession | None:
        sid = request.cookies.get(COOKIE) or ""
        return browsers.get(sid) if sid else None

    def authorised(request: Request) -> bool:
        if not session.token:
            return True
        given = request.query_params.get("token")
        if given is not None:  # a correct ?token= wins over a stale cookie; a wrong one loses
            return secrets.compare_digest(given.encode(), session.token.encode())
        return browser(request) is not None

    def denied() -> Response:
        return page("error.html", 401, message="This rating page needs its token: open it "
                                                "with ?token=...")

    def ensure(request: Request) -> tuple[BrowserSession, str | None]:
        """The browser's session, or a new one (and its id, for the cookie) when it has none or
        a ?token= was given: the cookie holds a session id, never the token."""
        mine = browser(request) if request.query_params.get("token") is None else None
        if mine is not None:
            return mine, None
        while len(browsers) >= MAX_SESSIONS:  # the oldest go first
            browsers.pop(next(iter(browsers)))
        sid = secrets.token_urlsafe(32)
        browsers[sid] = mine = BrowserSession()
        return mine, sid

    def with_session(response: Response, sid: str | None) -> Response:
        if sid is not None:
            response.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/")
        return response

    def wants_json(request: Request) -> bool:
        return "application/json" in request.headers.get("accept", "")

    def refusal(request: Request, status: int, error: str) -> Response:
        if wants_json(request):
            return JSONResponse({"error": error}, status_code=status)
        return page("error.html", status, message=error)

    def forged(request: Request, form: dict[str, list[str]] | None) -> str | None:
        """Why a state-changing request is refused (None: it may go on)."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"a request from another site ({site}) is refused: nothing was written"
        origin = request.headers.get("origin")
        if origin is not None:
            own = f"{request.url.scheme}://{request.headers.get('host', '')}".lower()
            if origin.lower() != own:
                return "a request from another origin is refused: nothing was written"
        mine = browser(request)
        if mine is None:
            return ("no session: open the rating page first (its form carries what a grade "
                    "needs): nothing was written")
        given = request.headers.get(CSRF_HEADER) or \
            ((form or {}).get(CSRF_FIELD) or [""])[0]
        if not secrets.compare_digest(given.encode(), mine.csrf.encode()):
            return "expected this page's CSRF token: reload the page; nothing was written"
        return None

    async def read_form(request: Request) -> dict[str, list[str]]:
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body:
                raise BodyTooLarge()
        return parse_qs(body.decode("utf-8", errors="replace"), keep_blank_values=True)

    async def checked_form(request: Request):
        """(form without its csrf field, None) or (None, the refusal)."""
        if not authorised(request):
            return None, denied()
        try:
            form = await read_form(request)
        except BodyTooLarge:
            return None, refusal(request, 413, f"a request body over {max_body:,} bytes: "
                                               "nothing was written")
        why = forged(request, form)
        if why:
            return None, refusal(request, 403, why)
        form.pop(CSRF_FIELD, None)
        return form, None

    @app.get("/", response_class=HTMLResponse)
    def home(request: Request):
        if not authorised(request):
            return denied()
        with connect(session.database_url) as conn:
            qid = session.first_open_query(conn)
        _, sid = ensure(request)
        if qid is None:
            return with_session(page("empty.html", pool=session.pool, judge=session.judge), sid)
        return with_session(security_headers(RedirectResponse(
            f"/q/{quote(qid, safe='')}", status_code=303), ""), sid)

    @app.get("/q/{query_id:path}", response_class=HTMLResponse)
    def query_page(query_id: str, request: Request):
        if not authorised(request):
            return denied()
        if query_id not in session.order:
            return page("error.html", 404,
                        message=f"unknown query {query_id!r}: it is not in pool "
                                f"{session.pool['pool_id']} for {session.judge}")
        with connect(session.database_url) as conn:
            docs = session.documents(conn, query_id)
            progress = session.progress(conn)
        i = session.order.index(query_id)
        query = session.queries[query_id]
        mine, sid = ensure(request)
        message, mine.flash = mine.flash, ""
        response = page(
            "query.html", query=query, docs=docs, progress=progress, judge=session.judge,
            grades=session.grades,
            labels={g: session.guideline.labels.get(g, "") for g in session.grades},
            guideline=[(g, session.guideline.labels.get(g, "")) for g in
                       reversed(session.grades)],
            guideline_text=session.guideline.text,
            guideline_version=session.guideline.version, number=i + 1, of=len(session.order),
            previous=session.order[i - 1] if i > 0 else None,
            next=session.order[i + 1] if i + 1 < len(session.order) else None,
            message=message, csrf=mine.csrf)
        return with_session(response, sid)

    @app.post("/grade")
    async def grade(request: Request):
        form, refused = await checked_form(request)
        if refused is not None:
            return refused
        with connect(session.database_url) as conn:
            status, body = session.grade(conn, form)
        if wants_json(request):
            return JSONResponse(body, status_code=status)
        qid = (form.get("query_id") or [""])[0]
        if status == 200:
            return RedirectResponse(f"/q/{quote(qid, safe='')}", status_code=303)
        return page("error.html", status, message=body["error"])

    @app.post("/undo")
    async def undo(request: Request):
        form, refused = await checked_form(request)
        if refused is not None:
            return refused
        with connect(session.database_url) as conn:
            status, body = session.undo(conn)
        if status == 200:
            last = body["undone"]
            browser(request).flash = f"undone: {last['doc_id']} (was {last['grade']})"
        if wants_json(request):
            return JSONResponse(body, status_code=status)
        if status == 200:
            return RedirectResponse(f"/q/{quote(body['undone']['query_id'], safe='')}",
                                    status_code=303)
        return page("error.html", status, message=body["error"])

    return app


def _small_number(raw: str) -> int | None:
    """A form's whole number: ASCII digits only (str.isdigit also takes "²" and "٣"), at most 9
    of them (a Postgres integer holds it); None for anything else."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 9 else None
