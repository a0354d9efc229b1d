"""What users did with a trace's results (issue 25): the optional behaviour fields of a trace.

A trace (`searcheval.io.traces`) may carry, beside what the service returned:

| field | what it is |
| --- | --- |
| `shown_ids` | the ids the user was shown, in order (default: `retrieved_ids`) |
| `clicks` | `[{"position": 1-based rank in shown_ids, "doc_id"?, "dwell_s"?}]` (`position` may be left out when `doc_id` is shown) |
| `feedback` | `[{"doc_id"?, "grade"?, "thumbs"?: "up" or "down"}]` explicit feedback; without `doc_id` it is about the whole page |
| `session_id`, `user_id` | a session and a pseudonymous user id (never an e-mail or a name) |
| `configuration_version` | the version of the served `configuration` |

Every field is optional. A malformed one makes the record a bad record naming the field (for
example `clicks[1].position`), as the core fields do. `parse_behaviour` validates the fields of
one record; `Behaviour` keeps them in columns beside a `TraceTable`, so a million traces with ten
shown results and their clicks stay a few hundred megabytes.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

BEHAVIOUR_FIELDS = ("shown_ids", "clicks", "feedback", "session_id", "user_id",
                    "configuration_version")
_FIELD_SET = frozenset(BEHAVIOUR_FIELDS)
_TEXT_FIELDS = frozenset(("session_id", "user_id", "configuration_version"))
THUMBS = {"up": 1, "down": -1}
_THUMB_NAMES = {1: "up", -1: "down"}
MAX_ID_CHARS = 200  # session and user ids: pseudonyms, not documents


class Click(NamedTuple):
    position: int  # 1-based rank in the shown list
    doc_id: str
    dwell_s: float | None = None


class Feedback(NamedTuple):
    doc_id: str | None = None  # None: feedback on the whole result page
    grade: int | None = None
    thumbs: str | None = None  # "up" | "down"

    def label(self) -> int | None:
        """The grade this feedback gives its document: the grade, else thumbs up 1 / down 0."""
        if self.grade is not None:
            return self.grade
        if self.thumbs is not None:
            return 1 if self.thumbs == "up" else 0
        return None


class _Errors:
    """The error class bad fields raise: the core module's TraceError, set by it at import (this
    module imports nothing of it, so the two never import each other)."""

    cls: type = ValueError


def _error(field: str, message: str):
    return _Errors.cls(field, message)


def _short_text(obj: dict, key: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_ID_CHARS:
        raise _error(key, f"expected a non-empty string of at most {MAX_ID_CHARS} characters, "
                          f"got {value!r:.60}")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _clicks(value: Any, shown: tuple[str, ...]) -> tuple[Click, ...]:
    if not isinstance(value, list):
        raise _error("clicks", f"expected a list of clicks, got {type(value).__name__}")
    out = []
    n_shown = len(shown)
    for i, raw in enumerate(value):
        # the common click, {"position": p} with p a shown position: no further checks
        if type(raw) is dict and len(raw) == 1:
            position = raw.get("position")
            if type(position) is int and 0 < position <= n_shown:
                out.append(Click(position, shown[position - 1]))
                continue
        where = f"clicks[{i}]"
        if not isinstance(raw, dict):
            raise _error(where, f"expected an object {{position, doc_id, dwell_s}}, got "
                                f"{type(raw).__name__}")
        position, doc = raw.get("position"), raw.get("doc_id")
        if doc is not None and (not isinstance(doc, str) or not doc):
            raise _error(f"{where}.doc_id", f"expected a non-empty string id, got {doc!r:.60}")
        if position is None:
            if doc is None:
                raise _error(f"{where}.position", "missing; expected the 1-based position of "
                                                  "the clicked result (or its doc_id)")
            if doc not in shown:
                raise _error(f"{where}.doc_id", f"{doc!r:.60} was not shown")
            position = shown.index(doc) + 1
        elif isinstance(position, bool) or not isinstance(position, int) \
                or not 1 <= position <= len(shown):
            raise _error(f"{where}.position", f"expected a whole position in 1..{len(shown)} "
                                              f"(the shown results), got {position!r:.60}")
        elif doc is not None and shown[position - 1] != doc:
            raise _error(f"{where}.doc_id", f"{doc!r:.60} is not the result shown at position "
                                            f"{position} ({shown[position - 1]!r:.60})")
        dwell = raw.get("dwell_s")
        if dwell is not None and (not _number(dwell) or dwell < 0):
            raise _error(f"{where}.dwell_s", f"expected seconds >= 0, got {dwell!r:.60}")
        out.append(Click(position, shown[position - 1],
                         None if dwell is None else float(dwell)))
    return tuple(out)


def _feedback(value: Any, scale: tuple[int, int]) -> tuple[Feedback, ...]:
    if not isinstance(value, list):
        raise _error("feedback", f"expected a list of feedback, got {type(value).__name__}")
    lo, hi = scale
    out = []
    for i, raw in enumerate(value):
        where = f"feedback[{i}]"
        if not isinstance(raw, dict):
            raise _error(where, f"expected an object {{doc_id, grade, thumbs}}, got "
                                f"{type(raw).__name__}")
        doc, grade, thumbs = raw.get("doc_id"), raw.get("grade"), raw.get("thumbs")
        if doc is not None and (not isinstance(doc, str) or not doc):
            raise _error(f"{where}.doc_id", f"expected a non-empty string id, got {doc!r:.60}")
        if grade is not None and not (_number(grade) and float(grade).is_integer()
                                      and lo <= grade <= hi):
            raise _error(f"{where}.grade", f"expected a whole grade in {lo}..{hi}, got "
                                           f"{grade!r:.60}")
        if thumbs is not None and thumbs not in THUMBS:
            raise _error(f"{where}.thumbs", f"expected 'up' or 'down', got {thumbs!r:.60}")
        if grade is None and thumbs is None:
            raise _error(where, "expected a grade or thumbs")
        out.append(Feedback(doc, None if grade is None else int(grade), thumbs))
    return tuple(out)


def parse_behaviour(obj: dict, retrieved: tuple[str, ...], grade_scale: tuple[int, int],
                    ids) -> dict[str, Any]:
    """The behaviour fields of one record, validated, as keyword arguments of `Trace` (only those
    present); `ids` is the core module's id-list check. Raises TraceError naming the field."""
    present = _FIELD_SET.intersection(obj)
    if not present:
        return {}
    out: dict[str, Any] = {}
    shown = obj.get("shown_ids")
    if shown is not None:
        out["shown_ids"] = shown = ids(shown, "shown_ids")
    else:
        shown = retrieved
    clicks = obj.get("clicks")
    if clicks is not None:
        out["clicks"] = _clicks(clicks, shown)
    if obj.get("feedback") is not None:
        out["feedback"] = _feedback(obj["feedback"], grade_scale)
    for key in _TEXT_FIELDS.intersection(present):
        value = _short_text(obj, key)
        if value is not None:
            out[key] = value
    return out


