"""The steps of one evaluation as plain functions; `tasks/` wraps each in a Prefect task.

load inputs -> validate -> seed catalog -> embed (cached) -> run configurations -> score -> gate
-> publish -> alert. Every function here is tested without Prefect.

Scale-out: the texts to embed are cut into batches (`text_batches`), each embedded on its own
(`embed_texts`, through the cache) and joined again (`index_collection`); the queries are cut into
shards (`query_shards`; `configuration_shards` per configuration, which on a cluster also cuts
an http configuration's limits among its shards), each configuration runs per shard, and
`merge_runs` puts the shards' runs back together. Cutting changes nothing in the results: every
query and every text is handled on its own, in the same order.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import psycopg

from searcheval import progress, store
from searcheval.defaults import REPORT_METRICS, SNAPSHOT_DEPTH
from searcheval.errors import InputError
from searcheval.evaluation.alerts import (
    Alert,
    agreement_reasons,
    audit_reasons,
    coverage_reasons,
    failure_reasons,
    gate_reasons,
    stale_reasons,
)
from searcheval.evaluation.baseline import Baseline, load_baseline
from searcheval.evaluation.gate import GateResult, Rescored, check_gate, judgment_changes
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
from searcheval.rankers.configs import Configuration
from searcheval.rankers.limits import Lanes, lane_shards
from searcheval.rankers.registry import (RunContext, lane_count, reusable_siblings,
                                         run_configuration, sibling_key, still_needs_database)
from searcheval.types import Collection, Query, RankedRun


@dataclass
class Embedded:
    model: str
    query_vectors: np.ndarray
    stats: dict  # {"model", "embedded", "from_cache", "documents"}
    seconds: float = 0.0  # time of the embedding batches (cache look-ups and model included)
    model_seconds: float = 0.0  # of it, the batches' time in the model itself, summed


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
    seconds: float = 0.0  # time of this batch, cache look-ups and model included
    started: float = 0.0  # when it started (epoch seconds): batches may run side by side
    model_seconds: float = 0.0  # of `seconds`, the time in the model itself (CachedEmbedder)


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
    started, wall = time.perf_counter(), time.time()
    embedder = CachedEmbedder(conn, model_path)
    vectors = embedder.embed(texts)
    return EmbeddedTexts(embedder.model, embedder.fingerprint, vectors, embedder.embedded,
                         embedder.from_cache, time.perf_counter() - started, wall,
                         embedder.model_seconds)


def embedding_seconds(batches: list[EmbeddedTexts]) -> float:
    """The wall time of the embedding stage: from the first batch's start to the last one's end
    (batches run side by side, so their own times do not add up)."""
    if not batches:
        return 0.0
    return max(b.started + b.seconds for b in batches) - min(b.started for b in batches)


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
    documents = store.save_doc_vectors(conn, collection.catalog_id, model,  # rows, not copied
                                       [r.id for r in collection.resources],
                                       [vectors[r.text] for r in collection.resources])
    progress.advance("indexing", len(collection.resources))
    progress.finish("indexing")
    stats = {"model": model, "documents": documents,
             "embedded": sum(b.embedded for b in batches),
             "from_cache": sum(b.from_cache for b in batches)}
    return Embedded(model=model, query_vectors=_matrix(vectors, [q.text for q in collection.queries]),
                    stats=stats, seconds=embedding_seconds(batches),
                    model_seconds=sum(b.model_seconds for b in batches))


@dataclass
class QueryShard:
    """A consecutive part of the golden queries and their vectors, run as one task; `lanes`: the
    part of its configuration's limits it owns, when the shards do not share a process."""

    number: int  # from 1
    of: int
    queries: list[Query]
    query_vectors: np.ndarray
    lanes: Lanes | None = None


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


def configuration_shards(configuration: Configuration, queries: list[Query],
                         query_vectors: np.ndarray, shards: int, *,
                         together: bool) -> list[QueryShard]:
    """The shards one configuration runs in. `together`: the shards run in one process (threads)
    and share its limits: `query_shards`. Otherwise a configuration whose limits hold across its
    shards (`rankers.registry.lane_count`: http's concurrency and rate_limit) runs in at most
    `concurrency` shards, each owning a part of its limits, with the queries in proportion
    (`rankers.limits.lane_shards`): the shards' requests stay within the limits wherever they
    run, without talking to each other."""
    count = lane_count(configuration)
    if together or count is None:
        return query_shards(queries, query_vectors, shards)
    _whole(shards, 1, "shards")
    if len(query_vectors) != len(queries):
        raise InputError(f"expected one query vector per query ({len(queries)}), got "
                         f"{len(query_vectors)}", field="query_vectors")
    plan = lane_shards(len(queries), shards, count)
    out, start = [], 0
    for number, (lanes, size) in enumerate(plan, start=1):
        end = start + size
        out.append(QueryShard(number, len(plan), list(queries[start:end]),
                              query_vectors[start:end], lanes))
        start = end
    return out


