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
from prefect.states import Completed
from prefect.utilities.annotations import opaque  # large inputs of tasks called here: not
# walked for futures (submitted tasks: `whole`, which knows the task runner)

from flows import boundary
from flows.console import route_library_logs
from flows.parameters import ConfigurationNames, Gain, MetricNames, NoRelevant
from flows.runners import shards_share_process, task_runner_from_settings, whole
from searcheval import defaults, progress
from searcheval.errors import GateTripped, InputError, RunIncomplete
from searcheval.evaluation import lookups, pipeline, provenance
from searcheval.evaluation.alerts import Alert
from searcheval.evaluation.baseline import dataset_of
from searcheval.evaluation.pipeline import alert_for, new_run_id
from searcheval.evaluation.preflight import Refused, RunRequest
from searcheval.evaluation.report import (
    EvaluationResult,
    console_table,
    query_notes,
    verdict_line,
)
from searcheval.io.collection import collection_hashes
from searcheval.judging.judgments import judgment_set
from searcheval.metrics.engine import parse_metrics
from searcheval.judging.summary import pool_command
from searcheval.project import find_project, pool_flags, project_key, resolve_run, run_settings
from searcheval.rankers.configs import load_configurations
from searcheval.rankers.registry import needs_embeddings
from searcheval.types import Collection
from tasks import evaluation as t
from tasks.events import emit_gate_event, emit_verdict_event

boundary.install()  # refusals and a tripped gate end the run Failed without a traceback
route_library_logs()  # the progress lines reach the console and the flow run's logs


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


def run_project():
    """The project settings of this run: SEARCHEVAL_SETTINGS, else the working directory's (or
    above), else those beside the flows (searcheval.project)."""
    return find_project() or find_project(project_directory())


