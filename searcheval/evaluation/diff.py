"""Diffs of two snapshots: which queries got worse or better between two runs (or two
configurations of one run), and why, from the ranked lists stored in Postgres.

A side is `RUN[:CONFIGURATION]`, RUN being a run id, `latest`, `previous` (the run before the
latest of the same dataset), or `baseline` (the run the baseline was made from). For every query
the diff has its text and category, each metric before and after and the delta, both top-k lists
with their grades (None: unjudged), the rank of the first relevant result, whether either side
abstained (returned nothing), and which documents entered or left the top k. Queries are sorted
by the delta of one metric, worst first; the headline counts them: "N worse, M better, K
unchanged of T".

Each listed document has the title and text the run's document lookup returned for it, as kept
with the run (`store.documents`; an engine that holds its own documents): the side's own
configuration's lookup first, else another configuration's of the same run; None when no lookup
of that run returned it.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from searcheval import store
from searcheval.defaults import (
    DIFF_METRIC,
    DIFF_TOP_K,
    GATED_CONFIGURATION,
    GATED_METRICS,
    NIGHTLY_KIND,
    RELEVANCE_LEVEL,
    WORST_QUERIES,
)
from searcheval.errors import InputError
from searcheval.io.escape import md
from searcheval.store import documents, snapshots

#: a delta this small is "unchanged" (floating-point noise of a mean, never a real change)
EPSILON = 1e-12
NAMED_RUNS = ("latest", "previous", "baseline")


@dataclass
class Side:
    """One side of a diff: a configuration of a stored run, its ranked lists and values."""

    run_id: str
    configuration: str
    dataset: str | None
    started_at: object
    label: str | None
    lists: dict[str, list[tuple[str, float, int | None]]]
    values: dict[str, dict[str, float]]
    queries: dict[str, dict]
    relevance_level: int = RELEVANCE_LEVEL
    pruned: bool = False
    name: str = ""  # how it was asked for ("previous", a run id)
    documents: dict[str, dict] = field(default_factory=dict)  # doc id -> {title, text, ...}
    failed: dict[str, str] = field(default_factory=dict)  # query id -> the cause: not answered

    @property
    def title(self) -> str:
        return f"{self.run_id}:{self.configuration}"


@dataclass
class DiffRequest:
    a: str
    b: str
    configuration: str | None = None
    dataset: str | None = None
    baseline: str | Path | None = None
    metric: str = DIFF_METRIC
    k: int = DIFF_TOP_K
    metrics: tuple[str, ...] = field(default=GATED_METRICS)


def _split(spec: str) -> tuple[str, str | None]:
    run, sep, configuration = str(spec).partition(":")
    if not run:
        raise InputError(f"expected RUN[:CONFIGURATION] (a run id, latest, previous or baseline), "
                         f"got {spec!r}", field=None)
    return run, (configuration or None) if sep else None


def _run_row(conn: psycopg.Connection, name: str, *, dataset: str | None,
             configuration: str | None, baseline: str | Path | None) -> dict:
    if name == "latest":
        rows = snapshots.find_runs(conn, n=1, dataset=dataset, configuration=configuration)
        if not rows:
            raise InputError("no run in the history" + (f" of dataset {dataset!r}" if dataset
                                                        else ""), field=None)
        return rows[0]
    if name == "previous":
        latest = _run_row(conn, "latest", dataset=dataset, configuration=configuration,
                          baseline=baseline)
        rows = snapshots.find_runs(conn, n=1, dataset=latest.get("dataset"),
                                   configuration=configuration, before=latest)
        if not rows:
            raise InputError(f"no run before the latest ({latest['run_id']}) of dataset "
                             f"{latest.get('dataset')!r}", field=None)
        return rows[0]
    if name == "baseline":
        from searcheval.evaluation.baseline import load_baseline

        if baseline is None:
            raise InputError("`baseline` needs a baseline file", field="baseline")
        b = load_baseline(baseline)
        if not b.from_run:
            raise InputError("the baseline does not name the run it was made from", file=b.path,
                             field="from_run")
        name = b.from_run
    row = snapshots.load_run(conn, name)
    if row is None:
        raise InputError(f"no run {name!r} in the history", field=None)
    return row


def load_side(conn: psycopg.Connection, spec: str, *, configuration: str | None = None,
              dataset: str | None = None, baseline: str | Path | None = None,
              which: str = "") -> Side:
    """One side of a diff from the history in Postgres (see the module docstring); `which` ("A",
    "B") prefixes the message of a side that cannot be found."""
    try:
        return _load_side(conn, spec, configuration=configuration, dataset=dataset,
                          baseline=baseline)
    except InputError as exc:
        if not which or exc.file is not None:
            raise
        raise InputError(f"{which}: {exc.message}", field=exc.field) from None


def _load_side(conn: psycopg.Connection, spec: str, *, configuration: str | None,
               dataset: str | None, baseline: str | Path | None) -> Side:
    name, conf = _split(spec)
    conf = conf or configuration
    if name == "baseline" and conf is None and baseline is not None:
        from searcheval.evaluation.baseline import load_baseline

        conf = load_baseline(baseline).configuration
    row = _run_row(conn, name, dataset=dataset, configuration=conf, baseline=baseline)
    summary = row.get("summary") or {}
    scored = {r["configuration"] for r in store.run_metrics(conn, row["run_id"])}
    served = (summary.get("what_ran") or {}).get("served")  # the run's own served one
    conf = conf or (served if served in scored else
                    GATED_CONFIGURATION if GATED_CONFIGURATION in scored else
                    (sorted(scored)[0] if scored else GATED_CONFIGURATION))
    if conf not in scored:
        raise InputError(f"run {row['run_id']} has no configuration {conf!r}; it scored "
                         f"{', '.join(sorted(scored)) or 'nothing'}", field=None)
    values: dict[str, dict[str, float]] = {}
    for r in store.run_query_results(conn, row["run_id"]):
        if r["configuration"] == conf:
            values.setdefault(r["query_id"], {})[r["metric"]] = r["value"]
    queries = dict(summary.get("queries") or {})
    for qid in values:
        queries.setdefault(qid, {"text": None, "category": None})
    conventions = summary.get("conventions") or {}
    looked_up = documents.run_documents(conn, row["run_id"])
    shown: dict[str, dict] = {}
    for name in [conf, *sorted(set(looked_up) - {conf})]:
        for doc_id, d in (looked_up.get(name) or {}).items():
            shown.setdefault(doc_id, d)
    # the queries this configuration failed (the engine's error, not sent): never abstentions
    errors = (((summary.get("failures") or {}).get("configurations") or {}).get(conf) or {}) \
        .get("errors") or {}
    failed = {qid: str((e or {}).get("cause") or "failed") for qid, e in errors.items()}
    return Side(run_id=row["run_id"], configuration=conf, dataset=row.get("dataset"),
                started_at=row.get("started_at"), label=row.get("label"),
                lists=snapshots.load_ranked_results(conn, row["run_id"], conf), values=values,
                queries=queries,
                relevance_level=int(conventions.get("relevance_level") or RELEVANCE_LEVEL),
                pruned=row.get("snapshot_pruned_at") is not None
                or row.get("snapshot_depth") is None, name=spec, documents=shown,
                failed=failed)


def _first_relevant(docs, level: int) -> int | None:
    for rank, (_, _, grade) in enumerate(docs, start=1):
        if grade is not None and grade >= level:
            return rank
    return None


def _num(value):
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _entry(rank: int, doc_id: str, score: float, grade: int | None, side: Side) -> dict:
    found = side.documents.get(doc_id) or {}
    return {"rank": rank, "doc_id": doc_id, "score": score, "grade": grade,
            "title": found.get("title"), "text": found.get("text")}


def diff_sides(a: Side, b: Side, *, metric: str = DIFF_METRIC, k: int = DIFF_TOP_K,
               metrics: tuple[str, ...] = GATED_METRICS) -> dict:
    """The diff of two sides as a JSON-able dict (the shape `searcheval diff --format json`
    prints): `a`, `b`, `metric`, `k`, `headline`, `counts`, `queries` (worst first), `worst`."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"expected k >= 1, got {k!r}", field="k")
    shown = list(dict.fromkeys([metric, *metrics]))
    qids = sorted(set(a.queries) | set(b.queries) | set(a.values) | set(b.values)
                  | set(a.failed) | set(b.failed))
    rows = []
    for qid in qids:
        la, lb = a.lists.get(qid, []), b.lists.get(qid, [])
        va, vb = a.values.get(qid, {}), b.values.get(qid, {})
        values = {}
        for m in shown:
            before, after = _num(va.get(m)), _num(vb.get(m))
            values[m] = {"before": before, "after": after,
                         "delta": None if before is None or after is None else after - before}
        delta = values[metric]["delta"]
        failed = {"a": a.failed.get(qid), "b": b.failed.get(qid)}
        status = ("failed" if failed["a"] or failed["b"] else
                  "not compared" if delta is None else "worse" if delta < -EPSILON
                  else "better" if delta > EPSILON else "unchanged")
        top_a = [d for d, _, _ in la[:k]]
        top_b = [d for d, _, _ in lb[:k]]
        info = b.queries.get(qid) or a.queries.get(qid) or {}
        rows.append({
            "query_id": qid, "text": info.get("text"), "category": info.get("category"),
            "status": status, "delta": delta, "metrics": values,
            "a": [_entry(r, d, s, g, a) for r, (d, s, g) in enumerate(la[:k], start=1)],
            "b": [_entry(r, d, s, g, b) for r, (d, s, g) in enumerate(lb[:k], start=1)],
            "first_relevant": {"a": _first_relevant(la, a.relevance_level),
                               "b": _first_relevant(lb, b.relevance_level)},
            # a side without stored lists (pruned) cannot say whether it abstained; a query the
            # engine failed was not answered at all: not an abstention (`failed` says why)
            "abstained": {"a": None if a.pruned or failed["a"] else not la,
                          "b": None if b.pruned or failed["b"] else not lb},
            "failed": failed,
            # a side that failed has no list: nothing entered or left its top k
            "entered": [] if any(failed.values()) else [d for d in top_b if d not in top_a],
            "left": [] if any(failed.values()) else [d for d in top_a if d not in top_b],
        })
    rows.sort(key=lambda r: (r["delta"] is None, r["delta"] if r["delta"] is not None else 0.0,
                             r["query_id"]))
    counts = {s: sum(r["status"] == s for r in rows)
              for s in ("worse", "better", "unchanged", "not compared", "failed")}
    headline = (f"{counts['worse']} worse, {counts['better']} better, {counts['unchanged']} "
                f"unchanged of {len(rows)}")
    if counts["not compared"]:
        headline += f" ({counts['not compared']} not compared: {metric} missing on a side)"
    if counts["failed"]:
        headline += f" ({counts['failed']} failed on a side: not answered, not compared)"
    notes = []
    for side, label in ((a, "A"), (b, "B")):
        if side.pruned:
            notes.append(f"{label} ({side.title}) has no stored ranked lists (pruned, or a run "
                         "from before snapshots): its lists show as empty")
    if a.dataset != b.dataset:
        notes.append(f"the two sides are of different datasets ({a.dataset} and {b.dataset})")
    return {"a": _side_info(a), "b": _side_info(b), "metric": metric, "k": k,
            "metrics": shown, "headline": headline, "counts": counts, "notes": notes,
            "queries": rows,
            "worst": [r for r in rows if r["status"] == "worse"][:WORST_QUERIES]}


