"""What one evaluation found, and its renderings: metrics.json, the console table, report.md, and
the rows of the run history."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from searcheval.evaluation.gate import GateResult, gate_status, status_line
from searcheval.io.escape import md
from searcheval.io.trec import write_trec_run
from searcheval.judging.versions import Observed
from searcheval.metrics.scoring import ConfigurationScores
from searcheval.redaction import redact
from searcheval.types import RankedRun

TABLE_METRICS = (("nDCG@10", "ndcg@10"), ("MRR", "mrr"), ("Recall@20", "recall@20"))


@dataclass
class EvaluationResult:
    run_id: str
    started_at: datetime
    finished_at: datetime | None
    source: str
    input_hashes: dict[str, str]
    model: str
    scores: dict[str, ConfigurationScores]
    gate: GateResult | None
    validation: dict = field(default_factory=dict)
    coverage: dict = field(default_factory=dict)
    embeddings: dict = field(default_factory=dict)
    flow_run_id: str | None = None
    label: str | None = None  # e.g. the ranking version of a manual run
    conventions: dict = field(default_factory=dict)  # Conventions.to_dict(): values and sources
    queries: dict = field(default_factory=dict)  # query id -> {category, segments, intent, persona}
    failures: dict = field(default_factory=dict)  # pipeline.failures_of: failed queries per configuration
    what_ran: dict = field(default_factory=dict)  # resolved configurations, hashes, code, versions
    candidate: dict | None = None  # pipeline.compare_candidate: the candidate beside the served
    candidates: dict | None = None  # evaluation.candidates: each candidate vs served, Holm
    cost: dict = field(default_factory=dict)  # pipeline.costs: usage and cost per configuration
    documents: dict = field(default_factory=dict)  # lookups.look_up_results, per configuration
    observed: Observed | None = None  # what the run's lookups reported (kept as versions)
    judgment_set: str | None = None  # whose judgments and document versions (judgments.catalog)

    @property
    def incomplete(self) -> list[str]:
        return list((self.failures or {}).get("incomplete", []))
    dataset: str | None = None  # the collection's name: what baselines and diffs are of
    kind: str | None = None  # nightly | manual | candidate
    snapshot_depth: int | None = None  # ranks of each list stored in Postgres (None: not stored)
    diff: dict | None = None  # the diff against the previous run (evaluation.diff), when there is one
    candidate_diff: dict | None = None  # a candidate against the served configuration, query by query
    judging: dict = field(default_factory=dict)  # judgments rule, pool sizes, bounds, agreement
    not_gated_reason: str | None = None  # why a run without a gate has none (always said)

    def gate_status(self) -> dict:
        """`{"status": PASSED | TRIPPED | NOT GATED, "reason": ...}`."""
        return gate_status(self.gate, self.not_gated_reason)

    def gate_line(self) -> str:
        return status_line(self.gate, self.not_gated_reason)

    @property
    def gate_passed(self) -> bool | None:
        return None if self.gate is None else self.gate.passed

    def segment_sizes(self) -> dict[str, int]:
        """Queries in each automatic segment (the same for every configuration)."""
        for s in self.scores.values():
            return s.segment_sizes()
        return {}

    def metrics_document(self) -> dict:
        """`metrics.json`: the contract of DESIGN.md, extended, never renamed."""
        gate = self.gate.to_dict() if self.gate else {"passed": None, "tripped": []}
        gate.update(self.gate_status())
        return {
            "run_id": self.run_id,
            "flow_run_id": self.flow_run_id,
            "label": self.label,
            "dataset": self.dataset,
            "kind": self.kind,
            "snapshot_depth": self.snapshot_depth,
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "source": self.source,
            "input_hashes": self.input_hashes,
            "gate": gate,
            "conventions": self.conventions,
            "configurations": {name: s.to_dict() for name, s in self.scores.items()},
            "segments": self.segment_sizes(),
            "queries": self.queries,
            "coverage": self.coverage,
            "validation": self.validation,
            "embeddings": self.embeddings,
            "failures": self.failures,
            "incomplete": self.incomplete,
            "what_ran": self.what_ran,
            "candidate": self.candidate,
            "candidates": self.candidates,
            "cost": self.cost,
            "documents": {name: {k: v for k, v in d.items() if k != "documents"}
                          for name, d in (self.documents or {}).items()},
            "diff": _diff_summary(self.diff),
            "candidate_diff": _diff_summary(self.candidate_diff, "candidate_diff.md"),
            "judging": self.judging,
        }

    # -- history rows -----------------------------------------------------------------------

    def run_row(self) -> dict:
        return {
            "run_id": self.run_id, "flow_run_id": self.flow_run_id, "started_at": self.started_at,
            "finished_at": self.finished_at, "source": self.source,
            "input_hashes": self.input_hashes, "model": self.model,
            "gate_passed": self.gate_passed,
            "summary": {"label": self.label, "embeddings": self.embeddings,
                        "coverage": self.coverage,
                        "gate": {**(self.gate.to_dict() if self.gate else {}),
                                 **self.gate_status()},
                        "conventions": self.conventions, "dataset": self.dataset,
                        "kind": self.kind,
                        "queries": {q: {"text": v.get("text"), "category": v.get("category")}
                                    for q, v in self.queries.items()},
                        "judging": {k: self.judging[k] for k in ("pool", "judgments")
                                    if k in self.judging},
                        "failures": self.failures, "what_ran": self.what_ran},
        }

    def metric_rows(self) -> list[dict]:
        """Rows of eval_metrics; a metric with no value (e.g. abstention in a category without
        no-result queries) has no row."""
        rows = []
        for conf, s in self.scores.items():
            for metric, value in s.means.items():
                ci = s.ci95.get(metric)
                rows.append({"run_id": self.run_id, "configuration": conf, "category": "all",
                             "metric": metric, "value": value, "ci_low": ci[0] if ci else None,
                             "ci_high": ci[1] if ci else None,
                             "n": int((~_isnan(s.evaluation.values[metric])).sum())})
            for category, means in s.by_category.items():
                if category == "all":  # a collection without categories (BEIR): the overall rows
                    continue
                for metric, value in means.items():
                    rows.append({"run_id": self.run_id, "configuration": conf,
                                 "category": category, "metric": metric, "value": value,
                                 "ci_low": None, "ci_high": None, "n": None})
            for name in ("p50", "p95", "p99"):
                rows.append({"run_id": self.run_id, "configuration": conf, "category": "all",
                             "metric": f"latency_{name}_ms", "value": s.latency_ms.get(name),
                             "ci_low": None, "ci_high": None, "n": None})
        return [r for r in rows if r["value"] is not None]

    def segment_rows(self) -> list[dict]:
        """Rows of eval_segment_metrics: each configuration's means per automatic segment, with
        the number of queries that have a value."""
        rows = []
        for conf, s in self.scores.items():
            members: dict[str, list[int]] = {}
            for i, qid in enumerate(s.evaluation.query_ids):
                for label in s.segments.get(qid, ()):
                    members.setdefault(label, []).append(i)
            for segment, means in s.by_segment.items():
                for metric, value in means.items():
                    if value is None:
                        continue
                    values = s.evaluation.values[metric][members.get(segment, [])]
                    rows.append({"run_id": self.run_id, "configuration": conf, "segment": segment,
                                 "metric": metric, "value": value,
                                 "n": int((~_isnan(values)).sum())})
        return rows

    def query_rows(self) -> list[dict]:
        """Rows of eval_query_results; a query left out of a metric (None) has no row."""
        rows = []
        for conf, s in self.scores.items():
            for qid, values in s.evaluation.per_query().items():
                for metric, value in values.items():
                    if value is not None:
                        rows.append({"run_id": self.run_id, "configuration": conf,
                                     "query_id": qid, "category": s.categories.get(qid),
                                     "metric": metric, "value": value})
        return rows


def _diff_section(w, title: str, headline: str, diff: dict) -> None:
    """A report section of a diff: its headline, and its worst queries with their text."""
    from searcheval.evaluation.diff import worst_lines

    w(f"## {title}\n\n{headline}\n")
    if diff.get("worst"):
        w("\nWorst queries:\n\n")
        for line in worst_lines(diff):
            w(f"- {line}\n")
    w("\n")


def _diff_summary(diff: dict | None, file: str = "diff.md") -> dict | None:
    """metrics.json's `diff` (and `candidate_diff`) block: what the run was diffed against, the
    counts, the worst five, and the file that holds the whole diff."""
    if not diff:
        return None
    return {"a": diff["a"], "b": diff["b"], "metric": diff["metric"],
            "headline": diff["headline"], "counts": diff["counts"], "file": file,
            "worst": [{"query_id": q["query_id"], "text": q["text"], "delta": q["delta"]}
                      for q in diff.get("worst", [])]}


def _isnan(arr):
    import numpy as np

    return np.isnan(arr)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) \
        else f"{value:.{digits}f}"


def console_table(result: EvaluationResult) -> str:
    """The table `make run` prints, before the verdict line (`verdict_line`): the gate's status
    is said there, once."""
    width = max([15] + [len(name) + 2 for name in result.scores])  # a long name keeps columns
    header = f"{'configuration':<{width}}" + "".join(f"{label:<11}" for label, _ in TABLE_METRICS) \
        + f"{'p95 ms':<8}"
    lines = [header.rstrip()]
    for name, s in result.scores.items():
        # a mean over fewer queries than asked is starred, as in the report, and said below
        star = "*" if s.incomplete_means else ""
        cells = [_fmt(s.means.get(m)) for _, m in TABLE_METRICS]
        line = f"{name:<{width}}" + "".join(f"{c + (star if c != '-' else ''):<11}" for c in cells)
        line += f"{_fmt(s.latency_ms.get('p95'), 1):<8}"
        if result.gate is not None and name == result.gate.configuration:
            line += f"gate: {result.gate.verdict()} ({Path(result.gate.baseline_path or '-').name}, " \
                    f"tolerance {result.gate.tolerance:g})"
        lines.append(line.rstrip())
    for name, s in result.scores.items():  # a mean over fewer queries is said to be one
        if s.incomplete_means:
            lines.append(f"  * {name}: {s.incomplete_means}")
    if result.candidate:
        lines.extend(candidate_lines(result.candidate))
    if result.candidates:
        from searcheval.evaluation.candidates import candidates_lines

        lines.extend(candidates_lines(result.candidates))
    for name in result.incomplete:
        f = result.failures["configurations"][name]
        lines.append(f"  incomplete: {name} failed {f['failed']} of {f['queries']} queries "
                     f"(allowed {f['allowed']}): not gated")
    # a run without a gate says so once, in the verdict line printed after the table
    if result.gate is not None:
        for note in result.gate.notes(console=True):  # moved for another reason than ranking
            lines.append(f"  {note}")
        for trip in result.gate.tripped:
            lines.append(f"  tripped: {trip.describe()}")
        for metric in dict.fromkeys(t.metric for t in result.gate.tripped):
            st = result.gate.statistics.get(metric)
            if st:
                lines.append("  " + "; ".join(st["lines"][:2]))
        if result.gate.stale_baseline:
            lines.append("  note: improved beyond the tolerance; the baseline is stale "
                         "(searcheval baseline update)")
    return "\n".join(lines)


def verdict_line(result: EvaluationResult, report: str | None) -> str:
    """One line for a person watching the run (the CLI, `prefect deployment run --watch`, the
    flow run's final state): the gate's status line and where the report is."""
    return f"{result.gate_line()}; report: {report or '-'}"


def markdown_report(result: EvaluationResult) -> str:
    """report.md: each section of `REPORT_SECTIONS` in order (a section with nothing to say
    writes nothing)."""
    out = io.StringIO()
    for section in REPORT_SECTIONS:
        section(out.write, result)
    return out.getvalue()


def _report_header(w, result: EvaluationResult) -> None:
    """The run, its source, model, embeddings and the gate's verdict."""
    gate = result.gate
    w(f"# searcheval run {result.run_id}\n\n")
    w(f"- source: `{result.source}`\n- started: {result.started_at.isoformat(timespec='seconds')}\n")
    if result.label:
        w(f"- label: {result.label}\n")
    if model_ran(result):
        w(f"- model: {result.model}\n")
    else:
        w("- model: none (no configuration read vectors)\n")
    if result.embeddings:
        seconds = ((result.cost or {}).get("embedding") or {}).get("seconds")
        w(f"- embeddings: {result.embeddings.get('embedded', 0)} embedded, "
          f"{result.embeddings.get('from_cache', 0)} from the cache"
          + (f", {seconds:.1f} s" if seconds is not None else "") + "\n")
    if gate is not None:
        w(f"- gate: **{gate.verdict()}** ({gate.configuration} against `{gate.baseline_path}`, "
          f"tolerance {gate.tolerance:g})\n")
    else:
        w(f"- gate: **NOT GATED** ({result.not_gated_reason or 'no baseline'})\n")
    if result.incomplete:
        from searcheval.evaluation.alerts import incomplete_summary

        w(f"- **incomplete**: {', '.join(result.incomplete)} failed more queries than allowed; "
          "the run is not gated\n")
        for name in result.incomplete:
            w(f"  - {incomplete_summary(name, result.failures['configurations'][name])}\n")


def _report_conventions(w, result: EvaluationResult) -> None:
    """The metric conventions and where each came from."""
    if result.conventions:
        w("\n## Conventions\n\n")
        for line in conventions_lines(result.conventions):
            w(f"- {line}\n")
        if result.conventions.get("settings"):
            from searcheval.project import settings_report_lines

            w("\n## Settings\n\n")
            for line in settings_report_lines(result.conventions["settings"]):
                w(f"- {line}\n")


def _report_metrics(w, result: EvaluationResult) -> None:
    """Means with their 95% intervals and latency, per configuration."""
    w("\n## Metrics\n\n")
    metrics = _metric_names(result)
    w("| configuration | " + " | ".join(metrics) + " | p50 ms | p95 ms | p99 ms |\n")
    w("|---|" + "---|" * (len(metrics) + 3) + "\n")
    for name, s in result.scores.items():
        cells = []
        for m in metrics:
            ci = s.ci95.get(m)
            cell = _fmt(s.means.get(m)) + ("*" if s.incomplete_means else "")
            if ci:
                cell += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
            cells.append(cell)
        w(f"| {name} | " + " | ".join(cells)
          + f" | {_fmt(s.latency_ms.get('p50'), 1)} | {_fmt(s.latency_ms.get('p95'), 1)} "
          f"| {_fmt(s.latency_ms.get('p99'), 1)} |\n")
    for name, s in result.scores.items():
        if s.incomplete_means:
            w(f"\n\\* {name}: {s.incomplete_means}: not a mean over every golden query.\n")
    w("\nMeans over all golden queries, with 95% bootstrap intervals. `abstention` is scored on "
      "queries with no relevant judgment only (1 = returned nothing); nDCG and Recall give such "
      f"queries the `{_policy(result)}` policy.\n")


def _report_categories(w, result: EvaluationResult) -> None:
    """Means per query category, per configuration."""
    metrics = _metric_names(result)
    w("\n## By category\n\n")
    for name, s in result.scores.items():
        w(f"### {name}\n\n| category | " + " | ".join(metrics) + " |\n|---|"
          + "---|" * len(metrics) + "\n")
        for category, means in s.by_category.items():
            w(f"| {_cell(category)} | " + " | ".join(_fmt(means.get(m)) for m in metrics)
              + " |\n")
        w("\n")


def _report_segments(w, result: EvaluationResult) -> None:
    """Means per automatic segment, per configuration."""
    metrics = _metric_names(result)
    sizes = result.segment_sizes()
    if sizes:
        w("## By segment\n\nAutomatic segments of the query text: number of words, digits, a "
          "quoted phrase, and the data's query class when it has one. The gate's per-category "
          "floors accept these labels too.\n\n")
        for name, s in result.scores.items():
            w(f"### {name}\n\n| segment | queries | " + " | ".join(metrics) + " |\n|---|---|"
              + "---|" * len(metrics) + "\n")
            for segment, means in s.by_segment.items():
                w(f"| {segment} | {sizes.get(segment, 0)} | "
                  + " | ".join(_fmt(means.get(m)) for m in metrics) + " |\n")
            w("\n")


def _report_cost(w, result: EvaluationResult) -> None:
    """Usage and cost per configuration."""
    if (result.cost or {}).get("configurations"):
        w("## Cost\n\nUsage of each configuration this run, and its cost at the prices its "
          "entry states (`prices:`; none stated: -).\n\n| configuration | requests | CPU s "
          "| documents embedded | cost per run | cost per query |\n|---|---|---|---|---|---|\n")
        for name, c in (result.cost.get("configurations") or {}).items():
            w(f"| {name} | {c['requests']:.0f} | {c['cpu_s']:.3f} | {c['embedded']} "
              f"| {_money(c['per_run'])} | {_money(c['per_query'])} |\n")
        w("\n")


def _report_failures(w, result: EvaluationResult) -> None:
    """The failed queries of each configuration."""
    failed = {n: f for n, f in ((result.failures or {}).get("configurations") or {}).items()
              if f.get("failed")}
    if failed:
        w("## Failed queries\n\nA failed query is an error of that query, never a score: it is "
          "left out of its configuration's metrics.\n\n| configuration | query | cause | "
          "attempts |\n|---|---|---|---|\n")
        for name, f in failed.items():
            for qid, error in list(f["errors"].items())[:FAILED_SHOWN]:
                w(f"| {name} | {_cell(qid)} | {_cell(error.get('cause', ''))} "
                  f"| {error.get('attempts', 1)} |\n")
            if f["failed"] > FAILED_SHOWN:
                w(f"| {name} | and {f['failed'] - FAILED_SHOWN} more in metrics.json | | |\n")
        w("\n")


def _report_candidate(w, result: EvaluationResult) -> None:
    """The candidate beside the served configuration."""
    if result.candidate:
        c = result.candidate
        w(f"## Candidate\n\n`{c['candidate']}` beside the served `{c['served']}` on the same "
          "queries; the candidate is the one gated.\n\n| metric | served | candidate | delta |\n"
          "|---|---|---|---|\n")
        for metric, m in c["means"].items():
            w(f"| {metric} | {_fmt(m['served'])} | {_fmt(m['candidate'])} "
              f"| {_fmt(m['delta'])} |\n")
        for label in ("better", "worse"):
            rows = c[label]
            w(f"\n{c['counts'][label]} queries got {label} on {c['metric']}"
              + (":\n\n| query | category | served | candidate | delta |\n|---|---|---|---|---|\n"
                 if rows else ".\n"))
            for r in rows:
                w(f"| {_cell(r['query_id'])} | {_cell(r['category'])} | {_fmt(r['served'])} "
                  f"| {_fmt(r['candidate'])} | {_fmt(r['delta'])} |\n")
        w("\n")
    if result.candidates:
        from searcheval.evaluation.candidates import candidates_markdown

        w(candidates_markdown(result.candidates))


def _report_gate(w, result: EvaluationResult) -> None:
    """The gate: what tripped, what the query set can tell, the queries that got worse."""
    gate = result.gate
    if gate is not None:
        w("## Gate\n\n")
        if gate.tripped:
            w("| metric | category | baseline | now | delta | p (paired randomization) |\n"
              "|---|---|---|---|---|---|\n")
            for t in gate.tripped:
                w(f"| {t.metric} | {t.category or 'all'} | {_fmt(t.baseline)} | {_fmt(t.value)} "
                  f"| {_fmt(t.delta)} | {_fmt(t.p_value)} |\n")
        else:
            w("No gated metric dropped by more than the tolerance.\n")
        notes = gate.notes()
        if notes or gate.like_with_like:
            w("\n### Like with like\n\nThe gate compares the same queries under the same "
              "judgments, conventions and depth; what moved for another reason is said here, "
              "never folded into the delta.\n\n")
            for note in notes or ["the same queries and judgments on both sides"]:
                w(f"- {note}\n")
            rescored = (gate.like_with_like or {}).get("baseline") or {}
            if rescored.get("status") == "re-scored":
                w(f"- {rescored['note']}\n")
            counted = (result.judging.get("judgments") or {}).get("set") or {}
            if counted:
                w(f"- judgments counted: `judgment_sources: {counted.get('counted')}` "
                  f"({counted.get('counted_from')})\n")
            w("\n| metric | baseline (compared) | as recorded | now | delta | queries |\n"
              "|---|---|---|---|---|---|\n")
            for metric, c in gate.compared.items():
                w(f"| {metric} | {_fmt(c.get('baseline'))} | "
                  f"{_fmt(c.get('recorded_baseline', c.get('baseline')))} | {_fmt(c.get('value'))} "
                  f"| {_fmt(c.get('delta'))} | {c.get('queries') or 'all'} |\n")
        if gate.tripped:
            w(f"\nEach query's results against the baseline's run, side by side: "
              f"`searcheval diff baseline {result.run_id}`.\n")
        if gate.statistics:
            w("\n### What this query set can tell\n\n")
            for metric, st in gate.statistics.items():
                w(f"- **{metric}**: " + "; ".join(st["lines"]) + "\n")
        if gate.improved:
            w("\nImproved beyond the tolerance: "
              + ", ".join(f"{t.metric} {_fmt(t.delta)}" for t in gate.improved)
              + ". The baseline is stale: review and run `searcheval baseline update`.\n")
        if gate.worse_queries:
            w("\nQueries that got worse most:\n\n| query | text | category | metric | baseline "
              "| now | intent / persona |\n|---|---|---|---|---|---|---|\n")
            for q in gate.worse_queries:
                text = _cell((result.queries.get(q["query_id"]) or {}).get("text", ""))
                w(f"| {_cell(q['query_id'])} | {text} | {_cell(q['category'])} | {q['metric']} "
                  f"| {_fmt(q['baseline'])} "
                  f"| {_fmt(q['value'])} | {_cell(_notes(result.queries.get(q['query_id'])))} |\n")
        w("\n")


def _report_diffs(w, result: EvaluationResult) -> None:
    """The diffs: the candidate against the served one, this run against the previous."""
    if result.candidate_diff:
        d = result.candidate_diff
        _diff_section(w, "Candidate against the served configuration, query by query",
                      f"**{d['headline']}** ({d['b']['configuration']} against "
                      f"{d['a']['configuration']}, by {d['metric']}): both top {d['k']} lists of "
                      "every query are in [candidate_diff.md](candidate_diff.md).", d)
    if result.diff:
        d = result.diff
        _diff_section(w, "Against the previous run",
                      f"**{d['headline']}** ({d['b']['configuration']}, by {d['metric']}, against "
                      f"{d['a']['run_id']}): the full diff, with both top {d['k']} lists of every "
                      "query, is in [diff.md](diff.md).", d)


def _report_validation(w, result: EvaluationResult) -> None:
    """Validation findings and stale judgments."""
    if result.validation:
        w("## Judgments\n\n")
        v = result.validation
        findings = v.get("findings") or []
        stale = (v.get("stale") or {}).get("judgments") or []
        w(f"- validation findings: {len(findings)}; stale judgments left out of scoring: "
          f"{len(stale)}\n")
        for note in v.get("notes") or []:
            w(f"- note: {note}\n")
        for f in findings:
            w(f"  - {f.get('severity')}: {f.get('suite')} / {f.get('expectation')}: "
              f"{_cell(f.get('message'))}\n")
        for s in stale[:20]:
            w(f"  - stale: ({_cell(s.get('query_id'))}, {_cell(s.get('doc_id'))}) "
              f"{s.get('reason')}\n")


def _report_coverage(w, result: EvaluationResult) -> None:
    """The judged share of each configuration's results."""
    if result.coverage:
        judged = (result.judging or {}).get("configurations") or {}
        w("\n## Judged share of the results\n\n| configuration | judged share of top k | floor "
          "| below the floor | pool (unjudged pairs) |\n|---|---|---|---|---|\n")
        for name, c in result.coverage.items():
            pool = (judged.get(name) or {}).get("pool")
            w(f"| {name} | {_fmt(c.get('judged_share'))} (k={c.get('k')}) | {_fmt(c.get('floor'))} "
              f"| {'yes' if c.get('below_floor') else 'no'} "
              f"| {pool if pool is not None else '-'} |\n")
        sources = {c.get("floor_source") for c in result.coverage.values() if c.get("floor_source")}
        if sources:
            w(f"\nWhere the floor comes from: {'; '.join(sorted(sources))}.\n")


def _report_judging(w, result: EvaluationResult) -> None:
    """Judging: rule, pools, bounds, agreement."""
    if result.judging:
        w(judging_markdown(result.judging, result.scores))


def _report_documents(w, result: EvaluationResult) -> None:
    """The top results' titles from the document lookups."""
    for name, d in (result.documents or {}).items():
        w(f"\n## Top results of {name}\n\nTitles from its document lookup ({d['looked_up']} "
          f"documents looked up; gone: {len(d['gone'])}; failed: {len(d['failed'])}).\n\n"
          "| query | text | top results |\n|---|---|---|\n")
        for qid, hits in list(d["top"].items())[:NOTED_QUERIES]:
            text = (result.queries.get(qid) or {}).get("text", "")
            w(f"| {_cell(qid)} | {_cell(text)} | "
              + "; ".join(_cell(str(h["title"] or h["id"])) for h in hits) + " |\n")


def _report_what_ran(w, result: EvaluationResult) -> None:
    """What ran: configurations, hashes, code, versions."""
    if result.what_ran:
        w("\n## What ran\n\n")
        for line in what_ran_lines(result.what_ran):
            w(f"- {line}\n")


def _report_query_notes(w, result: EvaluationResult) -> None:
    """Intent and persona of the golden queries."""
    noted = [(qid, q) for qid, q in result.queries.items() if _notes(q)]
    if noted:
        w("\n## Query notes\n\nIntent and persona of the golden queries, for whoever reads or "
          "judges the results (never sent to a search backend unless its configuration asks).\n\n"
          "| query | text | category | segments | intent | persona |\n|---|---|---|---|---|---|\n")
        for qid, q in noted[:NOTED_QUERIES]:
            w(f"| {_cell(qid)} | {_cell(q.get('text', ''))} | {_cell(q.get('category', ''))} "
              f"| {' '.join(q.get('segments') or [])} | {_cell(q.get('intent', ''))} "
              f"| {_cell(q.get('persona', ''))} |\n")
        if len(noted) > NOTED_QUERIES:
            w(f"\nand {len(noted) - NOTED_QUERIES} more in metrics.json (`queries`).\n")


def _metric_names(result: EvaluationResult) -> list[str]:
    return list(next(iter(result.scores.values())).means) if result.scores else []


REPORT_SECTIONS = (_report_header, _report_conventions, _report_metrics, _report_categories,
                   _report_segments, _report_cost, _report_failures, _report_candidate,
                   _report_gate, _report_diffs, _report_validation, _report_coverage,
                   _report_judging, _report_documents, _report_what_ran, _report_query_notes)

NOTED_QUERIES = 50
FAILED_SHOWN = 20


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def candidate_lines(c: dict) -> list[str]:
    """The console's side by side of a candidate and the served configuration."""
    deltas = ", ".join(f"{m} {_fmt(v['delta'])}" for m, v in c["means"].items()
                       if v["delta"] is not None)
    over = "" if c.get("same_queries", True) else \
        f" (over the {c['queries']} queries both answered)"
    lines = [f"candidate {c['candidate']} vs served {c['served']}: {deltas}{over}"]
    for label in ("better", "worse"):
        names = ", ".join(f"{r['query_id']} ({r['delta']:+.3f})" for r in c[label])
        lines.append(f"  {c['counts'][label]} {label} on {c['metric']}"
                     + (f": {names}" if names else ""))
    return lines


def what_ran_lines(what_ran: dict) -> list[str]:
    """The "What ran" section of report.md: each configuration with its hash and parameters
    (secrets are never among them), then the code, versions, model and dataset."""
    lines = []
    if what_ran.get("configurations_file"):
        lines.append(f"configurations file: `{what_ran['configurations_file']}` (served: "
                     f"{what_ran.get('served')})")
    for name, c in (what_ran.get("configurations") or {}).items():
        params = json.dumps(c.get("params", {}), sort_keys=True, separators=(", ", ": "))
        over = c.get("overridden") or {}
        lines.append(f"`{name}` ({c.get('kind')}) sha256 `{c.get('sha256', '')[:12]}`"
                     + (f", overridden: {json.dumps(over, sort_keys=True)}" if over else "")
                     + f": `{params}`")
    code = what_ran.get("code") or {}
    if code:
        changed = code.get("changed") or []
        lines.append(f"code: commit `{code.get('commit') or '-'}`"
                     + (f", **dirty** (diff sha256 `{(code.get('diff_sha256') or '')[:12]}`"
                        + (f": {', '.join(changed[:5])}"
                           + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
                           if changed else "") + ")"
                        if code.get("dirty") else ", clean (the run's inputs)"))
    if what_ran.get("versions"):
        lines.append("versions: " + ", ".join(f"{k} {v}" for k, v in what_ran["versions"].items()))
    model = what_ran.get("model") or {}
    if model:
        lines.append(f"model: {model.get('name')}, weights sha256 "
                     f"`{(model.get('weights_sha256') or '-')[:12]}`")
    execution = what_ran.get("execution") or {}
    if execution:
        runner = execution.get("task_runner")
        if runner == "dask":
            runner += (f" at {execution['dask_address']}" if execution.get("dask_address")
                       else f" (a local cluster of {execution.get('dask_workers')} processes)")
        lines.append(f"execution: task runner {runner}, {execution.get('shards')} query "
                     f"shard(s) per configuration, embedding batches of "
                     f"{execution.get('embed_batch')} texts")
    sample = what_ran.get("golden_queries") or {}
    if sample:
        counts = sample.get("counts") or {}
        window = sample.get("window") or {}
        seen = window.get("traces") or {}  # the traces' own first and last when not asked
        span = (f"{window.get('since') or seen.get('first') or '-'} .. "
                f"{window.get('until') or seen.get('last') or '-'}")
        lines.append(f"golden queries: sampled from {sample.get('source')} by "
                     f"{sample.get('method')} (seed {sample.get('seed')}, window {span}): "
                     f"{counts.get('sampled')} of {counts.get('candidates')} candidate "
                     f"queries, {counts.get('traces')} traces")
    dataset = what_ran.get("dataset") or {}
    if dataset:
        lines.append(f"dataset: sha256 `{dataset.get('sha256', '')[:12]}` over "
                     + ", ".join(f"{name} `{h[:12]}`" for name, h in
                                 (dataset.get("inputs") or {}).items()))
    return lines


def judgment_set_lines(record: dict | None) -> list[str]:
    """Which judgments counted, and the judgment set the run was scored with."""
    if not record:
        return []
    from searcheval.judging.source import describe_sources

    counted = record.get("counted") or "all"
    counted = counted if counted in ("dataset", "all") else tuple(counted.split(","))
    by_source = ", ".join(f"{n} {s}" for s, n in (record.get("by_source") or {}).items())
    return [f"judgments counted: {describe_sources(counted)} "
            f"(`judgment_sources: {record.get('counted')}`, {record.get('counted_from')})",
            f"judgment set: {record.get('pairs', 0)} graded pair(s) ({by_source or 'none'}); "
            f"fingerprint `{(record.get('fingerprint') or '')[:19]}`"]


def judging_markdown(judging: dict, scores: dict) -> str:
    """The report's Judging section, from metrics.json's `judging` block."""
    out = io.StringIO()
    w = out.write
    j = judging.get("judgments") or {}
    pool = judging.get("pool") or {}
    w("\n## Judging\n\n")
    if j:
        w(f"- effective grade: `{j.get('rule')}`: {j.get('rule_text')}\n")
        judges = j.get("judges") or {}
        w(f"- {j.get('rows', 0)} judgment row(s) on {j.get('pairs', 0)} pair(s) by "
          f"{len(judges)} judge(s); {j.get('multiply_judged', 0)} pair(s) graded by two or more\n")
        for line in judgment_set_lines(j.get("set")):
            w(f"- {line}\n")
    if pool:
        w(f"- pool: {pool.get('size', 0)} unjudged pair(s) in the configurations' top "
          f"{pool.get('k')}: list them with `{pool.get('command')}`\n")
    stale = j.get("stale_by_judge") or {}
    if j.get("judges"):
        lookup = any(r.get("document-gone") or r.get("document-changed")
                     for r in stale.values())  # the columns of a document lookup's reasons
        w("\n| judge | pairs | stale: removed | changed after judged | too old |"
          + (" document gone | document changed |" if lookup else "") + "\n"
          "|---|---|---|---|---|" + ("---|---|" if lookup else "") + "\n")
        for judge, pairs in j["judges"].items():
            r = stale.get(judge) or {}
            w(f"| {_cell(judge)} | {pairs} | {r.get('resource-removed', 0)} "
              f"| {r.get('changed-after-judged', 0)} | {r.get('too-old', 0)} |"
              + (f" {r.get('document-gone', 0)} | {r.get('document-changed', 0)} |"
                 if lookup else "") + "\n")
    configurations = judging.get("configurations") or {}
    if configurations:
        metrics = [m for m in next(iter(configurations.values())).get("bounds", {})]
        w("\nHow far each mean could still move if every unjudged document in the top "
          f"{pool.get('k')} were relevant (top grade) or not: [low, high].\n\n"
          "| configuration | judged share | pool | agreement (alpha) | " + " | ".join(metrics)
          + " |\n|---|---|---|---|" + "---|" * len(metrics) + "\n")
        for name, c in configurations.items():
            cells = []
            for m in metrics:
                lo, hi = (c.get("bounds") or {}).get(m, [None, None])
                mean = scores[name].means.get(m) if name in scores else None
                cells.append(f"{_fmt(mean)} [{_fmt(lo)}, {_fmt(hi)}]")
            agree = c.get("agreement") or {}
            agreed = f"{_fmt(agree.get('alpha'))} ({agree.get('items', 0)} pairs)" \
                if agree.get("items") else "-"
            w(f"| {name} | {_fmt(c.get('judged_share'))} | {c.get('pool')} | {agreed} | "
              + " | ".join(cells) + " |\n")
    a = judging.get("agreement") or {}
    if a:
        w("\n### Agreement between judges\n\n")
        if not a.get("items"):
            w("No pair is graded by two judges yet: agreement cannot be measured (assign a share "
              "of the pool to two judges: `searcheval judgments pool --overlap 0.2`).\n")
        else:
            w(f"- Krippendorff's alpha (ordinal) over {a['items']} pair(s), judges "
              f"{', '.join(a.get('judges') or [])}: **{_fmt(a.get('alpha'))}** (floor "
              f"{_fmt(a.get('floor'))}{', below it' if a.get('below_floor') else ''})\n")
            for k in a.get("kappa") or []:
                w(f"- Cohen's weighted kappa (quadratic) {k['judges'][0]} / {k['judges'][1]}: "
                  f"{_fmt(k.get('kappa'))} over {k['items']} pair(s)\n")
            by_category = a.get("by_category") or {}
            if by_category:
                w("\n| category | pairs | alpha |\n|---|---|---|\n")
                for category, c in by_category.items():
                    w(f"| {category} | {c['items']} | {_fmt(c.get('alpha'))} |\n")
            if a.get("disagreements"):
                w("\nLargest disagreements:\n\n| query | document | grades |\n|---|---|---|\n")
                for d in a["disagreements"]:
                    grades = ", ".join(f"{_cell(k)}={v}" for k, v in d["grades"].items())
                    w(f"| {d['query_id']} | {d['doc_id']} | {grades} |\n")
    w(model_grades_section(judging, scores))
    return out.getvalue()


def model_grades_section(judging: dict, scores: dict) -> str:
    """What each number rests on (issue 24): per configuration the share of its judged top k by
    source (human, import, model: which judge), each model judge's audit and standing, the means
    with and without model grades, and whether the gate's verdict would differ without them."""
    configurations = judging.get("configurations") or {}
    judges = (judging.get("judgments") or {}).get("model_judges") or {}
    if not judges and not any((c.get("sources") or {}).get("counts", {}).keys() - {"import"}
                              for c in configurations.values()):
        return ""
    lines = ["\n### What the numbers rest on\n\n"]
    for name, c in configurations.items():
        src = c.get("sources") or {}
        if not src.get("judged"):
            continue
        shares = ", ".join(f"{s} {v:.0%}" for s, v in src["shares"].items())
        lines.append(f"- {name}: judged top {c.get('k')} ({src['judged']} pairs) by source: "
                     f"{shares}\n")
    for judge, audit in sorted(judges.items()):
        a = audit.get("agreement") or {}
        alpha = a.get("alpha")
        lines.append(f"- model judge {judge}: {audit.get('graded')} grade(s), audit "
                     f"{a.get('items', 0)} pair(s), alpha "
                     f"{'-' if alpha is None else f'{alpha:.3f}'}; "
                     f"{'counted' if audit.get('counts') else 'NOT counted'}: "
                     f"{audit.get('reason')}\n")
    with_without = [(n, c["means_without_model"]) for n, c in configurations.items()
                    if c.get("means_without_model")]
    if with_without:
        metrics = [m for m in next(iter(with_without))[1] if not m.startswith("judged@")][:4]
        lines.append("\n| configuration | " + " | ".join(f"{m} (with / without model)"
                                                       for m in metrics)
                     + " |\n|---|" + "---|" * len(metrics) + "\n")
        for name, without in with_without:
            mine = scores[name].means if name in scores else {}
            lines.append(f"| {name} | " + " | ".join(
                f"{_fmt(mine.get(m))} / {_fmt(without.get(m))}" for m in metrics) + " |\n")
    gate = ((judging.get("without_model") or {}).get("gate")) or {}
    if gate.get("differs"):
        lines.append(f"\n**The gate's verdict rests on model grades**: without them it would "
                     f"have {'passed' if gate['passed'] else 'tripped'}"
                     + (f" ({'; '.join(gate['tripped'])})" if gate.get("tripped") else "")
                     + ".\n")
    return "".join(lines)


def model_ran(result: EvaluationResult) -> bool:
    """Whether the run used its embedding model (embedded texts or read cached vectors)."""
    stats = result.embeddings or {}
    return bool(stats.get("embedded") or stats.get("from_cache") or stats.get("documents"))


def conventions_lines(conventions: dict) -> list[str]:
    """The Conventions section of report.md, from metrics.json's `conventions` block."""
    from searcheval.evaluation.conventions import Conventions

    c = conventions
    return Conventions(
        gain=c["gain"], relevance_level=c["relevance_level"], no_relevant=c["no_relevant"],
        coverage_floor=c["coverage_floor"], grade_scale=tuple(c["grade_scale"]),
        grade_map=tuple(c["grade_map"].items()) if c.get("grade_map") else None,
        coverage_k=c.get("coverage_k", 10), sources=dict(c.get("sources") or {})).lines() \
        + ([f"retrieval depth: {c['depth']} results per query"] if c.get("depth") else [])


def query_notes(queries, segments: dict[str, list[str]] | None = None) -> dict[str, dict]:
    """metrics.json's `queries` block: each golden query's text, category, segments, and its
    intent and persona when it has them."""
    out = {}
    for q in queries:
        entry = {"text": q.text, "category": q.category}
        if segments is not None:
            entry["segments"] = segments.get(q.id, [])
        for key in ("intent", "persona"):
            if getattr(q, key):
                entry[key] = getattr(q, key)
        out[q.id] = entry
    return out


def _notes(query: dict | None) -> str:
    if not query:
        return ""
    return " / ".join(query[k] for k in ("intent", "persona") if query.get(k))


def _cell(text: str) -> str:
    """Text from data safe inside markdown (a table cell or a line): one line, and nothing in it
    renders as a link, an image, HTML or emphasis (`searcheval.io.escape.md`)."""
    return md(text)


def _policy(result: EvaluationResult) -> str:
    for s in result.scores.values():
        return s.settings.effective_policy
    return "one"


def per_query_csv(result: EvaluationResult) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["configuration", "query_id", "category", "metric", "value", "segments"])
    segments = {conf: s.segments for conf, s in result.scores.items()}
    for row in result.query_rows():
        writer.writerow([row["configuration"], row["query_id"], row["category"], row["metric"],
                         "" if row["value"] is None else repr(float(row["value"])),
                         " ".join(segments[row["configuration"]].get(row["query_id"], []))])
    return out.getvalue()


