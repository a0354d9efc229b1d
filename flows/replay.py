"""The replay flow: score recorded production traces without re-running search. Wiring only;
every step is a task in tasks/replay.py.

load references -> read traces (a JSONL file, or the search_traces table) -> score (labels,
coverage, per-segment metrics, thresholds, A/B) -> publish (history, files, artifacts) -> alert.
Refused input alerts and stops the run before anything is written; a missed floor (a segment
metric under its threshold, or annotation coverage under min_coverage) publishes, alerts, and
ends the flow run Failed so automations can act on it. `searcheval replay` is the same path
without Prefect.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Literal

from prefect import flow, get_run_logger
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote

from searcheval.alerts import Alert
from searcheval.errors import InputError
from searcheval.metrics import parse_metrics
from searcheval.replay import (DEFAULT_REPLAY_METRICS, ThresholdsMissed, new_replay_id,
                               replay_settings, replay_source)
from searcheval.replay_report import (missed_message, replay_alert, replay_document, replay_text)
from searcheval.traces import parse_time_bound
from tasks import replay as t


@flow(name="searcheval-replay", log_prints=True)
def replay(
    traces: str | None = None,
    traces_b: str | None = None,
    from_db: bool = False,
    since: datetime | None = None,
    until: datetime | None = None,
    segment: str | None = None,
    configurations: list[str] | None = None,
    thresholds: str | None = None,
    catalog: str | None = None,
    judgments: str | None = None,
    queries: str | None = None,
    metrics: list[str] = list(DEFAULT_REPLAY_METRICS),
    relevance_level: int = 1,
    gain: Literal["exponential", "linear"] = "exponential",
    no_relevant: Literal["one", "zero", "skip"] = "one",
    max_grade: int = 3,
    max_bad_share: float = 0.01,
    permutations: int = 10_000,
    seed: int = 0,
    output: str | None = "out/replay",
    label: str | None = None,
    alert_block: str | None = None,
) -> dict:
    """Score recorded traces per segment against thresholds, with annotation coverage and A/B.

    `traces` (a JSONL file, `traces_b` a second one to compare) or `from_db` (the search_traces
    table) names the traces; `since` / `until` / `segment` select some (ts >= since, ts < until);
    `configurations` picks one, or two to compare, by the traces' configuration field.
    `thresholds`, `catalog`, `judgments`, `queries` are files as for `searcheval replay`.
    The database comes from SEARCHEVAL_DATABASE_URL (embedded Postgres when unset), never from a
    parameter, so no password is stored with the flow run.
    """
    logger = get_run_logger()
    run_id = new_replay_id()
    started = datetime.now(timezone.utc)
    try:
        settings = replay_settings(gain=gain, relevance_level=relevance_level,
                                   no_relevant=no_relevant, max_grade=max_grade,
                                   max_bad_share=max_bad_share, permutations=permutations)
        source = replay_source(traces, traces_b, from_db, configurations)
        parse_metrics(metrics)
        since = parse_time_bound(since, "since")  # a naive time is UTC
        until = parse_time_bound(until, "until")
        references = t.load_references(thresholds, catalog, judgments, queries, max_grade)
        if from_db:
            table = t.read_trace_table(since, until, segment, max_grade, max_bad_share)
            table_b = None
        else:
            table = t.read_trace_file(traces, since, until, segment, max_grade, max_bad_share)
            table_b = t.read_trace_file(traces_b, since, until, segment, max_grade,
                                        max_bad_share) if traces_b else None
        report = t.score(quote(table), quote(table_b), configurations, quote(references),
                         metrics, settings, permutations, seed)
    except InputError as exc:
        t.send_alert(Alert(run_id, [{"kind": "validation", "summary": f"input refused: {exc}"}]),
                     alert_block)
        raise

    t.publish(quote(report), quote(references), run_id, source, started,
              datetime.now(timezone.utc), str(flow_run.id) if flow_run.id else None, label,
              output)
    text = replay_text(report)
    logger.info("replay %s\n%s", run_id, text)

    alert = replay_alert(report, run_id,
                         where=f"{output}/report.md" if output else f"artifact {t.REPORT_ARTIFACT}")
    if alert is not None:
        t.send_alert(alert, alert_block)
    if not report.passed:
        raise ThresholdsMissed(missed_message(report), text)
    return {"run_id": run_id, "passed": report.passed, "table": text,
            "replay": replay_document(report, run_id=run_id)}
