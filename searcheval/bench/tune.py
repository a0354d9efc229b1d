"""`searcheval benchmark tune`: trials per second of a study of `fuse` weights over cached bm25 and
dense result lists on a BEIR collection (SciFact's test queries by default), and its held-out
verdict against the served `fused`.

The corpus goes through the embedding cache (embedded once, ever); bm25 and dense run once over
the tuning queries before the first trial; each trial re-fuses their cached lists (no search, no
embedding) and scores them. The trials run in this process through the same library loop the
flow's trial tasks call (`searcheval.tuning.study.run_trials`), so the figure is the search's own
cost, without Prefect's per-task overhead.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from searcheval.bench.common import say

GOAL_SECONDS = 60.0  # 100 trials
CONFIGURATIONS = """\
configurations:
  bm25: {kind: bm25}
  dense: {kind: dense}
  fused: {kind: fused, served: true}
  hybrid:
    kind: fuse
    params: {runs: [bm25, dense], method: combsum, normalisation: min-max}
"""
SPACE = {"hybrid.weights.bm25": "0..1", "hybrid.weights.dense": "0..1",
         "hybrid.method": ["combsum", "combmnz", "rrf"],
         "hybrid.normalisation": ["min-max", "z-score"], "hybrid.rrf_k": "1..100"}


def benchmark_tune(dataset: str | Path, *, trials: int = 100, held_out: float = 0.3,
                   seed: int = 0, database_url: str | None = None,
                   say: Callable[[str], None] = say) -> dict:
    from searcheval.io.beir import load_beir
    from searcheval.store import database
    from searcheval.tuning import study
    from searcheval.tuning.verdict import verdict_line

    collection = load_beir(dataset, "test")
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "configurations.yaml"
        file.write_text(CONFIGURATIONS)
        request = study.TuneRequest(configurations_file=str(file), params=dict(SPACE),
                                    trials=trials, held_out=held_out, seed=seed,
                                    label=f"benchmark {time.time()}")
        prepared = study.check(request, collection=collection)
        url = database.resolve_url(database_url)
        conn = database.open_database(url)
        try:
            start = time.perf_counter()
            study.prepare(prepared, conn, say=say)
            prepare_s = time.perf_counter() - start
            searched_before = prepared.objective.runner.searched
            start = time.perf_counter()
            results = study.run_trials(prepared, say=say)
            trials_s = time.perf_counter() - start
            searched = prepared.objective.runner.searched - searched_before
            start = time.perf_counter()
            document = study.conclude(prepared, results, None)
            verdict_s = time.perf_counter() - start
        finally:
            conn.close()
    figures = {"dataset": collection.name, "documents": len(collection.resources),
               "queries": len(collection.queries),
               "tuning": len(prepared.split.tuning), "held_out": len(prepared.split.held_out),
               "trials": len(results), "trials_s": trials_s,
               "trials_per_s": len(results) / trials_s if trials_s else float("inf"),
               "prepare_s": prepare_s, "verdict_s": verdict_s,
               "searched_during_trials": searched, "embeddings": prepared.embedded,
               "chosen": document["chosen"], "verdict": document["verdict"],
               "entries": document["entries"], "flagged": document["flagged"]}
    figures["goal_met"] = len(results) >= 100 and trials_s < GOAL_SECONDS * len(results) / 100
    say(f"{collection.name} (test): {len(collection.resources)} documents, "
        f"{len(collection.queries)} queries: {figures['tuning']} tuning, "
        f"{figures['held_out']} held out (stratified, seed {seed})")
    say(f"prepare (embedding cache, bm25 and dense once): {prepare_s:.1f} s; embeddings "
        f"{prepared.embedded}")
    say(f"{len(results)} trials in {trials_s:.2f} s: {figures['trials_per_s']:.1f} trials/s; "
        f"configurations searched during the trials: {searched} (every trial re-fused cached "
        f"lists); {figures['flagged']} flagged")
    judged = [t.judged for t in results if t.judged is not None]
    figures["judged_mean"] = sum(judged) / len(judged) if judged else None
    if judged:
        say(f"judged@10 over the trials: mean {figures['judged_mean']:.3f}, min {min(judged):.3f}, "
            f"max {max(judged):.3f} (flagged above {request.unjudged_threshold:.0%} unjudged)")
    best = document["chosen"]
    say(f"chosen trial #{best['number']}: tuning ndcg@10 {best['value']:.4f} "
        f"{best['overrides']}")
    say(verdict_line(document["verdict"]))
    say(("met" if figures["goal_met"] else "MISSED") +
        f"   {trials} trials in under {GOAL_SECONDS * trials / 100:.0f} s")
    return figures
