"""`searcheval benchmark traces`: a million simulated trace events (10 results shown, clicks from
the position-based simulation of `searcheval.production.simulate`) through ingest (the JSONL
reader, every line validated), golden-query sampling (pps, n = 100) and the position-based
model (impressions + EM); then one live-monitor window of 10,000 labelled traces read from
Postgres, scored and stored. Goals: under 60 s and 2 GB for the first three, under 5 s for the
window."""

from __future__ import annotations

import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from searcheval.bench.common import say, throwaway_database
from searcheval.bench.replay import peak_memory_bytes
from searcheval.production.simulate import default_alpha, default_theta

GOAL_S, GOAL_BYTES, WINDOW_GOAL_S = 60.0, 2 * 1024 ** 3, 5.0
BLOCK = 50_000
START = datetime(2026, 3, 1, tzinfo=timezone.utc)


def write_simulated(path: Path, traces: int, *, queries: int = 2_000, shown: int = 10,
                    seed: int = 0, production_share: float = 0.8, labelled: bool = False,
                    start: datetime = START, span_s: float = 86_400.0) -> int:
    """The simulation of `production.simulate` written fast (f-strings, numpy), `traces` lines
    spread over `span_s` seconds; `labelled` adds relevance_scores (grade 3 for the two most
    attractive documents, 0 for the least)."""
    rng = np.random.default_rng(seed)
    theta, alpha = default_theta(shown), default_alpha(shown)
    clicks_total = 0
    # query texts without digits (the sampler's default exclusions drop runs of 4+ digits)
    words = ["".join(chr(97 + (qi // 26 ** e) % 26) for e in range(3)) for qi in range(queries)]
    with open(path, "w", encoding="utf-8") as fh:
        for first in range(0, traces, BLOCK):
            n = min(BLOCK, traces - first)
            q = rng.integers(0, queries, size=n)
            order = np.tile(np.arange(shown), (n, 1))
            shuffle = rng.random(n) >= production_share
            order[shuffle] = rng.permuted(order[shuffle], axis=1)
            clicked = rng.random((n, shown)) < theta[None, :] * alpha[order]
            clicks_total += int(clicked.sum())
            lines = []
            for i in range(n):
                k = first + i
                qi = int(q[i])
                sec = start + timedelta(seconds=k * span_s / traces)
                ids = ", ".join(f'"d{qi}-{j}"' for j in order[i].tolist())
                cl = ", ".join(f'{{"position": {r + 1}}}'
                               for r in np.flatnonzero(clicked[i]).tolist())
                line = (f'{{"trace_id": "t{k}", "ts": "{sec.isoformat()}", "query": '
                        f'"query {words[qi]}", "segment": "s{qi % 3}", "retrieved_ids": [{ids}], '
                        f'"clicks": [{cl}]')
                if labelled:
                    line += (f', "relevance_scores": {{"d{qi}-{shown - 1}": 3, '
                             f'"d{qi}-{shown - 2}": 3, "d{qi}-0": 0}}')
                lines.append(line + "}")
            fh.write("\n".join(lines) + "\n")
    return clicks_total


def benchmark_traces(traces: int = 1_000_000, window: int = 10_000, seed: int = 0,
                     workdir: Path | None = None, database_url: str | None = None) -> dict:
    from searcheval.io.traces import read_traces
    from searcheval.production import clicks
    from searcheval.production.sampling import sample_queries

    figures: dict = {}
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        path = Path(tmp) / "traces.jsonl"
        t = time.perf_counter()
        n_clicks = write_simulated(path, traces, seed=seed)
        say(f"simulated {traces:,} traces (10 shown each, {n_clicks:,} clicks): "
            f"{path.stat().st_size / 1e6:,.0f} MB of JSONL in {time.perf_counter() - t:.1f} s "
            "(not timed)")
        c0, t0 = time.process_time(), time.perf_counter()
        table = read_traces(path)
        c1, t1 = time.process_time(), time.perf_counter()
        sample = sample_queries(table, n=100, method="pps", seed=seed)
        c2, t2 = time.process_time(), time.perf_counter()
        imp = clicks.impressions(table)
        c3, t_imp = time.process_time(), time.perf_counter()
        model = clicks.fit_pbm(imp)
        c4, t3 = time.process_time(), time.perf_counter()
        peak = peak_memory_bytes()
        figures.update(ingest_s=t1 - t0, sample_s=t2 - t1, pbm_s=t3 - t2, total_s=t3 - t0,
                       cpu_s=c4 - c0,
                       peak_bytes=peak, traces=len(table), sampled=len(sample.queries),
                       pairs=imp.pairs, em_iterations=model.iterations,
                       curve=[round(float(v), 3) for v in model.per_rank])
        say("step         wall s    CPU s")
        say(f"ingest     {t1 - t0:8.2f} {c1 - c0:8.2f}  ({len(table) / (t1 - t0):,.0f} traces/s "
            "wall, every line validated)")
        say(f"sample     {t2 - t1:8.2f} {c2 - c1:8.2f}  (pps, n = 100 of "
            f"{sample.provenance['counts']['candidates']:,} queries)")
        say(f"impressions{t_imp - t2:8.2f} {c3 - c2:8.2f}  ({len(imp.n):,} (pair, rank) cells of "
            f"{imp.pairs:,} pairs)")
        say(f"PBM (EM)   {t3 - t_imp:8.2f} {c4 - c3:8.2f}  ({model.iterations} EM steps, "
            f"converged {model.converged})")
        say(f"total      {t3 - t0:8.2f} {c4 - c0:8.2f}  (goal < {GOAL_S:.0f} s wall); peak memory "
            f"{peak / 2 ** 20:,.0f} MiB (goal < {GOAL_BYTES / 2 ** 30:.0f} GiB)")
        say("examination by rank (simulated 1/r): " + ", ".join(
            f"{v:.3f}" for v in model.per_rank))
        del table, imp, model
        figures.update(_window(Path(tmp), window, seed, database_url))
    figures["goals_met"] = (figures["total_s"] < GOAL_S and figures["peak_bytes"] < GOAL_BYTES
                            and figures["window_s"] < WINDOW_GOAL_S)
    say("goals met" if figures["goals_met"] else "goals NOT met")
    return figures


def _window(tmp: Path, window: int, seed: int, database_url: str | None) -> dict:
    """One live-monitor window of `window` labelled traces in a throwaway database: load it,
    score it, store it (run_monitor), timed."""
    from searcheval.io.traces import iter_trace_file
    from searcheval.production.monitor import MonitorSettings, run_monitor
    from searcheval.store import database
    from searcheval.store.traces import save_traces

    path = tmp / "window.jsonl"
    start = datetime(2026, 3, 2, tzinfo=timezone.utc)
    write_simulated(path, window, seed=seed + 1, labelled=True, start=start, span_s=14 * 60)
    url = database.resolve_url(database_url)
    with throwaway_database(url, "live") as db, database.connect(db) as conn:
        save_traces(conn, (t for _, t in iter_trace_file(path)))
        settings = MonitorSettings(name="bench", start=start)
        t = time.perf_counter()
        [result] = run_monitor(conn, settings, now=start + timedelta(minutes=16))
        elapsed = time.perf_counter() - t
    say(f"live window of {result.traces:,} traces ({result.labelled:,} labelled): "
        f"{elapsed:.2f} s read, scored and stored (goal < {WINDOW_GOAL_S:.0f} s); "
        + ", ".join(f"{m} {v:.4f}" for m, v in result.metrics.items() if v is not None))
    return {"window_s": elapsed, "window_traces": result.traces}