def run_kind() -> str:
    """`nightly` for a run its deployment's schedule created, else `manual`."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = getattr(context, "flow_run", None)
    return "nightly" if run is not None and getattr(run, "auto_scheduled", False) else "manual"


@flow(name="searcheval-nightly", log_prints=True, task_runner=task_runner_from_settings())
def nightly(
    fixtures: str | None = None,
    dataset: str | None = None,
    split: str | None = None,
    max_queries: int | None = None,
    baseline: str | None = None,
    no_baseline: bool = False,
    configurations: ConfigurationNames = None,
    configurations_file: str | None = None,
    overrides: dict[str, Any] | None = None,
    candidate: str | None = None,
    depth: int | None = None,
    metrics: MetricNames = list(defaults.REPORT_METRICS),
    tolerance: float | None = None,
    coverage_k: int | None = None,
    coverage_floor: float | None = None,
    max_age_days: int | None = defaults.MAX_AGE_DAYS,
    min_per_category: int | None = None,
    output: str | None = defaults.OUTPUT,
    model_path: str | None = None,
    label: str | None = None,
    alert_block: str | None = None,
    shards: int = defaults.SHARDS,
    embed_batch: int = defaults.EMBED_BATCH,
    mapping: str | None = None,
    gain: Gain = None,
    relevance_level: int | None = None,
    no_relevant: NoRelevant = None,
    grade_scale: list[int] | None = None,
    grade_map: dict[str, int] | None = None,
    snapshot_depth: int = defaults.SNAPSHOT_DEPTH,
    snapshot_retention: str | None = defaults.SNAPSHOT_RETENTION,
    kind: str | None = None,
    judgment_rule: str | None = None,
    agreement_floor: float | None = None,
    allow_dirty: bool = True,
    dataset_name: str | None = None,
    sources: dict[str, str] | None = None,
) -> dict:
    """Evaluate the ranking configurations on a golden set and gate the served one.

    A missing baseline, or one whose configuration is not run, is refused unless `no_baseline`
    (the run then says NOT GATED). The conventions default to None: the dataset's settings
    (searcheval.yaml), else searcheval.defaults. The database comes from SEARCHEVAL_DATABASE_URL
    (embedded Postgres when unset), never from a parameter, so no password is stored with the
    flow run. Judgments are read from Postgres (seeded from the dataset's own file). Every
    run's ranked lists are kept in Postgres and diffed against the previous run of the dataset.
    The run ends Failed when the gate trips; its final message is the verdict and where the
    report is.

    Args:
        fixtures: A folder in the fixtures' layout (catalog.json, golden_queries.json,
            judgments.csv); ignored when dataset or mapping is set.
        dataset: A dataset of the project settings (its name), or a dataset folder: BEIR,
            WANDS or the fixtures' layout, told by its files. Empty (with fixtures and mapping
            empty): the project's default dataset. Every empty option below takes the
            dataset's project setting, else the library's default (searcheval.project).
        split: The BEIR qrels split to judge with (qrels/<split>.tsv).
        max_queries: Evaluate only the first N judged queries (BEIR, WANDS, mappings); empty
            for all.
        baseline: The reviewed baseline.json the gate compares the served configuration with.
        no_baseline: Run without a gate on purpose (the run says NOT GATED and why).
        configurations: Entries of configurations_file to run; empty for the file's `run`
            list.
        configurations_file: The configurations file (YAML) naming each configuration's kind
            and parameters, and the one production serves.
        overrides: Parameters changed for this run, e.g. {"fused.rrf_k": 20} or
            {"bm25": {"b": 0.5}} (an overridden configuration has a hash of its own).
        candidate: An entry evaluated beside the served one on the same queries: it is the
            one gated, and the queries it made better and worse are listed.
        depth: How many results each configuration returns per query.
        metrics: The metrics to score and report.
        tolerance: The largest drop of a gated metric that still passes; empty for the
            baseline's own tolerance.
        coverage_k: Depth at which the judged share of each configuration's results is
            measured.
        coverage_floor: Judged share of the top coverage_k below which the run alerts; empty
            for the dataset's setting, else the default.
        max_age_days: Judgments older than this many days are stale and left out of scoring;
            empty for no limit.
        min_per_category: Fewest golden queries a query category may have.
        output: Folder for metrics.json, report.md, per_query.csv and runs/; empty to publish
            to the database and the artifacts only.
        model_path: A sentence-transformers model folder instead of all-MiniLM-L6-v2.
        label: A label for this run, e.g. the ranking version (shown in the report and the
            alerts).
        alert_block: A Prefect notification block to alert through, as 'type/name'.
        shards: Query shards per configuration, run concurrently.
        embed_batch: Texts per embedding task.
        mapping: A YAML mapping of columns over CSV, TSV, JSONL, Parquet files or SQL queries,
            instead of the fixtures.
        gain: Gain of a grade g in nDCG: exponential (2^g - 1) or linear (g, trec_eval's);
            empty for the dataset's setting.
        relevance_level: Lowest grade that counts as relevant for MRR, precision, recall and
            MAP; empty for the dataset's setting.
        no_relevant: nDCG and recall of a query without a relevant judgment: one, zero, or
            skip it; empty for the dataset's setting.
        grade_scale: The grades a judgment may have, as [lowest, highest]; empty for the
            dataset's setting.
        grade_map: Text labels to grades, e.g. {"Exact": 2, "Partial": 1, "Irrelevant": 0};
            empty for the dataset's setting.
        snapshot_depth: Ranks of each configuration's list kept in Postgres for diffs.
        snapshot_retention: Snapshots older than this (e.g. 90d) are pruned; empty
            keeps them all.
        kind: What started the run (nightly, manual, candidate); empty for nightly
            when its schedule created it, else manual.
        judgment_rule: How the grades of several judges of one result combine: median,
            majority, or judge:NAME (that judge's grade).
        agreement_floor: Judges' agreement (Krippendorff's alpha, ordinal) below which the
            run alerts.
        allow_dirty: Run from a working tree with uncommitted changes (false for the
            scheduled deployment, so the nightly always measures a commit).
        dataset_name: The dataset's identity when its folder declares none (set from the
            project settings).
        sources: Where options came from when not from the caller (set by the command line
            from the project settings); the report prints them.
    """
    logger = get_run_logger()
    run_id = new_run_id()
    started = datetime.now(timezone.utc)
    try:
        options = resolve_run({
            "fixtures": fixtures, "dataset": dataset, "mapping": mapping, "split": split,
            "max_queries": max_queries, "configurations_file": configurations_file,
            "baseline": baseline, "depth": depth, "coverage_floor": coverage_floor,
            "coverage_k": coverage_k, "tolerance": tolerance,
            "min_per_category": min_per_category, "agreement_floor": agreement_floor,
            "judgment_rule": judgment_rule, "alert_block": alert_block, "gain": gain,
            "relevance_level": relevance_level, "no_relevant": no_relevant,
            "grade_scale": grade_scale, "grade_map": grade_map},
            project=run_project(), given_sources=sources).values
    except InputError as exc:
        refuse(run_id, exc if isinstance(exc, Refused) else Refused([exc]), alert_block)
    fixtures, dataset, mapping, split = (options[k] for k in ("fixtures", "dataset", "mapping",
                                                              "split"))
    max_queries, configurations_file, baseline = (
        options["max_queries"], options["configurations_file"], options["baseline"])
    depth, coverage_floor, coverage_k, tolerance = (
        options["depth"], options["coverage_floor"], options["coverage_k"], options["tolerance"])
    min_per_category, agreement_floor, judgment_rule, alert_block = (
        options["min_per_category"], options["agreement_floor"], options["judgment_rule"],
        options["alert_block"])
    gain, relevance_level, no_relevant, grade_scale, grade_map = (
        options[k] for k in ("gain", "relevance_level", "no_relevant", "grade_scale",
                             "grade_map"))
    dataset_name, sources = dataset_name or options["dataset_name"], options["sources"]
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
        agreement_floor=agreement_floor, dataset_name=dataset_name, sources=sources)
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
        # the model loads (only if some text is not cached) while the inputs are validated
        texts = pipeline.collection_texts(loaded) if needs_embeddings(selected) else []
        model_loading = t.load_model.submit(whole(texts), model_path) if texts else None
        judged = t.judged_documents(opaque(loaded)) if lookups.any_lookup(selected) else set()
        looked = lookups.look_up_judged(selected, resolved.served, judged)
        collection, effective = t.judgments(opaque(loaded), judgment_rule, max_age_days,
                                            looked.observed())
        report = t.validate(opaque(collection), max_age_days, min_per_category)
        report = pipeline.with_judging_checks(report, collection, effective, agreement_floor)
        report.raise_for_errors()
    except InputError as exc:
        refuse(run_id, exc if isinstance(exc, Refused) else Refused([exc]), alert_block)
    if checked.not_gated_reason:
        logger.warning("gate: NOT GATED (%s)", checked.not_gated_reason)

    if collection.has_catalog:
        t.seed_catalog(opaque(collection))
    t.seed_judgments(opaque(loaded))
    if model_loading is not None:
        model_loading.wait()  # its errors are the embedding's own, raised there
    if needs_embeddings(selected):  # `texts`: the documents and queries judging left unchanged
        progress.start("embedding", len(texts), "texts")  # one report for all the batches
        batches = [t.embed_texts.submit(whole(batch), model_path, number) for number, batch
                   in enumerate(pipeline.text_batches(texts, embed_batch), start=1)]
        done_batches = [b.result() for b in batches]
        progress.finish("embedding")
        embedded = t.index_collection(opaque(collection), opaque(texts), opaque(done_batches),
                                      model_path)
    else:  # nothing reads vectors (bm25, http, python, trec): no model call, no vector
        embedded = pipeline.not_embedded(collection, model_path)
    together = shards_share_process()  # else an http configuration's limits are cut among shards
    parts = {c.name: pipeline.configuration_shards(c, collection.queries, embedded.query_vectors,
                                                   shards, together=together)
             for c in selected}
    progress.start("searching", len(collection.queries) * len(selected), "queries")
    futures = {c.name: [t.run_configuration.submit(c, whole(collection), whole(part),
                                                    embedded.model, depth)
                        for part in parts[c.name]]
               for c in selected}
    runs = {name: pipeline.merge_runs([f.result() for f in shard_futures])
            for name, shard_futures in futures.items()}
    progress.finish("searching")
    failures = pipeline.failures_of(runs, selected, len(collection.queries))

    documents = lookups.look_up_results(looked, runs, selected, collection)
    report = lookups.lookup_staleness(report, documents, collection)
    fresh = pipeline.fresh_collection(collection, report)
    qrels = fresh.qrels()
    coverage = t.coverage(opaque(runs), opaque(qrels), coverage_k,  # stale labels do not count
                          conventions.coverage_floor,
                          conventions.source("coverage_floor"))
    scores = t.score(opaque(runs), opaque(fresh), opaque(qrels), tuple(metrics),
                     conventions.settings())
    not_gated_reason = checked.not_gated_reason
    if failures["incomplete"]:  # failed queries beyond what their configuration allows
        verdict, not_gated_reason = None, pipeline.incomplete_message(failures)
    else:
        gated = t.gate(opaque(scores), checked.baseline, tolerance, candidate,
                       dataset_of(collection),
                       return_state=True)  # Failed when it trips: the task graph shows where
        verdict = gated.result(raise_on_failure=False)
        if isinstance(verdict, BaseException):
            raise verdict
    side_by_side = (pipeline.compare_candidate(scores, candidate, resolved.served)
                    if candidate and candidate in scores and resolved.served in scores else None)
    judging = pipeline.judging_summary(runs, fresh, qrels, tuple(metrics), conventions.settings(),
                                       run_id, coverage, coverage_k, effective, agreement_floor)
    judging["pool"]["command"] = pool_command(run_id, coverage_k, pool_flags(options, output))

    result = EvaluationResult(
        run_id=run_id, started_at=started, finished_at=datetime.now(timezone.utc),
        source=str(mapping or dataset or fixtures), input_hashes=collection_hashes(collection),
        model=embedded.model, scores=scores, gate=verdict, validation=report.to_dict(),
        coverage=coverage, embeddings=embedded.stats,
        flow_run_id=str(flow_run.id) if flow_run.id else None, label=label,
        conventions={**conventions.to_dict(), "settings": run_settings(
            options, sources, collection, depth=depth, project=run_project())},
        queries=query_notes(collection.queries, pipeline.segments_of(collection.queries)),
        judging=judging, not_gated_reason=not_gated_reason,
        dataset=dataset_of(collection), snapshot_depth=snapshot_depth, kind=kind or run_kind(),
        failures=failures, candidate=side_by_side, documents=documents,
        observed=looked.observed(), judgment_set=judgment_set(collection),
        cost=pipeline.costs(runs, selected, embedded, len(collection.queries)),
        what_ran=provenance.run_record(pipeline.what_ran(resolved, selected), code,
                                       embedded.model, pipeline.model_sha256(model_path),
                                       collection_hashes(collection)))
    published = t.publish(opaque(result), opaque(runs), output, opaque(qrels),
                          snapshot_retention)
    table = console_table(result)  # printed by the CLI, shown by the artifacts: not logged twice
    where = f"{output}/{run_id}/report.md" if output else \
        f"artifact {project_key(t.REPORT_ARTIFACT, t.result_project(result))}"
    line = verdict_line(result, where)
    logger.info("run %s: %s", run_id, line)
    emit_verdict_event(run_id, line, result.gate_passed)  # what `deployment run --watch` shows

    alert = alert_for(result)
    if alert is not None:
        alert.where = where
        diff = published["diff"]
        if published["candidate_diff"]:  # a candidate run: what the candidate changed
            alert.diff = (f"{output}/{run_id}/candidate_diff.md" if output else "artifact "
                          + t.artifact_key(t.CANDIDATE_DIFF_ARTIFACT, result.dataset))
        elif diff:
            alert.diff = (f"{output}/{run_id}/diff.md" if output else "artifact "
                          + t.artifact_key(t.DIFF_ARTIFACT, result.dataset,
                                           diff["b"]["configuration"]))
        t.send_alert(alert, alert_block)
    if failures["incomplete"]:
        raise RunIncomplete(pipeline.incomplete_message(failures), table)
    if verdict is not None and not verdict.passed:
        emit_gate_event(result)  # for the `searcheval-gate-tripped` automation
        raise GateTripped(f"gate tripped for {verdict.configuration}: "
                          + "; ".join(trip.describe() for trip in verdict.tripped)
                          + f"; report: {where}", table)
    # the final state's message is the verdict: the UI and `prefect flow-run inspect` show it
    return Completed(message=line, data={"run_id": run_id, "table": table, "verdict": line,
                                         "report": where, "metrics": result.metrics_document()})
