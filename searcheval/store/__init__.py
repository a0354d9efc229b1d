"""Postgres: the server and connections (`database`), every SQL statement (`sql`), the migrations
(`migrations/`), and the functions that read and write rows: the search data (`catalog`), the run
history (`history`), recorded traces (`traces`), judgments and pools (`judgments`, imported as
`searcheval.store.judgments`), what document lookups returned (`documents`, imported as
`searcheval.store.documents`), a model judge's answers and labelling runs (`judges`, imported as
`searcheval.store.judges`).

Only the library's evaluation, judging, replay, rankers and bench packages and the CLI import it,
and it imports none of them (io's trace nouns and readers, for `traces`, only: io never imports
store, a mapping's SQL tables are read by `tables.read_query`, handed to io by
`evaluation.inputs`). The row functions are re-exported here, so `from searcheval import store; store.save_catalog(...)`.
"""

from searcheval.store.catalog import (
                                      EF_SEARCH_MAX,
                                      EF_SEARCH_MIN,
                                      HNSW_DIMENSIONS,
                                      count_cached,
                                      count_doc_vectors,
                                      count_embeddings,
                                      dense_search,
                                      dense_search_many,
                                      dense_search_plan,
                                      hnsw_search,
                                      load_catalog_hashes,
                                      load_embeddings,
                                      load_resources,
                                      save_catalog,
                                      save_doc_vectors,
                                      save_embeddings,
)
from searcheval.store.history import (
                                      last_replay_runs,
                                      last_runs,
                                      replay_run_metrics,
                                      run_configurations,
                                      run_metrics,
                                      run_query_results,
                                      run_what_ran,
                                      run_segment_metrics,
                                      save_evaluation,
                                      save_replay,
)
from searcheval.store.traces import (
                                      TRACES_SOURCE,
                                      count_traces,
                                      ingest_traces,
                                      iter_trace_rows,
                                      load_trace_table,
                                      save_traces,
)

__all__ = [
    "EF_SEARCH_MAX", "EF_SEARCH_MIN", "HNSW_DIMENSIONS", "TRACES_SOURCE", "count_cached", "count_doc_vectors",
    "count_embeddings", "count_traces", "dense_search", "dense_search_many", "dense_search_plan", "hnsw_search",
    "ingest_traces", "iter_trace_rows", "last_replay_runs", "last_runs", "load_catalog_hashes",
    "load_embeddings", "load_resources", "load_trace_table", "replay_run_metrics", "run_metrics",
    "run_query_results", "run_segment_metrics", "save_catalog", "save_doc_vectors",
    "save_embeddings", "save_evaluation",
    "save_replay", "save_traces", "run_configurations", "run_what_ran",
]
