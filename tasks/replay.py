"""Prefect tasks of the replay flow: each wraps one step of `searcheval.replay.compose` (the same
composition `searcheval replay` calls) or of publishing (`searcheval.replay.report`).

Retries live on the tasks that do I/O with the database; refused input is never retried. Alerts
go through `tasks.evaluation.send_alert`, the nightly flow's one channel (a Prefect notification
block, else the webhook). Trace tables can hold a million rows: the flow passes them wrapped in
`quote`, so Prefect does not walk them looking for futures.
"""

from __future__ import annotations

from datetime import datetime

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from searcheval import store
from searcheval.io.traces import TraceTable
from searcheval.replay import compose
from searcheval.replay import report as rr
from searcheval.replay.scoring import ReplayReport
from searcheval.store.database import open_database
from tasks.evaluation import IO_RETRIES, not_refused_input, send_alert  # noqa: F401 - re-exported

METRICS_ARTIFACT = "searcheval-replay-metrics"
REPORT_ARTIFACT = "searcheval-replay-report"


@task(cache_policy=NO_CACHE)
def load_references(plan: compose.ReplayPlan) -> compose.References:
    return compose.load_references(plan)


@task(cache_policy=NO_CACHE, task_run_name="read-{path}")
def read_trace_file(plan: compose.ReplayPlan, path: str) -> TraceTable:
    return compose.read_file_traces(plan, path)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def read_trace_table(plan: compose.ReplayPlan) -> TraceTable:
    with open_database() as conn:
        return compose.read_db_traces(plan, conn)


@task(cache_policy=NO_CACHE)
def score(plan: compose.ReplayPlan, table: TraceTable, table_b: TraceTable | None,
          references: compose.References) -> ReplayReport:
    return compose.score(plan, table, table_b, references)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def publish(report: ReplayReport, references: compose.References, run_id: str, source: str,
            started_at: datetime, finished_at: datetime, flow_run_id: str | None,
            label: str | None, output: str | None) -> None:
    """History in Postgres (one transaction), files, and artifacts under stable keys."""
    run_row, metric_rows = rr.replay_history(
        report, run_id=run_id, source=source, started_at=started_at, finished_at=finished_at,
        input_hashes=references.input_hashes, flow_run_id=flow_run_id, label=label,
        thresholds=references.thresholds)
    with open_database() as conn:
        store.save_replay(conn, run_row, metric_rows)
    if output:
        rr.write_replay_outputs(report, output, run_id=run_id)
    verdict = "passed" if report.passed else f"FAILED ({len(report.failures)} miss(es))"
    create_table_artifact(table=rr.replay_table_rows(report), key=METRICS_ARTIFACT,
                          description=f"searcheval replay {run_id} of {report.main.source}: "
                                      f"means per segment over the labelled traces; {verdict}")
    create_markdown_artifact(markdown=rr.replay_markdown(report, run_id=run_id),
                             key=REPORT_ARTIFACT, description=f"searcheval replay {run_id}")