def write_outputs(result: EvaluationResult, runs: dict[str, RankedRun], directory: str | Path,
                  extra: dict[str, str] | None = None) -> Path:
    """The run's own folder `DIR/<run_id>/` (`metrics.json`, `runs/<configuration>.trec`,
    `per_query.csv`, `report.md`, `extra` {file name: text}, e.g. the diff, and the marker
    `.searcheval-run.json` output retention goes by), then `DIR/latest`
    pointed at it. Nothing of an earlier run is overwritten; `DIR/metrics.json`, `DIR/runs`,
    `DIR/per_query.csv` and `DIR/report.md` are links through `DIR/latest`, so the paths of
    DESIGN.md's contract always show the newest run. Returns the run's folder."""
    root = Path(directory)
    folder = root / result.run_id
    folder.mkdir(parents=True, exist_ok=True)
    # every text passes `redact` on its way out (a secret read this run never reaches a file,
    # even through a path that did not redact it at its source)
    (folder / "metrics.json").write_text(redact(
        json.dumps(result.metrics_document(), indent=2, allow_nan=False) + "\n"),
        encoding="utf-8")
    for name, run in runs.items():
        write_trec_run(run, folder / "runs" / f"{name}.trec")
    (folder / "per_query.csv").write_text(redact(per_query_csv(result)), encoding="utf-8")
    (folder / "report.md").write_text(redact(markdown_report(result)), encoding="utf-8")
    for name, text in (extra or {}).items():
        (folder / name).write_text(redact(text), encoding="utf-8")
    from searcheval.evaluation.retention import MARKER, marker_text

    # what makes the folder searcheval's to prune (output_retention), and nothing else
    (folder / MARKER).write_text(marker_text(result.run_id, result.started_at), encoding="utf-8")
    point_latest(root, result.run_id, ("metrics.json", "runs", "per_query.csv", "report.md",
                                       *(extra or {})))
    return folder


def _link(path: Path, target: str) -> None:
    """`path` becomes a symlink to `target`, atomically (a reader never finds it missing)."""
    if path.is_symlink() and os.readlink(path) == target:
        return
    if path.exists() and not path.is_symlink():
        if path.is_dir():
            shutil.rmtree(path)  # an output folder of before runs had their own folders
        else:
            path.unlink()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    os.symlink(target, tmp)
    os.replace(tmp, path)


def point_latest(root: Path, run_id: str, names: tuple[str, ...]) -> None:
    """`root/latest` -> `<run_id>` and each of `names` -> `latest/<name>` (relative links, so the
    folder can be moved or mounted elsewhere)."""
    from searcheval.defaults import LATEST

    _link(root / LATEST, run_id)
    for name in names:
        _link(root / name, f"{LATEST}/{name}")