def shard_context(conn: psycopg.Connection | None, collection: Collection, shard: QueryShard,
                  model: str, secrets: dict[str, str] | None = None,
                  siblings: dict[str, RankedRun] | None = None) -> RunContext:
    return RunContext(conn=conn, catalog=collection.catalog_id, resources=collection.resources,
                      model=model, secrets=secrets or {}, lanes=shard.lanes,
                      siblings=siblings or {})


def reuse_order(selected: list[Configuration]) -> tuple[list[Configuration], list[Configuration]]:
    """The configurations in two waves: first every one no other one takes runs from and those
    that take none, then those that take a sibling's runs for a component (`fused` after `bm25`
    and `dense` with the same sha256: `rankers.registry.reusable_siblings`)."""
    later = [c for c in selected if reusable_siblings(c, selected)]
    return [c for c in selected if c not in later], later


def shard_siblings(configuration: Configuration, selected: list[Configuration],
                   runs: dict[str, RankedRun], shard: QueryShard, k: int) -> dict[str, RankedRun]:
    """The finished runs of `configuration`'s siblings (`rankers.registry.reusable_siblings`)
    over the shard's queries, by `sibling_key`: what its shard takes instead of searching. Each
    run's usage is the shard's share of its whole."""
    out: dict[str, RankedRun] = {}
    ids = [q.id for q in shard.queries]
    for sibling in reusable_siblings(configuration, selected):
        run = runs.get(sibling.name)
        if run is None:
            continue
        share = len(ids) / max(1, len(run.results) + len(run.errors))
        out[sibling_key(sibling, k)] = RankedRun(
            configuration=sibling.name,
            results={q: run.results[q] for q in ids if q in run.results},
            latency_ms={q: run.latency_ms[q] for q in ids if q in run.latency_ms},
            errors={q: run.errors[q] for q in ids if q in run.errors},
            timing={q: run.timing[q] for q in ids if q in run.timing},
            usage={key: value * share for key, value in run.usage.items()})
    return out


def shard_needs_database(configuration: Configuration, collection: Collection,
                         shard: QueryShard, k: int,
                         siblings: dict[str, RankedRun] | None = None) -> bool:
    """Whether the shard must open a connection: not when the siblings hold the runs of every
    component that reads the database."""
    context = shard_context(None, collection, shard, "", siblings=siblings)
    return still_needs_database(configuration, context, shard.queries, k)


def run_shard(conn: psycopg.Connection | None, configuration: Configuration,
              collection: Collection, shard: QueryShard, model: str, k: int,
              secrets: dict[str, str] | None = None,
              siblings: dict[str, RankedRun] | None = None) -> RankedRun:
    """One resolved configuration over one shard of the queries, `k` results per query. `conn` is
    needed by the configurations that read the database (`rankers.registry.needs_database`);
    `secrets` are the Prefect Secret blocks it reads, resolved by the task layer; `siblings`
    the runs of other configurations it may take for a component (`shard_siblings`)."""
    context = shard_context(conn, collection, shard, model, secrets, siblings)
    run = run_configuration(configuration, context, shard.queries, shard.query_vectors, k=k)
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
    errors: dict[str, dict] = {}
    timing: dict[str, dict] = {}
    usage: dict[str, float] = {}
    for i, part in enumerate(parts):
        if part.configuration != configuration:
            raise InputError(f"shard {i + 1} is a {part.configuration!r} run, expected "
                             f"{configuration!r}", field="configuration")
        shared = [q for q in [*part.results, *part.errors] if q in results or q in errors]
        if shared:
            raise InputError(f"shard {i + 1} repeats query {shared[0]!r} of an earlier shard",
                             field="results")
        results.update(part.results)
        latency.update(part.latency_ms)
        errors.update(part.errors)
        timing.update(part.timing)
        for key, value in part.usage.items():
            usage[key] = usage.get(key, 0.0) + value
    return RankedRun(configuration=configuration, results=results, latency_ms=latency,
                     errors=errors, timing=timing, usage=usage)


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
    for judge, audit in sorted((effective.model_judges or {}).items()):
        if not audit["counts"]:  # its grades are reported, not counted (judging.counting)
            a = audit["agreement"]
            findings.append(Finding(
                "judgments", "model_audit", "warning",
                f"expected the human audit of model judge {judge} to hold (at least "
                f"{audit['policy']['minimum']} audited pairs, alpha >= "
                f"{audit['policy']['floor']:g}); {audit['reason']}: its {audit['graded']} "
                "grade(s) are reported, not counted", a.get("items") or 0, [], "grade",
                f"judge:{judge}"))
    if not extra and len(findings) == len(report.findings):
        return report
    return replace(report, stale=list(report.stale) + extra, findings=findings)


