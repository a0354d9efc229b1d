"""Prefect tasks of the nightly evaluation: each wraps one library function.

Retries live here, on the tasks that do I/O (database, model); refused input is never retried.
Validation is cached by the inputs' content hashes and the day, so a manual rerun of unchanged
inputs on the same day skips Great Expectations; any edit to an input file changes the key.
Nothing here takes a connection or a DataFrame as a cache key: tasks open their own connection.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from contextlib import nullcontext
from dataclasses import fields
from datetime import datetime, timedelta, timezone

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.states import Failed

from searcheval import __version__, defaults
from searcheval.errors import AlertDeliveryError, InputError
from searcheval.evaluation import compose, lookups, pipeline, provenance
from searcheval.evaluation.alerts import Alert, post_webhook, webhook_url
from searcheval.evaluation.compose import RunPlan
from searcheval.evaluation.lookups import Lookups
from searcheval.evaluation.preflight import Refused, RunRequest
from searcheval.evaluation.report import EvaluationResult, markdown_report, write_outputs
from searcheval.project import project_key
from searcheval.evaluation.tables import narrow_tables
from searcheval.evaluation.validation import ValidationReport, validate_collection
from searcheval.io.collection import collection_hashes
from searcheval.judging.judgments import Effective, parse_rule
from searcheval.judging.source import judged_documents as source_judged_documents
from searcheval.judging.source import preview_judgments, seed_collection_judgments
from searcheval.judging.versions import Observed
from searcheval.metrics.coverage import results_coverage
from searcheval.metrics.engine import Settings
from searcheval.rankers.configs import Configuration
from searcheval.rankers.registry import needs_database, secret_blocks
from searcheval.redaction import redact
from searcheval.store.database import open_database
from searcheval.types import Collection, RankedRun
from tasks import secrets  # noqa: F401 - installs the database password's reader

class _NoEmptyTraceback(logging.Filter):
    """Prefect logs a task run that returned a Failed state (the tripped gate) with
    exc_info=True but no exception, which prints a stray `NoneType: None` line: drop it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[0] is None:
            record.exc_info = None
        return True


logging.getLogger("prefect.task_runs").addFilter(_NoEmptyTraceback())

METRICS_ARTIFACT = "searcheval-metrics"
REPORT_ARTIFACT = "searcheval-report"
WHAT_RAN_ARTIFACT = "searcheval-what-ran"
DIFF_ARTIFACT = "searcheval-diff"
CANDIDATE_DIFF_ARTIFACT = "searcheval-candidate-diff"
REFUSAL_ARTIFACT = "searcheval-refusal"
IO_RETRIES = dict(retries=2, retry_delay_seconds=[1, 5])


def not_refused_input(task, task_run, state) -> bool:
    """Retry I/O failures, never refused input: it would fail the same way again."""
    try:
        state.result()
    except InputError:
        return False
    except Exception:  # noqa: BLE001 - anything else may be transient
        return True
    return False


def block_exists(name: str) -> bool:
    """Whether the Prefect block "type/name" exists (and loads)."""
    from prefect.blocks.core import Block

    try:
        Block.load(name)
    except (ValueError, KeyError):  # Prefect: "Unable to find block document named ..."
        return False
    return True


@task(cache_policy=NO_CACHE)
def plan_run(request: RunRequest, project: str) -> RunPlan:
    """Every input read and checked before any work (searcheval.evaluation.preflight), and the
    run's plan (searcheval.evaluation.compose); a refusal is raised with every problem found, and
    the flow decides what it does (alert or not)."""
    request.block_exists = block_exists
    return compose.plan_run(request, project)


