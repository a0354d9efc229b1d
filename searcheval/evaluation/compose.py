"""One composition of a nightly run, as `searcheval.replay.compose` is of a replay: the plan the
preflight checked, and the plain steps between the nightly flow's tasks.

    plan = plan_run(request, project)       # every input read and checked once, before any work
    report = checked_judgments(plan, ...)   # validation + the judges' agreement: refused or not
    view = judged_view(plan, ...)           # the staleness lookups told, the labels that count
    result = evaluation_result(plan, ...)   # what one evaluation found (metrics.json, the report)

What touches the network or the database is a task in tasks/evaluation.py (the judged documents,
the document lookups, the judgments, seeding, embedding, the search, the gate's history spread,
publishing); flows/nightly.py calls those tasks over the plan. No Prefect here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from searcheval.evaluation import pipeline, provenance
from searcheval.evaluation.baseline import dataset_of
from searcheval.evaluation.candidates import candidate_names, compare_candidates, gated_configuration
from searcheval.evaluation.lookups import any_lookup, lookup_staleness
from searcheval.evaluation.preflight import Preflight, RunRequest
from searcheval.evaluation.report import EvaluationResult, query_notes
from searcheval.evaluation.validation import ValidationReport
from searcheval.io.collection import collection_hashes
from searcheval.judging.judgments import Effective, judgment_set
from searcheval.judging.summary import pool_command
from searcheval.judging.versions import Observed
from searcheval.metrics.engine import parse_metrics
from searcheval.project import find_project, pool_flags, resolve_request, run_settings
from searcheval.rankers.registry import needs_embeddings
from searcheval.types import Collection, RankedRun


@dataclass
class RunPlan:
    """Everything the preflight read and checked, for the run to use: nothing is read or parsed
    twice inside one run (the configurations file once, the conventions resolved once, every
    numeric option such as `depth` and `snapshot_depth` checked once)."""

    request: RunRequest
    collection: Collection  # as loaded: the judgments the dataset's own file holds
    resolved: Any  # rankers.configs.Configurations: the file with the overrides
    selected: list  # the Configurations this run runs (the candidate and the served one too)
    metrics: tuple[str, ...]  # the metrics' canonical names (any spelling asked, ours published)
    conventions: Any  # evaluation.conventions.Conventions, with where each value came from
    baseline: Any  # evaluation.baseline.Baseline | None
    not_gated_reason: str | None
    code: dict  # provenance.code_state of the project folder
    project: str = "."  # the project folder (its settings: `project_settings`)

    @property
    def served(self) -> str | None:
        return self.resolved.served

    @property
    def embeds(self) -> bool:
        """Whether some configuration reads vectors (dense, fused): else no model is loaded."""
        return needs_embeddings(self.selected)

    @property
    def looks_up(self) -> bool:
        """Whether some configuration has a document lookup (rankers.documents)."""
        return any_lookup(self.selected)

    def texts(self) -> list[str]:
        """The documents' and queries' texts to embed ([] when nothing reads vectors)."""
        return pipeline.collection_texts(self.collection) if self.embeds else []

    @property
    def source(self) -> str:
        r = self.request
        return str(r.mapping or r.dataset or r.fixtures)


def plan_run(request: RunRequest, project: str | Path, found: Preflight | None = None) -> RunPlan:
    """The checked plan of `request` (its preflight `found` when the caller ran it already);
    raises `preflight.Refused` with every problem, or InputError for a dirty tree (when
    `allow_dirty` is false) and for a catalog configuration on a dataset without documents."""
    from searcheval.evaluation.preflight import preflight

    resolve_request(request, project_settings(project))  # the project's settings fill the gaps
    found = found if found is not None else preflight(request)
    found.raise_for_problems()
    code = provenance.code_state(project, run_inputs(request, found.collection, project))
    if not request.allow_dirty:
        provenance.refuse_dirty(code)
    selected = request.selected()
    pipeline.check_documents(found.collection, selected)
    return RunPlan(request=request, collection=found.collection, resolved=request.resolved(),
                   selected=selected,
                   metrics=tuple(m.name for m in parse_metrics(request.metrics)),
                   conventions=found.conventions, baseline=found.baseline,
                   not_gated_reason=found.not_gated_reason, code=code, project=str(project))


def run_inputs(request: RunRequest, collection: Collection | None,
               project: str | Path) -> list[Path]:
    """What a run reads, so what makes its working tree dirty (`provenance.code_state`): the
    configurations file, the baseline, the dataset (its folder or mapping, and every file it was
    loaded from), the project settings (searcheval.yaml), the validation suites (expectations/),
    the judges file when a judge is named, and the code (the searcheval package, flows/ and
    tasks/ beside the project). Not deploy/prefect.yaml: a deployment's parameters travel with
    each flow run (recorded there) and its schedule is not an input, so editing a cron is not
    dirt; nor anything else in the tree (README, docs, a stray nohup.out)."""
    import searcheval
    from searcheval.evaluation.validation import expectations_dir

    project = Path(project)
    paths: list[Path] = [Path(searcheval.__file__).resolve().parent,
                         project / "flows", project / "tasks", expectations_dir()]
    for value in (request.configurations_file, request.baseline, request.fixtures,
                  request.dataset):
        if value:
            paths.append(Path(value))
    if request.mapping:
        paths.append(Path(request.mapping).parent)  # the mapping and the files beside it
    if request.judge:
        file = request.judge.rsplit(":", 1)[0] if ":" in request.judge else None
        paths.append(Path(file) if file else project / "judges.yaml")
    settings = project_settings(project)
    if settings is not None:
        paths.append(Path(settings.file))
    if collection is not None:
        paths += [Path(p) for p in (getattr(collection, "sources", None) or {}).values()
                  if isinstance(p, (str, Path)) and p]
    return paths


def project_settings(project: str | Path):
    """The project settings of a run: SEARCHEVAL_SETTINGS, else the working directory's (or
    above), else those of the project folder the flows came from (searcheval.project)."""
    return find_project() or find_project(project)


def run_values(request: RunRequest) -> dict:
    """The settled options `searcheval.project`'s report helpers read."""
    return {name: getattr(request, name, None) for name in (
        "fixtures", "dataset", "mapping", "split", "judgment_rule", "configurations_file",
        "baseline", "dataset_name", "sources")}