def judging_summary(runs: dict[str, RankedRun], collection: Collection, qrels: dict,
                    metrics: tuple[str, ...], settings: Settings, run_id: str, coverage: dict,
                    k: int, effective: Effective | None, floor: float, *,
                    verdict: GateResult | None = None, baseline=None,
                    tolerance: float | None = None, candidate: str | None = None) -> dict:
    """metrics.json's `judging` block: the rule, judges and staleness per judge, agreement,
    and per configuration judged@k, pool size and bounds (`searcheval.judging.summary`); what
    each configuration's judged top k rests on (human, import, model: which judge), and, when
    model grades count, its means without them and whether the gate's verdict would differ."""
    agreement = None
    if effective is not None:
        agreement = judge_agreement(effective.latest, {q.id: q.category for q in collection.queries},
                                    collection.grade_scale, floor=floor)
    sources = effective.rests_on if effective is not None else None
    without = None
    if sources and any(str(sources.get((q, d), "")).startswith("model:")
                       for q, docs in qrels.items() for d in docs):
        from searcheval.judging.summary import without_model

        other = score_runs(runs, collection, without_model(qrels, sources), metrics, settings)
        without = {"means": {name: s.means for name, s in other.items()}, "gate": None}
        if verdict is not None and baseline is not None:
            try:
                again = gate_scores(other, baseline, tolerance, candidate)
            except InputError:  # the gate itself refused it: the verdict says why already
                again = None
            if again is not None:
                without["gate"] = {"passed": again.passed,
                                   "differs": again.passed != verdict.passed,
                                   "tripped": [t.describe() for t in again.tripped]}
    return judging_block(runs, qrels, [q.id for q in collection.queries], list(metrics), settings,
                         collection.grade_scale, run_id, coverage, k,
                         judgments=effective.summary() if effective is not None else None,
                         agreement=agreement,
                         latest=effective.latest if effective is not None else None,
                         sources=sources, without=without)


def score_runs(runs: dict[str, RankedRun], collection: Collection, qrels: dict,
               metrics: tuple[str, ...] = REPORT_METRICS,
               settings: Settings = Settings()) -> dict[str, ConfigurationScores]:
    return {name: score_run(run, qrels, collection.queries, metrics, settings)
            for name, run in runs.items()}


def configuration_spread(scores: dict[str, ConfigurationScores], metric: str
                         ) -> tuple[float | None, str]:
    """The spread of per-query differences between this run's configurations (every pair)."""
    from itertools import combinations

    from searcheval.metrics.stats import pooled_sd

    names = [n for n in scores if metric in scores[n].evaluation.values]
    sets = [scores[b].evaluation.values[metric] - scores[a].evaluation.values[metric]
            for a, b in combinations(names, 2)
            if scores[a].evaluation.query_ids == scores[b].evaluation.query_ids]
    sd, used = pooled_sd(sets)
    return sd, f"the differences between this run's configurations ({', '.join(names)})"


def history_spread(conn: psycopg.Connection, dataset: str | None, metric: str,
                   runs: int = 20) -> tuple[float | None, str]:
    """The spread of per-query differences seen in the history of `dataset` (topic-set-size
    design): between the configurations of each of the last `runs` runs, and between consecutive
    runs of each configuration. Pairs that did not differ at all are left out."""
    from itertools import combinations

    from searcheval.metrics.stats import pooled_sd
    from searcheval.store import snapshots

    if dataset is None:
        return None, ""
    rows = snapshots.find_runs(conn, n=runs, dataset=dataset)
    values: list[dict[str, dict[str, float]]] = []  # per run: configuration -> query -> value
    for run in rows:
        per: dict[str, dict[str, float]] = {}
        for r in store.run_query_results(conn, run["run_id"]):
            if r["metric"] == metric and r["value"] is not None:
                per.setdefault(r["configuration"], {})[r["query_id"]] = r["value"]
        values.append(per)

    def differences(x: dict[str, float], y: dict[str, float]) -> np.ndarray:
        shared = sorted(set(x) & set(y))
        return np.array([y[q] - x[q] for q in shared], dtype=np.float64)

    sets = [differences(per[a], per[b]) for per in values for a, b in combinations(sorted(per), 2)]
    sets += [differences(older[c], newer[c]) for newer, older in zip(values, values[1:])
             for c in newer if c in older]
    sd, used = pooled_sd(sets)
    if sd is None:
        return None, ""
    return sd, (f"the history of {dataset}: {used} pairs of configurations and runs over the "
                f"last {len(values)} runs")


