"""`searcheval benchmark search`: a BEIR corpus indexed through the embedding cache; HNSW recall@k
against exact search, and per-query latency p50/p95 beside nDCG@10 for dense (HNSW), dense exact,
bm25 and fused."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from searcheval.bench.common import say

#: HNSW top k against exact top k.
GOAL_HNSW_RECALL = 0.99
#: BEIR's published BM25 nDCG@10 (Thakur et al. 2021, table 2), for reading ours beside it.
BEIR_BM25_NDCG10 = {"scifact": 0.665, "nfcorpus": 0.325, "fiqa": 0.236, "arguana": 0.315,
                    "scidocs": 0.158, "trec-covid": 0.656}
#: documents embedded per cache call when indexing: a progress line each, and what is embedded
#: survives an interruption.
INDEX_CHUNK = 500


def _index_through_cache(conn, catalog: str, embedder, resources, say) -> dict:
    """Embed the documents in chunks through the cache (a progress line each), then make them the
    catalog's document vectors (all from the cache by then)."""
    from searcheval.rankers.dense import index_documents

    embedded, from_cache = embedder.embedded, embedder.from_cache
    start = time.perf_counter()
    for lo in range(0, len(resources), INDEX_CHUNK):
        chunk = resources[lo:lo + INDEX_CHUNK]
        before = embedder.embedded
        embedder.embed([r.text for r in chunk])
        done = lo + len(chunk)
        if embedder.embedded > before and len(resources) > INDEX_CHUNK:  # model work only
            say(f"  {done:>6}/{len(resources)} documents: {embedder.embedded - embedded} "
                f"embedded, {embedder.from_cache - from_cache} from the cache, "
                f"{time.perf_counter() - start:.0f} s")
    final = index_documents(conn, catalog, embedder, resources)  # everything is cached now
    return {"seconds": time.perf_counter() - start, "documents": final["documents"],
            "embedded": embedder.embedded - embedded,
            "from_cache": embedder.from_cache - from_cache - final["from_cache"]}


def benchmark_search(dataset: str | Path, *, split: str = "test", max_queries: int | None = None,
                     k: int = 10, depth: int = 100, database_url: str | None = None,
                     model_path: str | None = None,
                     say: Callable[[str], None] = say) -> dict:
    """Speed and quality of the ranking configurations on a BEIR collection, side by side.

    Indexes the corpus through the embedding cache (the catalog is named after the dataset's
    folder), then measures HNSW recall@k against exact search, and over the judged queries of
    `split` the per-query latency (p50, p95) and nDCG@10 of dense through HNSW, dense exact, bm25
    and fused, each run at `depth` results as the nightly runs do. The recall pass runs first,
    so the latency runs find the index and the table in Postgres's buffers.
    """
    from searcheval import store
    from searcheval.errors import InputError
    from searcheval.io.beir import load_beir
    from searcheval.metrics.engine import Settings, evaluate
    from searcheval.metrics.scoring import latency_summary
    from searcheval.rankers.dense import hnsw_recall, run_dense
    from searcheval.rankers.embeddings import CachedEmbedder
    from searcheval.rankers.configs import builtin_configurations
    from searcheval.rankers.registry import (
        RunContext,
        bm25_index,
        run_configuration,
    )
    from searcheval.store import database

    for name, value in (("k", k), ("depth", depth)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"expected a whole {name} >= 1, got {value!r}", field=name)
    collection = load_beir(dataset, split, max_queries=max_queries)
    if not collection.queries:
        raise InputError(f"no judged query in qrels/{split}.tsv", file=collection.sources["qrels"])
    url = database.resolve_url(database_url)
    catalog, resources, queries = collection.name, collection.resources, collection.queries
    qids = [q.id for q in queries]
    figures: dict = {"dataset": collection.name, "split": split, "documents": len(resources),
                     "queries": len(queries), "k": k, "depth": depth,
                     "database": database.describe(url)}
    conn = database.open_database(url)
    try:
        store.save_catalog(conn, catalog, resources)
        embedder = CachedEmbedder(conn, model_path, show_progress=False)
        figures["model"] = embedder.model
        first = len(resources) / 19
        say(f"indexing {len(resources)} documents of {catalog} through the embedding cache of "
            f"{figures['database']}: texts never embedded before go through the model (~19 "
            f"abstracts/s on 2 cores: up to ~"
            + (f"{first / 60:.0f} min" if first >= 120 else f"{first:.0f} s")
            + " the first time); later runs read them from the cache")
        figures["index"] = _index_through_cache(conn, catalog, embedder, resources, say)
        t = time.perf_counter()
        before = embedder.embedded, embedder.from_cache
        query_vectors = embedder.embed([q.text for q in queries])
        figures["query_embedding"] = {"seconds": time.perf_counter() - t,
                                      "embedded": embedder.embedded - before[0],
                                      "from_cache": embedder.from_cache - before[1]}
        t = time.perf_counter()
        bm25_index(resources, disk=False,  # the build, not the cache
                   **builtin_configurations()["bm25"].params)
        figures["bm25_index_s"] = time.perf_counter() - t

        say(f"HNSW recall@{k} against exact search over {len(queries)} queries ...")
        t = time.perf_counter()
        recall = hnsw_recall(conn, catalog, embedder.model, query_vectors, k=k)
        figures["hnsw_recall"] = {
            "k": k, "value": recall, "seconds": time.perf_counter() - t,
            "ef_search": min(max(k, store.EF_SEARCH_MIN), store.EF_SEARCH_MAX)}

        qrels = collection.qrels()
        settings = Settings(trec_compat=True)  # trec_eval's conventions, as BEIR reports
        runs = {}
        say(f"running dense (HNSW), dense (exact), bm25 and fused at depth {depth} ...")
        builtin = builtin_configurations()
        context = RunContext(conn=conn, catalog=catalog, resources=resources,
                             model=embedder.model)
        runs["dense"] = run_configuration(builtin['dense'], context, queries,
                                          query_vectors, k=depth)
        runs["dense-exact"] = run_dense(conn, catalog, embedder.model, qids, query_vectors,
                                        k=depth, exact=True)
        runs["bm25"] = run_configuration(builtin['bm25'], context, queries,
                                         query_vectors, k=depth)
        runs["fused"] = run_configuration(builtin['fused'], context, queries,
                                          query_vectors, k=depth)
        # what the evaluation itself sees: the top k of the depth-long HNSW run (searched with
        # ef_search = clamp(depth)) against the top k of the exact run
        overlaps = [len(set(runs["dense"].top_ids(q, k)) & set(runs["dense-exact"].top_ids(q, k)))
                    / len(runs["dense-exact"].top_ids(q, k))
                    for q in qids if runs["dense-exact"].top_ids(q, k)]
        figures["hnsw_recall"]["at_depth"] = {
            "depth": depth, "value": float(np.mean(overlaps)) if overlaps else 1.0,
            "ef_search": min(max(depth, store.EF_SEARCH_MIN), store.EF_SEARCH_MAX)}
        figures["configurations"] = {}
        for name, run in runs.items():
            latency = latency_summary(run.latency_ms)
            ndcg = evaluate(qrels, run.as_run(), ["ndcg@10"], settings, query_ids=qids)
            figures["configurations"][name] = {
                "p50_ms": latency["p50"], "p95_ms": latency["p95"],
                "ndcg@10": ndcg.means["ndcg@10"]}
    finally:
        conn.close()
    figures["beir_bm25_ndcg@10"] = BEIR_BM25_NDCG10.get(collection.name)
    figures["goals"] = {f"HNSW recall@{k} >= {GOAL_HNSW_RECALL}": recall >= GOAL_HNSW_RECALL}
    figures["goal_met"] = all(figures["goals"].values())
    say(search_table(figures))
    return figures


