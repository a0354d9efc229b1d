"""The nightly evaluation flow: wiring only; every step is a task in tasks/evaluation.py.

load inputs -> validate -> seed catalog -> embed (cached, in batches) -> index
-> bm25 | dense | fused, each per query shard (concurrently) -> merge -> score -> gate -> publish
-> alert. Refused input stops the run before anything is written; a tripped gate publishes,
alerts, and ends the flow run Failed so automations can act on it.

The embedding batches and the query shards are submitted to the task runner the settings name
(flows/runners.py: Prefect's thread pool, or a Dask cluster); the results are the same whatever
the runner, the number of shards and the batch size.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger
from prefect.runtime import flow_run

from flows import boundary
from flows.runners import task_runner_from_settings
from searcheval import defaults
from searcheval.errors import GateTripped, InputError, RunIncomplete
from searcheval.evaluation import pipeline, provenance
from searcheval.evaluation.alerts import Alert
from searcheval.evaluation.baseline import dataset_of
from searcheval.evaluation.pipeline import alert_for, new_run_id
from searcheval.evaluation.preflight import Refused, RunRequest
from searcheval.evaluation.report import EvaluationResult, console_table, query_notes
from searcheval.io.collection import collection_hashes
from searcheval.metrics.engine import parse_metrics
from searcheval.rankers.configs import load_configurations
from searcheval.rankers.registry import needs_embeddings
from searcheval.types import Collection
from tasks import evaluation as t
from tasks.events import emit_gate_event

boundary.install()  # refusals and a tripped gate end the run Failed without a traceback


def refuse(run_id: str, refused: Refused, alert_block: str | None):
    """End a refused run: its report in the UI, an alert when the run was scheduled (a manual
    run's refusal answers whoever started it, without paging on-call), then the refusal raised:
    the flow run ends Failed with its one line."""
    logger = get_run_logger()
    scheduled = boundary.scheduled_run()
    t.record_refusal(refused, scheduled)
    if scheduled:
        t.send_alert(Alert(run_id, [{"kind": "refused", "summary": f"input refused: {line}"}
                                    for line in refused.lines()]), alert_block)
    else:
        logger.info("refused input of a manual run: not alerted")
    raise refused


def project_directory() -> Path:
    """The working tree the flow runs from: SEARCHEVAL_PROJECT, else the folder of flows/."""
    named = os.environ.get("SEARCHEVAL_PROJECT")
    return Path(named) if named else Path(__file__).resolve().parents[1]
def run_kind() -> str:
    """`nightly` for a run its deployment's schedule created, else `manual`."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = getattr(context, "flow_run", None)
    return "nightly" if run is not None and getattr(run, "auto_scheduled", False) else "manual"


@flow(name="searcheval-nightly", log_prints=True, task_runner=task_runner_from_settings())
def nightly(
    fixtures: str | None = defaults.FIXTURES,
    dataset: str | None = None,
    split: str = defaults.SPLIT,
    max_queries: int | None = None,
    baseline: str | None = defaults.BASELINE,
    no_baseline: bool = False,
    configurations: list[str] | None = None,
    configurations_file: str = defaults.CONFIGURATIONS_FILE,
    overrides: dict[str, Any] | None = None,
    candidate: str | None = None,
    depth: int = defaults.DEPTH,
    metrics: list[str] = list(defaults.REPORT_METRICS),
    tolerance: float | None = None,
    coverage_k: int = defaults.COVERAGE_K,
    coverage_floor: float | None = None,
    max_age_days: int | None = defaults.MAX_AGE_DAYS,
    min_per_category: int = defaults.MIN_PER_CATEGORY,
    output: str | None = defaults.OUTPUT,
    model_path: str | None = None,
    label: str | None = None,
    alert_block: str | None = None,
    shards: int = defaults.SHARDS,
    embed_batch: int = defaults.EMBED_BATCH,
    mapping: str | None = None,
    gain: str | None = None,
    relevance_level: int | None = None,
    no_relevant: str | None = None,
    grade_scale: list[int] | None = None,
    grade_map: dict[str, int] | None = None,
    snapshot_depth: int = defaults.SNAPSHOT_DEPTH,
    snapshot_retention: str | None = defaults.SNAPSHOT_RETENTION,
    kind: str | None = None,
    judgment_rule: str = defaults.JUDGMENT_RULE,
    agreement_floor: float = defaults.AGREEMENT_FLOOR,
    allow_dirty: bool = True,
) -> dict:
    """Evaluate the ranking configurations on a golden set and gate the served one.

    `fixtures`, `dataset` (a BEIR, WANDS or fixtures folder, told by its files) or `mapping` (a
    table mapping file) names the inputs; `baseline` the reviewed baseline.json the gate reads;
    `no_baseline=True` runs without a gate on purpose (the run then says NOT GATED; a missing
    baseline, or one whose configuration is not run, is otherwise refused);
    `label` tags a manual run (e.g. the ranking version). `configurations` names entries of
    `configurations_file` (None: its `run` list); `overrides` changes their parameters for this
    run, e.g. `{"fused.rrf_k": 20}` or `{"bm25": {"b": 0.5}}` (an overridden configuration has a
    hash of its own); `candidate` names an entry to evaluate beside the served one on the same
    queries: it is the one gated, and the queries it made better and worse are listed. The run
    records what ran (configurations and hashes, git commit and dirty flag, versions, model,
    dataset); with `allow_dirty` false (the scheduled deployment) a working tree with
    uncommitted changes is refused, so the nightly always measures a commit. The conventions `gain`,
    `relevance_level`, `no_relevant`, `grade_scale`, `grade_map` and the judged-share floor
    `coverage_floor` default to None: the dataset's settings (searcheval.yaml), else
    searcheval.defaults. Every run's ranked lists are kept in Postgres to `snapshot_depth`
    ranks and diffed against the previous run of the dataset; snapshots older than
    `snapshot_retention` (e.g. 90d; None keeps them) are pruned. `kind` (nightly, manual,
    candidate) defaults to nightly for a run its schedule created, else manual. The database
    comes from SEARCHEVAL_DATABASE_URL (embedded Postgres when unset), never from a parameter,
    so no password is stored with the flow run. Judgments are
    read from Postgres (seeded from the dataset's own file) and combined by `judgment_rule`
    (`median`, `majority` or `judge:NAME`); judges' agreement (Krippendorff's alpha) under
    `agreement_floor` is alerted.
    """
    logger = get_run_logger()
    run_id = new_run_id()
    started = datetime.now(timezone.utc)
    request = RunRequest(
        fixtures=fixtures, dataset=dataset, mapping=mapping, split=split, max_queries=max_queries,
        grade_map=grade_map, grade_scale=grade_scale, baseline=baseline, no_baseline=no_baseline,
        configurations=None if configurations is None else list(configurations),
        configurations_file=configurations_file, overrides=overrides, candidate=candidate,
        depth=depth, metrics=list(metrics),
        tolerance=tolerance, coverage_k=coverage_k, coverage_floor=coverage_floor,
        max_age_days=max_age_days, min_per_category=min_per_category, shards=shards,
        embed_batch=embed_batch, gain=gain, relevance_level=relevance_level,
        no_relevant=no_relevant, alert_block=alert_block, judgment_rule=judgment_rule,
        agreement_floor=agreement_floor)
    checked = t.preflight(request)
    code = provenance.code_state(project_directory())
    try:
        checked.raise_for_problems()
        if not allow_dirty:
            provenance.refuse_dirty(code)
        resolved = load_configurations(configurations_file, overrides)
        selected = pipeline.with_candidate(resolved, configurations, candidate)
        metrics = [m.name for m in parse_metrics(metrics)]  # any spelling, published as ours
        loaded: Collection = checked.collection
        conventions = checked.conventions
        pipeline.check_documents(loaded, selected)
        collection, effective = t.judgments(loaded, judgment_rule, max_age_days)
        report = t.validate(collection, max_age_days, min_per_category)
        report = pipeline.with_judging_checks(report, collection, effective, agreement_floor)
        report.raise_for_errors()
    except InputError as exc:
        refuse(run_id, exc if isinstance(exc, Refused) else Refused([exc]), alert_block)
    if checked.not_gated_reason:
        logger.warning("gate: NOT GATED (%s)", checked.not_gated_reason)

    if collection.has_catalog:
        t.seed_catalog(collection)
    t.seed_judgments(loaded)
    if needs_embeddings(selected):
        texts = pipeline.collection_texts(collection)
        batches = [t.embed_texts.submit(batch, model_path, number) for number, batch
                   in enumerate(pipeline.text_batches(texts, embed_batch), start=1)]
        embedded = t.index_collection(collection, texts, [b.result() for b in batches],
                                      model_path)
    else:  # nothing reads vectors (bm25, http, python, trec): no model call, no vector
        embedded = pipeline.not_embedded(collection, model_path)
    parts = pipeline.query_shards(collection.queries, embedded.query_vectors, shards)
    futures = {c.name: [t.run_configuration.submit(c, collection, part, embedded.model, depth)
                        for part in parts]
               for c in selected}
    runs = {name: pipeline.merge_runs([f.result() for f in shard_futures])
            for name, shard_futures in futures.items()}
    failures = pipeline.failures_of(runs, selected, len(collection.queries))

    documents = pipeline.look_up_documents(runs, selected, collection)
    report = pipeline.lookup_staleness(report, documents, collection)
    fresh = pipeline.fresh_collection(collection, report)
    qrels = fresh.qrels()
    coverage = t.coverage(runs, qrels, coverage_k, conventions.coverage_floor,  # stale labels
                          conventions.source("coverage_floor"))  # do not count
    scores = t.score(runs, fresh, qrels, tuple(metrics), conventions.settings())
    not_gated_reason = checked.not_gated_reason
    if failures["incomplete"]:  # failed queries beyond what their configuration allows
        verdict, not_gated_reason = None, pipeline.incomplete_message(failures)
    else:
        verdict = t.gate(scores, checked.baseline, tolerance, candidate,
                         dataset_of(collection))
    side_by_side = (pipeline.compare_candidate(scores, candidate, resolved.served)
                    if candidate and candidate in scores and resolved.served in scores else None)
    judging = pipeline.judging_summary(runs, fresh, qrels, tuple(metrics), conventions.settings(),
                                       run_id, coverage, coverage_k, effective, agreement_floor)

    result = EvaluationResult(
        run_id=run_id, started_at=started, finished_at=datetime.now(timezone.utc),
        source=str(mapping or dataset or fixtures), input_hashes=collection_hashes(collection),
        model=embedded.model, scores=scores, gate=verdict, validation=report.to_dict(),
        coverage=coverage, embeddings=embedded.stats,
        flow_run_id=str(flow_run.id) if flow_run.id else None, label=label,
        conventions=conventions.to_dict(),
        queries=query_notes(collection.queries, pipeline.segments_of(collection.queries)),
        judging=judging, not_gated_reason=not_gated_reason,
        dataset=dataset_of(collection), snapshot_depth=snapshot_depth, kind=kind or run_kind(),
        failures=failures, candidate=side_by_side, documents=documents,
        cost=pipeline.costs(runs, selected, embedded, len(collection.queries)),
        what_ran=provenance.run_record(pipeline.what_ran(resolved, selected), code,
                                       embedded.model, pipeline.model_sha256(model_path),
                                       collection_hashes(collection)))
    published = t.publish(result, runs, output, qrels, snapshot_retention)
    table = console_table(result)
    logger.info("results of %s\n%s", run_id, table)
    logger.info("%s", result.gate_line())

    alert = alert_for(result)
    if alert is not None:
        alert.where = f"{output}/{run_id}/report.md" if output else f"artifact {t.REPORT_ARTIFACT}"
        diff = published["diff"]
        if diff:
            alert.diff = (f"{output}/{run_id}/diff.md" if output else "artifact "
                          + t.artifact_key(t.DIFF_ARTIFACT, result.dataset,
                                           diff["b"]["configuration"]))
        t.send_alert(alert, alert_block)
    if failures["incomplete"]:
        raise RunIncomplete(pipeline.incomplete_message(failures), table)
    if verdict is not None and not verdict.passed:
        emit_gate_event(result)  # for the `searcheval-gate-tripped` automation
        raise GateTripped(f"gate tripped for {verdict.configuration}: "
                          + "; ".join(trip.describe() for trip in verdict.tripped), table)
    return {"run_id": run_id, "table": table, "metrics": result.metrics_document()}