@dataclass
class Today:
    """What the gate needs to compare like with like: today's effective grades (`qrels`, the
    pairs' judges), the judgment set's record, the golden queries, the scoring settings and the
    retrieval depth (`gate_inputs`)."""

    qrels: dict[str, dict[str, int]]
    judges: dict[tuple[str, str], str]
    record: dict
    queries: list[Query]
    settings: Settings
    depth: int | None
    judgment_set: str | None
    counted: str | tuple[str, ...] = "all"
    rule: str = "median"


def gate_inputs(collection: Collection, qrels: dict, effective: Effective | None,
                settings: Settings, depth: int | None) -> Today:
    """`Today` from the run's fresh collection, its qrels and effective judgments."""
    from searcheval.judging.judgments import judgment_set

    judges = {(j.query_id, j.doc_id): j.judge or "-" for j in
              (effective.judgments if effective is not None else [])}
    return Today(qrels=qrels, judges=judges,
                 record=effective.record() if effective is not None else {},
                 queries=list(collection.queries), settings=settings, depth=depth,
                 judgment_set=judgment_set(collection),
                 counted=effective.counted if effective is not None else "all",
                 rule=effective.rule.name if effective is not None else "median")


def _exact_metrics(metrics, snapshot_depth: int, depth: int | None) -> tuple[list, list]:
    """Which metrics the stored lists (cut at `snapshot_depth`) re-score exactly: a cutoff within
    it, or no cutoff and a retrieval depth within it."""
    from searcheval.metrics.engine import parse_metric

    exact, not_exact = [], []
    for name in metrics:
        k = parse_metric(name).k
        ok = (k is not None and k <= snapshot_depth) or (k is None and depth is not None
                                                          and depth <= snapshot_depth)
        (exact if ok else not_exact).append(name)
    return exact, not_exact


def judgments_then(conn: psycopg.Connection, catalog: str, at: datetime, rule: str,
                   counted, queries: set[str]) -> dict[tuple[str, str], int]:
    """The effective grades as they were at `at`: the rows recorded by then and not yet
    retracted (rows are never overwritten), through the same rule and sources; staleness is
    not replayed."""
    from searcheval.judging.judgments import effective_judgments, parse_rule
    from searcheval.store import judgments as jstore

    rows = [r for r in jstore.load_judgment_rows(conn, catalog, include_retracted=True)
            if r.query_id in queries
            and (r.recorded_at is None or r.recorded_at <= at)
            and (r.retracted_at is None or r.retracted_at > at)
            and (r.seed or counted == "all" or (counted != "dataset" and r.source in counted))]
    rows = [replace(r, retracted_at=None) for r in rows]
    effective = effective_judgments(rows, parse_rule(rule), [], catalog=False)
    return effective.grades()


