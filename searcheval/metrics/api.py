"""The public scoring functions `searcheval.evaluate` and `searcheval.compare`.

Both take runs and judgments as dicts, pandas DataFrames or paths (`searcheval.io.frames`) and the
metric conventions as keywords (`gain`, `relevance_level`, `no_relevant`, `trec_compat`, see
`searcheval.metrics.engine.Settings`), and hand them to the metric engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from searcheval.defaults import SCORE_METRICS
from searcheval.errors import InputError
from searcheval.io.frames import as_qrels, as_run, is_table
from searcheval.metrics.engine import Evaluation, Settings, parse_metrics
from searcheval.metrics.engine import evaluate as engine_evaluate
from searcheval.metrics.stats import sign_flip_pvalues


# Dict runs of fewer rows go the dict engine (`searcheval.metrics.engine`); larger ones the dict
# path at scale (`searcheval.metrics.dicts`, compiled with numba, whose first load costs more than
# it saves on a small run).
COMPILED_ROWS = 20_000


def _rows(run: Any) -> int:
    """The rows of a run given as a dict of dicts (0 for anything else)."""
    if not isinstance(run, dict) or not run:
        return 0
    try:
        return sum(map(len, run.values()))
    except TypeError:  # a value without a length: the dict engine refuses it
        return 0


def _dict_evaluate(qrels: dict, prepared, run: Any, specs, settings: Settings,
                   complete: bool | None):
    """`run` through the dict path at scale when it is a large dict (`prepared`: the judgments
    read by `dicts.prepare`, or None to read them here); None when it goes the dict engine."""
    if _rows(run) < COMPILED_ROWS:
        return None
    from searcheval.metrics import dicts

    return dicts.evaluate(prepared if prepared is not None else dicts.prepare(qrels), run, specs,
                          settings, complete=complete)


def _settings(conventions: dict[str, Any]) -> Settings:
    known = set(Settings.__dataclass_fields__)
    unknown = sorted(set(conventions) - known)
    if unknown:
        raise InputError(f"unknown convention(s) {', '.join(unknown)}; expected some of "
                         f"{', '.join(sorted(known))}", field=unknown[0])
    return Settings(**conventions)


def _columns(given: Mapping[str, str] | None, value: str) -> dict[str, str]:
    """`{"query_id": ..., "doc_id": ..., value: ...}` -> the keyword arguments of as_run / as_qrels."""
    if not given:
        return {}
    allowed = {"query_id", "doc_id", value}
    unknown = sorted(set(given) - allowed)
    if unknown:
        raise InputError(f"unknown column role(s) {', '.join(unknown)}; expected some of "
                         f"{', '.join(sorted(allowed))}", field="columns")
    return {f"{role.removesuffix('_id')}_column": name for role, name in given.items()}


class Evaluator:
    """Judgments prepared once, to score any number of runs against them (as pytrec_eval's
    `RelevanceEvaluator`): tables (a DataFrame, a pyarrow Table, a dict of numpy arrays) go the
    compiled path (`searcheval.metrics.kernel`; integer ids as they are, others as codes), or the
    numpy columnar path for what it does not take; anything else goes the dict way.

        evaluator = searcheval.Evaluator(qrels, ["ndcg@10", "map"], trec_compat=True)
        for name, run in runs.items():
            print(name, evaluator.evaluate(run).means)
    """

    def __init__(self, qrels: Any, metrics: str | Iterable[str] = SCORE_METRICS, *,
                 qrels_columns: Mapping[str, str] | None = None, **conventions: Any):
        from searcheval.io.trec import Fallback
        from searcheval.metrics.columnar import qrels_from_frame

        self.metrics, self.settings = parse_metrics(metrics), _settings(conventions)
        self._qrels, self._roles = qrels, _columns(qrels_columns, "grade")
        self._dict: dict | None = None
        self._prepared = None  # the dict judgments as arrays, for large dict runs (dicts.py)
        self._columnar = self._integer = None
        if is_table(qrels):
            names = (self._roles.get("query_column", "query_id"),
                     self._roles.get("doc_column", "doc_id"),
                     self._roles.get("grade_column", "grade"))
            try:
                self._integer = _integer_qrels(qrels, names)
                self._columnar = self._integer.columns if self._integer is not None else \
                    qrels_from_frame(qrels, names)
            except Fallback:  # the dict way refuses what the columns may not hold
                self._integer = self._columnar = None
        if self._columnar is None:
            self._dict = as_qrels(qrels, **self._roles)

    def evaluate(self, run: Any, *, run_columns: Mapping[str, str] | None = None,
                 complete: bool | None = None) -> Evaluation:
        """Score `run` (see `searcheval.evaluate` for `complete` and the shapes)."""
        from searcheval.io.trec import Fallback
        from searcheval.metrics.columnar import evaluate_columns, run_from_frame

        roles = _columns(run_columns, "score")
        if self._columnar is not None and is_table(run):
            names = (roles.get("query_column", "query_id"), roles.get("doc_column", "doc_id"),
                     roles.get("score_column", "score"))
            chosen = (False if self.settings.trec_compat else None) if complete is None \
                else complete
            try:  # the compiled path (searcheval.metrics.kernel)
                return self._compiled(run, names, chosen)
            except Fallback:  # the numpy path groups what the compiled one does not take
                pass
            try:
                chunks = run_from_frame(run, names)
                return evaluate_columns(self._columnar, chunks, self.metrics, self.settings,
                                        complete=chosen)
            except Fallback:  # the dict way refuses bad input with a clear error
                pass
        if self._dict is None:
            self._dict = as_qrels(self._qrels, **self._roles)
        if _rows(run) >= COMPILED_ROWS:
            from searcheval.metrics import dicts

            if self._prepared is None:
                self._prepared = dicts.prepare(self._dict)
            result = _dict_evaluate(self._dict, self._prepared, run, self.metrics,
                                    self.settings, complete)
            if result is not None:
                return result
        return engine_evaluate(self._dict, as_run(run, **roles), self.metrics, self.settings,
                               complete=complete)

    def _compiled(self, run: Any, names: tuple[str, str, str], complete: bool | None):
        """The run through the compiled path: integer ids against integer judgments as they
        are, any other ids as codes; Fallback for what it does not take."""
        from searcheval.metrics import kernel
        from searcheval.metrics.columnar import _column, integer_ids

        query, doc, score = (_column(run, name) for name in names)
        if self._integer is not None:
            q, d = integer_ids(query), integer_ids(doc)
            if q is not None and d is not None:
                return kernel.evaluate(self._integer, q, d, score, self.metrics, self.settings,
                                       complete=complete)
        return kernel.evaluate_coded(self._columnar, self._columnar.qid_array(), query, doc,
                                     score, self.metrics, self.settings, complete=complete)


def _integer_qrels(qrels: Any, names: tuple[str, str, str]):
    """The compiled path's judgments by integer id (`searcheval.metrics.kernel.integer_qrels`,
    built from the numbers) when the query and document ids are integers, else None."""
    from searcheval.metrics.columnar import _column, integer_ids

    query, doc = integer_ids(_column(qrels, names[0])), integer_ids(_column(qrels, names[1]))
    if query is None or doc is None:
        return None
    grade = np.asarray(_column(qrels, names[2]))
    from searcheval.metrics.kernel import integer_qrels  # imports numba (only for tables)

    return integer_qrels(query, doc, grade)


def evaluate(qrels: Any, run: Any, metrics: str | Iterable[str] = SCORE_METRICS, *,
             run_columns: Mapping[str, str] | None = None,
             qrels_columns: Mapping[str, str] | None = None, complete: bool | None = None,
             **conventions: Any) -> Evaluation:
    """Score `run` against `qrels`: `.means`, `.per_query()`, `.to_dataframe()`, `.counts`.

    Metric names may be searcheval's, ir_measures' or trec_eval's (`searcheval.metrics.names`).
    `complete`: False averages the judged queries of the run (trec_eval), True every judged query
    with a missing one as 0 (trec_eval -c); None, the default, every judged query with a missing
    one as an empty ranking (or, with trec_compat, as False).

    A table's columns (a DataFrame, a pyarrow Table or a dict of numpy arrays) are `query_id`,
    `doc_id`, `score` (a run) or `grade` (qrels) unless named otherwise, e.g.
    `run_columns={"query_id": "qid", "doc_id": "docno"}`. Tables go the columnar path; to score
    many runs against the same judgments, prepare them once with `Evaluator`.
    """
    if is_table(qrels) and is_table(run):
        return Evaluator(qrels, metrics, qrels_columns=qrels_columns,
                         **conventions).evaluate(run, run_columns=run_columns, complete=complete)
    specs, settings = parse_metrics(metrics), _settings(conventions)
    qrels_roles, run_roles = _columns(qrels_columns, "grade"), _columns(run_columns, "score")
    judgments = as_qrels(qrels, **qrels_roles)
    result = _dict_evaluate(judgments, None, run, specs, settings, complete)
    if result is not None:
        return result
    return engine_evaluate(judgments, as_run(run, **run_roles), specs, settings,
                           complete=complete)


@dataclass
class Comparison:
    """Runs scored on the same queries, each against the first (the reference)."""

    names: list[str]
    evaluations: dict[str, Evaluation]
    p_values: dict[str, dict[str, float | None]]  # run -> metric -> two-sided paired p vs the first

    @property
    def means(self) -> dict[str, dict[str, float | None]]:
        return {name: ev.means for name, ev in self.evaluations.items()}

    def to_dataframe(self):
        """One row per run: the mean of each metric, and `<metric> p` against the first run."""
        import pandas as pd

        rows = []
        for name in self.names:
            row: dict[str, Any] = {"run": name, **self.evaluations[name].means}
            row.update({f"{m} p": p for m, p in self.p_values[name].items()})
            rows.append(row)
        return pd.DataFrame(rows).set_index("run")


def compare(qrels: Any, runs: Mapping[str, Any] | Sequence[Any],
            metrics: str | Iterable[str] = SCORE_METRICS, *, permutations: int | None = None,
            seed: int = 0, run_columns: Mapping[str, str] | None = None,
            qrels_columns: Mapping[str, str] | None = None, **conventions: Any) -> Comparison:
    """Score several runs on the same judged queries and test each against the first with the
    two-sided paired randomization (sign-flip) test of `searcheval.metrics.stats` (exact up to
    16 queries with a difference, sampled beyond). `runs` is `{name: run}` or a list (named
    run_1, run_2, ...)."""
    named = dict(runs) if isinstance(runs, Mapping) else \
        {f"run_{i}": run for i, run in enumerate(runs, start=1)}
    if len(named) < 2:
        raise InputError(f"expected at least two runs to compare, got {len(named)}", field="runs")
    judgments = as_qrels(qrels, **_columns(qrels_columns, "grade"))
    columns = _columns(run_columns, "score")
    specs = parse_metrics(metrics)
    settings = _settings(conventions)
    evaluations = {name: engine_evaluate(judgments, as_run(run, name=name, **columns), specs,
                                         settings)
                   for name, run in named.items()}
    names = list(named)
    first = evaluations[names[0]]
    extra = {} if permutations is None else {"permutations": permutations}
    p_values: dict[str, dict[str, float | None]] = {names[0]: {s.name: None for s in specs}}
    for name in names[1:]:
        ev = evaluations[name]
        diffs = np.column_stack([ev.values[s.name] - first.values[s.name] for s in specs])
        p = sign_flip_pvalues(diffs, seed=seed, **extra)
        p_values[name] = {s.name: (None if np.isnan(v) else float(v)) for s, v in zip(specs, p)}
    return Comparison(names=names, evaluations=evaluations, p_values=p_values)