@task(cache_policy=NO_CACHE)
def record_refusal(refused: Refused, scheduled: bool) -> None:
    """The refusal's report in the UI (every problem found, not only the first): a Prefect
    artifact, never a file or a row of the history."""
    lines = "\n".join(f"- {line}" for line in refused.lines())
    who = ("a scheduled run: alerted" if scheduled else
           "a manual run: not alerted (it answers whoever started it)")
    create_markdown_artifact(markdown=f"# searcheval run refused\n\n{who}. Nothing was embedded, "
                                      f"searched or written.\n\n{lines}\n",
                             key=REFUSAL_ARTIFACT, description=refused.summary()[:500])


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def judged_documents(collection: Collection) -> set[str]:
    """The documents a golden query has a judgment of: what the document lookups are asked for
    before the judgments are read."""
    with open_database() as conn:
        return source_judged_documents(conn, collection)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def look_up_judged(configurations: list[Configuration], served: str | None,
                   judged: set[str]) -> Lookups:
    """The judged documents asked of every document lookup of the run (HTTP), before the
    judgments are read: their grades then leave out what changed or is gone."""
    return lookups.look_up_judged(configurations, served, judged)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def look_up_results(looked: Lookups, runs: dict[str, RankedRun],
                    configurations: list[Configuration],
                    collection: Collection) -> tuple[dict, Observed]:
    """The top results of every query asked of the lookups (HTTP): per configuration what the
    report shows, and what the run observed of each document (kept as versions)."""
    documents = lookups.look_up_results(looked, runs, configurations, collection)
    return documents, looked.observed()


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def judgments(collection: Collection, rule: str, max_age_days: int | None,
              observed: Observed | None = None,
              sources: str | list[str] | None = None,
              sources_from: str | None = None) -> tuple[Collection, Effective]:
    """The collection with its effective judgments: the stored rows that count (`sources`: the
    run parameter or the project's setting, `sources_from` saying which; else the dataset
    folder's setting) plus the dataset's file (read
    only: the seed is written by `seed_judgments` once the inputs are accepted), and what this
    run's document lookups `observed` (staleness without a catalog)."""
    from searcheval.judging.source import counted_sources

    counted, counted_from = counted_sources(collection, sources, sources_from)
    with open_database() as conn:
        return preview_judgments(conn, collection, parse_rule(rule), max_age_days=max_age_days,
                                 observed=observed, counted=counted, counted_from=counted_from)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def seed_judgments(collection: Collection) -> dict:
    with open_database() as conn:
        return seed_collection_judgments(conn, collection)


def _validation_key(context, parameters) -> str:
    collection: Collection = parameters["collection"]
    # the version and the report's fields are in the key: the cached result is a pickled
    # ValidationReport, and a class that moved or changed (in another version, or in another
    # checkout sharing PREFECT_HOME) must never be loaded from an old cache entry
    key = {"version": __version__, "report": [f.name for f in fields(ValidationReport)],
           "inputs": collection_hashes(collection),
           "max_age_days": parameters["max_age_days"],
           "min_per_category": parameters["min_per_category"],
           "day": datetime.now(timezone.utc).date().isoformat()}
    return "searcheval-validate-" + hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()


@task(cache_key_fn=_validation_key, cache_expiration=timedelta(days=1), persist_result=True)
def validate(collection: Collection, max_age_days: int | None,
             min_per_category: int) -> ValidationReport:
    rows = len(collection.resources) + len(collection.queries) + len(collection.judgments)
    return validate_collection(collection, max_age_days=max_age_days,
                               min_per_category=min_per_category,
                               apart=rows >= defaults.VALIDATE_APART_ROWS)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def seed_catalog(collection: Collection) -> dict:
    with open_database() as conn:
        return pipeline.seed_catalog(conn, collection)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def load_model(texts: list[str], model_path: str | None) -> int:
    """The model loaded while the run seeds its inputs, if the cache lacks any of `texts`
    (submitted after the validation: it overlaps the seeding); the number of texts to embed."""
    from searcheval.rankers.embeddings import load_if_missing

    with open_database() as conn:
        return load_if_missing(conn, texts, model_path)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES,
      task_run_name="embed-{batch}")
def embed_texts(texts: list[str], model_path: str | None, batch: int) -> pipeline.EmbeddedTexts:
    """One batch of texts through the embedding cache (submitted: may run on a Dask worker);
    `batch` numbers it in the task run's name."""
    with open_database() as conn:
        return pipeline.embed_texts(conn, texts, model_path)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def index_collection(collection: Collection, texts: list[str],
                     batches: list[pipeline.EmbeddedTexts],
                     model_path: str | None) -> pipeline.Embedded:
    with open_database() as conn:
        return pipeline.index_collection(conn, collection, texts, batches, model_path)


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES,
      task_run_name="run-{configuration.name}-{shard.number}of{shard.of}")
