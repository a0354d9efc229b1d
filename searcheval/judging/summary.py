"""What a run's judgments say about its numbers: per configuration, the pool of its unjudged top
k (how many pairs still need a grade) and the bounds of each mean (how far it could still move
if every unjudged document in its top k were relevant, at the top grade, or not relevant), and
the judges' agreement on its top k; the run's agreement between judges; and the effective-grade rule in force.

The bounds are computed with the same metric engine and conventions as the means: the low end
is the smaller of the two scenarios and the mean itself, the high end the larger (adding a
relevant document can lower a mean too: nDCG's ideal ranking and Recall's denominator grow).
"""

from __future__ import annotations

from searcheval.defaults import COVERAGE_K
from searcheval.judging.agreement import pair_stats
from searcheval.metrics.engine import Settings, evaluate
from searcheval.types import Qrels, RankedRun

POOL_COMMAND = "searcheval judgments pool --run {run_id} --depth {k}"


def pool_command(run_id: str, k: int, flags: str = "") -> str:
    """The pool command a report and an alert print: with the flags that name the run's dataset
    and output folder (`searcheval.project.pool_flags`), it works as printed."""
    return POOL_COMMAND.format(run_id=run_id, k=k) + (f" {flags}" if flags else "")


def unjudged_pairs(run: RankedRun, qrels: Qrels, k: int = COVERAGE_K) -> list[tuple[str, str]]:
    """The (query, document) pairs of the run's top k without a grade in `qrels`."""
    out = []
    for qid in run.results:
        labels = qrels.get(qid, {})
        out.extend((qid, d) for d in run.top_ids(qid, k) if d not in labels)
    return out


def bounds(run: RankedRun, qrels: Qrels, query_ids: list[str], metrics: list[str],
           settings: Settings, top_grade: int, k: int = COVERAGE_K
           ) -> dict[str, list[float | None]]:
    """metric -> [low, high] of its mean over `query_ids` (module docstring); judged@k metrics
    are left out (they measure the judging itself)."""
    metrics = [m for m in metrics if not m.startswith("judged@")]
    missing = unjudged_pairs(run, qrels, k)
    scenarios = []
    for grade in (0, top_grade):
        extended = {q: dict(docs) for q, docs in qrels.items()}
        for qid, doc in missing:
            extended.setdefault(qid, {})[doc] = grade
        scenarios.append(evaluate(extended, run.as_run(), metrics, settings,
                                  query_ids=query_ids).means)
    now = evaluate(qrels, run.as_run(), metrics, settings, query_ids=query_ids).means
    out = {}
    for m in metrics:
        values = [v for v in (now[m], scenarios[0][m], scenarios[1][m]) if v is not None]
        out[m] = [min(values), max(values)] if values else [None, None]
    return out


def top_agreement(run: RankedRun, latest: dict[tuple[str, str], dict[str, int]],
                  grade_scale: tuple[int, int], k: int = COVERAGE_K) -> dict:
    """Agreement (alpha, ordinal) over the pairs of the run's top k that two or more judges
    graded: how much the judges agree on what this configuration returns."""
    top = {(qid, d) for qid in run.results for d in run.top_ids(qid, k)}
    multi = {p: g for p, g in latest.items() if p in top and len(g) >= 2}
    labels = list(range(int(grade_scale[0]), int(grade_scale[1]) + 1))
    return {"items": len(multi), "alpha": pair_stats(multi, labels)["alpha"]}


def source_shares(run: RankedRun, qrels: Qrels, sources: dict, k: int = COVERAGE_K) -> dict:
    """The judged pairs of the run's top k by the source of their grade (human, import,
    model:<judge>): {judged, counts, shares}."""
    from collections import Counter

    top = [(qid, d) for qid in run.results for d in run.top_ids(qid, k)
           if d in qrels.get(qid, {})]
    counts = Counter(sources.get(p, "import") for p in top)
    return {"judged": len(top), "counts": dict(sorted(counts.items())),
            "shares": {s: n / len(top) for s, n in sorted(counts.items())} if top else {}}


def without_model(qrels: Qrels, sources: dict) -> Qrels:
    """The qrels less every grade that rests on a model judge only."""
    return {q: {d: g for d, g in docs.items()
                if not str(sources.get((q, d), "")).startswith("model:")}
            for q, docs in qrels.items()}


def judging_block(runs: dict[str, RankedRun], qrels: Qrels, query_ids: list[str],
                  metrics: list[str], settings: Settings, grade_scale: tuple[int, int],
                  run_id: str, coverage: dict, k: int = COVERAGE_K,
                  judgments: dict | None = None, agreement: dict | None = None,
                  latest: dict | None = None, sources: dict | None = None,
                  without: dict | None = None) -> dict:
    """metrics.json's `judging` block; with `sources` (pair -> source of its grade) each
    configuration says what its judged top k rests on, and `without` ({configuration: means
    without model grades, "gate": ...}) what its numbers would be without model grades."""
    per_configuration = {}
    union: set[tuple[str, str]] = set()
    for name, run in runs.items():
        pairs = unjudged_pairs(run, qrels, k)
        union.update(pairs)
        c = coverage.get(name) or {}
        per_configuration[name] = {
            "judged_share": c.get("judged_share"), "k": k, "pool": len(set(pairs)),
            "agreement": top_agreement(run, latest or {}, grade_scale, k),
            "bounds": bounds(run, qrels, query_ids, metrics, settings, int(grade_scale[1]), k),
        }
        if sources is not None:
            per_configuration[name]["sources"] = source_shares(run, qrels, sources, k)
        if without and name in without.get("means", {}):
            per_configuration[name]["means_without_model"] = without["means"][name]
    return {"pool": {"size": len(union), "k": k,
                     "command": POOL_COMMAND.format(run_id=run_id, k=k)},
            "configurations": per_configuration,
            "judgments": judgments or {},
            "agreement": agreement or {},
            **({"without_model": {"gate": without.get("gate")}} if without else {})}