def rescore_baseline(conn: psycopg.Connection, baseline: Baseline, today: Today) -> Rescored:
    """The baseline under today's judgments, from its run's ranked lists in Postgres: each query
    the baseline scored, its stored list scored again with today's grades, the same settings
    and metrics. Where that cannot be done (no run named, the run not in this history, its lists
    pruned or cut above the retrieval depth) the recorded values stand and the note says why.
    Unchanged judgments (the same fingerprint) need no re-scoring."""
    from searcheval.judging.judgments import grades_fingerprint
    from searcheval.store import snapshots

    recorded = dict(baseline.metrics)
    then_fp = (baseline.judgments or {}).get("fingerprint")
    now_fp = (today.record or {}).get("fingerprint")
    if then_fp and now_fp and then_fp == now_fp:
        return Rescored(baseline, recorded, status="judgments unchanged",
                        note="judgments unchanged since the baseline")
    row = snapshots.load_run(conn, baseline.from_run) if baseline.from_run else None
    changes: dict = {}
    if row is not None and today.judgment_set:
        at = row.get("finished_at") or row.get("started_at")
        grades_now = {(q, d): g for q, docs in today.qrels.items() for d, g in docs.items()}
        then = judgments_then(conn, today.judgment_set, at, today.rule, today.counted,
                              {q.id for q in today.queries})
        if then_fp is None or grades_fingerprint(then) == then_fp:
            changes = judgment_changes(then, grades_now, today.judges)
    if not changes and then_fp and now_fp and then_fp != now_fp:
        a, b = baseline.judgments, today.record
        changes = {"unknown": f"{a.get('pairs', 0)} graded pairs then, {b.get('pairs', 0)} now "
                              f"(fingerprint {then_fp[:19]} -> {now_fp[:19]})"}
    if not baseline.from_run:
        return Rescored(baseline, recorded, note="the baseline names no run: compared with its "
                        "values as recorded", judgments=changes)
    if row is None:
        return Rescored(baseline, recorded, judgments=changes,
                        note=f"the baseline's run {baseline.from_run} is not in this history: "
                             "compared with its values as recorded")
    if row.get("snapshot_pruned_at") is not None or row.get("snapshot_depth") is None:
        return Rescored(baseline, recorded, judgments=changes,
                        note=f"the ranked lists of the baseline's run {baseline.from_run} were "
                             "pruned: compared with its values as recorded, under the "
                             "judgments of then")
    depth = (baseline.conventions or {}).get("depth") or today.depth
    exact, not_exact = _exact_metrics(list(baseline.metrics), row["snapshot_depth"], depth)
    if not exact:
        return Rescored(baseline, recorded, judgments=changes,
                        note=f"the baseline's run {baseline.from_run} kept its lists to depth "
                             f"{row['snapshot_depth']} only: compared as recorded")
    lists = snapshots.load_ranked_results(conn, baseline.from_run, baseline.configuration)
    answered = [q for q in today.queries if q.id in baseline.per_query] if baseline.per_query \
        else list(today.queries)
    run = RankedRun(configuration=baseline.configuration,
                    results={q.id: [(d, s) for d, s, _ in lists.get(q.id, [])] for q in answered})
    scored = score_run(run, today.qrels, answered, tuple(exact), today.settings)
    per_query = {q: dict(v) for q, v in baseline.per_query.items()}
    for metric in exact:
        for qid, value in scored.values(metric).items():
            per_query.setdefault(qid, {})[metric] = None if np.isnan(value) else float(value)
    means = {**recorded, **{m: scored.means[m] for m in exact if scored.means.get(m) is not None}}
    note = (f"baseline re-scored under today's judgments from the ranked lists of run "
            f"{baseline.from_run}")
    if not_exact:
        note += (f"; {', '.join(not_exact)} as recorded (lists kept to depth "
                 f"{row['snapshot_depth']})")
    return Rescored(replace(baseline, metrics=means, per_query=per_query), recorded,
                    rescored={m: means[m] for m in exact if m in means}, status="re-scored",
                    note=note, judgments=changes)


def gate_scores(scores: dict[str, ConfigurationScores], baseline: Baseline | str | Path | None,
                tolerance: float | None = None,
                configuration: str | None = None,
                spread: dict[str, tuple[float | None, str]] | None = None,
                rescored: Rescored | None = None) -> GateResult | None:
    """`configuration` (default: the baseline's) against the baseline (read by the preflight, or
    a path); None only when no baseline is given on purpose. A gated configuration that was not
    run is refused, never a silently open gate (the preflight refuses it before any work).
    `spread` (metric -> (sd, source), e.g. `history_spread`) feeds the minimum detectable effect;
    a metric without one takes the spread between this run's configurations."""
    if baseline is None:
        return None
    if not isinstance(baseline, Baseline):
        baseline = load_baseline(baseline)
    gated = configuration or baseline.configuration
    if gated not in scores:
        raise InputError(f"the baseline gates {gated!r}, which this run did not run (it ran "
                         f"{', '.join(scores) or 'nothing'})", file=baseline.path,
                         field="configuration")
    spread = dict(spread or {})
    for metric in baseline.metrics:
        if not (spread.get(metric) or (None,))[0] and metric in scores[gated].means:
            estimate = configuration_spread(scores, metric)
            if estimate[0]:
                spread[metric] = estimate
    if gated == baseline.configuration:
        return check_gate(baseline, scores[gated], tolerance=tolerance, spread=spread,
                          rescored=rescored)
    # a candidate against the values the baseline holds for the served configuration: the
    # verdict is the candidate's
    result = check_gate(baseline, replace(scores[gated], configuration=baseline.configuration),
                        tolerance=tolerance, spread=spread, rescored=rescored)
    return replace(result, configuration=gated)


