"""searcheval: search-quality evaluation.

The public Python API (imported on first use, so `import searcheval` stays light):

    import searcheval
    result = searcheval.evaluate(qrels, run, ["ndcg@10", "mrr"])     # dicts, DataFrames or paths
    result.means, result.per_query(), result.to_dataframe()
    evaluator = searcheval.Evaluator(qrels, ["ndcg@10"])   # judgments prepared once, many runs
    searcheval.compare(qrels, {"bm25": run_a, "dense": run_b})      # paired significance vs the first
    searcheval.load_qrels(path), searcheval.load_run(path), searcheval.write_run(run, path)
    searcheval.load_collection(fixtures="fixtures")   # or dataset=DIR (BEIR, WANDS), mapping=FILE
    searcheval.load_configurations("configurations.yaml", {"fused.rrf_k": 20})  # checked, hashed

The library never imports Prefect; the project's flows/ and tasks/ wrap it.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "evaluate": "searcheval.metrics.api",
    "Evaluator": "searcheval.metrics.api",
    "compare": "searcheval.metrics.api",
    "Comparison": "searcheval.metrics.api",
    "Evaluation": "searcheval.metrics.engine",
    "Settings": "searcheval.metrics.engine",
    "load_qrels": "searcheval.io.trec",
    "load_run": ("searcheval.io.trec", "load_trec_run"),
    "write_run": "searcheval.io.frames",
    "load_collection": "searcheval.evaluation.inputs",
    "Collection": "searcheval.types",
    "Filters": "searcheval.types",
    "Judgment": "searcheval.types",
    "Query": "searcheval.types",
    "RankedRun": "searcheval.types",
    "Resource": "searcheval.types",
    "Qrels": "searcheval.types",
    "Run": "searcheval.types",
    "InputError": "searcheval.errors",
    "RunIncomplete": "searcheval.errors",
    "load_configurations": "searcheval.rankers.configs",
    "Configuration": "searcheval.rankers.configs",
    "Configurations": "searcheval.rankers.configs",
    "Kind": "searcheval.rankers.registry",
    "register_kind": "searcheval.rankers.registry",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'searcheval' has no attribute {name!r}")
    module, attribute = where if isinstance(where, tuple) else (where, name)
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