CONFIGURATION_LABELS = {"dense": "dense (HNSW)", "dense-exact": "dense (exact)", "bm25": "bm25",
                        "fused": "fused"}


def search_table(f: dict) -> str:
    """The paste-able summary of `benchmark_search`'s figures."""
    index, qe, recall = f["index"], f["query_embedding"], f["hnsw_recall"]
    lines = [
        (f"{f['dataset']} ({f['split']}): {f['documents']} documents, {f['queries']} judged "
         f"queries; {f['model']}; database {f['database']}"),
        (f"index: {index['documents']} documents in {index['seconds']:.1f} s "
         f"({index['embedded']} embedded, {index['from_cache']} from the cache); queries: "
         f"{qe['embedded']} embedded, {qe['from_cache']} from the cache; bm25 index "
         f"{f['bm25_index_s']:.2f} s"),
        (f"HNSW recall@{recall['k']} against exact search: {recall['value']:.4f} "
         f"(a k={recall['k']} search, ef_search {recall['ef_search']}; goal >= "
         f"{GOAL_HNSW_RECALL}); the top {recall['k']} of the depth-{recall['at_depth']['depth']} "
         f"runs below (ef_search {recall['at_depth']['ef_search']}): "
         f"{recall['at_depth']['value']:.4f}"),
        "",
        f"| {'configuration':<14} | {'p50 ms':>7} | {'p95 ms':>7} | {'nDCG@10':>7} |",
        f"| {'-' * 14} | {'-' * 6}:| {'-' * 6}:| {'-' * 6}:|",
    ]
    for name, c in f["configurations"].items():
        ndcg = "-" if c["ndcg@10"] is None else f"{c['ndcg@10']:.4f}"
        lines.append(f"| {CONFIGURATION_LABELS.get(name, name):<14} | {c['p50_ms']:>7.2f} | "
                     f"{c['p95_ms']:>7.2f} | {ndcg:>7} |")
    lines.append("")
    lines.append(f"per-query latency at depth {f['depth']} (fused = its own bm25 + dense + "
                 "fusion); nDCG@10 with trec_eval's conventions")
    if f.get("beir_bm25_ndcg@10") is not None:
        lines.append(f"BEIR's published BM25 nDCG@10 on {f['dataset']}: "
                     f"{f['beir_bm25_ndcg@10']:.3f}")
    lines += [f"{'met ' if ok else 'MISSED'}  {goal}" for goal, ok in f["goals"].items()]
    return "\n".join(lines)
