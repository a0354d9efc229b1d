"""Prefect tasks of the live monitor (flows/live.py): each wraps one function of
`searcheval.production.monitor` or of its store. Retries on the database tasks; refused input is
never retried."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE

from searcheval.production import monitor
from searcheval.store import live as store
from searcheval.store.database import open_database
from tasks.evaluation import IO_RETRIES, not_refused_input, send_alert  # noqa: F401 - re-exported

SERIES_ARTIFACT = "searcheval-live-series"
REPORT_ARTIFACT = "searcheval-live-report"


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def score_due_windows(settings: monitor.MonitorSettings, judgment_set: str | None,
                      max_grade: int) -> list[monitor.WindowResult]:
    with open_database() as conn:
        judgments = monitor.counted_judgments(conn, judgment_set) if judgment_set else None
        return monitor.run_monitor(conn, settings, judgments=judgments,
                                   grade_scale=(0, max_grade))


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def publish_series(settings: monitor.MonitorSettings, windows: int = 96) -> list[dict]:
    """The monitor's last `windows` windows as a table artifact, and a short markdown report."""
    with open_database() as conn:
        rows = store.load_series(conn, settings.name, windows)
    table = monitor.series_rows(rows, settings.metrics)
    create_table_artifact(table=table, key=SERIES_ARTIFACT,
                          description=f"searcheval live monitor {settings.name!r}: "
                                      f"{', '.join(settings.metrics)} per "
                                      f"{settings.interval_minutes}-minute window")
    create_markdown_artifact(markdown=monitor.series_markdown(table, settings),
                             key=REPORT_ARTIFACT,
                             description=f"searcheval live monitor {settings.name!r}")
    return table
