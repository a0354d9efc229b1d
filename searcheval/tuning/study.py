"""One study from its request to its verdict, as plain functions the CLI's flow (flows/tune.py)
and the benchmark share: `prepare` checks everything and lays the study out (before the first
trial), `run_trials` searches, `judge_before_verdict` (with a model judge) labels the pool the
choice and the verdict lack, `conclude` gives the held-out verdict and writes the outputs.

The grades are the effective ones (`read_grades`: the dataset's judgments and the stored ones
that count, by the judgment rule and sources), as `searcheval run` scores with; each trial is
stored with their digest, and a resumed study whose grades changed rescores its stored trials."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from searcheval import defaults
from searcheval.errors import InputError
from searcheval.metrics.engine import Settings
from searcheval.tuning.search import Objective, TrialResult, TrialRunner

DEFAULT_TRIALS = 50
DEFAULT_HELD_OUT = 0.3
DEFAULT_UNJUDGED = 0.3
DEFAULT_MIN_EFFECT = 0.02  # the gate's default tolerance: the smallest difference worth finding


@dataclass
class TuneRequest:
    """What `searcheval tune` was asked (the flow's parameters)."""

    fixtures: str | None = None
    dataset: str | None = None
    split: str = defaults.SPLIT
    max_queries: int | None = None
    configurations_file: str = defaults.CONFIGURATIONS_FILE
    overrides: dict[str, Any] | None = None
    params: dict[str, Any] | None = None  # NAME.PARAM -> spec (`--param`)
    space_file: str | None = None
    target: str | None = None
    name: str | None = None  # the proposed entry's name (default <target>_tuned)
    trials: int = DEFAULT_TRIALS
    sampler: str = "tpe"
    seed: int = 0
    held_out: float = DEFAULT_HELD_OUT
    metric: str = "ndcg@10"
    unjudged_threshold: float = DEFAULT_UNJUDGED
    min_effect: float = DEFAULT_MIN_EFFECT
    parallel: int = 1
    depth: int = defaults.DEPTH
    label: str | None = None  # part of the study's identity: another label is another study
    top: int = 3  # the tuning's top N, each compared on the held-out part (Holm), as context
    # the grades: the dataset's own and the stored ones that count (judging.source), by the rule;
    # not part of the study's identity: a study whose grades changed is the same study, rescored
    judgment_rule: str | None = None  # None: defaults.JUDGMENT_RULE
    judgment_sources: str | list[str] | None = None  # None: the dataset's setting, else default
    max_age_days: int | None = defaults.MAX_AGE_DAYS
    judge: str | None = None  # NAME or FILE:NAME of a judges file: labels the pool first
    judge_limit: int | None = None  # at most this many pairs labelled by the judge
    guideline: str | None = None  # the guideline text the judge is shown (None: the default one)

    def check_numbers(self) -> None:
        for name, value, lo in (("trials", self.trials, 1), ("parallel", self.parallel, 1),
                                ("depth", self.depth, 1), ("top", self.top, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise InputError(f"expected a whole number >= {lo}, got {value!r}", field=name)
        for name, value in (("judge_limit", self.judge_limit),
                            ("max_age_days", self.max_age_days)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise InputError(f"expected a whole number >= 0, got {value!r}", field=name)
        if self.judge_limit is not None and not self.judge:
            raise InputError("a judge limit without a judge: name it with --judge NAME",
                             field="judge_limit")
        for name, value in (("unjudged_threshold", self.unjudged_threshold),
                            ("min_effect", self.min_effect)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0.0 <= value <= 1.0:
                raise InputError(f"expected a share in [0, 1], got {value!r}", field=name)


@dataclass
class Prepared:
    """A study laid out, before its first trial."""

    request: TuneRequest
    collection: Any
    raw: dict
    resolved: Any
    space: Any
    target: str
    served: str
    split: Any
    study_id: str
    definition: dict
    settings: Settings
    qrels: dict
    objective: Objective | None = None
    held_runner: TrialRunner | None = None
    warnings: list[str] = field(default_factory=list)
    conn: Any = None
    embedded: dict = field(default_factory=dict)
    effective: Any = None  # judging.judgments.Effective: the grades the trials are scored with
    grades: str | None = None  # its digest, stored with each trial
    model_path: str | None = None


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def check(request: TuneRequest, collection=None) -> Prepared:
    """Every input checked, the space built, the target and the split made; no database, no
    model, no trial. InputError naming the file and the parameter otherwise."""
    from searcheval.io.collection import collection_hashes, load_collection
    from searcheval.io.files import read_yaml_mapping
    from searcheval.metrics.engine import parse_metric
    from searcheval.rankers.configs import configurations_from
    from searcheval.tuning.space import build_space, default_target, read_space_file
    from searcheval.tuning.split import check_held_out, split_queries

    request.check_numbers()
    parse_metric(request.metric)
    check_grades(request)
    if collection is None:
        chosen = request.dataset is not None
        collection = load_collection(fixtures=None if chosen else request.fixtures,
                                     dataset=request.dataset, split=request.split,
                                     max_queries=request.max_queries)
    file = request.configurations_file
    if not Path(file).is_file():
        raise InputError("no such configurations file", file=file, field="configurations_file")
    raw = read_yaml_mapping(Path(file))
    resolved = configurations_from(raw, file, request.overrides)
    specs: dict[str, Any] = {}
    source = "--param"
    if request.space_file:
        specs.update(read_space_file(request.space_file))
        source = request.space_file
    specs.update(request.params or {})
    space = build_space(specs, source, raw, file, request.overrides, request.target)
    target = request.target or default_target(space, resolved)
    split = split_queries(collection.queries, request.held_out, request.seed)
    check_held_out(split, sd=None, effect=request.min_effect)  # too few: refused now
    definition = {"space": space.to_dict(), "sampler": request.sampler, "seed": request.seed,
                  "held_out": request.held_out, "target": target, "served": resolved.served,
                  "metric": request.metric, "unjudged_threshold": request.unjudged_threshold,
                  "configurations": hashlib.sha256(_canonical(raw).encode()).hexdigest(),
                  "overrides": request.overrides or {}, "depth": request.depth,
                  "label": request.label,
                  "collection": collection_hashes(collection)}
    if request.sampler == "grid":
        from searcheval.tuning.space import grid_space

        grid_space(space)  # a continuous dimension or too many points: refused now
    elif request.sampler != "tpe":
        raise InputError(f"expected a sampler tpe or grid, got {request.sampler!r}",
                         field="sampler")
    study_id = hashlib.sha256(_canonical(definition).encode()).hexdigest()
    return Prepared(request=request, collection=collection, raw=raw, resolved=resolved,
                    space=space, target=target, served=resolved.served, split=split,
                    study_id=study_id, definition=definition, settings=Settings(),
                    qrels=collection.qrels(), warnings=[])


def check_grades(request: TuneRequest) -> None:
    """The judgment rule, the sources and the judge (its file, its fields, the product's rule
    against the configurations), before the first trial."""
    from searcheval.io.settings import check_judgment_sources
    from searcheval.judging.judgments import parse_rule

    parse_rule(request.judgment_rule or defaults.JUDGMENT_RULE)
    if request.judgment_sources is not None:
        check_judgment_sources(request.judgment_sources)
    if request.judge:
        from searcheval.judging.labelling import check_judge_reference

        check_judge_reference(request.judge, request.configurations_file)


def read_grades(prepared: Prepared, conn) -> Prepared:
    """The effective grades (judging.source.preview_judgments): the dataset's own judgments and
    the stored ones that count (`judgment_sources`; a model judge's only while its audit holds),
    by the rule; put in the objective, with their digest. Read again after a labelling."""
    from searcheval.judging.judgments import parse_rule
    from searcheval.judging.source import counted_sources, preview_judgments

    request = prepared.request
    counted, counted_from = counted_sources(prepared.collection, request.judgment_sources)
    graded, effective = preview_judgments(
        conn, prepared.collection, parse_rule(request.judgment_rule or defaults.JUDGMENT_RULE),
        max_age_days=request.max_age_days, counted=counted, counted_from=counted_from)
    prepared.qrels = graded.qrels()
    prepared.effective = effective
    prepared.grades = effective.digest()
    if prepared.objective is not None:
        prepared.objective.qrels = prepared.qrels
    return prepared


def grades_summary(prepared: Prepared) -> dict:
    """What the trials and the verdict were scored with: the rule, the sources that counted, the
    model judges and whether their grades count (judging.counting)."""
    from searcheval.judging.source import describe_sources

    e = prepared.effective
    if e is None:
        return {}
    return {"rule": e.rule.name, "counted": e.counted if isinstance(e.counted, str)
            else list(e.counted), "counted_text": describe_sources(e.counted),
            "counted_from": e.counted_from, "pairs": len(e.judgments), "digest": prepared.grades,
            "model_judges": {j: {"counts": bool(a.get("counts")), "reason": a.get("reason"),
                                 "pairs_counted": a.get("pairs_counted", 0),
                                 "audited": (a.get("agreement") or {}).get("items", 0),
                                 "alpha": (a.get("agreement") or {}).get("alpha")}
                             for j, a in sorted((e.model_judges or {}).items())}}


def prepare(prepared: Prepared, conn, model_path: str | None = None,
            say: Callable[[str], None] = lambda line: None) -> Prepared:
    """The database side: the catalog and its vectors through the embedding cache (only texts
    never embedded reach the model), the runners of the two parts, the spread estimate for the
    held-out warning, the study's row (an existing one keeps its split)."""
    from searcheval import store
    from searcheval.rankers.registry import RunContext, needs_embeddings
    from searcheval.store import tuning as tuning_store
    from searcheval.tuning.split import Split, check_held_out

    request, collection, resolved = prepared.request, prepared.collection, prepared.resolved
    prepared.model_path = model_path
    read_grades(prepared, conn)  # the stored grades that count, not only the dataset's file
    row = tuning_store.open_study(conn, prepared.study_id, target=prepared.target,
                                  served=prepared.served, metric=request.metric,
                                  definition=prepared.definition,
                                  split=prepared.split.to_dict())
    stored = row["split"]
    prepared.split = Split(tuple(stored["tuning"]), tuple(stored["held_out"]),
                           float(stored["share"]), int(stored["seed"]))
    selected = [resolved[prepared.target], resolved[prepared.served]]
    vectors = None
    context = RunContext(conn=conn, catalog=collection.catalog_id,
                         resources=collection.resources)
    if needs_embeddings(selected):
        from searcheval.rankers.dense import index_documents
        from searcheval.rankers.embeddings import CachedEmbedder

        store.save_catalog(conn, collection.catalog_id, collection.resources)
        embedder = CachedEmbedder(conn, model_path, show_progress=False)
        say(f"embedding through the cache: {len(collection.resources)} documents, "
            f"{len(collection.queries)} queries")
        index_documents(conn, collection.catalog_id, embedder, collection.resources)
        vectors = embedder.embed([q.text for q in collection.queries])
        context.model = embedder.model
        prepared.embedded = {"model": embedder.model, "embedded": embedder.embedded,
                             "from_cache": embedder.from_cache}
    position = {q.id: i for i, q in enumerate(collection.queries)}
    by_id = {q.id: q for q in collection.queries}

    def runner(ids) -> TrialRunner:
        rows = [position[q] for q in ids]
        return TrialRunner(context, [by_id[q] for q in ids],
                           None if vectors is None else vectors[rows], request.depth)

    tuning = runner(prepared.split.tuning)
    prepared.held_runner = runner(prepared.split.held_out)
    grades = [j.grade for j in collection.judgments] + \
        [g for q in prepared.qrels.values() for g in q.values()]
    prepared.objective = Objective(
        configurations_raw=prepared.raw, configurations_file=request.configurations_file,
        base_overrides=dict(request.overrides or {}), target=prepared.target, runner=tuning,
        qrels=prepared.qrels, metric=request.metric, settings=prepared.settings,
        top_grade=max(grades) if grades else 1,
        unjudged_threshold=request.unjudged_threshold)
    # the spread of per-query differences (served vs the target as it stands), tuning part only
    sd = _spread(prepared, tuning)
    warning = check_held_out(prepared.split, sd=sd, effect=request.min_effect)
    if warning:
        prepared.warnings.append(warning)
        say(f"warning: {warning}")
    prepared.conn = conn
    return prepared


def _spread(prepared: Prepared, tuning: TrialRunner) -> float | None:
    from searcheval.metrics.engine import evaluate
    from searcheval.metrics.stats import pooled_sd

    metric = prepared.request.metric
    runs = [tuning.run(prepared.resolved[n]) for n in (prepared.target, prepared.served)]
    ids = [q.id for q in tuning.queries if not any(q.id in r.errors for r in runs)]
    values = [evaluate(prepared.qrels, r.as_run(), [metric], prepared.settings,
                       query_ids=ids).values[metric] for r in runs]
    sd, _ = pooled_sd([values[0] - values[1]])
    return sd


def stored_trials(prepared: Prepared) -> tuple[list[TrialResult], list[int]]:
    """(the study's stored trials, the numbers of those scored with other grades than the
    current ones: to be rescored, not reused)."""
    from searcheval.store import tuning as tuning_store

    rows = tuning_store.load_trials(prepared.conn, prepared.study_id)
    trials = [TrialResult(number=r["number"], overrides=r["overrides"], sha256=r["sha256"],
                          value=r["value"], metrics=r["metrics"], judged=r["judged"],
                          bounds=r["bounds"], flagged=r["flagged"], seconds=r["seconds"])
              for r in rows]
    return trials, [r["number"] for r in rows if r.get("grades") != prepared.grades]


def rescore(prepared: Prepared, trials: list[TrialResult],
            numbers: set[int] | None = None) -> list[TrialResult]:
    """The trials (those of `numbers`, else all) scored again with the current grades, stored
    with their digest; each keeps its number, overrides and the time its first scoring took. The
    same configuration runs again through the cached lists (a `fuse` trial only re-fuses)."""
    from searcheval.store import tuning as tuning_store

    out = []
    for t in trials:
        if numbers is not None and t.number not in numbers:
            out.append(t)
            continue
        again = replace(prepared.objective(t.number, t.overrides), seconds=t.seconds)
        if again.sha256 != t.sha256:  # the configurations file changed: another study's id
            raise InputError(f"trial {t.number} now resolves to another configuration "
                             f"({again.sha256[:12]}, stored {t.sha256[:12]})", field="trials")
        tuning_store.rescore_trial(prepared.conn, prepared.study_id, again.row(), prepared.grades)
        out.append(again)
    return out


def run_trials(prepared: Prepared, evaluate_batch: Callable | None = None,
               say: Callable[[str], None] = lambda line: None) -> list[TrialResult]:
    """Resumes the stored trials, then runs the rest up to `request.trials`, each stored as it
    is scored. `evaluate_batch` defaults to this process, one after the other."""
    from searcheval.store import tuning as tuning_store
    from searcheval.tuning.search import make_study, replay, search

    request = prepared.request
    study, trials = make_study(prepared.space, request.sampler, request.seed, request.trials)
    done, stale = stored_trials(prepared)
    if done:
        say(f"resuming study {prepared.study_id[:12]}: {len(done)} trials stored")
        if stale:  # new grades since: the stored metrics would be of other grades
            say(f"the grades changed since {len(stale)} of them were scored: rescoring them")
            done = rescore(prepared, done, set(stale))
        replay(study, prepared.space, done)
    objective = prepared.objective
    if evaluate_batch is None:
        def evaluate_batch(batch):
            return [objective(n, o) for n, o in batch]

    def keep(result: TrialResult) -> None:
        tuning_store.save_trial(prepared.conn, prepared.study_id, result.row(), prepared.grades)

    new = search(study, prepared.space, trials, evaluate_batch, keep,
                 batch=request.parallel, start=len(done))
    return done + new


def tune_pool_id(prepared: Prepared) -> str:
    """The saved pool of a study (`searcheval rate --pool tune:STUDY`, `judgments label --pool
    tune:STUDY`): the pairs its verdict still lacks grades of, replaced at each conclusion."""
    return f"tune:{prepared.study_id[:12]}"


def top_configurations(prepared: Prepared, results: list[TrialResult]) -> list[tuple[int, Any]]:
    """[(trial number, configuration)] of the tuning's top N distinct configurations."""
    from searcheval.rankers.configs import configurations_from

    request = prepared.request
    seen, out = set(), []
    for t in sorted((t for t in results if t.value is not None),
                    key=lambda t: (-t.value, t.number)):
        if t.sha256 not in seen and len(out) < request.top:
            seen.add(t.sha256)
            out.append((t.number, configurations_from(
                prepared.raw, request.configurations_file,
                {**(request.overrides or {}), **t.overrides})[prepared.target]))
    return out


def chosen_configuration(prepared: Prepared, results: list[TrialResult]):
    """(the best trial, its configuration of the target)."""
    from searcheval.rankers.configs import configurations_from
    from searcheval.tuning.search import best

    request = prepared.request
    trial = best(results)
    overrides = {**(request.overrides or {}), **trial.overrides}
    resolved = configurations_from(prepared.raw, request.configurations_file, overrides)
    return trial, resolved[prepared.target]


def _unjudged_items(pairs: list[tuple[str, str, int]]) -> list:
    from searcheval.judging.pool import PoolItem

    best_rank: dict[tuple[str, str], int] = {}
    counts: dict[tuple[str, str], int] = {}
    for q, d, rank in pairs:
        best_rank[(q, d)] = min(best_rank.get((q, d), rank), rank)
        counts[(q, d)] = counts.get((q, d), 0) + 1
    return [PoolItem(q, d, rank, counts[(q, d)])
            for (q, d), rank in sorted(best_rank.items(),
                                       key=lambda kv: (kv[1], kv[0][0], kv[0][1]))]


def verdict_pool(prepared: Prepared, results: list[TrialResult], chosen=None
                 ) -> tuple[list, list]:
    """(tuning part, held-out part) of the pairs without an effective grade that the choice and
    the verdict rest on: the unjudged top 10 of the flagged trials among the tuning's top N on
    the tuning queries (those that could change the choice), and the unjudged top 10 of the
    `chosen` and the served configurations on the held-out queries, when some trial is pooled
    or either of the two has more than the threshold of its held-out top 10 unjudged."""
    from searcheval.tuning.search import ranked_unjudged

    k = prepared.objective.k
    flagged = {t.number for t in results if t.flagged}
    tuning: list[tuple[str, str, int]] = []
    for number, configuration in top_configurations(prepared, results):
        if number in flagged:
            tuning += ranked_unjudged(prepared.objective.runner.run(configuration),
                                      prepared.qrels, k)
    held: list[tuple[str, str, int]] = []
    if chosen is not None:
        shown = 0
        for configuration in (chosen, prepared.resolved[prepared.served]):
            run = prepared.held_runner.run(configuration)
            shown += sum(len(run.top_ids(q, k)) for q in run.results)
            held += ranked_unjudged(run, prepared.qrels, k)
        share = len(held) / shown if shown else 0.0
        if not tuning and share <= prepared.request.unjudged_threshold + 1e-12:
            held = []
    return _unjudged_items(tuning), _unjudged_items(held)


def _documents(prepared: Prepared, items: list) -> dict:
    """The latest looked-up versions of pooled documents the catalog does not hold."""
    from searcheval.judging.judgments import judgment_set
    from searcheval.store import documents as looked_up

    held = {r.id for r in prepared.collection.resources}
    missing = {i.doc_id for i in items if i.doc_id not in held}
    if not missing:
        return {}
    return looked_up.latest_versions(prepared.conn, judgment_set(prepared.collection), missing)


def judge_before_verdict(prepared: Prepared, results: list[TrialResult],
                         secret: Callable[[str], str] | None = None,
                         say: Callable[[str], None] = lambda line: None
                         ) -> tuple[list[TrialResult], dict]:
    """The model judge (`request.judge`) labels what the choice and the verdict lack, before the
    verdict: first the tuning part of the pool (`verdict_pool`), then every trial is rescored with
    the grades that now count and the best one chosen again; then the held-out part of the
    chosen and the served configurations. At most `request.judge_limit` pairs in all (the tuning
    part first). The judge's grades count only while its human audit holds
    (judging.counting): the report says whether they did, and why. `secret(block)` resolves the
    judge's Prefect Secret blocks. Returns (the trials, rescored; what the judge did)."""
    from searcheval.judging.grading import secret_blocks
    from searcheval.judging.labelling import check_judge_reference, label

    request = prepared.request
    judge = check_judge_reference(request.judge, request.configurations_file, prepared.model_path)
    secrets = {b: secret(b) for b in secret_blocks(judge)} if secret else {}
    before = {t.number: t.judged for t in results}
    flagged_before = sorted(t.number for t in results if t.flagged)
    left = request.judge_limit
    runs: list[dict] = []

    def ask(items: list, part: str) -> None:
        nonlocal left
        result = label(prepared.conn, judge, prepared.collection,
                       [(i.query_id, i.doc_id) for i in items], limit=left, secrets=secrets,
                       pool_id=tune_pool_id(prepared), documents=_documents(prepared, items),
                       guideline=request.guideline)
        if left is not None:
            left -= result.pairs
        say(f"the {part} part of the pool ({len(items)} pair(s)): {result.describe()}")
        figures = result.to_dict()
        figures.pop("planned", None)
        figures["errors"] = figures["errors"][:20]
        runs.append({"part": part, "pool": len(items), **figures})

    tuning_items, _ = verdict_pool(prepared, results)
    ask(tuning_items, "tuning")
    digest = prepared.grades
    read_grades(prepared, prepared.conn)
    if prepared.grades != digest:  # grades that count were added: every trial rescored
        results = rescore(prepared, results)
    _, chosen = chosen_configuration(prepared, results)
    _, held_items = verdict_pool(prepared, results, chosen)
    ask(held_items, "held-out")
    read_grades(prepared, prepared.conn)
    standing = grades_summary(prepared)["model_judges"].get(judge.name)
    if standing is None:
        from searcheval.judging.source import describe_sources

        standing = {"counts": False, "pairs_counted": 0, "audited": 0, "alpha": None,
                    "reason": "its grades are not among the judgments that count ("
                              f"{describe_sources(prepared.effective.counted)})"}
    report = {"judge": judge.name, "judge_hash": judge.sha256, "limit": request.judge_limit,
              "labelled": sum(r["graded"] for r in runs), "failed": sum(r["failed"] for r in runs),
              "cost": sum(r["cost"] for r in runs), "runs": runs, **standing,
              "judged_before": before, "judged_after": {t.number: t.judged for t in results},
              "flagged_before": flagged_before,
              "flagged_after": sorted(t.number for t in results if t.flagged)}
    say(judge_line(report))
    return results, report


def judge_line(report: dict) -> str:
    """One line: what the judge labelled and whether its grades count in the verdict."""
    state = ("COUNTED in the verdict" if report["counts"] else "NOT COUNTED in the verdict")
    return (f"judge {report['judge']}: {report['labelled']} pair(s) graded, {report['failed']} "
            f"failed, cost {report['cost']:.4f}; {state} ({report['reason']})")


def save_tune_pool(prepared: Prepared, items: list) -> str | None:
    """The study's pool kept in Postgres as `tune:STUDY` (replacing the earlier one): the
    rating page's queue and `judgments label --pool`. None when nothing is left to grade."""
    from searcheval.judging.judgments import judgment_set
    from searcheval.store import judgments as judgments_store

    pool_id = tune_pool_id(prepared)
    rows = [{"position": n, "query_id": i.query_id, "doc_id": i.doc_id,
             "best_rank": i.best_rank, "configurations": i.configurations,
             "judges_needed": 1, "assigned": []} for n, i in enumerate(items, start=1)]
    judgments_store.replace_pool(prepared.conn, {
        "pool_id": pool_id, "catalog": judgment_set(prepared.collection), "run_id": pool_id,
        "depth": prepared.objective.k, "configurations": [prepared.target, prepared.served],
        "overlap": 0.0, "judges": []}, rows)
    return pool_id if rows else None


def conclude(prepared: Prepared, results: list[TrialResult], output: str | None,
             say: Callable[[str], None] = lambda line: None,
             judging: dict | None = None) -> dict:
    """The held-out verdict of the best trial, the entry to commit, the report; written to
    `output` (tune.json, report.md, configurations.tuned.yaml, pool.csv when trials were
    flagged) and to the study's row. `judging`: what `judge_before_verdict` did. The verdict is
    scored with the effective grades as they are now (after any labelling)."""
    from searcheval.judging.pool import pool_rows, write_pool
    from searcheval.rankers.configs import configurations_from
    from searcheval.store import tuning as tuning_store
    from searcheval.tuning.verdict import (
        entries_yaml,
        held_out_verdict,
        proposed_entries,
        report_markdown,
        top_family,
        verdict_line,
    )

    request = prepared.request
    chosen_trial, chosen = chosen_configuration(prepared, results)
    chosen_resolved = configurations_from(prepared.raw, request.configurations_file,
                                          {**(request.overrides or {}), **chosen_trial.overrides})
    held_queries = prepared.held_runner.queries
    verdict = held_out_verdict(prepared.held_runner, chosen, prepared.resolved[prepared.served],
                               held_queries, prepared.qrels, request.metric,
                               ("ndcg@10", "mrr", "recall@20"), prepared.settings,
                               seed=request.seed)
    verdict["chosen_trial"] = chosen_trial.number
    verdict["chosen_overrides"] = chosen_trial.overrides
    verdict["grades"] = grades_summary(prepared)
    if judging is not None:
        verdict["judge"] = judging
    top = top_family(prepared.held_runner, top_configurations(prepared, results),
                     prepared.resolved[prepared.served], held_queries, prepared.qrels,
                     request.metric, prepared.settings, seed=request.seed)
    verdict["top"] = top
    tuning_store.save_verdict(prepared.conn, prepared.study_id, verdict)
    name = request.name or f"{prepared.target}_tuned"
    entries = proposed_entries(prepared.resolved, chosen_resolved, prepared.target, name)
    text = entries_yaml(entries)
    # the pool: what the choice and the verdict still lack grades of (verdict_pool); graded,
    # by people on the rating page or a judge, it firms up the next run of the study
    tuning_items, held_items = verdict_pool(prepared, results, chosen)
    items = tuning_items + [i for i in held_items
                            if (i.query_id, i.doc_id) not in {(t.query_id, t.doc_id)
                                                              for t in tuning_items}]
    pool_id = save_tune_pool(prepared, items)
    pool_path = None
    files: dict[str, str] = {}
    if items:
        files["pool.csv"] = write_pool(pool_rows(items, prepared.collection,
                                                 _documents(prepared, items)), "csv")
        pool_path = "pool.csv"
    study = {"study_id": prepared.study_id, "target": prepared.target,
             "metric": request.metric, "definition": prepared.definition,
             "split": prepared.split.to_dict()}
    report = report_markdown(study, results, chosen_trial, verdict, text, prepared.warnings,
                             pool_path, top=top, pool_id=pool_id,
                             pool_parts=(len(tuning_items), len(items) - len(tuning_items)))
    document = {"study_id": prepared.study_id, "target": prepared.target,
                "served": prepared.served, "metric": request.metric,
                "split": {"tuning": len(prepared.split.tuning),
                          "held_out": len(prepared.split.held_out),
                          "share": prepared.split.share, "seed": prepared.split.seed},
                "trials": [t.row() for t in results], "chosen": chosen_trial.row(),
                "verdict": verdict, "entries": entries, "warnings": prepared.warnings,
                "flagged": sum(1 for t in results if t.flagged), "pool": pool_path,
                "pool_id": pool_id, "grades": verdict["grades"], "judge": judging,
                "embeddings": prepared.embedded}
    files |= {"tune.json": json.dumps(document, indent=2, default=_json_default) + "\n",
              "report.md": report, "configurations.tuned.yaml": text}
    if output:
        folder = Path(output)
        folder.mkdir(parents=True, exist_ok=True)
        stale = folder / "pool.csv"
        if "pool.csv" not in files and stale.is_file():
            stale.unlink()  # an earlier conclusion's pool, graded since
        for file_name, content in files.items():
            (folder / file_name).write_text(content)
    say(verdict_line(verdict))
    return document


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)