def behaviour_dict(trace) -> dict[str, Any]:
    """The JSONL fields of a trace's behaviour (those it has)."""
    out: dict[str, Any] = {}
    if trace.shown_ids is not None:
        out["shown_ids"] = list(trace.shown_ids)
    if trace.clicks is not None:
        out["clicks"] = [{"position": c.position, "doc_id": c.doc_id,
                          **({"dwell_s": c.dwell_s} if c.dwell_s is not None else {})}
                         for c in trace.clicks]
    if trace.feedback is not None:
        out["feedback"] = [{k: v for k, v in (("doc_id", f.doc_id), ("grade", f.grade),
                                              ("thumbs", f.thumbs)) if v is not None}
                           for f in trace.feedback]
    for key in ("session_id", "user_id", "configuration_version"):
        if getattr(trace, key) is not None:
            out[key] = getattr(trace, key)
    return out


# --------------------------------------------------------------------------- columns


def _ragged_index(offsets: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions of the given rows' elements, and the offsets of the result (as
    traces.ragged_index)."""
    rows = np.asarray(rows, dtype=np.int64)
    starts = offsets[rows]
    counts = offsets[rows + 1] - starts
    out = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return np.repeat(starts - out[:-1], counts) + np.arange(out[-1], dtype=np.int64), out


@dataclass
class Behaviour:
    """The behaviour of a TraceTable's rows in columns (row i is the table's row i).

    `shown` (doc codes of the table's vocabulary) between `shown_offsets`: what was shown, the
    retrieved ids when the trace gave no `shown_ids` (`has_shown` False). Clicks: `click_pos`
    (1-based) and `click_dwell` (NaN: not given) between `click_offsets`; `has_clicks` False
    where the trace gave no `clicks` field (unknown, unlike an empty list: shown, not clicked).
    Feedback: `fb_doc` (-1: the page), `fb_grade` (-1: none), `fb_thumbs` (1 up, -1 down, 0)
    between `fb_offsets`. `session`, `user`, `version`: codes into their lists, -1 absent.
    """

    shown: np.ndarray
    shown_offsets: np.ndarray
    has_shown: np.ndarray
    click_pos: np.ndarray
    click_dwell: np.ndarray
    click_offsets: np.ndarray
    has_clicks: np.ndarray
    fb_doc: np.ndarray
    fb_grade: np.ndarray
    fb_thumbs: np.ndarray
    fb_offsets: np.ndarray
    session: np.ndarray
    user: np.ndarray
    version: np.ndarray
    sessions: list[str]
    users: list[str]
    versions: list[str]

    def select(self, rows: np.ndarray) -> "Behaviour":
        s_idx, s_off = _ragged_index(self.shown_offsets, rows)
        c_idx, c_off = _ragged_index(self.click_offsets, rows)
        f_idx, f_off = _ragged_index(self.fb_offsets, rows)
        return Behaviour(
            shown=self.shown[s_idx], shown_offsets=s_off, has_shown=self.has_shown[rows],
            click_pos=self.click_pos[c_idx], click_dwell=self.click_dwell[c_idx],
            click_offsets=c_off, has_clicks=self.has_clicks[rows], fb_doc=self.fb_doc[f_idx],
            fb_grade=self.fb_grade[f_idx], fb_thumbs=self.fb_thumbs[f_idx], fb_offsets=f_off,
            session=self.session[rows], user=self.user[rows], version=self.version[rows],
            sessions=self.sessions, users=self.users, versions=self.versions)

    def fields(self, i: int, docs: list[str]) -> dict[str, Any]:
        """Trace i's behaviour as `Trace` keyword arguments."""
        out: dict[str, Any] = {}
        shown = tuple(docs[c] for c in
                      self.shown[self.shown_offsets[i]:self.shown_offsets[i + 1]].tolist())
        if self.has_shown[i]:
            out["shown_ids"] = shown
        if self.has_clicks[i]:
            a, b = self.click_offsets[i], self.click_offsets[i + 1]
            out["clicks"] = tuple(
                Click(p, shown[p - 1], None if math.isnan(d) else d)
                for p, d in zip(self.click_pos[a:b].tolist(), self.click_dwell[a:b].tolist()))
        a, b = self.fb_offsets[i], self.fb_offsets[i + 1]
        if b > a:
            out["feedback"] = tuple(
                Feedback(docs[d] if d >= 0 else None, g if g >= 0 else None,
                         _THUMB_NAMES.get(t))
                for d, g, t in zip(self.fb_doc[a:b].tolist(), self.fb_grade[a:b].tolist(),
                                   self.fb_thumbs[a:b].tolist()))
        for key, codes, names in (("session_id", self.session, self.sessions),
                                  ("user_id", self.user, self.users),
                                  ("configuration_version", self.version, self.versions)):
            if codes[i] >= 0:
                out[key] = names[codes[i]]
        return out


class BehaviourBuilder:
    """Appends the behaviour of each trace a TraceBuilder adds (sharing its document codes)."""

    def __init__(self, doc_codes, interner) -> None:
        _Interner = interner  # the core module's string interner class
        self._codes = doc_codes  # the TraceBuilder's document interner's `codes`
        self._shown, self._s_count, self._has_shown = array("i"), array("q"), array("b")
        self._click_pos, self._click_dwell = array("i"), array("d")
        self._c_count, self._has_clicks = array("q"), array("b")
        self._fb_doc, self._fb_grade, self._fb_thumbs = array("i"), array("h"), array("b")
        self._f_count = array("q")
        self._session, self._user, self._version = array("i"), array("i"), array("i")
        self._sessions, self._users, self._versions = _Interner(), _Interner(), _Interner()
        self.any = False

    def add(self, trace, retrieved_codes: list[int]) -> None:
        shown = trace.shown_ids
        self._has_shown.append(shown is not None)
        self._shown.extend(retrieved_codes if shown is None else self._codes(shown))
        self._s_count.append(len(retrieved_codes) if shown is None else len(shown))
        clicks = trace.clicks
        self._has_clicks.append(clicks is not None)
        if clicks:
            self._click_pos.extend([c.position for c in clicks])
            self._click_dwell.extend([math.nan if c.dwell_s is None else c.dwell_s
                                      for c in clicks])
        self._c_count.append(len(clicks) if clicks else 0)
        feedback = trace.feedback or ()
        for f in feedback:
            self._fb_doc.append(self._codes((f.doc_id,))[0] if f.doc_id is not None else -1)
            self._fb_grade.append(-1 if f.grade is None else f.grade)
            self._fb_thumbs.append(THUMBS.get(f.thumbs, 0))
        self._f_count.append(len(feedback))
        for value, codes, interner in ((trace.session_id, self._session, self._sessions),
                                       (trace.user_id, self._user, self._users),
                                       (trace.configuration_version, self._version,
                                        self._versions)):
            codes.append(-1 if value is None else interner.code(value))
        if not self.any and (trace.shown_ids is not None or clicks is not None or feedback
                             or trace.session_id or trace.user_id
                             or trace.configuration_version):
            self.any = True

    def build(self) -> Behaviour:
        def arr(a: array, dtype) -> np.ndarray:
            return np.frombuffer(a, dtype=dtype).copy() if len(a) else np.zeros(0, dtype=dtype)

        def offsets(counts: array) -> np.ndarray:
            out = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(arr(counts, np.int64), out=out[1:])
            return out

        return Behaviour(
            shown=arr(self._shown, np.int32), shown_offsets=offsets(self._s_count),
            has_shown=arr(self._has_shown, np.int8).astype(bool),
            click_pos=arr(self._click_pos, np.int32), click_dwell=arr(self._click_dwell,
                                                                        np.float64),
            click_offsets=offsets(self._c_count),
            has_clicks=arr(self._has_clicks, np.int8).astype(bool),
            fb_doc=arr(self._fb_doc, np.int32), fb_grade=arr(self._fb_grade, np.int16),
            fb_thumbs=arr(self._fb_thumbs, np.int8), fb_offsets=offsets(self._f_count),
            session=arr(self._session, np.int32), user=arr(self._user, np.int32),
            version=arr(self._version, np.int32), sessions=self._sessions.names,
            users=self._users.names, versions=self._versions.names)