def _side_info(side: Side) -> dict:
    started = side.started_at.isoformat() if hasattr(side.started_at, "isoformat") \
        else side.started_at
    return {"run_id": side.run_id, "configuration": side.configuration, "dataset": side.dataset,
            "label": side.label, "started_at": started, "asked": side.name}


def diff_runs(conn: psycopg.Connection, request: DiffRequest) -> dict:
    a = load_side(conn, request.a, configuration=request.configuration, dataset=request.dataset,
                  baseline=request.baseline, which="A")
    b = load_side(conn, request.b, configuration=request.configuration, dataset=request.dataset,
                  baseline=request.baseline, which="B")
    return diff_sides(a, b, metric=request.metric, k=request.k, metrics=request.metrics)


# --------------------------------------------------------------------------- renderings


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _signed(value) -> str:
    return "-" if value is None else f"{value:+.3f}"


def _cell(text) -> str:
    """Text from data as literal markdown (`searcheval.io.escape.md`)."""
    return md(text or "")


def _yes(value: bool | None, failed: str | None = None) -> str:
    if failed:
        return "failed"
    return "-" if value is None else "yes" if value else "no"


def _doc(entry: dict | None) -> str:
    if entry is None:
        return ""
    grade = "unjudged" if entry["grade"] is None else f"grade {entry['grade']}"
    if entry.get("title"):
        return f"{_cell(entry['title'])} ({_cell(entry['doc_id'])}, {grade})"
    return f"{_cell(entry['doc_id'])} ({grade})"


