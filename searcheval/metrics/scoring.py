"""Scores of each configuration: per query, per category, means with 95% bootstrap intervals, latency.

A thin layer over the metric engine that knows about queries' categories and runs' latencies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from searcheval.defaults import REPORT_METRICS
from searcheval.metrics.engine import Evaluation, Settings, evaluate
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

    def values(self, metric: str) -> dict[str, float]:
        """Per-query values of one metric (NaN where the query is left out)."""
        return dict(zip(self.evaluation.query_ids, self.evaluation.values[metric].tolist()))

    def to_dict(self) -> dict:
        """The per-configuration block of metrics.json."""
        return {
            "means": self.means,
            "ci95": {m: list(ci) if ci else None for m, ci in self.ci95.items()},
            "by_category": self.by_category,
            "latency_ms": self.latency_ms,
        }


def latency_summary(latency_ms: dict[str, float]) -> dict[str, float | None]:
    if not latency_ms:
        return {"p50": None, "p95": None}
    values = np.fromiter(latency_ms.values(), dtype=np.float64)
    p50, p95 = np.percentile(values, [50, 95])
    return {"p50": float(p50), "p95": float(p95)}


def score_run(run: RankedRun, qrels: Qrels, queries: list[Query],
              metrics: tuple[str, ...] = REPORT_METRICS,
              settings: Settings = Settings(), *, seed: int = 0) -> ConfigurationScores:
    """Score one configuration over every golden query (a query it did not answer is empty)."""
    query_ids = [q.id for q in queries]
    evaluation = evaluate(qrels, run.as_run(), list(metrics), settings, query_ids=query_ids)
    categories = {q.id: q.category for q in queries}
    by_category: dict[str, dict[str, float | None]] = {}
    cats = np.array([categories[q] for q in query_ids])
    for category in sorted(set(cats)):
        mask = cats == category
        by_category[category] = {}
        for name, arr in evaluation.values.items():
            kept = arr[mask][~np.isnan(arr[mask])]
            by_category[category][name] = float(kept.mean()) if kept.size else None
    return ConfigurationScores(
        configuration=run.configuration,
        evaluation=evaluation,
        categories=categories,
        means=evaluation.means,
        ci95={name: bootstrap_ci(arr, seed=seed) for name, arr in evaluation.values.items()},
        by_category=by_category,
        latency_ms=latency_summary(run.latency_ms),
        settings=settings,
    )