def run_configuration(configuration: Configuration, collection: Collection,
                      shard: pipeline.QueryShard, model: str, k: int,
                      siblings: dict[str, RankedRun] | None = None) -> RankedRun:
    """One configuration over one shard of the queries (submitted: may run on a Dask worker); a
    connection is opened only for a configuration that reads the database (and whose siblings'
    runs, taken for its components, do not already answer it). The Prefect Secret blocks it
    names are read here, handed to the library in memory, never logged or stored."""
    database = open_database() if needs_database(configuration) and \
        pipeline.shard_needs_database(configuration, collection, shard, k, siblings) \
        else nullcontext()
    with database as conn:
        return pipeline.run_shard(conn, configuration, collection, shard, model, k,
                                  secrets=load_secrets(secret_blocks(configuration)),
                                  siblings=siblings)


def load_secrets(names: list[str]) -> dict[str, str]:
    """The values of Prefect Secret blocks by name; a missing block is refused input, naming it."""
    if not names:
        return {}
    from prefect.blocks.system import Secret

    values = {}
    for name in names:
        try:
            values[name] = Secret.load(name).get()
        except ValueError as exc:
            raise InputError(f"no Prefect Secret block {name!r} ({type(exc).__name__})",
                             field="secret") from None
    return values


@task(cache_policy=NO_CACHE)
def coverage(runs: dict[str, RankedRun], qrels: dict, k: int, floor: float,
             floor_source: str = "default") -> dict:
    return results_coverage(runs, qrels, k=k, floor=floor, floor_source=floor_source)


@task(cache_policy=NO_CACHE)
def score(runs: dict[str, RankedRun], collection: Collection, qrels: dict,
          metrics: tuple[str, ...], settings: Settings = Settings()) -> dict:
    return pipeline.score_runs(runs, collection, qrels, metrics, settings)


@task(cache_policy=NO_CACHE)
def gate(scores: dict, baseline, tolerance: float | None, configuration: str | None = None,
         dataset: str | None = None, today: pipeline.Today | None = None):
    """The verdict of `configuration` (a candidate; default the baseline's) against the baseline
    (the preflight's Baseline, or a path). The spread of per-query differences for the minimum
    detectable effect comes from the dataset's history in Postgres when there is one. When the
    gate trips the task run ends Failed (the UI's task graph shows where the run failed) and
    still hands the verdict on, so the flow publishes and alerts."""
    spread, rescored = {}, None
    if baseline is not None and dataset is not None:
        from searcheval.evaluation.baseline import Baseline, load_baseline

        gated = baseline if isinstance(baseline, Baseline) else load_baseline(baseline)
        with open_database() as conn:
            spread = {m: pipeline.history_spread(conn, dataset, m) for m in gated.metrics}
            if today is not None:  # the same judgments: the baseline re-scored under today's
                rescored = pipeline.rescore_baseline(conn, gated, today)
    verdict = pipeline.gate_scores(scores, baseline, tolerance, configuration, spread, rescored)
    if verdict is not None and not verdict.passed:
        return Failed(message=f"gate tripped for {verdict.configuration}: "
                              + "; ".join(trip.describe() for trip in verdict.tripped),
                      data=verdict)
    return verdict


def result_project(result) -> str | None:
    """The project a run was of (its settings block), if any."""
    return ((result.conventions or {}).get("settings") or {}).get("project")


def artifact_key(*parts: str | None) -> str:
    """A Prefect artifact key (lowercase letters, digits, dashes) from its parts: stable per
    dataset and configuration, so the UI's artifact history shows one series each."""
    text = "-".join(p for p in parts if p)
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text.lower())).strip("-")


