"""`searcheval benchmark replay`: a million synthetic traces through the replay path.

The traces are written to a JSONL file (in blocks, so generation holds little in memory), then read
back with `traces.read_traces` and scored with `replay.replay`, exactly as `searcheval replay`
does: A/B of two configurations, a catalog (some labels stale), judgments joined for traces with
none, thresholds and a few bad lines. It prints the wall time of every phase and the peak memory
(ru_maxrss), and cross-checks a sample of traces against the metric engine called directly on
plain string-keyed dicts.
"""

from __future__ import annotations

import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MEMORY_BUDGET = 2 * 1024 ** 3
SEGMENTS = ("agent-api", "dashboard", "mcp-tool", "partner-eu", "partner-us")
CONFIGURATIONS = ("control", "treatment")
GRADES = (3, 2, 1)  # the three relevant documents of each query
BLOCK = 50_000


def peak_memory_bytes() -> int:
    """Peak resident memory of this process (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def generate_traces(path: Path, traces: int, *, depth: int = 20, seed: int = 0,
                    docs: int = 100_000, queries: int = 20_000,
                    bad_every: int = 2_000) -> dict[str, int]:
    """Write `traces` synthetic traces to `path` (one bad line every `bad_every`).

    Query q (id `q<q>`, text `query <q>`) has relevant documents `rel-<q>-<k>` graded 3, 2, 1;
    the other results are drawn from `doc-<n>`. Treatment places relevant documents higher than
    control. Label kinds: 55 % relevance_scores, 20 % relevant_ids, 15 % none but a query_id (the
    judgments join them), 10 % none and no query_id (unlabelled).
    """
    rng = np.random.default_rng(seed)
    stats = {"written": 0, "bad": 0}
    with open(path, "w", encoding="utf-8") as fh:
        for start in range(0, traces, BLOCK):
            n = min(BLOCK, traces - start)
            q = rng.zipf(1.3, size=n) % queries
            seg = rng.integers(0, len(SEGMENTS), size=n)
            conf = rng.integers(0, 2, size=n)
            first = rng.integers(0, docs, size=n)
            stride = rng.integers(1, max(2, docs // (depth + 1)), size=n)
            noise = (first[:, None] + np.arange(depth)[None, :] * stride[:, None]) % docs
            # each relevant document shows up with a probability, at a position that depends on
            # the configuration (treatment ranks them higher)
            shown = rng.random((n, 3)) < np.array([0.85, 0.6, 0.4])
            top = np.where(conf == 1, 3, depth)[:, None]
            pos = (rng.random((n, 3)) * top).astype(np.int64)
            kind = rng.random(n)
            second = (start + np.arange(n)) * 86_400 // traces  # spread over one day
            lines = []
            for i in range(n):
                qi = int(q[i])
                ids = [f"doc-{d:06d}" for d in noise[i].tolist()]
                for k in range(3):
                    if shown[i, k]:
                        ids[pos[i, k]] = f"rel-{qi}-{k}"
                ids = list(dict.fromkeys(ids))  # a later relevant doc may overwrite an earlier
                number = start + i
                sec = int(second[i])
                head = (f'{{"trace_id": "t{number:08d}", "ts": "2026-12-01T{sec // 3600:02d}:'
                        f'{sec // 60 % 60:02d}:{sec % 60:02d}Z", "query": "query {qi}", ')
                k = kind[i]
                qid = "" if k >= 0.9 else f'"query_id": "q{qi}", '
                body = (f'"segment": "{SEGMENTS[seg[i]]}", "configuration": '
                        f'"{CONFIGURATIONS[conf[i]]}", "retrieved_ids": ["' + '", "'.join(ids)
                        + '"]')
                if k < 0.55:
                    body += (f', "relevance_scores": {{"rel-{qi}-0": 3, "rel-{qi}-1": 2, '
                             f'"rel-{qi}-2": 1, "doc-{noise[i, -1]:06d}": 0}}')
                elif k < 0.75:
                    body += f', "relevant_ids": ["rel-{qi}-0", "rel-{qi}-1"]'
                line = head + qid + body + "}"
                if bad_every and number % bad_every == bad_every - 1:
                    line = line[: len(line) // 2]  # a truncated line: invalid JSON
                    stats["bad"] += 1
                lines.append(line)
            fh.write("\n".join(lines) + "\n")
            stats["written"] += n
    return stats


def synthetic_catalog(docs: int, queries: int) -> set[str]:
    """Every document, except the grade-1 document of every 10th query: those labels are stale."""
    catalog = {f"doc-{d:06d}" for d in range(docs)}
    for q in range(queries):
        for k in range(3):
            if not (k == 2 and q % 10 == 0):
                catalog.add(f"rel-{q}-{k}")
    return catalog


def synthetic_judgments(queries: int) -> dict[str, dict[str, int]]:
    return {f"q{q}": {f"rel-{q}-{k}": g for k, g in enumerate(GRADES)} for q in range(queries)}


def benchmark_replay(traces: int = 1_000_000, depth: int = 20, seed: int = 0,
                     directory: Path | None = None, *, docs: int = 100_000,
                     queries: int = 20_000, check: int = 500, out=print) -> int:
    """Generate, read and score; print per-phase wall time and peak memory. 0 = agreement and
    within the 2 GiB budget, 1 otherwise."""
    from searcheval.io.traces import read_traces
    from searcheval.metrics.engine import Settings, evaluate
    from searcheval.replay.scoring import (
        DEFAULT_REPLAY_METRICS,
        Thresholds,
        replay,
        split_configurations,
    )

    own_dir = directory is None
    folder = Path(tempfile.mkdtemp(prefix="se-replay-")) if own_dir else Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "traces.jsonl"
    phases: list[tuple[str, float]] = []
    wall = time.perf_counter()
    try:
        t0 = time.perf_counter()
        stats = generate_traces(path, traces, depth=depth, seed=seed, docs=docs, queries=queries)
        phases.append(("generate JSONL", time.perf_counter() - t0))
        size = path.stat().st_size
        t0 = time.perf_counter()
        catalog = synthetic_catalog(docs, queries)
        judgments = synthetic_judgments(queries)
        phases.append(("catalog + judgments", time.perf_counter() - t0))
        t0 = time.perf_counter()
        table = read_traces(path, max_bad_share=0.01)
        phases.append(("read + validate", time.perf_counter() - t0))
        t0 = time.perf_counter()
        sides, _ = split_configurations(table)
        phases.append(("split A/B", time.perf_counter() - t0))
        thresholds = Thresholds(default={"ndcg@10": 0.5, "recall@20": 0.6}, min_coverage=0.8)
        settings = Settings()
        report = replay(sides, metrics=DEFAULT_REPLAY_METRICS, settings=settings,
                        thresholds=thresholds, judgments=judgments, catalog=catalog, seed=seed)
        phases += [(name, secs) for name, secs in report.timings.items()]

        # cross-check a sample against the engine on plain dicts keyed by strings
        t0 = time.perf_counter()
        from searcheval.replay.scoring import resolve_labels
        a_table = sides[0][1]
        rng = random.Random(seed)
        sample = rng.sample(range(len(a_table)), min(check, len(a_table)))
        labels = resolve_labels(a_table, judgments=judgments, catalog=catalog)
        qrels, run, keep = {}, {}, []
        for i in sample:
            a, b = labels.offsets[i], labels.offsets[i + 1]
            if a == b:
                continue
            tr = a_table.trace(i)
            n = len(tr.retrieved_ids)
            run[tr.trace_id] = {d: float(n - p) for p, d in enumerate(tr.retrieved_ids)}
            qrels[tr.trace_id] = {a_table.docs[c]: int(g) for c, g in
                                  zip(labels.docs[a:b].tolist(), labels.grades[a:b].tolist())}
            keep.append(i)
        direct = evaluate(qrels, run, report.metrics, settings)
        worst = 0.0
        for name in report.metrics:
            ours = report.main.scores.values[name][keep]
            worst = max(worst, float(np.abs(ours - direct.values[name]).max()) if keep else 0.0)
        phases.append((f"cross-check {len(keep)} traces", time.perf_counter() - t0))
    finally:
        if own_dir:
            shutil.rmtree(folder, ignore_errors=True)
    total = time.perf_counter() - wall
    peak = peak_memory_bytes()
    m = report.main
    out(f"{traces} traces x {depth} results ({size / 2**20:.0f} MiB of JSONL, "
        f"{stats['bad']} bad lines), {docs} documents, {queries} queries, seed {seed}")
    out(f"{'phase':<28}{'seconds':>9}")
    for name, secs in phases:
        out(f"{name:<28}{secs:>9.2f}")
    out(f"{'total':<28}{total:>9.2f}")
    out(f"peak memory (ru_maxrss): {peak / 2**20:.0f} MiB (budget {MEMORY_BUDGET / 2**20:.0f} MiB)")
    out(f"A = {m.name}: {m.traces} traces, coverage {m.coverage.share:.3f}, "
        f"bad lines skipped {m.bad.count}, stale labels dropped "
        f"{m.stale.dropped if m.stale else 0}; B = {report.other.name if report.other else '-'}")
    if report.ab is not None:
        c = report.ab.segments["(all)"]["ndcg@10"]
        out(f"A/B ndcg@10 over {c.pairs} query pairs: A {c.mean_a:.4f}, B {c.mean_b:.4f}, "
            f"wins {c.wins} / losses {c.losses} / ties {c.ties}, p = {c.p_value:.4g}")
    out("overall A: " + ", ".join(f"{k} {v:.4f}" for k, v in m.overall.items()
                                   if v is not None))
    out(f"agreement with the engine on plain dicts: max |difference| = {worst:.1e}")
    ok = worst <= 1e-12 and peak <= MEMORY_BUDGET
    if not ok:
        out("FAILED: " + ("disagreement; " if worst > 1e-12 else "")
            + ("over the memory budget" if peak > MEMORY_BUDGET else ""))
    return 0 if ok else 1