def failures_of(runs: dict[str, RankedRun], configurations: list[Configuration],
                queries: int) -> dict:
    """The failed queries of each configuration, and which configurations failed more queries
    than they allow (`max_failed_queries`, `max_failed_share`): metrics.json's `failures`."""
    by_name = {c.name: c for c in configurations}
    out: dict = {"configurations": {}, "incomplete": []}
    for name, run in runs.items():
        allowed = by_name[name].allowed_failures(queries) if name in by_name else 0
        entry = {"failed": len(run.errors), "allowed": allowed, "queries": queries,
                 "errors": run.errors,
                 "not_sent": sum(1 for e in run.errors.values() if e.get("not_sent")),
                 # down: it answered no query at all (unreachable, refusing, timing out)
                 "down": bool(queries) and len(run.errors) >= queries and not run.results}
        if name in by_name:
            entry["kind"] = by_name[name].kind
        if name in by_name and by_name[name].kind == "http":
            from searcheval.rankers.http import endpoint

            entry["endpoint"] = endpoint(by_name[name])
        out["configurations"][name] = entry
        if len(run.errors) > allowed:
            out["incomplete"].append(name)
    return out


def incomplete_message(failures: dict) -> str:
    """One line: which configurations are incomplete, and the first failure of each."""
    from searcheval.evaluation.alerts import incomplete_summary

    parts = [incomplete_summary(name, failures["configurations"][name])
             for name in failures["incomplete"]]
    return "run incomplete, not gated: " + "; ".join(parts)


def what_ran(configurations, selected: list[Configuration]) -> dict:
    """The resolved configurations that ran (and those they name), with their hashes."""
    ran: dict[str, dict] = {}

    def add(c: Configuration) -> None:
        if c.name not in ran:
            ran[c.name] = c.resolved()
            for component in c.components:
                add(component)

    for c in selected:
        add(c)
    return {"configurations_file": configurations.file, "served": configurations.served,
            "configurations": ran}


def publish_history(conn: psycopg.Connection, result: EvaluationResult,
                    runs: dict[str, RankedRun] | None = None, qrels: dict | None = None) -> int:
    """One run row, its metric rows, per-query rows and segment rows, the record of what ran
    (migration 003), what its document lookups returned (migration 008) and (given `runs`) its
    snapshot: the ranked lists to `result.snapshot_depth` (default SNAPSHOT_DEPTH) with the grade
    each document had in `qrels`, all in one transaction. Returns the snapshot rows written."""
    from searcheval.store import snapshots

    code = (result.what_ran or {}).get("code") or {}
    failed = {n: f["failed"] for n, f in
              ((result.failures or {}).get("configurations") or {}).items()}
    rows = [{"name": name, "kind": c["kind"], "sha256": c["sha256"], "served": c["served"],
             "resolved": c, "failed_queries": failed.get(name, 0)}
            for name, c in ((result.what_ran or {}).get("configurations") or {}).items()]
    # checked by the preflight (>= 1); store.snapshots refuses any other value
    depth = SNAPSHOT_DEPTH if result.snapshot_depth is None else result.snapshot_depth
    parts = (result.metric_rows(), result.query_rows(), result.segment_rows())
    count = 1 + sum(len(part) for part in parts)
    progress.start("storing", count, "rows")
    with conn.transaction():
        store.save_evaluation(conn, result.run_row(), *parts,
                              what_ran={"git_commit": code.get("commit"),
                                        "git_dirty": code.get("dirty"),
                                        "incomplete": bool(result.incomplete),
                                        "what_ran": result.what_ran},
                              configuration_rows=rows)
        progress.advance("storing", count)
        progress.finish("storing")
        with conn.cursor() as cur:
            snapshots.set_run_identity(cur, result.run_id, dataset=result.dataset,
                                       label=result.label, kind=result.kind,
                                       depth=None if runs is None else depth)
            save_looked_up(cur, result)
            if runs is None:
                return 0
            result.snapshot_depth = depth
            return snapshots.write_ranked_results(cur, result.run_id, runs, qrels or {}, depth)


