"""Coverage of the results by the judgments: how much of what each configuration returned in its
top k carries a judgment (any grade, 0 included)."""

from __future__ import annotations

from typing import Any

from searcheval.defaults import COVERAGE_FLOOR, COVERAGE_K
from searcheval.errors import InputError
from searcheval.types import Qrels, RankedRun

EXAMPLES = 5  # unjudged (query, document) pairs listed per configuration


def results_coverage(runs: dict[str, RankedRun], qrels: Qrels, k: int = COVERAGE_K,
                     floor: float = COVERAGE_FLOOR,
                     floor_source: str = "default") -> dict[str, dict[str, Any]]:
    """judged@k per configuration: how many of the (query, top-k document) pairs it returned are
    judged in `qrels` (any grade counts as judged).

    `judged_share` pools all pairs; `mean_per_query` averages the per-query shares over the
    queries that returned something; `below_floor` compares `judged_share` with `floor`, and
    `floor_source` says where the floor came from (a run parameter, the dataset's settings, the
    default). With no pair at all (every query abstained) both shares are None and the floor is
    not tripped.
    """
    if k < 1:
        raise InputError(f"expected k >= 1, got {k}", field="k")
    out: dict[str, dict[str, Any]] = {}
    for name, run in runs.items():
        pairs = judged = 0
        shares: list[float] = []
        unjudged: list[str] = []
        for qid in run.results:
            top = run.top_ids(qid, k)
            if not top:
                continue
            labels = qrels.get(qid, {})
            hits = sum(1 for d in top if d in labels)
            pairs += len(top)
            judged += hits
            shares.append(hits / len(top))
            unjudged.extend(f"{qid}:{d}" for d in top if d not in labels)
        share = judged / pairs if pairs else None
        out[name] = {
            "k": k,
            "floor": floor,
            "floor_source": floor_source,
            "pairs": pairs,
            "judged_pairs": judged,
            "judged_share": share,
            "mean_per_query": sum(shares) / len(shares) if shares else None,
            "queries": len(shares),
            "below_floor": share is not None and share < floor,
            "unjudged_examples": unjudged[:EXAMPLES],
        }
    return out