def diff_markdown(diff: dict, *, limit: int | None = None) -> str:
    """The diff as markdown: headline, then each query (worst first) with its metrics and both
    top-k lists side by side. `limit` keeps the first queries only (the rest are counted)."""
    out = io.StringIO()
    w = out.write
    a, b = diff["a"], diff["b"]
    w(f"# diff: {a['run_id']}:{a['configuration']} -> {b['run_id']}:{b['configuration']}\n\n")
    w(f"**{diff['headline']}** (by {diff['metric']}; A = {a['asked'] or a['run_id']}, "
      f"B = {b['asked'] or b['run_id']}, dataset {b['dataset'] or a['dataset'] or '-'})\n\n")
    for note in diff.get("notes") or []:
        w(f"- note: {note}\n")
    if diff.get("notes"):
        w("\n")
    w("| query | text | category | " + " | ".join(f"{m} A -> B (delta)" for m in diff["metrics"])
      + " | first relevant A / B | abstained A / B | status |\n")
    w("|---|---|---|" + "---|" * len(diff["metrics"]) + "---|---|---|\n")
    for q in diff["queries"]:
        cells = [f"{_fmt(q['metrics'][m]['before'])} -> {_fmt(q['metrics'][m]['after'])} "
                 f"({_signed(q['metrics'][m]['delta'])})" for m in diff["metrics"]]
        fr, ab, fa = q["first_relevant"], q["abstained"], q.get("failed") or {}
        w(f"| {_cell(q['query_id'])} | {_cell(q['text'])} | {_cell(q['category'])} | "
          + " | ".join(cells)
          + f" | {fr['a'] or '-'} / {fr['b'] or '-'} | {_yes(ab['a'], fa.get('a'))} / "
          f"{_yes(ab['b'], fa.get('b'))} "
          f"| {q['status']} |\n")
    shown = [q for q in diff["queries"] if q["status"] != "unchanged" or q["entered"]
             or q["left"]]
    if limit is not None:
        shown = shown[:limit]
    for q in shown:
        w(f"\n## {_cell(q['query_id'])}: {_cell(q['text'])} ({q['status']}, "
          f"{diff['metric']} {_signed(q['delta'])})\n\n")
        if q["abstained"]["a"] or q["abstained"]["b"]:
            who = " and ".join(s for s in ("A", "B") if q["abstained"][s.lower()])
            w(f"- abstained: {who} returned nothing\n")
        for side in ("A", "B"):
            cause = (q.get("failed") or {}).get(side.lower())
            if cause:
                w(f"- failed: {side} was not answered ({_cell(cause)})\n")
        w(f"- entered the top {diff['k']}: {', '.join(map(_cell, q['entered'])) or '-'}\n")
        w(f"- left the top {diff['k']}: {', '.join(map(_cell, q['left'])) or '-'}\n\n")
        w("| rank | A | B |\n|---|---|---|\n")
        for i in range(max(len(q["a"]), len(q["b"]))):
            ea = q["a"][i] if i < len(q["a"]) else None
            eb = q["b"][i] if i < len(q["b"]) else None
            w(f"| {i + 1} | {_doc(ea)} | {_doc(eb)} |\n")
    return out.getvalue()


