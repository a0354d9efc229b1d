"""The registry of configurations: which names exist, what each needs, and one entry point that runs
any of them, as production runs them.

Each configuration is independent of the others: `fused` retrieves its own bm25 and dense
candidates (as the service does), so they can run concurrently. The BM25 index of a catalog is
built once per process and shared.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import numpy as np
import psycopg

from searcheval.defaults import CONFIGURATIONS
from searcheval.errors import InputError
from searcheval.rankers.bm25 import BM25FIndex, run_bm25
from searcheval.rankers.dense import run_dense
from searcheval.rankers.fusion import FusionParams, run_fused
from searcheval.types import Query, RankedRun, Resource

#: whether a configuration reads the database (document vectors): its runner gets a connection.
NEEDS_DATABASE = {"bm25": False, "dense": True, "fused": True}

_indexes: dict[str, BM25FIndex] = {}
_lock = threading.Lock()


def check_configurations(names: Sequence[str]) -> list[str]:
    unknown = [n for n in names if n not in CONFIGURATIONS]
    if unknown or not names:
        raise InputError(f"unknown configuration(s) {unknown}; expected some of "
                         f"{', '.join(CONFIGURATIONS)}", field="configurations")
    return list(dict.fromkeys(names))


def needs_database(name: str) -> bool:
    """Whether the configuration `name` runs on the database (and the query vectors)."""
    check_configurations([name])
    return NEEDS_DATABASE[name]


def bm25_index(resources: Sequence[Resource]) -> BM25FIndex:
    """The BM25F index of this exact catalog content, built once per process."""
    key = hashlib.sha256("\n".join(r.content_hash for r in resources).encode()).hexdigest()
    with _lock:
        if key not in _indexes:
            _indexes.clear()  # one catalog at a time: do not keep old indexes alive
            _indexes[key] = BM25FIndex(resources)
        return _indexes[key]


def run_configuration(name: str, conn: psycopg.Connection | None, catalog: str,
                      resources: Sequence[Resource], queries: Sequence[Query],
                      query_vectors: np.ndarray | None, model: str, *, k: int = 100,
                      fusion: FusionParams = FusionParams()) -> RankedRun:
    """One configuration's run over `queries`. `query_vectors` are in the order of `queries`;
    `conn` and the vectors are needed for `dense` and `fused`."""
    check_configurations([name])
    if name == "bm25":
        return run_bm25(resources, queries, k=k, index=bm25_index(resources))
    if conn is None or query_vectors is None:
        raise InputError(f"the {name} configuration needs the database and query vectors",
                         field="configurations")
    qids = [q.id for q in queries]
    dense = run_dense(conn, catalog, model, qids, query_vectors, k=k)
    if name == "dense":
        return dense
    lexical = run_bm25(resources, queries, k=k, index=bm25_index(resources))
    return run_fused(lexical, dense, resources, queries, fusion)
