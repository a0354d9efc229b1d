"""Prefect tasks of the replay flow: each wraps one library function (searcheval.replay,
searcheval.traces, searcheval.store).

Retries live on the tasks that do I/O with the database; refused input is never retried. Alerts
go through `tasks.evaluation.send_alert`, the nightly flow's channel (webhook and/or Prefect
notification block). Trace tables can hold a million rows: the flow passes them wrapped in
`quote`, so Prefect does not walk them looking for futures.
"""

from __future__ import annotations

from datetime import datetime

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from searcheval import replay as rp
from searcheval import replay_report as rr
from searcheval import store
from searcheval.database import open_database
from searcheval.metrics import Settings
from searcheval.traces import TraceTable, read_traces, select_traces
from tasks.evaluation import IO_RETRIES, not_refused_input, send_alert  # noqa: F401 - re-exported

METRICS_ARTIFACT = "searcheval-replay-metrics"
REPORT_ARTIFACT = "searcheval-replay-report"


@task(cache_policy=NO_CACHE)
def load_references(thresholds: str | None, catalog: str | None, judgments: str | None,
                    queries: str | None, max_grade: int) -> rp.References:
    return rp.load_references(thresholds=thresholds, catalog=catalog, judgments=judgments,
                              queries=queries, max_grade=max_grade)


@task(cache_policy=NO_CACHE, task_run_name="read-{path}")
def read_trace_file(path: str, since: datetime | None, until: datetime | None,
                    segment: str | None, max_grade: int, max_bad_share: float) -> TraceTable:
    table = read_traces(path, grade_scale=(0, max_grade), max_bad_share=max_bad_share)
    return select_traces(table, since=since, until=until, segment=segment)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def read_trace_table(since: datetime | None, until: datetime | None, segment: str | None,
                     max_grade: int, max_bad_share: float) -> TraceTable:
    with open_database() as conn:
        return store.load_trace_table(conn, since=since, until=until, segment=segment,
                                      grade_scale=(0, max_grade), max_bad_share=max_bad_share)


@task(cache_policy=NO_CACHE)
def score(table: TraceTable, table_b: TraceTable | None, configurations: list[str] | None,
          references: rp.References, metrics: list[str], settings: Settings,
          permutations: int, seed: int) -> rp.ReplayReport:
    sides, excluded = rp.choose_sides(table, table_b, configurations)
    return rp.replay(sides, metrics=metrics, settings=settings,
                     thresholds=references.thresholds, judgments=references.judgments,
                     queries=references.queries, catalog=references.catalog,
                     permutations=permutations, seed=seed, excluded=excluded)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def publish(report: rp.ReplayReport, references: rp.References, run_id: str, source: str,
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
