"""Trials: each a set of overrides, resolved through the configurations' own checks, run on the
tuning queries with what earlier trials left cached, and scored.

Reuse (`TrialRunner`): the result lists of a configuration that another one combines are kept by
the configuration's sha256, so a trial that changes only a `fuse` (or `fused`) configuration's
own parameters re-fuses the cached lists of bm25, dense, an `http` engine or a `trec` file, and
never re-searches nor re-embeds (the query vectors are computed once, before the first trial).
A `fuse` trial also keeps each query's lists laid out (`rankers.combine.PreparedLists`) with their
normalisations, so changing weights costs one weighted sum per query.

Scored per trial, on the tuning queries only: the objective metric, the other report metrics,
judged@10 and the bounds of the objective's mean (every unjudged document of the top 10
irrelevant, or relevant at the top grade: `judging.summary.bounds`). A trial whose unjudged share
of the top 10 is above the threshold is flagged: its mean may be an artefact of missing labels.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from searcheval.defaults import COVERAGE_K
from searcheval.errors import InputError
from searcheval.judging.summary import bounds
from searcheval.metrics.engine import Settings, evaluate
from searcheval.rankers.registry import RunContext, fusion_params, run_configuration
from searcheval.types import Query, RankedRun
from searcheval.tuning.space import SearchSpace, distributions, grid_space, suggest

KEEP_RUNS = 64  # component runs kept by hash (a few parameter sets of each component)


@dataclass
class TrialResult:
    number: int
    overrides: dict[str, Any]
    sha256: str
    value: float | None
    metrics: dict[str, float | None]
    judged: float | None
    bounds: dict[str, list]
    flagged: bool
    seconds: float
    unjudged: list[tuple[str, str, int]] = field(default_factory=list)

    def row(self) -> dict:
        return {"number": self.number, "overrides": self.overrides, "sha256": self.sha256,
                "value": self.value, "metrics": self.metrics, "judged": self.judged,
                "bounds": self.bounds, "flagged": self.flagged, "seconds": self.seconds}


class TrialRunner:
    """Runs configurations over one fixed list of queries, keeping the runs of combined
    configurations by hash (the module docstring)."""

    def __init__(self, context: RunContext, queries: Sequence[Query],
                 query_vectors: np.ndarray | None, k: int = 100) -> None:
        self.context, self.queries, self.vectors, self.k = context, list(queries), \
            query_vectors, k
        self._runs: dict[str, RankedRun] = {}
        self._prepared: dict[tuple, dict] = {}
        self.searched = 0  # configurations actually run (not from the cache)

    def __getstate__(self) -> dict:
        """Sent to another process (a Dask worker) without the database connection, with the
        cached lists: a worker re-fuses them as this process does, and opens a connection of
        its own (SEARCHEVAL_DATABASE_URL) only if a trial must search the database again."""
        state = dict(self.__dict__)
        state["context"] = replace(self.context, conn=None)
        state["_opened"] = True
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)

    def _connection(self):
        if self.context.conn is None and getattr(self, "_opened", False):
            from searcheval.store.database import open_database

            self.context = replace(self.context, conn=open_database())
        return self.context

    def run(self, configuration, keep: bool = False) -> RankedRun:
        cached = self._runs.get(configuration.sha256)
        if cached is not None:
            return replace(cached, configuration=configuration.name)
        if configuration.kind == "fuse":
            parts = [self.run(configuration.component(n), keep=True)
                     for n in configuration.params["runs"]]
            run = self._fuse(configuration, parts)
        elif configuration.kind == "fused":
            from searcheval.rankers.fusion import run_fused

            lexical = self.run(configuration.component(configuration.params["lexical"]), True)
            semantic = self.run(configuration.component(configuration.params["semantic"]), True)
            run = run_fused(lexical, semantic, self.context.resources, self.queries,
                            fusion_params(configuration.params, depth=self.k))
            run = replace(run, configuration=configuration.name)
        else:
            run = run_configuration(configuration, self._connection(), self.queries,
                                    self.vectors, self.k)
            self.searched += 1
        if keep:
            if len(self._runs) >= KEEP_RUNS:
                self._runs.pop(next(iter(self._runs)))
            self._runs[configuration.sha256] = run
        return run

    def _fuse(self, configuration, parts: list[RankedRun]) -> RankedRun:
        from searcheval.rankers.combine import PreparedLists, fuse_runs

        key = tuple(c.sha256 for c in configuration.components)
        prepared = self._prepared.get(key)
        if prepared is None:
            if len(self._prepared) >= KEEP_RUNS:
                self._prepared.pop(next(iter(self._prepared)))
            prepared = self._prepared[key] = {
                q.id: PreparedLists.of([p.results.get(q.id, []) for p in parts])
                for q in self.queries if not any(q.id in p.errors for p in parts)}
        return fuse_runs(configuration.name, parts, self.queries, configuration.params,
                         self.k, prepared)


@dataclass
class Objective:
    """What one trial does: resolve the overrides, run the target, score it on the tuning
    queries."""

    configurations_raw: Mapping
    configurations_file: str
    base_overrides: Mapping[str, Any]
    target: str
    runner: TrialRunner
    qrels: Mapping[str, Mapping[str, int]]
    metric: str = "ndcg@10"
    metrics: tuple[str, ...] = ("ndcg@10", "mrr", "recall@20")
    settings: Settings = field(default_factory=Settings)
    top_grade: int = 1
    unjudged_threshold: float = 0.3
    k: int = COVERAGE_K

    def configuration(self, overrides: Mapping[str, Any]):
        from searcheval.rankers.configs import configurations_from

        resolved = configurations_from(self.configurations_raw, self.configurations_file,
                                       {**self.base_overrides, **overrides})
        return resolved[self.target]

    def __call__(self, number: int, overrides: Mapping[str, Any]) -> TrialResult:
        started = time.perf_counter()
        configuration = self.configuration(overrides)
        run = self.runner.run(configuration)
        ids = [q.id for q in self.runner.queries if q.id not in run.errors]
        judged_metric = f"judged@{self.k}"
        names = list(dict.fromkeys([self.metric, *self.metrics, judged_metric]))
        scores = evaluate(self.qrels, run.as_run(), names, self.settings, query_ids=ids).means
        judged = scores.pop(judged_metric)
        flagged = judged is not None and (1.0 - judged) > self.unjudged_threshold + 1e-12
        low_high = bounds(run, self.qrels, ids, [self.metric], self.settings, self.top_grade,
                          self.k)
        return TrialResult(number=number, overrides=dict(overrides),
                           sha256=configuration.sha256, value=scores[self.metric],
                           metrics=scores, judged=judged, bounds=low_high, flagged=flagged,
                           seconds=time.perf_counter() - started,
                           unjudged=ranked_unjudged(run, self.qrels, self.k) if flagged
                           else [])


def ranked_unjudged(run: RankedRun, qrels: Mapping, k: int) -> list[tuple[str, str, int]]:
    """(query, document, rank) of the run's top k without a grade: a flagged trial's pool."""
    return [(qid, d, rank) for qid in run.results
            for rank, d in enumerate(run.top_ids(qid, k), start=1) if d not in qrels.get(qid, {})]


def _ask_tell_grid():
    import optuna

    class AskTellGrid(optuna.samplers.GridSampler):
        """Optuna's grid sampler without its `study.stop()` when the grid is exhausted (which
        only works inside `study.optimize`): the search asks for at most the grid's size."""

        def after_trial(self, study, trial, state, values) -> None:
            return None

    return AskTellGrid