def save_looked_up(cur: psycopg.Cursor, result: EvaluationResult) -> None:
    """What the run's lookups returned: per configuration (the diff's titles), and as one more
    report of each document's version (staleness, the pool, the rating page)."""
    from searcheval.judging.versions import record_versions
    from searcheval.store import documents

    if result.documents:
        documents.write_run_documents(cur, result.run_id, result.documents)
    if result.observed is not None and result.judgment_set:
        record_versions(cur, result.judgment_set, result.observed, result.run_id)


def model_sha256(model_path: str | None = None) -> str | None:
    """The hash of the embedding model's files (weights included), or None without one."""
    try:
        return model_fingerprint(model_path)
    except (InputError, OSError):
        return None


def alert_for(result: EvaluationResult) -> Alert | None:
    """What to alert on: a tripped gate, a coverage floor missed, stale judgments."""
    reasons = gate_reasons(result.gate) + coverage_reasons(result.coverage, result.judging) \
        + stale_reasons(result.validation) + agreement_reasons(result.judging) \
        + audit_reasons(result.judging) + failure_reasons(result.failures)
    if not reasons:
        return None
    from searcheval.evaluation.diff import worst_lines

    quoted = result.candidate_diff or result.diff  # a candidate's own changes come first
    return Alert(run_id=result.run_id, reasons=reasons, where=None,
                 worst=worst_lines(quoted) if quoted else [])


def diff_configuration(result: EvaluationResult) -> str | None:
    """Which configuration a run diffs against the previous run: the gated one when it ran."""
    if result.gate is not None and result.gate.configuration in result.scores:
        return result.gate.configuration
    from searcheval.defaults import GATED_CONFIGURATION

    if GATED_CONFIGURATION in result.scores:
        return GATED_CONFIGURATION
    return next(iter(result.scores), None)


def _answered_nothing(result: EvaluationResult, configuration: str) -> bool:
    """A configuration that answered no query (its backend down) has no list to diff."""
    f = ((result.failures or {}).get("configurations") or {}).get(configuration) or {}
    return bool(f.get("down"))


def diff_candidate(conn: psycopg.Connection, result: EvaluationResult) -> dict | None:
    """A candidate run's candidate against its served configuration (A = served, B = candidate),
    from the snapshot just published; None for a run without a candidate. Sets
    `result.candidate_diff`."""
    from searcheval.evaluation.diff import configurations_diff

    side = result.candidate or {}
    if not side.get("candidate") or not side.get("served") \
            or _answered_nothing(result, side["candidate"]) \
            or _answered_nothing(result, side["served"]):
        return None
    result.candidate_diff = configurations_diff(conn, result.run_id, side["served"],
                                                side["candidate"])
    return result.candidate_diff


def diff_with_previous(conn: psycopg.Connection, result: EvaluationResult) -> dict | None:
    """The published run against the previous run of its dataset (same configuration); None
    when there is no previous run. Sets `result.diff`."""
    from searcheval.evaluation.diff import previous_run_diff

    configuration = diff_configuration(result)
    if configuration is None or _answered_nothing(result, configuration):
        return None
    result.diff = previous_run_diff(conn, result.run_id, configuration)
    return result.diff


def with_candidate(configurations, names: list[str] | None, candidate: str | None
                   ) -> list[Configuration]:
    """The configurations to run: the named ones (None: the file's `run` list), and with
    candidates (`a` or `a,b,c`), the candidates and the served configuration too (on the same
    queries)."""
    from searcheval.evaluation.candidates import candidate_names

    chosen = [c.name for c in configurations.select(names)]
    candidates = candidate_names(candidate)  # `a,b,c`: several, each against the served one
    for name in candidates:
        configurations.select([name])  # refused naming the file when unknown
        if name == configurations.served:
            raise InputError(f"the candidate {name!r} is the served configuration; name "
                             "another entry (or an override of it under a new name)",
                             field="candidate")
    if candidates:
        chosen += [*candidates, configurations.served]
    return configurations.select(list(dict.fromkeys(chosen)))


