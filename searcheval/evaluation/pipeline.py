"""The steps of one evaluation as plain functions; `tasks/` wraps each in a Prefect task.

load inputs -> validate -> seed catalog -> embed (cached) -> run configurations -> score -> gate
-> publish -> alert. Every function here is tested without Prefect.

Scale-out: the texts to embed are cut into batches (`text_batches`), each embedded on its own
(`embed_texts`, through the cache) and joined again (`index_collection`); the queries are cut into
shards (`query_shards`), each configuration runs per shard, and `merge_runs` puts the shards' runs
back together. Cutting changes nothing in the results: every query and every text is handled on
its own, in the same order.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg

from searcheval import progress, store
from searcheval.defaults import REPORT_METRICS
from searcheval.errors import InputError
from searcheval.evaluation.alerts import (Alert, agreement_reasons, coverage_reasons, gate_reasons,
                                         stale_reasons)
from searcheval.evaluation.baseline import Baseline, load_baseline
from searcheval.evaluation.gate import GateResult, check_gate
from searcheval.evaluation.report import EvaluationResult
from searcheval.evaluation.validation import (Finding, StaleJudgment, ValidationReport,
                                              fresh_judgments)
from searcheval.judging.agreement import agreement as judge_agreement
from searcheval.judging.judgments import Effective
from searcheval.judging.summary import judging_block
from searcheval.metrics.engine import Settings
from searcheval.metrics.scoring import ConfigurationScores, score_run
from searcheval.metrics.segments import query_segments
from searcheval.rankers.embeddings import CachedEmbedder, model_fingerprint, model_name
from searcheval.rankers.fusion import FusionParams
from searcheval.rankers.registry import run_configuration
from searcheval.types import Collection, Query, RankedRun


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
    return store.save_catalog(conn, collection.catalog_id, collection.resources)


@dataclass
class EmbeddedTexts:
    """What one embedding batch returns: one vector per text, in the order of its texts."""

    model: str
    fingerprint: str
    vectors: np.ndarray
    embedded: int  # distinct texts the model encoded
    from_cache: int  # distinct texts found in the cache


def _whole(value: object, at_least: int, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < at_least:
        raise InputError(f"expected a whole number >= {at_least}, got {value!r}", field=field)
    return value


def check_scale_out(shards: int, embed_batch: int) -> None:
    """Refuse a shard count or an embedding batch size below 1 before anything runs."""
    _whole(shards, 1, "shards")
    _whole(embed_batch, 1, "embed_batch")


def collection_texts(collection: Collection) -> list[str]:
    """The texts one evaluation embeds, each once: every resource's text, then every query's,
    in first-seen order."""
    texts = [r.text for r in collection.resources] + [q.text for q in collection.queries]
    return list(dict.fromkeys(texts))


def text_batches(texts: list[str], size: int) -> list[list[str]]:
    """`texts` cut, in order, into consecutive batches of `size` (the last may be shorter)."""
    _whole(size, 1, "embed_batch")
    return [texts[start:start + size] for start in range(0, len(texts), size)]


def embed_texts(conn: psycopg.Connection, texts: list[str],
                model_path: str | None = None) -> EmbeddedTexts:
    """One batch through the cache: only texts never seen before reach the model, and the model
    loads (once per process) only if there are any."""
    embedder = CachedEmbedder(conn, model_path)
    vectors = embedder.embed(texts)
    return EmbeddedTexts(embedder.model, embedder.fingerprint, vectors, embedder.embedded,
                         embedder.from_cache)


def join_batches(texts: list[str], batches: list[EmbeddedTexts], model: str,
                 fingerprint: str) -> dict[str, np.ndarray]:
    """text -> vector from the batches of `text_batches(texts, n)`, given in the same order.

    Every batch must come from the model files this process has (`fingerprint`): a worker with
    other model files would mix two embedding spaces."""
    for i, batch in enumerate(batches):
        if (batch.model, batch.fingerprint) != (model, fingerprint):
            raise InputError(f"batch {i} was embedded with {batch.model} (fingerprint "
                             f"{batch.fingerprint[:12]}), expected {model} ({fingerprint[:12]}): "
                             "every worker needs the same model files", field="model")
    counts = [len(batch.vectors) for batch in batches]
    if sum(counts) != len(texts):
        raise InputError(f"the batches hold {sum(counts)} vectors for {len(texts)} texts",
                         field="batches")
    vectors: dict[str, np.ndarray] = {}
    position = 0
    for batch in batches:
        for vector in batch.vectors:
            vectors[texts[position]] = vector
            position += 1
    return vectors


def _matrix(vectors: dict[str, np.ndarray], texts: list[str]) -> np.ndarray:
    if not texts:
        dims = len(next(iter(vectors.values()))) if vectors else 0
        return np.zeros((0, dims), dtype=np.float32)
    return np.stack([vectors[text] for text in texts]).astype(np.float32, copy=False)


def index_collection(conn: psycopg.Connection, collection: Collection, texts: list[str],
                     batches: list[EmbeddedTexts], model_path: str | None = None) -> Embedded:
    """The embedded batches made the document vectors of the catalog (one transaction: the
    catalog's vector set becomes exactly its resources) and the query vectors, in the order of
    `collection.queries`. The catalog must have been saved first."""
    model, fingerprint = model_name(model_path), model_fingerprint(model_path)
    vectors = join_batches(texts, batches, model, fingerprint)
    progress.start("indexing", len(collection.resources), "documents")
    documents = store.save_doc_vectors(conn, collection.catalog_id, model,
                                       [r.id for r in collection.resources],
                                       _matrix(vectors, [r.text for r in collection.resources]))
    progress.advance("indexing", len(collection.resources))
    progress.finish("indexing")
    stats = {"model": model, "documents": documents,
             "embedded": sum(b.embedded for b in batches),
             "from_cache": sum(b.from_cache for b in batches)}
    return Embedded(model=model, query_vectors=_matrix(vectors, [q.text for q in collection.queries]),
                    stats=stats)


@dataclass
class QueryShard:
    """A consecutive part of the golden queries and their vectors, run as one task."""

    number: int  # from 1
    of: int
    queries: list[Query]
    query_vectors: np.ndarray


def shard_bounds(count: int, shards: int) -> list[tuple[int, int]]:
    """[start, end) of at most `shards` consecutive, non-empty parts of `count` items whose sizes
    differ by at most one (the first ones are the larger); one empty part when `count` is 0."""
    _whole(shards, 1, "shards")
    _whole(count, 0, "count")
    parts = max(1, min(shards, count))
    size, extra = divmod(count, parts)
    bounds, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def query_shards(queries: list[Query], query_vectors: np.ndarray, shards: int) -> list[QueryShard]:
    """The queries (and their vectors, in the same order) in `shards` consecutive parts."""
    if len(query_vectors) != len(queries):
        raise InputError(f"expected one query vector per query ({len(queries)}), got "
                         f"{len(query_vectors)}", field="query_vectors")
    bounds = shard_bounds(len(queries), shards)
    return [QueryShard(i, len(bounds), list(queries[a:b]), query_vectors[a:b])
            for i, (a, b) in enumerate(bounds, start=1)]


def run_shard(conn: psycopg.Connection | None, configuration: str, collection: Collection,
              shard: QueryShard, model: str, k: int) -> RankedRun:
    """One configuration over one shard of the queries, `k` results per query. `conn` is needed by
    the configurations that read the database (`rankers.registry.needs_database`)."""
    run = run_configuration(configuration, conn, collection.catalog_id, collection.resources,
                            shard.queries, shard.query_vectors, model, k=k,
                            fusion=FusionParams(depth=k))
    progress.advance("searching", len(shard.queries))  # one report for every shard and configuration
    return run


def merge_runs(parts: list[RankedRun]) -> RankedRun:
    """The shards' runs of one configuration as one run: results and latencies of each part, in
    the order of the parts (so of the queries). Parts must not share a query."""
    if not parts:
        raise InputError("expected the runs of at least one shard", field="runs")
    configuration = parts[0].configuration
    results: dict[str, list[tuple[str, float]]] = {}
    latency: dict[str, float] = {}
    for i, part in enumerate(parts):
        if part.configuration != configuration:
            raise InputError(f"shard {i + 1} is a {part.configuration!r} run, expected "
                             f"{configuration!r}", field="configuration")
        shared = [q for q in part.results if q in results]
        if shared:
            raise InputError(f"shard {i + 1} repeats query {shared[0]!r} of an earlier shard",
                             field="results")
        results.update(part.results)
        latency.update(part.latency_ms)
    return RankedRun(configuration=configuration, results=results, latency_ms=latency)


def segments_of(queries: list[Query]) -> dict[str, list[str]]:
    """Each query's automatic segments (`searcheval.metrics.segments`)."""
    return {q.id: query_segments(q) for q in queries}


def fresh_collection(collection: Collection, report: ValidationReport) -> Collection:
    """The collection without its stale judgments: what scoring and coverage see."""
    return replace(collection, judgments=fresh_judgments(collection, report))


def with_judging_checks(report: ValidationReport, collection: Collection, effective: Effective,
                        floor: float) -> ValidationReport:
    """The validation report plus what the judgments' provenance tells: the pairs it finds stale
    that the suites cannot see (a recorded content hash that differs from the document's current
    one), and a warning when the judges' agreement (Krippendorff's alpha) is under `floor`
    (published and alerted like low coverage; it does not stop the run)."""
    seen = {(s.query_id, s.doc_id) for s in report.stale}
    extra = [StaleJudgment(q, d, reason) for (q, d), reason in sorted(effective.stale_pairs.items())
             if (q, d) not in seen]
    findings = list(report.findings)
    a = judge_agreement(effective.latest, {q.id: q.category for q in collection.queries},
                        collection.grade_scale, floor=floor)
    if a["below_floor"]:
        findings.append(Finding(
            "judgments", "agreement_floor", "warning",
            f"expected judges' agreement (Krippendorff's alpha, ordinal) >= {floor:g}; "
            f"{a['alpha']:.3f} over {a['items']} pair(s) graded by two or more judges",
            a["items"], [f"{d['query_id']}/{d['doc_id']} {d['grades']}"
                         for d in a["disagreements"][:5]], "grade",
            str(collection.sources.get("judgments", f"<{collection.name}>:judgments"))))
    if not extra and len(findings) == len(report.findings):
        return report
    return replace(report, stale=list(report.stale) + extra, findings=findings)


def judging_summary(runs: dict[str, RankedRun], collection: Collection, qrels: dict,
                    metrics: tuple[str, ...], settings: Settings, run_id: str, coverage: dict,
                    k: int, effective: Effective | None, floor: float) -> dict:
    """metrics.json's `judging` block: the rule, judges and staleness per judge, agreement,
    and per configuration judged@k, pool size and bounds (`searcheval.judging.summary`)."""
    agreement = None
    if effective is not None:
        agreement = judge_agreement(effective.latest, {q.id: q.category for q in collection.queries},
                                    collection.grade_scale, floor=floor)
    return judging_block(runs, qrels, [q.id for q in collection.queries], list(metrics), settings,
                         collection.grade_scale, run_id, coverage, k,
                         judgments=effective.summary() if effective is not None else None,
                         agreement=agreement,
                         latest=effective.latest if effective is not None else None)


def score_runs(runs: dict[str, RankedRun], collection: Collection, qrels: dict,
               metrics: tuple[str, ...] = REPORT_METRICS,
               settings: Settings = Settings()) -> dict[str, ConfigurationScores]:
    return {name: score_run(run, qrels, collection.queries, metrics, settings)
            for name, run in runs.items()}


def gate_scores(scores: dict[str, ConfigurationScores], baseline: Baseline | str | Path | None,
                tolerance: float | None = None) -> GateResult | None:
    """The gated configuration against the baseline (read by the preflight, or a path); None
    only when no baseline is given on purpose. A baseline whose configuration was not run is
    refused, never a silently open gate (the preflight refuses it before any work)."""
    if baseline is None:
        return None
    if not isinstance(baseline, Baseline):
        baseline = load_baseline(baseline)
    if baseline.configuration not in scores:
        raise InputError(f"the baseline gates {baseline.configuration!r}, which this run did not "
                         f"run (it ran {', '.join(scores) or 'nothing'})", file=baseline.path,
                         field="configuration")
    return check_gate(baseline, scores[baseline.configuration], tolerance=tolerance)


def publish_history(conn: psycopg.Connection, result: EvaluationResult) -> None:
    """One run row, its metric rows, per-query rows and segment rows, in one transaction."""
    rows = (result.run_row(), result.metric_rows(), result.query_rows(), result.segment_rows())
    count = 1 + sum(len(part) for part in rows[1:])
    progress.start("storing", count, "rows")
    store.save_evaluation(conn, *rows)
    progress.advance("storing", count)
    progress.finish("storing")


def alert_for(result: EvaluationResult) -> Alert | None:
    """What to alert on: a tripped gate, a coverage floor missed, stale judgments."""
    reasons = gate_reasons(result.gate) + coverage_reasons(result.coverage, result.judging) \
        + stale_reasons(result.validation) + agreement_reasons(result.judging)
    if not reasons:
        return None
    return Alert(run_id=result.run_id, reasons=reasons, where=None)
