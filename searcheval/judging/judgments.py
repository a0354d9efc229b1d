"""Judgments with provenance, and the rule that derives the grade a metric uses.

Every grade anyone gave is one `JudgmentRow` (query, document, grade, judge, when, source
`human` | `import` | `model` | `implicit` (clicks through a click model), guideline version, note): a re-judgment adds a row, nothing is
overwritten. The effective grade of a (query, document) pair is derived in two steps:

1. each judge's latest row counts (latest by `judged_at`, a row without a time before any row
   with one, then by the order rows were recorded);
2. across judges, by the rule:
   - `median` (default): the median of the judges' grades; with an even number of judges the
     lower of the two middle grades (a grade is never rounded up);
   - `majority`: the grade most judges gave; a tie goes to the lowest of the tied grades;
   - `judge:NAME`: that judge's latest grade only; pairs NAME never graded have no effective grade.

Staleness uses the provenance of each row: a row is stale when its document is no longer in the
catalog (`resource-removed`), when it was judged before the document's content last changed (its
recorded content hash differs from the current one, or it was judged before the document's
`updated_at`: `changed-after-judged`), or when it is older than the maximum age (`too-old`).
Without a catalog (the search engine holds the documents) a document lookup's versions take the
catalog's place (`judging.versions`): a row is stale when the lookup last reported its document
gone (`document-gone`), or when the version it was made on has another hash than the latest one
(`document-changed`).
Stale rows do not count towards the effective grade; a pair whose rows are all stale keeps an
effective grade from them, marked stale, so that validation reports it and scoring leaves it out
(as before judgments had provenance).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone

from searcheval.defaults import JUDGMENT_RULE, JUDGMENT_SOURCES
from searcheval.errors import InputError
from searcheval.judging.versions import Version, lookup_stale_reason
from searcheval.types import Judgment, JudgmentRow, Resource  # JudgmentRow: a noun, re-exported

# priority order; the lookup's two are counted only where a document lookup is used
STALE_REASONS = ("resource-removed", "document-gone", "changed-after-judged", "document-changed",
                 "too-old")
LOOKUP_REASONS = ("document-gone", "document-changed")
RULES = ("median", "majority", "judge:NAME")


@dataclass(frozen=True)
class Rule:
    """How the judges' latest grades of a pair become one grade (see the module docstring)."""

    kind: str  # median | majority | judge
    judge: str | None = None

    @property
    def name(self) -> str:
        return f"judge:{self.judge}" if self.kind == "judge" else self.kind

    def describe(self) -> str:
        """One sentence for the report."""
        if self.kind == "median":
            return ("each judge's latest grade, then the median across judges (the lower middle "
                    "grade when their number is even)")
        if self.kind == "majority":
            return ("each judge's latest grade, then the grade most judges gave (a tie goes to the "
                    "lowest tied grade)")
        return f"the latest grade of judge {self.judge!r} only"

    def combine(self, grades: dict[str, int]) -> int | None:
        """The effective grade from {judge: latest grade}; None when the rule finds none."""
        if not grades:
            return None
        if self.kind == "judge":
            return grades.get(self.judge)
        values = sorted(grades.values())
        if self.kind == "median":
            return values[(len(values) - 1) // 2]
        counts = Counter(values)
        top = max(counts.values())
        return min(g for g, n in counts.items() if n == top)


def judgment_set(collection) -> str:
    """Which judgments a collection reads and writes in Postgres: the dataset's declared name,
    else its folder's name. Not the catalog's content fingerprint (`Collection.catalog_id`): a
    judgment must outlive a change of its document's content, which makes it stale, not lost."""
    return getattr(collection, "declared_name", None) or collection.name


def parse_rule(text: str | None = None) -> Rule:
    """`median`, `majority` or `judge:NAME` (default `defaults.JUDGMENT_RULE`)."""
    if text is not None and not isinstance(text, str):
        raise InputError(f"expected a judgment rule {', '.join(RULES)}; got {text!r}",
                         field="judgment_rule")
    text = (JUDGMENT_RULE if text is None else text).strip()
    if text in ("median", "majority"):
        return Rule(text)
    if text.startswith("judge:") and text[len("judge:"):].strip():
        return Rule("judge", text[len("judge:"):].strip())
    raise InputError(f"expected a judgment rule {', '.join(RULES)}; got {text!r}",
                     field="judgment_rule")


def check_source(source: str) -> str:
    if source not in JUDGMENT_SOURCES:
        raise InputError(f"expected a source {', '.join(JUDGMENT_SOURCES)}; got {source!r}",
                         field="source")
    return source


def check_judge(judge: str | None) -> str:
    if not isinstance(judge, str) or not judge.strip():
        raise InputError("expected a judge's name", field="judge")
    judge = judge.strip()
    if len(judge) > 100 or any(ord(c) < 32 for c in judge):
        raise InputError("expected a judge's name of at most 100 printable characters",
                         field="judge")
    return judge


def _utc(ts: datetime | None) -> datetime | None:
    if ts is None or ts.tzinfo is not None:
        return ts
    return ts.replace(tzinfo=timezone.utc)


def _order(row: JudgmentRow) -> tuple:
    ts = _utc(row.judged_at)
    return (ts is not None, ts or datetime.min.replace(tzinfo=timezone.utc),
            row.id if row.id is not None else -1)


def latest_by_judge(rows: list[JudgmentRow]) -> dict[tuple[str, str], dict[str, JudgmentRow]]:
    """(query, document) -> {judge: that judge's latest row}. Retracted rows do not count."""
    out: dict[tuple[str, str], dict[str, JudgmentRow]] = defaultdict(dict)
    for row in rows:
        if row.retracted_at is not None:
            continue
        judges = out[(row.query_id, row.doc_id)]
        current = judges.get(row.judge)
        if current is None or _order(row) >= _order(current):
            judges[row.judge] = row
    return dict(out)


def stale_reason(row: JudgmentRow, resource: Resource | None, *, now: datetime,
                 max_age_days: float | None, catalog: bool = True,
                 versions: list[Version] | None = None) -> str | None:
    """Why `row` is stale (STALE_REASONS), or None when it is fresh. Without a catalog (the
    search engine holds the documents) a document is never "removed" for want of one: the
    versions its lookup reported say whether it is gone or changed, then its age counts."""
    judged = _utc(row.judged_at)
    if resource is None and not catalog:
        reason = lookup_stale_reason(row.content_hash, row.judged_at, versions)
        if reason is not None:
            return reason
        if judged is not None and max_age_days is not None \
                and (_utc(now) - judged).total_seconds() / 86400 > max_age_days:
            return "too-old"
        return None
    if resource is None:
        return "resource-removed"
    if row.content_hash is not None and row.content_hash != resource.content_hash:
        return "changed-after-judged"
    updated = _utc(resource.updated_at)
    if judged is not None and updated is not None and judged < updated:
        return "changed-after-judged"
    if judged is not None and max_age_days is not None \
            and (_utc(now) - judged).total_seconds() / 86400 > max_age_days:
        return "too-old"
    return None


@dataclass
class Effective:
    """The effective grades of a catalog's judgments under one rule."""

    rule: Rule
    judgments: list[Judgment]  # one per pair: fresh effective grades, then stale-only pairs
    stale_pairs: dict[tuple[str, str], str]  # pairs whose every row is stale -> reason
    stale_by_judge: dict[str, dict[str, int]]  # judge -> reason -> stale latest rows
    judges: dict[str, int]  # judge -> pairs with a latest row of theirs (fresh or not)
    #: pair -> {judge: latest fresh grade}; read only: pairs with the same single grade share one
    latest: dict[tuple[str, str], dict[str, int]]
    rows: int = 0
    sources: dict[tuple[str, str], str] = field(default_factory=dict)  # pair -> its rows' sources
    counted: str | tuple[str, ...] = "all"  # which stored rows counted (`source.counted_sources`)
    counted_from: str = "default"  # where that choice came from

    def record(self) -> dict:
        """What a run was scored with (`judging.judgment_record`): the fingerprint of the fresh
        effective grades (query, document, grade: a re-grade to the same grade changes nothing),
        and how many pairs each source and each judge contributed."""
        grades = self.grades()
        by_source: Counter = Counter()
        by_judge: Counter = Counter()
        for j in self.judgments:
            pair = (j.query_id, j.doc_id)
            if pair in self.stale_pairs:
                continue
            for source in (self.sources.get(pair) or "import").split(","):
                by_source[source] += 1
            for judge in (j.judge or "").split(","):
                by_judge[judge or "-"] += 1
        return {"fingerprint": grades_fingerprint(grades), "pairs": len(grades),
                "by_source": dict(sorted(by_source.items())),
                "by_judge": dict(sorted(by_judge.items())), "rule": self.rule.name,
                "counted": (self.counted if isinstance(self.counted, str)
                            else ",".join(self.counted)),
                "counted_from": self.counted_from}
    #: model judges -> their audit and standing (judging.audit); pair -> the source its effective
    #: grade rests on: human | import | model:<judge> (set by judging.source)
    model_judges: dict = field(default_factory=dict)
    rests_on: dict = field(default_factory=dict)

    def grades(self) -> dict[tuple[str, str], int]:
        """Fresh effective grades only: what counts as judged."""
        return {(j.query_id, j.doc_id): j.grade for j in self.judgments
                if (j.query_id, j.doc_id) not in self.stale_pairs}

    def digest(self) -> str:
        """sha256 of the effective judgments: the judgments' part of a run's input hashes."""
        payload = sorted((j.query_id, j.doc_id, j.grade, j.judge or "",
                          j.judged_at.isoformat() if j.judged_at else "")
                         for j in self.judgments)
        payload.append(self.rule.name)
        return hashlib.sha256(json.dumps(payload).encode("utf-8")).hexdigest()

    def summary(self) -> dict:
        """metrics.json's `judging.judgments` block."""
        return {"rule": self.rule.name, "rule_text": self.rule.describe(), "rows": self.rows,
                "pairs": len(self.judgments), "judges": dict(sorted(self.judges.items())),
                "multiply_judged": sum(1 for g in self.latest.values() if len(g) >= 2),
                "stale_by_judge": {j: dict(r) for j, r in sorted(self.stale_by_judge.items())},
                "set": self.record(),  # the judgment set the run was scored with
                "model_judges": self.model_judges}


def grades_fingerprint(grades: dict[tuple[str, str], int]) -> str:
    """`sha256:` over the sorted (query, document, grade) triples."""
    digest = hashlib.sha256()
    for (q, d), g in sorted(grades.items()):
        digest.update(f"{q}\t{d}\t{g}\n".encode("utf-8"))
    return "sha256:" + digest.hexdigest()


def effective_judgments(rows: list[JudgmentRow], rule: Rule, resources: list[Resource], *,
                        now: datetime | None = None,
                        max_age_days: float | None = None, catalog: bool = True,
                        versions: dict[str, list[Version]] | None = None) -> Effective:
    """The effective grade of every pair under `rule`, from fresh rows (module docstring);
    `catalog` False: the dataset has no documents of its own, and `versions` (doc id -> what its
    lookup reported, `judging.versions`) say what is gone or changed (`stale_reason`)."""
    versions = versions or {}
    now = _utc(now) or datetime.now(timezone.utc)
    by_id = {r.id: r for r in resources}
    judgments: list[Judgment] = []
    stale_only: list[Judgment] = []
    stale_pairs: dict[tuple[str, str], str] = {}
    stale_by_judge: dict[str, dict[str, int]] = defaultdict(
        lambda: {r: 0 for r in STALE_REASONS if r not in LOOKUP_REASONS})
    judges: Counter = Counter()
    latest_fresh: dict[tuple[str, str], dict[str, int]] = {}
    # a pair one judge graded shares its {judge: grade} with every pair that judge gave the same
    # grade (read only, as all of `latest`): WANDS' 233k labels otherwise kept 233k dicts (24 MiB)
    one_grade: dict[tuple[str, int | None], dict[str, int | None]] = {}
    sources: dict[tuple[str, str], str] = {}
    for pair, by_judge in sorted(latest_by_judge(rows).items()):
        if len(by_judge) == 1:  # one judge (a dataset's own labels): nothing to combine
            ((judge, row),) = by_judge.items()
            judges[judge] += 1
            reason = stale_reason(row, by_id.get(pair[1]), now=now, max_age_days=max_age_days,
                                  catalog=catalog, versions=versions.get(pair[1]))
            if reason is None:
                latest_fresh[pair] = one_grade.setdefault((judge, row.grade), {judge: row.grade})
            else:
                stale_by_judge[judge][reason] = stale_by_judge[judge].get(reason, 0) + 1
            if row.grade is None or (rule.kind == "judge" and judge != rule.judge):
                continue  # what rule.combine finds of one grade: that grade, or none
            judgment = Judgment(query_id=pair[0], doc_id=pair[1], grade=row.grade,
                                judged_at=_utc(row.judged_at), judge=row.judge)
            if reason is None:
                judgments.append(judgment)
                sources[pair] = row.source
            else:
                stale_pairs[pair] = reason
                stale_only.append(judgment)
            continue
        fresh: dict[str, JudgmentRow] = {}
        stale: dict[str, tuple[JudgmentRow, str]] = {}
        for judge, row in by_judge.items():
            judges[judge] += 1
            reason = stale_reason(row, by_id.get(pair[1]), now=now, max_age_days=max_age_days,
                                  catalog=catalog, versions=versions.get(pair[1]))
            if reason is None:
                fresh[judge] = row
            else:
                stale[judge] = (row, reason)
                stale_by_judge[judge][reason] = stale_by_judge[judge].get(reason, 0) + 1
        if fresh:
            latest_fresh[pair] = {j: r.grade for j, r in fresh.items()}
        used = fresh or {j: r for j, (r, _) in stale.items()}
        grade = rule.combine({j: r.grade for j, r in used.items()})
        if grade is None:
            continue
        contributing = [r for j, r in used.items() if rule.kind != "judge" or j == rule.judge]
        when = max((_utc(r.judged_at) for r in contributing if r.judged_at is not None),
                   default=None)
        judgment = Judgment(query_id=pair[0], doc_id=pair[1], grade=grade, judged_at=when,
                            judge=",".join(sorted(r.judge for r in contributing)))
        if fresh:
            judgments.append(judgment)
            sources[pair] = ",".join(sorted({r.source for r in contributing}))
        else:
            reasons = [reason for _, reason in stale.values()]
            stale_pairs[pair] = min(reasons, key=STALE_REASONS.index)
            stale_only.append(judgment)
    return Effective(rule=rule, judgments=judgments + stale_only, stale_pairs=stale_pairs,
                     stale_by_judge=dict(stale_by_judge), judges=dict(judges),
                     latest=latest_fresh, rows=len(rows), sources=sources)


def rows_from_collection(judgments: list[Judgment], origin: str | None = None,
                         default_judge: str = "dataset") -> list[JudgmentRow]:
    """The rows a dataset's own judgments seed: source `import`, the file's judge (or
    `default_judge` when the file names none) and time."""
    return [JudgmentRow(query_id=j.query_id, doc_id=j.doc_id, grade=j.grade,
                        judge=j.judge or default_judge, judged_at=j.judged_at, source="import",
                        origin=f"{origin}:{j.line}" if origin and j.line else origin, seed=True)
            for j in judgments]