def compare_candidate(scores: dict[str, ConfigurationScores], candidate: str, served: str,
                      metrics: tuple[str, ...] = ("ndcg@10", "mrr", "recall@20"),
                      by: str = "ndcg@10", shown: int = 10) -> dict:
    """The candidate beside the served configuration on the queries both answered: the means,
    their deltas, and the queries that got better and worse on `by` (largest change first)."""
    a, b = scores[candidate], scores[served]
    shared = set(a.evaluation.query_ids) & set(b.evaluation.query_ids)
    same = shared == set(a.evaluation.query_ids) == set(b.evaluation.query_ids)

    def mean(s: ConfigurationScores, metric: str) -> float | None:
        """The plain mean when both answered every query, else the mean over those both did."""
        if same or metric not in s.evaluation.values:
            return s.means.get(metric)
        kept = [v for q, v in s.values(metric).items() if q in shared and v == v]
        return float(np.mean(kept)) if kept else None

    means = {m: {"served": mean(b, m), "candidate": mean(a, m)} for m in metrics if m in a.means}
    for m in means.values():
        m["delta"] = None if m["served"] is None or m["candidate"] is None \
            else m["candidate"] - m["served"]
    better, worse = [], []
    if by in a.evaluation.values and by in b.evaluation.values:
        va, vb = a.values(by), b.values(by)
        for qid in vb:
            if qid in va and va[qid] == va[qid] and vb[qid] == vb[qid] and va[qid] != vb[qid]:
                row = {"query_id": qid, "category": b.categories.get(qid),
                       "served": vb[qid], "candidate": va[qid], "delta": va[qid] - vb[qid]}
                (better if row["delta"] > 0 else worse).append(row)
    better.sort(key=lambda r: (-r["delta"], r["query_id"]))
    worse.sort(key=lambda r: (r["delta"], r["query_id"]))
    return {"candidate": candidate, "served": served, "metric": by, "means": means,
            "better": better[:shown], "worse": worse[:shown],
            "counts": {"better": len(better), "worse": len(worse)},
            "queries": len(shared), "same_queries": same}


def costs(runs: dict[str, RankedRun], configurations: list[Configuration],
          embedded: Embedded, queries: int) -> dict:
    """What each configuration cost this run at its stated prices (`prices:` of its entry):
    requests / 1000 * per_1000_requests + CPU seconds * per_cpu_second + documents embedded this
    run * per_embedded_document (for a configuration that reads vectors; cache hits cost
    nothing). Per query: the run's cost over the queries it ran. A configuration without prices
    has a cost of None, and its usage is shown all the same. `embedding`: the documents and
    queries embedded this run, the time it took (`seconds`: from the first batch's start to the
    last one's end) and, of it, the time in the model itself (`model_seconds`: summed over the
    batches, which take turns at a process's model; on Dask workers side by side it can pass
    `seconds`)."""
    from searcheval.rankers.registry import needs_database

    out = {}
    for c in configurations:
        run = runs.get(c.name)
        if run is None:
            continue
        requests = run.usage.get("requests", 0.0)
        cpu_s = run.usage.get("cpu_s", 0.0)
        embedded_now = int(embedded.stats.get("embedded", 0)) if needs_database(c) else 0
        p = c.prices
        cost = None
        if p:
            cost = (requests / 1000.0 * p.get("per_1000_requests", 0.0)
                    + cpu_s * p.get("per_cpu_second", 0.0)
                    + embedded_now * p.get("per_embedded_document", 0.0))
        out[c.name] = {"requests": requests, "cpu_s": cpu_s, "embedded": embedded_now,
                       "prices": p, "per_run": cost,
                       "per_query": None if cost is None or not queries else cost / queries}
    return {"configurations": out,
            "embedding": {"embedded": int(embedded.stats.get("embedded", 0)),
                          "from_cache": int(embedded.stats.get("from_cache", 0)),
                          "seconds": embedded.seconds,
                          "model_seconds": embedded.model_seconds}}


def not_embedded(collection: Collection, model_path: str | None = None) -> Embedded:
    """What a run whose configurations read no vectors has instead of embeddings: nothing
    embedded, no model loaded (its name only), zero-width query vectors."""
    return Embedded(model=model_name(model_path),
                    query_vectors=np.zeros((len(collection.queries), 0), dtype=np.float32),
                    stats={"model": model_name(model_path), "documents": 0, "embedded": 0,
                           "from_cache": 0})


def check_documents(collection: Collection, configurations: list[Configuration]) -> None:
    """Refuse a configuration that searches the catalog (bm25, dense, fused) on a dataset
    without one (queries and judgments only: the engine holds the documents)."""
    if collection.has_catalog and collection.resources:
        return
    from searcheval.rankers.registry import needs_database

    for c in configurations:
        if c.kind in ("bm25", "fused") or needs_database(c):
            raise InputError(f"the {c.name} configuration ({c.kind}) searches the dataset's "
                             "documents, and this dataset has none: run configurations that "
                             "hold their own (http, python, trec)", field="configurations")
