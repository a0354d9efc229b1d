"""One study from its request to its verdict, as plain functions the CLI's flow (flows/tune.py)
and the benchmark share: `prepare` checks everything and lays the study out (before the first
trial), `run_trials` searches, `conclude` gives the held-out verdict and writes the outputs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
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

    def check_numbers(self) -> None:
        for name, value, lo in (("trials", self.trials, 1), ("parallel", self.parallel, 1),
                                ("depth", self.depth, 1), ("top", self.top, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < lo:
                raise InputError(f"expected a whole number >= {lo}, got {value!r}", field=name)
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
    grades = [j.grade for j in collection.judgments]
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


def stored_trials(prepared: Prepared) -> list[TrialResult]:
    from searcheval.store import tuning as tuning_store

    return [TrialResult(number=r["number"], overrides=r["overrides"], sha256=r["sha256"],
                        value=r["value"], metrics=r["metrics"], judged=r["judged"],
                        bounds=r["bounds"], flagged=r["flagged"], seconds=r["seconds"])
            for r in tuning_store.load_trials(prepared.conn, prepared.study_id)]


def run_trials(prepared: Prepared, evaluate_batch: Callable | None = None,
               say: Callable[[str], None] = lambda line: None) -> list[TrialResult]:
    """Resumes the stored trials, then runs the rest up to `request.trials`, each stored as it
    is scored. `evaluate_batch` defaults to this process, one after the other."""
    from searcheval.store import tuning as tuning_store
    from searcheval.tuning.search import make_study, replay, search

    request = prepared.request
    study, trials = make_study(prepared.space, request.sampler, request.seed, request.trials)
    done = stored_trials(prepared)
    if done:
        say(f"resuming study {prepared.study_id[:12]}: {len(done)} trials stored")
        replay(study, prepared.space, done)
    objective = prepared.objective
    if evaluate_batch is None:
        def evaluate_batch(batch):
            return [objective(n, o) for n, o in batch]

    def keep(result: TrialResult) -> None:
        tuning_store.save_trial(prepared.conn, prepared.study_id, result.row())

    new = search(study, prepared.space, trials, evaluate_batch, keep,
                 batch=request.parallel, start=len(done))
    return done + new


def conclude(prepared: Prepared, results: list[TrialResult], output: str | None,
             say: Callable[[str], None] = lambda line: None) -> dict:
    """The held-out verdict of the best trial, the entry to commit, the report; written to
    `output` (tune.json, report.md, configurations.tuned.yaml, pool.csv when trials were
    flagged) and to the study's row."""
    from searcheval.judging.pool import PoolItem, pool_rows, write_pool
    from searcheval.rankers.configs import configurations_from
    from searcheval.store import tuning as tuning_store
    from searcheval.tuning.search import best
    from searcheval.tuning.verdict import (
        entries_yaml,
        held_out_verdict,
        proposed_entries,
        report_markdown,
        top_family,
        verdict_line,
    )

    request = prepared.request
    chosen_trial = best(results)
    overrides = {**(request.overrides or {}), **chosen_trial.overrides}
    chosen_resolved = configurations_from(prepared.raw, request.configurations_file, overrides)
    chosen = chosen_resolved[prepared.target]
    held_queries = prepared.held_runner.queries
    verdict = held_out_verdict(prepared.held_runner, chosen, prepared.resolved[prepared.served],
                               held_queries, prepared.qrels, request.metric,
                               ("ndcg@10", "mrr", "recall@20"), prepared.settings,
                               seed=request.seed)
    verdict["chosen_trial"] = chosen_trial.number
    verdict["chosen_overrides"] = chosen_trial.overrides
    seen, top_configurations = set(), []
    for t in sorted((t for t in results if t.value is not None),
                    key=lambda t: (-t.value, t.number)):
        if t.sha256 not in seen and len(top_configurations) < request.top:
            seen.add(t.sha256)
            top_configurations.append((t.number, configurations_from(
                prepared.raw, request.configurations_file,
                {**(request.overrides or {}), **t.overrides})[prepared.target]))
    top = top_family(prepared.held_runner, top_configurations,
                     prepared.resolved[prepared.served], held_queries, prepared.qrels,
                     request.metric, prepared.settings, seed=request.seed)
    verdict["top"] = top
    tuning_store.save_verdict(prepared.conn, prepared.study_id, verdict)
    name = request.name or f"{prepared.target}_tuned"
    entries = proposed_entries(prepared.resolved, chosen_resolved, prepared.target, name)
    text = entries_yaml(entries)
    pool_path = None
    # the pool: the unjudged top 10 of the flagged trials among the tuning's top N (those that
    # could change the choice), on the tuning queries; labelled, they firm up the next study
    from searcheval.tuning.search import ranked_unjudged

    unjudged: dict[tuple[str, str], int] = {}
    counts: dict[tuple[str, str], int] = {}
    flagged_top = {t.number for t in results if t.flagged}
    for number, configuration in top_configurations:
        if number not in flagged_top:
            continue
        run = prepared.objective.runner.run(configuration)
        for q, d, rank in ranked_unjudged(run, prepared.qrels, prepared.objective.k):
            unjudged[(q, d)] = min(unjudged.get((q, d), rank), rank)
            counts[(q, d)] = counts.get((q, d), 0) + 1
    files: dict[str, str] = {}
    if unjudged:
        items = [PoolItem(q, d, rank, counts[(q, d)])
                 for (q, d), rank in sorted(unjudged.items(),
                                            key=lambda kv: (kv[1], kv[0][0], kv[0][1]))]
        files["pool.csv"] = write_pool(pool_rows(items, prepared.collection), "csv")
        pool_path = "pool.csv"
    study = {"study_id": prepared.study_id, "target": prepared.target,
             "metric": request.metric, "definition": prepared.definition,
             "split": prepared.split.to_dict()}
    report = report_markdown(study, results, chosen_trial, verdict, text, prepared.warnings,
                             pool_path, top=top)
    document = {"study_id": prepared.study_id, "target": prepared.target,
                "served": prepared.served, "metric": request.metric,
                "split": {"tuning": len(prepared.split.tuning),
                          "held_out": len(prepared.split.held_out),
                          "share": prepared.split.share, "seed": prepared.split.seed},
                "trials": [t.row() for t in results], "chosen": chosen_trial.row(),
                "verdict": verdict, "entries": entries, "warnings": prepared.warnings,
                "flagged": sum(1 for t in results if t.flagged), "pool": pool_path,
                "embeddings": prepared.embedded}
    files |= {"tune.json": json.dumps(document, indent=2, default=_json_default) + "\n",
              "report.md": report, "configurations.tuned.yaml": text}
    if output:
        folder = Path(output)
        folder.mkdir(parents=True, exist_ok=True)
        for file_name, content in files.items():
            (folder / file_name).write_text(content)
    say(verdict_line(verdict))
    return document


def _json_default(value):
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return str(value)