def _AskTellGrid(grid, seed):  # noqa: N802 - a class made on first use (optuna imported late)
    return _ask_tell_grid()(grid, seed=seed)


def make_study(space: SearchSpace, sampler: str, seed: int, trials: int):
    """An in-memory Optuna study (maximising) with a seeded TPE or grid sampler; the number of
    trials to run (a grid has at most its size)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if sampler == "grid":
        grid = grid_space(space)
        chosen = _AskTellGrid(grid, seed=seed)
        trials = min(trials, space.grid_size())
    elif sampler == "tpe":
        chosen = optuna.samplers.TPESampler(seed=seed)
    else:
        raise InputError(f"expected a sampler tpe or grid, got {sampler!r}", field="sampler")
    return optuna.create_study(direction="maximize", sampler=chosen), trials


def replay(study, space: SearchSpace, done: Sequence[TrialResult | dict]) -> None:
    """Trials stored by an earlier (killed) run of the same study, told to the new study so the
    sampler continues from them."""
    import optuna

    dists = distributions(space)
    for t in done:
        row = t.row() if isinstance(t, TrialResult) else t
        if row["value"] is None:
            continue
        study.add_trial(optuna.trial.create_trial(params=dict(row["overrides"]),
                                                  distributions=dists, value=row["value"]))


def search(study, space: SearchSpace, trials: int, evaluate_batch: Callable,
           on_trial: Callable[[TrialResult], None] | None = None, *, batch: int = 1,
           start: int = 0) -> list[TrialResult]:
    """Runs trials `start`..`trials - 1`: asks `batch` suggestions at a time, evaluates them with
    `evaluate_batch([(number, overrides)]) -> [TrialResult]` (in this process, or as Prefect
    tasks), tells the study each value; `on_trial` stores each one as it comes."""
    import optuna

    results = []
    number = start
    while number < trials:
        asked = []
        for _ in range(min(batch, trials - number)):
            trial = study.ask()
            overrides = {d.path: suggest(trial, d) for d in space.dimensions}
            asked.append((trial, number, overrides))
            number += 1
        done = evaluate_batch([(n, o) for _, n, o in asked])
        for (trial, _, _), result in zip(asked, done):
            if result.value is None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, result.value)
            results.append(result)
            if on_trial is not None:
                on_trial(result)
    return results


def best(results: Sequence[TrialResult]) -> TrialResult:
    """The best trial: the highest objective, the earliest among equals."""
    scored = [r for r in results if r.value is not None]
    if not scored:
        raise InputError("no trial produced a score", field="trials")
    return max(scored, key=lambda r: (r.value, -r.number))
