"""Runs: what a ranking configuration returned, and TREC run files.

At the edges a run is `dict[query_id, dict[doc_id, score]]` (the shape ranx, ir_measures and BEIR
share). A `RankedRun` keeps the rank order and per-query latency of one configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from searcheval.errors import InputError

Run = dict[str, dict[str, float]]
Qrels = dict[str, dict[str, int]]


@dataclass
class RankedRun:
    """One configuration's results: query -> [(doc_id, score)] best first, and latency per query."""

    configuration: str
    results: dict[str, list[tuple[str, float]]]
    latency_ms: dict[str, float] = field(default_factory=dict)

    def as_run(self) -> Run:
        return {q: {d: float(s) for d, s in docs} for q, docs in self.results.items()}

    def top_ids(self, query_id: str, k: int) -> list[str]:
        return [d for d, _ in self.results.get(query_id, [])[:k]]


def write_trec_run(run: RankedRun, path: str | Path, tag: str | None = None) -> Path:
    """TREC run format: `qid Q0 docid rank score tag`, rank from 1, best first."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = tag or run.configuration
    with open(path, "w", encoding="utf-8") as fh:
        for qid in sorted(run.results):
            for rank, (doc, score) in enumerate(run.results[qid], start=1):
                fh.write(f"{qid} Q0 {doc} {rank} {score:.6f} {tag}\n")
    return path


def load_trec_run(path: str | Path) -> Run:
    """A TREC run file (`qid Q0 docid rank score tag`, whitespace separated).

    Ranks in the file are ignored, as trec_eval ignores them: order comes from the scores.
    """
    from searcheval.catalog import read_text

    path = Path(path)
    text = read_text(path)
    run: Run = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise InputError(f"expected 6 columns 'qid Q0 docid rank score tag', got {len(parts)}",
                             file=path, line=line_no)
        qid, _, doc, _, raw_score, _ = parts
        try:
            score = float(raw_score)
        except ValueError:
            raise InputError(f"expected a numeric score, got {raw_score!r}", file=path,
                             line=line_no, field="score") from None
        if not math.isfinite(score):
            raise InputError(f"expected a finite score, got {raw_score!r}", file=path,
                             line=line_no, field="score")
        docs = run.setdefault(qid, {})
        if doc in docs:
            raise InputError(f"duplicate document {doc!r} in the ranking of query {qid!r}",
                             file=path, line=line_no, field="docid")
        docs[doc] = score
    return run
