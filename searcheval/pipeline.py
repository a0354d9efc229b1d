"""The steps of one evaluation as plain functions; `tasks/` wraps each in a Prefect task.

load inputs -> validate -> seed catalog -> embed (cached) -> run configurations -> score -> gate
-> publish -> alert. Every function here is tested without Prefect.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg

from searcheval import store
from searcheval.alerts import Alert, coverage_reasons, gate_reasons, stale_reasons
from searcheval.catalog import Collection
from searcheval.dense import index_documents
from searcheval.embeddings import CachedEmbedder
from searcheval.gate import GateResult, check_gate, load_baseline
from searcheval.metrics import Settings
from searcheval.report import EvaluationResult
from searcheval.runs import RankedRun
from searcheval.scoring import DEFAULT_REPORT_METRICS, ConfigurationScores, score_run


class GateTripped(Exception):
    """The served configuration regressed against the baseline (exit 1)."""

    def __init__(self, message: str, table: str = "") -> None:
        super().__init__(message)
        self.table = table


@dataclass
class Embedded:
    model: str
    query_vectors: np.ndarray
    stats: dict  # {"model", "embedded", "from_cache", "documents"}


def new_run_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def seed_catalog(conn: psycopg.Connection, collection: Collection) -> dict:
    """The catalog snapshot in Postgres (one transaction): counts added/changed/removed."""
    return store.save_catalog(conn, collection.name, collection.resources)


def embed_collection(conn: psycopg.Connection, collection: Collection,
                     model_path: str | None = None) -> Embedded:
    """Document vectors for dense search and one vector per query, all through the cache: only
    texts never seen before reach the model, and the model loads only if there are any."""
    embedder = CachedEmbedder(conn, model_path)
    stats = index_documents(conn, collection.name, embedder, collection.resources)
    queries = embedder.embed([q.text for q in collection.queries])
    stats = {"model": embedder.model, "documents": stats["documents"],
             "embedded": embedder.embedded, "from_cache": embedder.from_cache}
    return Embedded(model=embedder.model, query_vectors=queries, stats=stats)


def score_runs(runs: dict[str, RankedRun], collection: Collection, qrels: dict,
               metrics: tuple[str, ...] = DEFAULT_REPORT_METRICS,
               settings: Settings = Settings()) -> dict[str, ConfigurationScores]:
    return {name: score_run(run, qrels, collection.queries, metrics, settings)
            for name, run in runs.items()}


def gate_scores(scores: dict[str, ConfigurationScores], baseline_path: str | Path | None,
                tolerance: float | None = None) -> GateResult | None:
    """The gated configuration against the baseline; None when no baseline is given."""
    if baseline_path is None:
        return None
    baseline = load_baseline(baseline_path)
    if baseline.configuration not in scores:
        return None  # the gated configuration was not run (e.g. a bm25-only manual run)
    return check_gate(baseline, scores[baseline.configuration], tolerance=tolerance)


def publish_history(conn: psycopg.Connection, result: EvaluationResult) -> None:
    """One run row, its metric rows and per-query rows, in one transaction."""
    store.save_evaluation(conn, result.run_row(), result.metric_rows(), result.query_rows())


def alert_for(result: EvaluationResult) -> Alert | None:
    """What to alert on: a tripped gate, a coverage floor missed, stale judgments."""
    reasons = gate_reasons(result.gate) + coverage_reasons(result.coverage) \
        + stale_reasons(result.validation)
    if not reasons:
        return None
    return Alert(run_id=result.run_id, reasons=reasons, where=None)