@task(cache_policy=NO_CACHE, retry_condition_fn=not_refused_input, **IO_RETRIES)
def publish(result: EvaluationResult, runs: dict[str, RankedRun], output: str | None,
            qrels: dict | None = None, retention: str | None = None,
            output_retention: str | None = None) -> dict:
    """History and the snapshot of the ranked lists in Postgres (one transaction), the diff
    against the previous run of the dataset, files in `output/<run_id>/` (+ `latest`), and
    artifacts under stable keys. Returns {"snapshot_rows", "diff", "pruned"}."""
    from searcheval.evaluation.diff import diff_json, diff_markdown
    from searcheval.store.snapshots import parse_age, prune_snapshots

    logger = get_run_logger()
    with open_database() as conn:
        rows = pipeline.publish_history(conn, result, runs, qrels)
        diff = pipeline.diff_with_previous(conn, result)
        candidate_diff = pipeline.diff_candidate(conn, result)
        pruned = prune_snapshots(conn, parse_age(retention)) if retention else None
    if pruned and pruned["rows"]:
        logger.info("pruned %d snapshot rows of %d runs older than %s", pruned["rows"],
                    pruned["runs"], retention)
    extra = {"diff.md": diff_markdown(diff), "diff.json": diff_json(diff)} if diff else {}
    if candidate_diff:
        extra |= {"candidate_diff.md": diff_markdown(candidate_diff),
                  "candidate_diff.json": diff_json(candidate_diff)}
    if output:
        write_outputs(result, runs, output, extra)
        if output_retention:  # the run folders it wrote before, past their age
            from searcheval.evaluation.retention import prune_outputs

            gone = prune_outputs(output, parse_age(output_retention))
            if gone["removed"]:
                logger.info("removed %d run folder(s) in %s older than %s",
                            len(gone["removed"]), output, output_retention)
    gate = result.gate
    status = result.gate_status()

    def keyed(base: str) -> str:  # the project's name in its keys: two projects never mix
        return artifact_key(project_key(base, result_project(result)))
    rows_table = []
    for name, s in result.scores.items():
        row = {"configuration": name,
               **{m: (None if v is None else round(v, 4)) for m, v in s.means.items()},
               # a mean over fewer queries is marked as such, never a plain mean
               "means over": s.incomplete_means or "all queries",
               "p95_ms": None if s.latency_ms["p95"] is None else round(s.latency_ms["p95"], 1),
               "gate": (status["status"] if gate is None or gate.configuration == name
                        else "")}
        if gate is not None and gate.configuration == name:
            for metric, c in gate.compared.items():
                row[f"baseline {metric}"] = c["baseline"]
                row[f"delta {metric}"] = None if c["delta"] is None else round(c["delta"], 6)
        rows_table.append(row)
    partial = [f"{n}: {s.incomplete_means}" for n, s in result.scores.items()
               if s.incomplete_means]
    description = (f"searcheval run {result.run_id}: means over the golden queries"
                   + (f" ({'; '.join(partial)})" if partial else "")
                   + f"; {result.gate_line()}")[:2000]
    create_table_artifact(table=rows_table, key=keyed(METRICS_ARTIFACT), description=description)
    if result.dataset:
        create_table_artifact(table=rows_table,
                              key=artifact_key(keyed(METRICS_ARTIFACT), result.dataset),
                              description=description)
        for name, s in result.scores.items():  # one series per dataset and configuration
            compared = gate.compared if gate is not None and gate.configuration == name else {}
            create_table_artifact(
                table=[{"metric": m, "value": v,
                        "baseline": (compared.get(m) or {}).get("baseline"),
                        "delta": (compared.get(m) or {}).get("delta")}
                       for m, v in s.means.items()],
                key=artifact_key(keyed(METRICS_ARTIFACT), result.dataset, name),
                description=f"searcheval run {result.run_id}: {name} on {result.dataset}")
    # the UI's artifact pane is narrow: wide tables are cut so the report reads without
    # scrolling sideways (report.md in the output folder keeps them whole)
    create_markdown_artifact(markdown=redact(narrow_tables(markdown_report(result))),
                             key=keyed(REPORT_ARTIFACT),
                             description=f"searcheval run {result.run_id}")
    ran = result.what_ran or {}
    if ran.get("configurations"):
        code = ran.get("code") or {}
        create_table_artifact(
            table=[{"configuration": name, "kind": c["kind"], "sha256": c["sha256"],
                    "served": c["served"], "overridden": json.dumps(c.get("overridden") or {}),
                    "commit": code.get("commit"), "dirty": code.get("dirty")}
                   for name, c in ran["configurations"].items()],
            key=keyed(WHAT_RAN_ARTIFACT),
            description=f"searcheval run {result.run_id}: what ran (secrets never shown)")
        tag_flow_run(provenance.tags(ran))

    if diff:
        create_markdown_artifact(
            markdown=redact(diff_markdown(diff, limit=20)),
            key=artifact_key(keyed(DIFF_ARTIFACT), result.dataset, diff["b"]["configuration"]),
            description=f"searcheval run {result.run_id} against {diff['a']['run_id']}: "
                        f"{diff['headline']}")
    if candidate_diff:
        create_markdown_artifact(
            markdown=redact(diff_markdown(candidate_diff, limit=20)),
            key=artifact_key(keyed(CANDIDATE_DIFF_ARTIFACT), result.dataset),
            description=f"searcheval run {result.run_id}: candidate "
                        f"{candidate_diff['b']['configuration']} against served "
                        f"{candidate_diff['a']['configuration']}: {candidate_diff['headline']}")
    return {"snapshot_rows": rows, "diff": diff, "candidate_diff": candidate_diff,
            "pruned": pruned}