def worst_lines(diff: dict) -> list[str]:
    """The worst queries as one line each: id, text, delta (the report and the alert quote them)."""
    return [f"{_cell(q['query_id'])} \"{_cell(q['text'])}\": {diff['metric']} "
            f"{_fmt(q['metrics'][diff['metric']]['before'])} -> "
            f"{_fmt(q['metrics'][diff['metric']]['after'])} ({_signed(q['delta'])})"
            + (", abstained" if q["abstained"]["b"] and not q["abstained"]["a"] else "")
            for q in diff.get("worst") or []]


def diff_json(diff: dict) -> str:
    return json.dumps(diff, indent=2, allow_nan=False, default=str) + "\n"


def previous_run_diff(conn: psycopg.Connection, run_id: str, configuration: str,
                      metrics: tuple[str, ...] = GATED_METRICS) -> dict | None:
    """The diff of `run_id` against the previous run of the same dataset that scored
    `configuration`; None when there is none.

    A scheduled run (kind `nightly`) is compared with the previous scheduled run only, so a
    manual experiment run in between never becomes the nightly's "previous" (issue 29): the
    nightly's diff and its alert's worst queries say what changed since the last nightly. Any
    other run is compared with the run just before it, whatever its kind."""
    row = snapshots.load_run(conn, run_id)
    if row is None:
        return None
    kind = NIGHTLY_KIND if row.get("kind") == NIGHTLY_KIND else None
    previous = snapshots.find_runs(conn, n=1, dataset=row.get("dataset"),
                                   configuration=configuration, kind=kind, before=row)
    if not previous:
        return None
    a = load_side(conn, f"{previous[0]['run_id']}:{configuration}")
    b = load_side(conn, f"{run_id}:{configuration}")
    a.name = "previous nightly" if kind else "previous"
    b.name = "this run"
    return diff_sides(a, b, metrics=metrics)


def configurations_diff(conn: psycopg.Connection, run_id: str, a: str, b: str,
                        metrics: tuple[str, ...] = GATED_METRICS) -> dict:
    """Two configurations of one run (a candidate against the served one), query by query."""
    side_a = load_side(conn, f"{run_id}:{a}", which="A")
    side_b = load_side(conn, f"{run_id}:{b}", which="B")
    return diff_sides(side_a, side_b, metrics=metrics)
