"""Simulated search traffic with a known relevance and a known position bias (tests, benchmark).

Query q (of `queries`) has `shown` documents `d<q>-<j>`, j = 0..shown-1, whose true
attractiveness is `alpha[j]` (default: evenly from 0.3 to 0.6, j = 0 the least relevant). The
served ranking shows them in the order j = 0, 1, ... (the *least* relevant first) for a share
`production_share` of the traces, and in a uniformly random order otherwise. A result at rank r
(1-based) is examined with probability `theta[r-1]` (default 1/r) and, examined, clicked with
probability alpha: P(click) = theta_r * alpha_j, independently per result (the PBM's own story).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Iterator

import numpy as np

START = datetime(2026, 3, 1, tzinfo=timezone.utc)


def default_theta(shown: int) -> np.ndarray:
    return 1.0 / np.arange(1, shown + 1)


def default_alpha(shown: int) -> np.ndarray:
    return 0.3 + 0.3 * np.arange(shown) / max(shown - 1, 1)


def simulate(n_traces: int, *, queries: int = 50, shown: int = 10,
             theta: np.ndarray | None = None, alpha: np.ndarray | None = None,
             production_share: float = 0.8, seed: int = 0, start: datetime = START,
             step_s: float = 1.0, segments: int = 3, chunk: int = 50_000,
             feedback_share: float = 0.0) -> Iterator[dict]:
    """`n_traces` trace records (dicts in the JSONL shape), one every `step_s` seconds. With
    `feedback_share`, that share of the traces with a click also carries explicit feedback on
    the first clicked document: grade 1 + (alpha >= 0.4) + (alpha >= 0.5) (drawn from its own
    random stream, so the clicks are the same with or without it)."""
    rng = np.random.default_rng(seed)
    fb_rng = np.random.default_rng(seed + 1_000_003)
    theta = default_theta(shown) if theta is None else np.asarray(theta, dtype=float)
    alpha = default_alpha(shown) if alpha is None else np.asarray(alpha, dtype=float)
    ids = [[f"d{q}-{j}" for j in range(shown)] for q in range(queries)]
    for first in range(0, n_traces, chunk):
        m = min(chunk, n_traces - first)
        q = rng.integers(0, queries, size=m)
        order = np.tile(np.arange(shown), (m, 1))
        shuffle = rng.random(m) >= production_share
        order[shuffle] = rng.permuted(order[shuffle], axis=1)
        clicks = rng.random((m, shown)) < theta[None, :] * alpha[order]
        give = fb_rng.random(m) < feedback_share
        for i in range(m):
            k = first + i
            qi = int(q[i])
            docs = ids[qi]
            clicked = np.flatnonzero(clicks[i]).tolist()
            record = {"trace_id": f"t{k}",
                      "ts": (start + timedelta(seconds=k * step_s)).isoformat()
                      .replace("+00:00", "Z"),
                      "query": f"query {qi}", "segment": f"s{qi % segments}",
                      "retrieved_ids": [docs[j] for j in order[i].tolist()],
                      "clicks": [{"position": r + 1} for r in clicked]}
            if give[i] and clicked:
                j = int(order[i][clicked[0]])
                record["feedback"] = [{"doc_id": docs[j],
                                       "grade": 1 + int(alpha[j] >= 0.4) + int(alpha[j] >= 0.5)}]
            yield record


def main(argv: list[str] | None = None) -> int:
    """`python -m searcheval.production.simulate N [SEED]`: N simulated traces as JSONL on stdout
    (to try the click models, the sampler and the live monitor: a third of the traces with a
    click carry explicit feedback)."""
    import json
    import sys

    args = sys.argv[1:] if argv is None else argv
    n = int(args[0]) if args else 1000
    seed = int(args[1]) if len(args) > 1 else 0
    out = sys.stdout
    for record in simulate(n, queries=20, seed=seed, feedback_share=1 / 3):
        out.write(json.dumps(record) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
