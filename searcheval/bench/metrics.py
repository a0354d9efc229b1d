"""`searcheval benchmark metrics`: one random run evaluated by searcheval, pytrec_eval and ranx on the
same five metrics; the three must agree before any time is printed."""

from __future__ import annotations

import numpy as np

from searcheval.bench.common import best_of

BENCH_METRICS = ("ndcg@10", "mrr", "recall@20", "precision@10", "map")
PYTREC_NAMES = {"ndcg@10": "ndcg_cut_10", "mrr": "recip_rank", "recall@20": "recall_20",
                "precision@10": "P_10", "map": "map"}
RANX_NAMES = {"ndcg@10": "ndcg@10", "mrr": "mrr", "recall@20": "recall@20",
              "precision@10": "precision@10", "map": "map"}


def random_collection(queries: int, depth: int, judged: int, seed: int = 0,
                      pool: int = 1000) -> tuple[dict, dict]:
    """A random run (distinct float scores, `depth` per query) and graded qrels (`judged` per query,
    half of them drawn from the run, grades 0..3)."""
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(queries):
        ids = rng.choice(pool, size=depth + judged, replace=False)
        scores = rng.random(depth)
        run[f"q{q}"] = {f"d{i}": float(s) for i, s in zip(ids[:depth], scores)}
        pick = np.concatenate([ids[: judged // 2], ids[depth: depth + judged - judged // 2]])
        grades = rng.integers(0, 4, size=judged)
        qrels[f"q{q}"] = {f"d{i}": int(g) for i, g in zip(pick, grades)}
    return qrels, run


def benchmark_metrics(queries: int = 20000, depth: int = 100, judged: int = 15, seed: int = 0,
                      repeat: int = 5) -> int:
    import pytrec_eval
    from ranx import Qrels as RanxQrels
    from ranx import Run as RanxRun
    from ranx import evaluate as ranx_evaluate

    from searcheval.metrics.engine import Settings, evaluate

    print(f"generating {queries} queries x {depth} results, {judged} judged per query (seed {seed})")
    qrels, run = random_collection(queries, depth, judged, seed)

    def ours():
        ev = evaluate(qrels, run, BENCH_METRICS, Settings(trec_compat=True))
        return ev.query_ids, ev.values

    def pytrec():
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(
            n.replace("_cut_", "_cut.").replace("_", ".", 1) if n.startswith(("recall", "P_"))
            else n.replace("_cut_", "_cut.") for n in PYTREC_NAMES.values()))
        return evaluator.evaluate(run)

    def ranx():
        return ranx_evaluate(RanxQrels(qrels), RanxRun(run), list(RANX_NAMES.values()))

    # ranx compiles with numba on first use: warm it up on a small input, outside the timing.
    small_q, small_r = random_collection(20, 10, 4, seed + 1)
    ranx_evaluate(RanxQrels(small_q), RanxRun(small_r), list(RANX_NAMES.values()))

    timed = best_of(repeat, {"searcheval": ours, "pytrec_eval": pytrec, "ranx": ranx})
    t_ours, (qids, values) = timed["searcheval"]
    t_pytrec, ref = timed["pytrec_eval"]
    t_ranx, ranx_means = timed["ranx"]

    worst = 0.0
    for name, ref_name in PYTREC_NAMES.items():
        ref_values = np.array([ref[q][ref_name] for q in qids])
        worst = max(worst, float(np.abs(values[name] - ref_values).max()))
    ranx_worst = max(abs(float(values[name].mean()) - float(ranx_means[rn]))
                     for name, rn in RANX_NAMES.items())
    agree = worst <= 1e-9 and ranx_worst <= 1e-9
    print(f"agreement: max |searcheval - pytrec_eval| per query = {worst:.2e}; "
          f"max |searcheval - ranx| of the means = {ranx_worst:.2e}")
    print(f"{'tool':<14}{'seconds':>9}{'vs searcheval':>16}   (best of {repeat}, "
          f"{len(BENCH_METRICS)} metrics: {', '.join(BENCH_METRICS)})")
    for tool, secs in (("searcheval", t_ours), ("pytrec_eval", t_pytrec), ("ranx", t_ranx)):
        print(f"{tool:<14}{secs:>9.3f}{secs / t_ours:>15.2f}x")
    if not agree:
        print("DISAGREEMENT: the tools do not give the same numbers")
        return 1
    return 0