def checked_judgments(plan: RunPlan, report: ValidationReport, collection: Collection,
                      effective: Effective) -> ValidationReport:
    """The validation report with the judges' checks (agreement against its floor); raises the
    refusal when the inputs are broken."""
    report = pipeline.with_judging_checks(report, collection, effective,
                                          plan.request.agreement_floor)
    report.raise_for_errors()
    return report


@dataclass
class JudgedView:
    """The judgments the scores count: stale labels (also those a lookup found gone or changed)
    left out."""

    report: ValidationReport
    fresh: Collection
    qrels: dict


def judged_view(report: ValidationReport, documents: dict, collection: Collection) -> JudgedView:
    report = lookup_staleness(report, documents, collection)
    fresh = pipeline.fresh_collection(collection, report)
    return JudgedView(report=report, fresh=fresh, qrels=fresh.qrels())


def gate_or_reason(plan: RunPlan, failures: dict) -> str | None:
    """Why this run is not gated: the preflight's reason, or queries failed beyond what their
    configuration allows (an incomplete run is never gated)."""
    if failures["incomplete"]:
        return pipeline.incomplete_message(failures)
    return plan.not_gated_reason


def gated_name(plan: RunPlan) -> str | None:
    """The configuration the gate guards: the one candidate, else (several candidates, or none)
    the served one (`evaluation.candidates.gated_configuration`)."""
    return gated_configuration(plan.request.candidate)


def side_by_side(plan: RunPlan, scores: dict) -> dict | None:
    """The one candidate beside the served configuration, when both ran (several candidates:
    `candidate_family`)."""
    single, served = gated_configuration(plan.request.candidate), plan.served
    if single and single in scores and served in scores:
        return pipeline.compare_candidate(scores, single, served)
    return None


def candidate_family(plan: RunPlan, scores: dict) -> dict | None:
    """Every candidate against the served configuration on the same queries, with Holm's
    correction over the family (`evaluation.candidates`)."""
    candidate, served = plan.request.candidate, plan.served
    if not candidate or served not in scores:
        return None
    return compare_candidates(scores, [c for c in candidate_names(candidate) if c in scores],
                              served)


def evaluation_result(plan: RunPlan, *, run_id: str, started: datetime, collection: Collection,
                      embedded: pipeline.Embedded, runs: dict[str, RankedRun], view: JudgedView,
                      scores: dict, verdict, not_gated_reason: str | None, coverage: dict,
                      failures: dict, effective: Effective, documents: dict,
                      observed: Observed | None, flow_run_id: str | None,
                      kind: str, execution: dict | None = None) -> EvaluationResult:
    """What one evaluation found: metrics.json, the report, the history's rows. `execution`:
    where the work ran (the flow's task runner, shards, embedding batch), kept in what_ran."""
    r = plan.request
    hashes = collection_hashes(collection)
    judging = pipeline.judging_summary(runs, view.fresh, view.qrels, plan.metrics,
                                       plan.conventions.settings(), run_id, coverage,
                                       r.coverage_k, effective, r.agreement_floor,
                                       verdict=verdict, baseline=plan.baseline,
                                       tolerance=r.tolerance, candidate=r.candidate)
    values = run_values(r)  # the pool command printed by the report and the alert, as it runs
    judging["pool"]["command"] = pool_command(run_id, r.coverage_k, pool_flags(values, r.output))
    return EvaluationResult(
        run_id=run_id, started_at=started, finished_at=datetime.now(timezone.utc),
        source=plan.source, input_hashes=hashes, model=embedded.model, scores=scores,
        gate=verdict, validation=view.report.to_dict(), coverage=coverage,
        embeddings=embedded.stats, flow_run_id=flow_run_id, label=r.label,
        conventions={**plan.conventions.to_dict(), "depth": r.depth,  # the gate: same depth
                     "settings": run_settings(values, r.sources, collection, depth=r.depth,
                                              project=project_settings(plan.project))},
        queries=query_notes(collection.queries, pipeline.segments_of(collection.queries)),
        judging=judging, not_gated_reason=not_gated_reason, dataset=dataset_of(collection),
        snapshot_depth=r.snapshot_depth, kind=r.kind or kind, failures=failures,
        candidate=side_by_side(plan, scores), candidates=candidate_family(plan, scores),
        documents=documents, observed=observed,
        judgment_set=judgment_set(collection),
        cost=pipeline.costs(runs, plan.selected, embedded, len(collection.queries)),
        what_ran=provenance.run_record(pipeline.what_ran(plan.resolved, plan.selected), plan.code,
                                       embedded.model, pipeline.model_sha256(r.model_path),
                                       hashes, execution=execution,
                                       golden_queries=provenance.golden_queries_sample(
                                           collection.provenance)))
