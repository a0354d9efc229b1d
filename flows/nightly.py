"""The nightly evaluation flow: task calls over one plan (searcheval.evaluation.compose).

plan (every input read and checked) -> judged documents -> document lookups -> judgments ->
validate -> seed catalog -> embed (cached, in batches) -> index -> bm25 | dense | fused, each per
query shard (concurrently) -> merge -> lookups of the results -> coverage -> score -> gate ->
publish -> alert. Every step that touches the network or the database is a task of
tasks/evaluation.py (retries, states and timing in the UI); the plain steps between them are
searcheval.evaluation.compose. Refused input stops the run before anything is written; a tripped
gate publishes, alerts, and ends the flow run Failed so automations can act on it.

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

from flows import boundary, outcome
from flows.console import route_library_logs
from flows.parameters import ConfigurationNames, Gain, MetricNames, NoRelevant
from flows.runners import (execution_record, shards_share_process, task_runner_from_settings,
                           whole)
from searcheval import defaults, progress
from searcheval.errors import DatabaseError, GateTripped, InputError, RunIncomplete
from searcheval.evaluation import compose, pipeline
from searcheval.evaluation.alerts import Alert
from searcheval.evaluation.baseline import dataset_of
from searcheval.evaluation.compose import RunPlan
from searcheval.evaluation.pipeline import alert_for, new_run_id
from searcheval.evaluation.preflight import Refused, RunRequest
from searcheval.evaluation.report import EvaluationResult, console_table, verdict_line
from searcheval.project import find_project, project_key
from searcheval.types import Collection
from tasks import evaluation as t
from tasks.events import emit_gate_event, emit_verdict_event
from tasks.judging import label_pool

boundary.install()  # refusals and a tripped gate end the run Failed without a traceback
route_library_logs()  # the progress lines reach the console and the flow run's logs


def requested_dataset(request: RunRequest) -> str | None:
    """The dataset a run was asked for, for an alert sent before it was loaded."""
    return request.dataset_name or request.dataset or request.fixtures or request.mapping


def refuse(run_id: str, refused: Refused, alert_block: str | None,
           dataset: str | None = None):
    """End a refused run: its report in the UI, an alert when the run was scheduled (a manual
    run's refusal answers whoever started it, without paging on-call), then the refusal raised:
    the flow run ends Failed with its one line."""
    logger = get_run_logger()
    scheduled = boundary.scheduled_run()
    t.record_refusal(refused, scheduled)
    if scheduled:
        t.send_alert(Alert(run_id, [{"kind": "refused", "summary": f"input refused: {line}"}
                                    for line in refused.lines()],
                           verdict=f"input refused: {refused.summary()}", dataset=dataset),
                     alert_block)
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


# The parameters are RunRequest's options (searcheval.evaluation.preflight), with the same
# defaults and, in the docstring's Args, the same help: tests/unit/test_run_options.py.
@flow(name="searcheval-nightly", log_prints=True, task_runner=task_runner_from_settings(),
      timeout_seconds=defaults.run_timeout())
@outcome.final_state  # REFUSED: / GATE TRIPPED: / FAILED: and the verdict tag (flows/outcome.py)
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
    output_retention: str | None = defaults.OUTPUT_RETENTION,
    kind: str | None = None,
    judgment_rule: str | None = None,
    agreement_floor: float | None = None,
    allow_dirty: bool = True,
    judgment_sources: str | list[str] | None = None,
    judge: str | None = None,
    dataset_name: str | None = None,
    sources: dict[str, str] | None = None,
) -> dict:
    """Evaluate the ranking configurations on a golden set and gate the served one.

    A missing baseline, or one whose configuration is not run, is refused unless `no_baseline`
    (the run then says NOT GATED). The conventions default to None: the dataset's settings
    (searcheval.yaml), else searcheval.defaults. The database comes from SEARCHEVAL_DATABASE_URL
    (embedded Postgres when unset), never from a parameter, so no password is stored with the
    flow run. Judgments are read from Postgres (seeded from the dataset's own file). Every
    run's ranked lists are kept in Postgres and diffed against the previous run of the dataset
    (a scheduled run: the previous scheduled one).
    The run ends Failed when the gate trips; its final message is the verdict and where the
    report is.

    Args:
        fixtures: A folder in the fixtures' layout (catalog.json, golden_queries.json,
            judgments.csv); ignored when dataset or mapping is set.
        dataset: A dataset of the project settings (its name), or a dataset folder: BEIR, WANDS or
            the fixtures' layout, told by its files. Empty (with fixtures and mapping empty): the
            project's default dataset. Every option below left empty takes the dataset's project
            setting, else the library's default (searcheval.project).
        split: The BEIR qrels split to judge with (qrels/SPLIT.tsv).
        max_queries: Evaluate only the first N judged queries (BEIR, WANDS, mappings); empty for
            all.
        baseline: The reviewed baseline.json the gate compares the served configuration with.
        no_baseline: Run without a gate on purpose (the run says NOT GATED and why).
        configurations: Entries of configurations_file to run; empty for the file's `run` list.
        configurations_file: The configurations file (YAML) naming each configuration's kind and
            parameters, and the one production serves.
        overrides: Parameters changed for this run, e.g. {"fused.rrf_k": 20} or {"bm25": {"b": 0.5}}
            (an overridden configuration has a hash of its own).
        candidate: An entry evaluated beside the served one on the same queries: it is the one
            gated, and the queries it made better and worse are listed. Several, comma separated:
            each compared with the served one (Holm's correction), which is gated.
        depth: How many results each configuration returns per query.
        metrics: The metrics to score and report.
        tolerance: The largest drop of a gated metric that still passes; empty for the baseline's
            own tolerance.
        coverage_k: Depth at which the judged share of each configuration's results is measured.
        coverage_floor: Judged share of the top coverage_k below which the run alerts; empty for the
            dataset's setting, else the default.
        max_age_days: Judgments older than this many days are stale and left out of scoring; empty
            for no limit.
        min_per_category: Fewest golden queries a query category may have.
        output: Folder for metrics.json, report.md, per_query.csv and runs/; empty to publish to the
            database and the artifacts only.
        model_path: A sentence-transformers model folder instead of all-MiniLM-L6-v2.
        label: A label for this run, e.g. the ranking version (shown in the report and the alerts).
        alert_block: A Prefect notification block to alert through, as 'type/name'.
        shards: Query shards per configuration, run concurrently.
        embed_batch: Texts per embedding task.
        mapping: A YAML mapping of columns over CSV, TSV, JSONL, Parquet files or SQL queries,
            instead of the fixtures.
        gain: Gain of a grade g in nDCG: exponential (2^g - 1) or linear (g, trec_eval's); empty for
            the dataset's setting.
        relevance_level: Lowest grade that counts as relevant for MRR, precision, recall and MAP;
            empty for the dataset's setting.
        no_relevant: nDCG and recall of a query without a relevant judgment: one, zero, or skip it;
            empty for the dataset's setting.
        grade_scale: The grades a judgment may have, as [lowest, highest]; empty for the dataset's
            setting.
        grade_map: Text labels to grades, e.g. {"Exact": 2, "Partial": 1, "Irrelevant": 0}; empty
            for the dataset's setting.
        snapshot_depth: Ranks of each configuration's list kept in Postgres for diffs.
        snapshot_retention: Snapshots older than this (e.g. 90d) are pruned; empty keeps them all.
        output_retention: Run folders in output older than this (e.g. 90d) are deleted (only those
            searcheval wrote); empty keeps them all.
        kind: What started the run (nightly, manual, candidate); empty for nightly when its schedule
            created it, else manual. A nightly run is diffed against the previous nightly, any
            other against the run before it.
        judgment_rule: How the grades of several judges of one result combine: median, majority, or
            judge:NAME (that judge's grade).
        agreement_floor: Judges' agreement (Krippendorff's alpha, ordinal) below which the run
            alerts.
        allow_dirty: Run from a working tree with uncommitted changes (false for the scheduled
            deployment, so the nightly always measures a commit).
        judgment_sources: Which judgments count: dataset (the dataset's own qrels only), all, or the
            sources counted beside them (human, import, model); empty for the dataset's setting,
            else dataset for a benchmark's qrels and all otherwise.
        judge: A model judge (NAME of judges.yaml, or FILE:NAME) that grades this run's unjudged top
            coverage_k after it is published; its grades count from the next run on, while its human
            audit holds. Empty: no model judge.
        dataset_name: The dataset's identity when its folder declares none (set from the project
            settings).
        sources: Where options came from when not from the caller (set by the command line from the
            project settings); the report prints them.
    """
    request = RunRequest.from_parameters(locals())  # the parameters are the run's options
    run_id = new_run_id()
    t.tag_flow_run([t.run_tag(run_id)])  # the run id of the alerts finds the flow run
    try:
        return evaluate(request, run_id, judgment_sources=judgment_sources, output=output,
                        judge=judge, model_path=model_path, alert_block=alert_block,
                        snapshot_retention=snapshot_retention)
    except DatabaseError as exc:  # paged by the flow itself, automations or not
        t.send_alert(Alert(run_id, [{"kind": "database", "summary": f"database failure: {exc}"}],
                           dataset=requested_dataset(request)), alert_block)
        raise


def evaluate(request: RunRequest, run_id: str, *, judgment_sources, output: str | None,
             judge: str | None, model_path: str | None, alert_block: str | None,
             snapshot_retention: str | None) -> Completed:
    """The nightly's steps over `request` (the flow's parameters; those given by name here are
    the flow's own values, before the project settings fill the request's gaps)."""
    logger = get_run_logger()
    started = datetime.now(timezone.utc)
    try:
        plan = t.plan_run(request, str(project_directory()))  # settled over the project
        r = plan.request  # every option as the project settings and the defaults settled it
        texts = plan.texts()
        judged = t.judged_documents(opaque(plan.collection)) if plan.looks_up else set()
        looked = t.look_up_judged(plan.selected, plan.served, judged)
        collection, effective = t.judgments(opaque(plan.collection), r.judgment_rule,
                                            r.max_age_days, looked.observed(), r.judgment_sources,
                                            (r.sources or {}).get("judgment_sources"))
        report = compose.checked_judgments(
            plan, t.validate(opaque(collection), r.max_age_days, r.min_per_category),
            collection, effective)
    except InputError as exc:
        refuse(run_id, exc if isinstance(exc, Refused) else Refused([exc]), alert_block,
               requested_dataset(request))
    if plan.not_gated_reason:
        logger.warning("gate: NOT GATED (%s)", plan.not_gated_reason)

    # the model loads (only if some text is not cached) while the inputs are seeded, after the
    # validation: loaded beside it, torch's imports and weights took the 2 cores and the GIL from
    # Great Expectations' import (the validate task 9.9 s against 3.4 s, WANDS' shape)
    model_loading = t.load_model.submit(whole(texts), model_path) if texts else None
    if collection.has_catalog:
        t.seed_catalog(opaque(collection))
    t.seed_judgments(opaque(plan.collection))
    embedded = embed(plan, collection, texts, model_loading)
    runs = search(plan, collection, embedded)
    failures = pipeline.failures_of(runs, plan.selected, len(collection.queries))
    documents, observed = t.look_up_results(looked, opaque(runs), plan.selected,
                                            opaque(collection))
    view = compose.judged_view(report, documents, collection)
    conventions = plan.conventions
    coverage = t.coverage(opaque(runs), opaque(view.qrels), r.coverage_k,  # stale: not counted
                          conventions.coverage_floor, conventions.source("coverage_floor"))
    scores = t.score(opaque(runs), opaque(view.fresh), opaque(view.qrels), plan.metrics,
                     conventions.settings())
    not_gated_reason = compose.gate_or_reason(plan, failures)
    verdict = None
    if not failures["incomplete"]:  # an incomplete run is published, never gated
        gated = t.gate(opaque(scores), plan.baseline, r.tolerance, compose.gated_name(plan),
                       dataset_of(collection),
                       opaque(pipeline.gate_inputs(view.fresh, view.qrels, effective,  # like
                                                   conventions.settings(), r.depth)),  # with like
                       return_state=True)  # Failed when it trips: the task graph shows where
        verdict = gated.result(raise_on_failure=False)
        if isinstance(verdict, BaseException):
            raise verdict

    result = compose.evaluation_result(
        plan, run_id=run_id, started=started, collection=collection, embedded=embedded,
        runs=runs, view=view, scores=scores, verdict=verdict, not_gated_reason=not_gated_reason,
        coverage=coverage, failures=failures, effective=effective, documents=documents,
        observed=observed, flow_run_id=str(flow_run.id) if flow_run.id else None,
        kind=run_kind(), execution=execution_record(r.shards, r.embed_batch))
    published = t.publish(opaque(result), opaque(runs), output, opaque(view.qrels),
                          snapshot_retention, r.output_retention)
    if judge:  # the model labels this run's own pool (issue 24); counted once audited
        label_pool(opaque(collection), opaque(runs), opaque(view.qrels), judge,
                   r.configurations_file, model_path, depth=r.coverage_k)
    return conclude(result, published, output, r.alert_block)


def embed(plan: RunPlan, collection: Collection, texts: list[str], model_loading):
    """The texts judging left unchanged through the embedding cache, in batches (submitted to
    the task runner), then the index; nothing at all when no configuration reads vectors."""
    if model_loading is not None:
        model_loading.wait()  # its errors are the embedding's own, raised there
    model_path = plan.request.model_path
    if not plan.embeds:  # bm25, http, python, trec: no model call, no vector
        return pipeline.not_embedded(collection, model_path)
    progress.start("embedding", len(texts), "texts")  # one report for all the batches
    parts = pipeline.text_batches(texts, plan.request.embed_batch)
    # in the thread pool the batches take turns at the process's one model (its encoding lock):
    # each starts when the one EMBED_TASKS_AT_ONCE before it has finished, so no more than that
    # hold a database connection meanwhile (22 idle Postgres backends at WANDS' size, 370 MiB of
    # RSS); on Dask each worker has its own model, and every batch is submitted at once
    at_once = defaults.EMBED_TASKS_AT_ONCE if shards_share_process() else 0
    batches: list = []
    for number, batch in enumerate(parts, start=1):
        after = [batches[-at_once]] if at_once and len(batches) >= at_once else None
        batches.append(t.embed_texts.submit(whole(batch), model_path, number, wait_for=after))
    done_batches = gather(batches, lambda i, done: counted_batch(len(parts[i]), done))
    progress.finish("embedding")
    return t.index_collection(opaque(collection), opaque(texts), opaque(done_batches),
                              model_path)


def search(plan: RunPlan, collection: Collection, embedded) -> dict:
    """Every configuration over its query shards (submitted to the task runner), merged."""
    together = shards_share_process()  # else an http configuration's limits are cut among shards
    request, queries = plan.request, collection.queries
    parts = {c.name: pipeline.configuration_shards(c, queries, embedded.query_vectors,
                                                   request.shards, together=together)
             for c in plan.selected}
    progress.start("searching", len(queries) * len(plan.selected), "queries")
    runs: dict = {}
    # fused after the bm25 and dense runs it takes its components' results from (the same
    # sha256): searched once, not twice (rankers.registry.reusable_siblings)
    for wave in pipeline.reuse_order(plan.selected):
        futures = {c.name: [t.run_configuration.submit(
                                c, whole(collection), whole(part), embedded.model, request.depth,
                                whole(pipeline.shard_siblings(c, plan.selected, runs, part,
                                                              request.depth)))
                            for part in parts[c.name]]
                   for c in wave}
        for c in wave:
            shards = parts[c.name]
            done = gather(futures[c.name],
                          lambda i, _: progress.advance("searching", len(shards[i].queries)))
            runs[c.name] = pipeline.merge_runs(done)
    progress.finish("searching")
    return {c.name: runs[c.name] for c in plan.selected}


def counted_batch(size: int, done: pipeline.EmbeddedTexts) -> None:
    """One finished embedding batch in the `embedding` progress: its cached texts as skipped."""
    cached = min(done.from_cache, size)
    progress.skip("embedding", cached)
    progress.advance("embedding", size - cached)


def gather(futures: list, on_done) -> list:
    """The results of submitted tasks, in submission order.

    In Prefect's thread pool the tasks report their own progress (in this process, as they
    go). On Dask they run in other processes, whose reports never reach this one: the progress
    line said "0 texts" after minutes (issue 29). There each task is counted here as it
    finishes, `on_done(index, result)`, so the line advances batch by batch, shard by shard."""
    if shards_share_process():
        return [f.result() for f in futures]
    from prefect.futures import as_completed

    where = {f.task_run_id: i for i, f in enumerate(futures)}
    results: list = [None] * len(futures)
    for future in as_completed(futures):
        i = where[future.task_run_id]
        results[i] = future.result()
        on_done(i, results[i])
    return results


def conclude(result: EvaluationResult, published: dict, output: str | None,
             alert_block: str | None) -> Completed:
    """The verdict logged and emitted, the alert sent; the run ends Failed when it is incomplete
    or its gate tripped, else Completed with the verdict as its message."""
    run_id, verdict = result.run_id, result.gate
    table = console_table(result)  # printed by the CLI, shown by the artifacts: not logged twice
    where = f"{output}/{run_id}/report.md" if output else \
        f"artifact {project_key(t.REPORT_ARTIFACT, t.result_project(result))}"
    line = verdict_line(result, where)
    get_run_logger().info("run %s: %s", run_id, line)
    emit_verdict_event(run_id, line, result.gate_passed)  # what `deployment run --watch` shows

    alert = alert_for(result)
    if alert is not None:  # paths absolute: on-call reads them from another directory
        folder = Path(output).resolve() / run_id if output else None
        alert.where = str(folder / "report.md") if folder else where
        alert.dataset, alert.verdict = result.dataset, line
        diff = published["diff"]
        if published["candidate_diff"]:  # a candidate run: what the candidate changed
            alert.diff = (str(folder / "candidate_diff.md") if folder else "artifact "
                          + t.artifact_key(t.CANDIDATE_DIFF_ARTIFACT, result.dataset))
        elif diff:
            alert.diff = (str(folder / "diff.md") if folder else "artifact "
                          + t.artifact_key(t.DIFF_ARTIFACT, result.dataset,
                                           diff["b"]["configuration"]))
        t.send_alert(alert, alert_block)
    if result.incomplete:
        # printed without a verdict line: a run that is not gated at all says so under its table
        raise RunIncomplete(pipeline.incomplete_message(result.failures),
                            table if verdict is not None else f"{table}\n{result.gate_line()}")
    if verdict is not None and not verdict.passed:
        emit_gate_event(result)  # for the `searcheval-gate-tripped` automation
        raise GateTripped(f"gate tripped for {verdict.configuration}: "
                          + "; ".join(trip.describe() for trip in verdict.tripped)
                          + f"; report: {where}", table)
    # the final state's message is the verdict: the UI and `prefect flow-run inspect` show it
    return Completed(message=line, data={"run_id": run_id, "table": table, "verdict": line,
                                         "report": where, "metrics": result.metrics_document()})
