"""Scores of each configuration: per query, per category, means with 95% bootstrap intervals, latency.

A thin layer over the metric engine that knows about queries' categories and runs' latencies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from searcheval.defaults import REPORT_METRICS
from searcheval.metrics.engine import Evaluation, Settings, evaluate
from searcheval.metrics.segments import query_segments, segment_order
from searcheval.metrics.stats import bootstrap_ci
from searcheval.types import Qrels, Query, RankedRun


@dataclass
class ConfigurationScores:
    configuration: str
    evaluation: Evaluation
    categories: dict[str, str]  # query id -> category
    means: dict[str, float | None]
    ci95: dict[str, tuple[float, float] | None]
    by_category: dict[str, dict[str, float | None]]
    latency_ms: dict[str, float | None]
    settings: Settings = field(default_factory=Settings)
    segments: dict[str, list[str]] = field(default_factory=dict)  # query id -> segment labels
    by_segment: dict[str, dict[str, float | None]] = field(default_factory=dict)
    failed: tuple[str, ...] = ()  # the queries that failed: left out of every mean

    @property
    def incomplete_means(self) -> str | None:
        """"5 queries failed: means over 295 of 300" when queries failed, else None: a mean over
        fewer queries is never shown as a plain mean."""
        if not self.failed:
            return None
        n = len(self.evaluation.query_ids)
        k = len(self.failed)
        if not n:
            return f"all {k} quer{'y' if k == 1 else 'ies'} failed: no mean"
        return f"{k} quer{'y' if k == 1 else 'ies'} failed: means over {n} of {n + k}"

    def group_means(self, group: str) -> dict[str, float | None]:
        """The means of a category, or of a segment (`words:4+`): what a per-category rule reads."""
        if group in self.by_category:
            return self.by_category[group]
        return self.by_segment.get(group, {})

    def segment_sizes(self) -> dict[str, int]:
        """Queries in each segment."""
        sizes: dict[str, int] = {}
        for labels in self.segments.values():
            for label in labels:
                sizes[label] = sizes.get(label, 0) + 1
        return {label: sizes[label] for label in sorted(sizes, key=segment_order)}

    def values(self, metric: str) -> dict[str, float]:
        """Per-query values of one metric (NaN where the query is left out)."""
        return dict(zip(self.evaluation.query_ids, self.evaluation.values[metric].tolist()))

    def to_dict(self) -> dict:
        """The per-configuration block of metrics.json."""
        return {
            "means": self.means,
            "ci95": {m: list(ci) if ci else None for m, ci in self.ci95.items()},
            "by_category": self.by_category,
            "by_segment": self.by_segment,
            "latency_ms": self.latency_ms,
            "queries": {"scored": len(self.evaluation.query_ids), "failed": len(self.failed),
                        "of": len(self.evaluation.query_ids) + len(self.failed)},
            "means_over": self.incomplete_means,  # None: every query answered
        }


def latency_summary(latency_ms: dict[str, float]) -> dict[str, float | None]:
    """p50, p95, p99 of the per-query latencies (numpy's linear interpolation)."""
    if not latency_ms:
        return {"p50": None, "p95": None, "p99": None}
    values = np.fromiter(latency_ms.values(), dtype=np.float64)
    p50, p95, p99 = np.percentile(values, [50, 95, 99])
    return {"p50": float(p50), "p95": float(p95), "p99": float(p99)}


def group_means(evaluation: Evaluation, groups: dict[str, list[str]]) -> dict[str, dict[str, float | None]]:
    """Means of every metric over the queries of each group (a query may be in several groups);
    a query left out of a metric (NaN) is left out of its group's mean too."""
    members: dict[str, list[int]] = {}
    for i, qid in enumerate(evaluation.query_ids):
        for group in groups.get(qid, ()):
            members.setdefault(group, []).append(i)
    out: dict[str, dict[str, float | None]] = {}
    for group, rows in members.items():
        index = np.asarray(rows, dtype=np.int64)
        out[group] = {}
        for name, arr in evaluation.values.items():
            part = arr[index]
            kept = part[~np.isnan(part)]
            out[group][name] = float(kept.mean()) if kept.size else None
    return out


def score_run(run: RankedRun, qrels: Qrels, queries: list[Query],
              metrics: tuple[str, ...] = REPORT_METRICS,
              settings: Settings = Settings(), *, seed: int = 0) -> ConfigurationScores:
    """Score one configuration over every golden query (a query it did not answer is empty), per
    category and per automatic segment (`searcheval.metrics.segments`). A query that failed
    (`run.errors`) is left out: a failure is never scored as an empty result."""
    failed = tuple(sorted(q.id for q in queries if q.id in run.errors))
    queries = [q for q in queries if q.id not in run.errors]
    query_ids = [q.id for q in queries]
    evaluation = evaluate(qrels, run.as_run(), list(metrics), settings, query_ids=query_ids)
    categories = {q.id: q.category for q in queries}
    by_category = group_means(evaluation, {q: [c] for q, c in categories.items()})
    segments = {q.id: query_segments(q) for q in queries}
    by_segment = group_means(evaluation, segments)
    return ConfigurationScores(
        configuration=run.configuration,
        evaluation=evaluation,
        categories=categories,
        means=evaluation.means,
        ci95={name: bootstrap_ci(arr, seed=seed) for name, arr in evaluation.values.items()},
        by_category={c: by_category[c] for c in sorted(by_category)},
        latency_ms=latency_summary(run.latency_ms),
        settings=settings,
        segments=segments,
        by_segment={s: by_segment[s] for s in sorted(by_segment, key=segment_order)},
        failed=failed,
    )
