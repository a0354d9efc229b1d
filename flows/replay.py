"""The replay flow: score recorded production traces without re-running search. Task calls over
one plan (searcheval.replay.compose); every step that reads or writes is a task in tasks/replay.py.

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

from searcheval import defaults
from searcheval.errors import InputError, ThresholdsMissed
from searcheval.evaluation.alerts import Alert
from searcheval.replay.compose import new_replay_id, plan_replay
from searcheval.replay.report import missed_message, replay_alert, replay_document, replay_text
from flows import outcome
from flows.parameters import MetricNames
from tasks import replay as t
from tasks.evaluation import run_tag, tag_flow_run


@flow(name="searcheval-replay", log_prints=True, timeout_seconds=defaults.run_timeout())
@outcome.final_state  # REFUSED: / GATE TRIPPED: / FAILED: and the verdict tag, as the nightly's
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
    metrics: MetricNames = list(defaults.REPLAY_METRICS),
    relevance_level: int = defaults.RELEVANCE_LEVEL,
    gain: Literal["exponential", "linear"] = defaults.GAIN,
    no_relevant: Literal["one", "zero", "skip"] = defaults.NO_RELEVANT,
    max_grade: int = defaults.MAX_GRADE,
    max_bad_share: float = defaults.MAX_BAD_SHARE,
    permutations: int = defaults.PERMUTATIONS,
    seed: int = 0,
    output: str | None = "out/replay",
    label: str | None = None,
    alert_block: str | None = None,
    ab_max_losses: int | None = None,
) -> dict:
    """Score recorded traces per segment against thresholds, with annotation coverage and A/B.

    The database comes from SEARCHEVAL_DATABASE_URL (embedded Postgres when unset), never from a
    parameter, so no password is stored with the flow run. A missed floor ends the run Failed. With two
    configurations B loses, and the run fails, when it has more losing than winning queries on a
    gated metric (or more than `ab_max_losses`), or a significant drop.

    Args:
        traces: A JSONL file of traces, one per line (trace_id, ts, query, segment,
            retrieved_ids, and relevant_ids / relevance_scores when labelled).
        traces_b: A second configuration's traces, compared with traces (A/B).
        from_db: Read the traces from the search_traces table instead of a file.
        since: Only traces with ts at or after this time (UTC when no zone is given).
        until: Only traces with ts before this time.
        segment: Only the traces of this segment.
        configurations: By the traces' configuration field: one to score, or two to compare;
            empty for the only one, or both when there are exactly two.
        thresholds: A JSON file of floors: {"default": {metric: floor}, "segments":
            {segment: {...}}, "min_coverage": share}.
        catalog: catalog.json: labels of resources absent from it are stale and dropped.
        judgments: Labels for traces that carry none, by query: judgments.csv, TREC or BEIR
            qrels.
        queries: golden_queries.json: matches traces without a query_id by their text.
        metrics: The metrics to score per segment (the thresholds' metrics are added).
        relevance_level: Lowest grade that counts as relevant for MRR, precision, recall and
            MAP.
        gain: Gain of a grade g in nDCG: exponential (2^g - 1) or linear (g).
        no_relevant: nDCG and recall of a labelled trace without a relevant result: one,
            zero, or skip it.
        max_grade: The grade scale is 0..max_grade.
        max_bad_share: Bad lines are skipped up to this share of the file, refused above.
        permutations: Random sign flips of the A/B paired randomization test.
        seed: Seed of the A/B paired randomization test.
        output: Folder for replay.json and report.md; empty for the database and the
            artifacts only.
        label: A label for this run (shown in the report and the alerts).
        alert_block: A Prefect notification block to alert through, as 'type/name'.
        ab_max_losses: With two configurations, B loses when more queries lose than this
            (empty: when more lose than win).
    """
    logger = get_run_logger()
    run_id = new_replay_id()
    started = datetime.now(timezone.utc)
    tag_flow_run([run_tag(run_id)])  # the run id of the alerts and the history finds the flow run
    try:
        plan = plan_replay(
            traces=traces, traces_b=traces_b, from_db=from_db, since=since, until=until,
            segment=segment, configurations=configurations, thresholds=thresholds,
            catalog=catalog, judgments=judgments, queries=queries, metrics=metrics, gain=gain,
            relevance_level=relevance_level, no_relevant=no_relevant, max_grade=max_grade,
            max_bad_share=max_bad_share, permutations=permutations, seed=seed,
            ab_max_losses=ab_max_losses)
        references = t.load_references(plan)
        if plan.from_db:
            table, table_b = t.read_trace_table(plan), None
        else:
            table = t.read_trace_file(plan, plan.traces)
            table_b = t.read_trace_file(plan, plan.traces_b) if plan.traces_b else None
        report = t.score(plan, quote(table), quote(table_b), quote(references))
    except InputError as exc:
        t.send_alert(Alert(run_id, [{"kind": "validation", "summary": f"input refused: {exc}"}]),
                     alert_block)
        raise

    t.publish(quote(report), quote(references), run_id, plan.source, started,
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
