"""Replay results, published: the replay JSON, its files, its history rows, its alert, and
its renderings as text, a table artifact and markdown. The scoring lives in `searcheval.replay`."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Mapping

from searcheval.evaluation.alerts import Alert
from searcheval.replay.scoring import ALL, ReplayReport, SideReport, Thresholds

# --------------------------------------------------------------------------- publishing


def replay_document(report: ReplayReport, *, run_id: str | None = None,
                    per_trace: bool = False) -> dict:
    """The replay JSON of DESIGN.md (`searcheval replay --format json`), plus `run_id` when the
    replay is published."""
    doc = report.to_dict(per_trace=per_trace)
    if run_id is not None:
        doc["run_id"] = run_id
    return doc


def write_replay_outputs(report: ReplayReport, output: str | Path, *, run_id: str | None = None,
                         per_trace: bool = False) -> dict[str, Path]:
    """`output/replay.json` (the replay JSON) and `output/report.md`."""
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    doc = replay_document(report, run_id=run_id, per_trace=per_trace)
    paths = {"replay.json": folder / "replay.json", "report.md": folder / "report.md"}
    paths["replay.json"].write_text(
        json.dumps(doc, indent=2, allow_nan=False, default=str) + "\n", encoding="utf-8")
    paths["report.md"].write_text(replay_markdown(report, run_id=run_id), encoding="utf-8")
    return paths


def replay_history(report: ReplayReport, *, run_id: str, source: str, started_at: datetime,
                   finished_at: datetime | None = None, input_hashes: Mapping[str, str] = {},
                   flow_run_id: str | None = None, label: str | None = None,
                   thresholds: Thresholds | None = None) -> tuple[dict, list[dict]]:
    """Rows of `replay_runs` and `replay_metrics` (searcheval.store.save_replay).

    One metric row per side (A is `configuration`, its name or 'replay'; B too, with no floors),
    per segment and ALL, per metric: the mean, n (traces averaged) and the floor when set; plus
    a 'coverage' row per segment and ALL (n: traces)."""
    m = report.main
    name = m.name or "replay"
    run = {
        "run_id": run_id, "flow_run_id": flow_run_id, "started_at": started_at,
        "finished_at": finished_at, "source": source, "configuration": name,
        "traces": m.traces, "labelled": m.coverage.labelled, "coverage": m.coverage.share,
        "min_coverage": m.coverage.min_coverage, "passed": report.passed,
        "input_hashes": dict(input_hashes),
        "summary": {"label": label, "metrics": report.metrics,
                    "failures": [f.to_dict() for f in report.failures],
                    "labels": m.labels, "stale_labels": m.stale.to_dict() if m.stale else None,
                    "bad_lines": m.bad.to_dict(), "excluded_traces": report.excluded,
                    "segments_without_traces": report.segments_without_traces,
                    "ab": report.ab.to_dict() if report.ab else None},
    }
    rows = _side_rows(m, name, thresholds)
    if report.other is not None:
        rows += _side_rows(report.other, report.other.name or "replay-b", None)
    return run, rows


def _side_rows(side: SideReport, name: str, thresholds: Thresholds | None) -> list[dict]:
    rows = []
    cov = side.coverage
    means = {**side.segments, ALL: side.overall}
    for seg, values in means.items():
        floors = thresholds.for_segment(seg) if thresholds and seg != ALL else {}
        for metric, value in values.items():
            rows.append({"configuration": name, "segment": seg, "metric": metric, "value": value,
                         "n": side.counts.get(seg, {}).get(metric, 0),
                         "threshold": floors.get(metric)})
        if seg == ALL:
            share, n = cov.share, cov.traces
            floor = thresholds.min_coverage if thresholds else None
        else:
            share, n = cov.segment_share(seg), cov.segments[seg][0]
            floor = thresholds.segment_min_coverage.get(seg) if thresholds else None
        rows.append({"configuration": name, "segment": seg, "metric": "coverage", "value": share,
                     "n": n, "threshold": floor})
    return rows


def replay_alert(report: ReplayReport, run_id: str, where: str | None = None) -> Alert | None:
    """An alert for every missed floor: kind 'coverage' (annotation coverage under its minimum)
    or 'threshold' (a segment's metric under its floor); None when the replay passed."""
    reasons = []
    cov = report.main.coverage
    for f in report.failures:
        if f.metric == "coverage":
            traces, labelled = (cov.traces, cov.labelled) if f.segment == ALL \
                else cov.segments[f.segment]
            reasons.append({"kind": "coverage", "segment": f.segment, "value": f.value,
                            "floor": f.threshold, "labelled": labelled, "traces": traces,
                            "summary": f"annotation coverage of {f.segment} is {f.value:.3f} "
                                       f"({labelled} of {traces} traces labelled), under the "
                                       f"minimum {f.threshold:.3f}"})
        else:
            reasons.append({"kind": "threshold", "segment": f.segment, "metric": f.metric,
                            "value": f.value, "threshold": f.threshold,
                            "summary": f"replay threshold missed: {f.describe()}"})
    for loss in report.ab_losses:
        reasons.append({"kind": "ab", **loss.to_dict(),
                        "summary": f"replay A/B: {loss.describe()}"})
    if not reasons:
        return None
    return Alert(run_id=run_id, reasons=reasons, where=where)


def missed_message(report: ReplayReport) -> str:
    parts = [f.describe() for f in report.failures] + [l.describe() for l in report.ab_losses]
    what = f"missed {len(report.failures)} floor(s)" if report.failures else "failed its A/B"
    if report.failures and report.ab_losses:
        what += " and its A/B"
    return f"replay of {report.main.source} {what}: " + "; ".join(parts)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{share:.1%}"


def replay_text(report: ReplayReport) -> str:
    """The console report of `searcheval replay` (and the flow's log)."""
    lines: list[str] = []
    out = lines.append
    m = report.main
    cov = m.coverage
    name = f" [{m.name}]" if m.name else ""
    floor = f", min {_pct(cov.min_coverage)}" if cov.min_coverage is not None else ""
    out(f"replay of {m.source}{name}: {m.traces} traces, {cov.labelled} labelled "
        f"(coverage {_pct(cov.share)}{floor})")
    out(f"labels: {m.labels['relevance_scores']} from relevance_scores, "
        f"{m.labels['relevant_ids']} from relevant_ids, {m.labels['judgments']} from judgments, "
        f"{m.labels['none']} unlabelled")
    if m.stale is not None:
        out(f"stale labels dropped: {m.stale.dropped} ({m.stale.traces} traces, "
            f"{m.stale.left_unlabelled} left unlabelled)")
    bad = m.bad
    out(f"bad lines skipped: {bad.count} of {bad.lines} lines"
        + ("" if not bad.first else " (" + "; ".join(f"line {b.line}: {b.reason}"
                                                     for b in bad.first) + ")"))
    if report.excluded:
        out(f"traces of other configurations left out: {report.excluded}")
    metrics = report.metrics
    seg_w = max([len(s) for s in m.segments] + [len(ALL), 7]) + 2
    head = f"{'segment':<{seg_w}}{'traces':>7}{'labelled':>10}{'coverage':>10}"
    w = max([len(n) for n in metrics] + [8]) + 2
    out(head + "".join(f"{n:>{w}}" for n in metrics))
    for seg, values in m.segments.items():
        t, lab = cov.segments[seg]
        out(f"{seg:<{seg_w}}{t:>7}{lab:>10}{_pct(cov.segment_share(seg)):>10}"
            + "".join(f"{_num(values.get(n)):>{w}}" for n in metrics))
    out(f"{ALL:<{seg_w}}{cov.traces:>7}{cov.labelled:>10}{_pct(cov.share):>10}"
        + "".join(f"{_num(m.overall.get(n)):>{w}}" for n in metrics))
    if report.segments_without_traces:
        out("thresholds name segments with no trace: "
            + ", ".join(report.segments_without_traces))
    if report.ab is not None:
        ab, other = report.ab, report.other
        out(f"\nA/B: {ab.a} (A, {m.traces} traces) vs {ab.b} (B, {other.traces} traces, "
            f"coverage {_pct(other.coverage.share)}); a win is B better than A on a query")
        out(f"{'segment':<{seg_w}}{'metric':<14}{'pairs':>6}{'wins':>6}{'losses':>7}"
            f"{'ties':>6}{'mean A':>9}{'mean B':>9}{'delta':>9}{'p':>8}")
        for seg, per in ab.segments.items():
            for metric, c in per.items():
                delta = "-" if c.delta is None else f"{c.delta:+.4f}"
                p = "-" if c.p_value is None else f"{c.p_value:.4f}"
                out(f"{seg:<{seg_w}}{metric:<14}{c.pairs:>6}{c.wins:>6}{c.losses:>7}"
                    f"{c.ties:>6}{_num(c.mean_a):>9}{_num(c.mean_b):>9}{delta:>9}{p:>8}")
        verdict = "B loses" if report.ab_losses else "B holds"
        out(f"A/B verdict: {verdict}")
        for loss in report.ab_losses:
            out(f"  {loss.describe()}")
    if report.passed:
        out("\nPASSED")
    else:
        misses = len(report.failures) + len(report.ab_losses)
        out(f"\nFAILED: {misses} miss(es)")
        for f in report.failures:
            out(f"  {f.describe()}")
        for loss in report.ab_losses:
            out(f"  {loss.describe()}")
    return "\n".join(lines)


def _md(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def replay_table_rows(report: ReplayReport) -> list[dict]:
    """The metrics table artifact: one row per segment and ALL, A side."""
    m = report.main
    cov = m.coverage
    missed: dict[str, list[str]] = {}
    for f in report.failures:
        missed.setdefault(f.segment, []).append(f.metric)
    rows = []
    for seg, values in [*m.segments.items(), (ALL, m.overall)]:
        traces, labelled = (cov.traces, cov.labelled) if seg == ALL else cov.segments[seg]
        rows.append({"segment": seg, "traces": traces, "labelled": labelled,
                     "coverage": round(labelled / traces, 4) if traces else None,
                     **{k: (None if v is None else round(v, 4)) for k, v in values.items()},
                     "status": ("missed: " + ", ".join(missed[seg])) if seg in missed else "ok"})
    return rows


def replay_markdown(report: ReplayReport, *, run_id: str | None = None) -> str:
    """report.md and the markdown artifact."""
    m = report.main
    cov = m.coverage
    verdict = "PASSED" if report.passed else \
        f"FAILED ({len(report.failures) + len(report.ab_losses)} miss(es))"
    parts = [f"# searcheval replay{f' {run_id}' if run_id else ''}: {verdict}\n",
             f"- source: `{_md(m.source)}`" + (f", configuration `{_md(m.name)}`" if m.name
                                               else ""),
             f"- traces: {m.traces}, labelled {cov.labelled} (coverage {_pct(cov.share)}"
             + (f", minimum {_pct(cov.min_coverage)}" if cov.min_coverage is not None else "")
             + ")",
             f"- labels: {m.labels['relevance_scores']} from relevance_scores, "
             f"{m.labels['relevant_ids']} from relevant_ids, {m.labels['judgments']} from "
             f"judgments, {m.labels['none']} unlabelled",
             f"- bad lines skipped: {m.bad.count} of {m.bad.lines}"]
    if m.stale is not None:
        parts.append(f"- stale labels dropped: {m.stale.dropped} ({m.stale.traces} traces, "
                     f"{m.stale.left_unlabelled} left unlabelled)")
    if report.excluded:
        parts.append(f"- traces of other configurations left out: {report.excluded}")
    rows = replay_table_rows(report)
    cols = ["segment", "traces", "labelled", "coverage", *report.metrics, "status"]
    parts += ["\n## Segments\n", "| " + " | ".join(cols) + " |",
              "|" + "---|" * len(cols)]
    for row in rows:
        cells = [_md(row["segment"]), str(row["traces"]), str(row["labelled"]),
                 _pct(row["coverage"]), *(_num(row.get(c)) for c in report.metrics),
                 _md(row["status"])]
        parts.append("| " + " | ".join(cells) + " |")
    if report.failures:
        parts.append("\n## Missed floors\n")
        parts += [f"- {_md(f.describe())}" for f in report.failures]
    if report.segments_without_traces:
        parts.append("\nThresholds name segments with no trace: "
                     + ", ".join(_md(s) for s in report.segments_without_traces))
    if report.ab is not None and report.other is not None:
        ab = report.ab
        parts += [f"\n## A/B: {_md(ab.a)} (A) vs {_md(ab.b)} (B)\n",
                  f"B: {report.other.traces} traces, coverage "
                  f"{_pct(report.other.coverage.share)}. A win is B better than A on a query; "
                  "p: two-sided paired sign-flip test.\n",
                  "| segment | metric | pairs | wins | losses | ties | mean A | mean B | delta "
                  "| p |", "|---|---|---|---|---|---|---|---|---|---|"]
        for seg, per in ab.segments.items():
            for metric, c in per.items():
                parts.append(
                    f"| {_md(seg)} | {metric} | {c.pairs} | {c.wins} | {c.losses} | {c.ties} | "
                    f"{_num(c.mean_a)} | {_num(c.mean_b)} | "
                    f"{'-' if c.delta is None else f'{c.delta:+.4f}'} | "
                    f"{'-' if c.p_value is None else f'{c.p_value:.4f}'} |")
    return "\n".join(parts) + "\n"
