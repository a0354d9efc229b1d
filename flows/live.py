"""The live monitor flow (`searcheval-live`, every 15 minutes): the traces of every window since
the last run, scored on their labels, stored in the history, published as a series, with an
alert when the change detector fires. Wiring only; the steps are tasks/live.py, the logic
`searcheval.production.monitor`.
"""

from __future__ import annotations

from datetime import datetime

from prefect import flow, get_run_logger

from flows.parameters import MetricNames
from searcheval import defaults
from searcheval.production.monitor import MonitorSettings, live_alert
from tasks import live as t


@flow(name="searcheval-live", log_prints=True)
def live(
    monitor: str = defaults.LIVE_MONITOR,
    interval_minutes: int = defaults.LIVE_INTERVAL_MINUTES,
    metrics: MetricNames = list(defaults.LIVE_METRICS),
    relevance_level: int = defaults.RELEVANCE_LEVEL,
    cusum_k: float = defaults.LIVE_CUSUM_K,
    cusum_h: float = defaults.LIVE_CUSUM_H,
    warmup: int = defaults.LIVE_WARMUP,
    target: float | None = None,
    min_labelled: int = defaults.LIVE_MIN_LABELLED,
    start: datetime | None = None,
    judgment_set: str | None = None,
    max_grade: int = defaults.MAX_GRADE,
    alert_block: str | None = None,
) -> dict:
    """Score the search_traces of each complete window since the last run; alert on a
    sustained drop (a lower CUSUM on the first metric).

    The database comes from SEARCHEVAL_DATABASE_URL (embedded Postgres when unset).

    Args:
        monitor: The monitor's name in the history (several monitors may coexist).
        interval_minutes: Window length in minutes; schedule the deployment as often.
        metrics: Metrics per window over the labelled traces; the first is watched.
        relevance_level: Lowest grade that counts as relevant for MRR and precision.
        cusum_k: CUSUM slack: a shortfall under target smaller than this is noise.
        cusum_h: CUSUM threshold: alert when the accumulated shortfall exceeds it.
        warmup: Scored windows whose mean becomes the detector's target.
        target: A fixed target for the watched metric instead of the warm-up mean.
        min_labelled: Windows with fewer labelled traces do not move the detector.
        start: Start of the first window when the monitor has no history yet.
        judgment_set: Label traces without labels of their own from this judgment set's
            grades (human and imported; implicit only while they agree with humans).
        max_grade: The grade scale is 0..max_grade.
        alert_block: A Prefect notification block to alert through, as 'type/name'.
    """
    logger = get_run_logger()
    settings = MonitorSettings(
        name=monitor, interval_minutes=interval_minutes, metrics=tuple(metrics),
        relevance_level=relevance_level, cusum_k=cusum_k, cusum_h=cusum_h, warmup=warmup,
        target=target, min_labelled=min_labelled, start=start)
    scored = t.score_due_windows(settings, judgment_set, max_grade)
    series = t.publish_series(settings)
    for w in scored:
        logger.info("window %s: %d traces, %d labelled, %s%s", w.start.isoformat(), w.traces,
                    w.labelled, w.metrics, " ALERT" if w.alerted else "")
    alert = live_alert(scored, settings)
    if alert is not None:
        t.send_alert(alert, alert_block)
    return {"windows": [w.start.isoformat() for w in scored],
            "alerted": [w.start.isoformat() for w in scored if w.alerted],
            "series": series}