def tag_flow_run(tags: list[str]) -> None:
    """Add the record's tags (configuration@hash, commit, dirty) to this flow run."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    if not flow_run.id or not tags:
        return
    try:
        with get_client(sync_client=True) as client:
            current = client.read_flow_run(flow_run.id)
            client.update_flow_run(flow_run.id,
                                   tags=list(dict.fromkeys([*(current.tags or []), *tags])))
    except Exception as exc:  # noqa: BLE001 - tags are a convenience; the record is published
        get_run_logger().warning("could not tag the flow run: %s", type(exc).__name__)


#: the suffix the flow run's name gets once its alert is delivered: the failed-run automation
#: (deploy/automations.yaml) matches only flow runs whose name does not end with it, so a trip
#: pages once whichever channels are configured
ALERTED = "(searcheval: alerted)"
ALERTED_TAG = "searcheval:alerted"


def run_tag(run_id: str) -> str:
    """The flow run's tag naming the searcheval run id (what the history, the output folder and
    the alerts call the run)."""
    return f"searcheval:run={run_id}"


def flow_run_url() -> str | None:
    """The absolute address of this flow run's page in the Prefect UI (PREFECT_UI_URL), or None
    outside a flow run or without a UI address."""
    from prefect.runtime import flow_run
    from prefect.settings import PREFECT_UI_URL

    base = PREFECT_UI_URL.value()
    if not flow_run.id or not base:
        return None
    return f"{str(base).rstrip('/')}/runs/flow-run/{flow_run.id}"


def mark_alerted() -> None:
    """Rename this flow run `<name> (searcheval: alerted)` and tag it: its final state's event
    then carries that name, and the failed-run automation leaves it alone (it was paged)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    if not flow_run.id:
        return
    try:
        with get_client(sync_client=True) as client:
            current = client.read_flow_run(flow_run.id)
            name = current.name if current.name.endswith(ALERTED) else f"{current.name} {ALERTED}"
            client.update_flow_run(flow_run.id, name=name,
                                   tags=list(dict.fromkeys([*(current.tags or []), ALERTED_TAG])))
    except Exception as exc:  # noqa: BLE001 - then the automation pages too: twice, never zero
        get_run_logger().warning("could not mark the flow run alerted: %s", type(exc).__name__)


@task(cache_policy=NO_CACHE)
def send_alert(alert: Alert, block: str | None) -> dict:
    """One delivery per event, through one channel: the Prefect notification block
    ("type/name") when the run names one, else the webhook (SEARCHEVAL_ALERT_WEBHOOK). The alert
    carries the flow run's absolute URL. Once delivered, the flow run is marked alerted
    (`mark_alerted`), so the failed-run automation does not page the same trip again.

    A delivery failure is logged and reported, never raised: it changes neither the verdict nor
    the exit code (the results are already published, or the refusal stands), and the unmarked
    run is then paged by the failed-run automation instead.
    """
    logger = get_run_logger()
    alert.url = alert.url or flow_run_url()
    delivered: dict[str, str] = {}
    url = webhook_url()
    if block:
        try:
            from prefect.blocks.core import Block

            Block.load(block).notify(alert.body(), subject=alert.subject)
            delivered["block"] = block
        except Exception as exc:  # noqa: BLE001 - a broken block must not lose the run
            logger.error("alert block %s failed: %s", block, type(exc).__name__)
            delivered["block"] = "failed"
    elif url:
        try:
            delivered["webhook"] = f"HTTP {post_webhook(url, alert.payload())}"
        except Exception as exc:  # noqa: BLE001 - AlertDeliveryError, or a URL urllib refuses
            logger.error("alert not delivered: %s", exc if isinstance(exc, AlertDeliveryError)
                         else f"webhook (SEARCHEVAL_ALERT_WEBHOOK): {type(exc).__name__}")
            delivered["webhook"] = "failed"
    if not delivered:
        logger.warning("alert not delivered: set SEARCHEVAL_ALERT_WEBHOOK or the alert_block "
                       "parameter. %s", alert.body())
    elif "failed" not in delivered.values():  # a failure is logged above; the failed-run
        logger.warning("alert sent (%s): %s", ", ".join(delivered), alert.subject)
        mark_alerted()  # automation pages a run that is not marked
    return delivered
