"""`searcheval benchmark judge`: labelling `pairs` (10,000) pairs through the `openai` judge kind
against a local chat-completions server (`searcheval.bench.chat_server`, a process of its own)
that answers each request after `delay_ms` (50), at `concurrency` (8), into a throwaway database.

Figures:
- pairs per second against the server's capacity: its nominal capacity (concurrency / delay:
  8 / 0.05 s = 160 pairs/s), and its measured capacity: a bare httpx client (one prompt, no
  templates, parsing, cache or database) at the same concurrency, run just before and just after,
  so that the machine's load of the moment weighs on both alike (the higher of the two is the
  capacity, the stricter goal); goal >= 90% of the measured capacity;
- the client's overhead per request: the time from rendering the prompt to the parsed grade, less
  the HTTP round trip (httpx's `response.elapsed`) and the wait for a concurrency slot (p50 and
  p95); goal < 1 ms at p50;
- a second run of the same judge over the same pairs into another judgment set: every answer from
  the cache, none asked; goal: all pairs in under 2 s.
"""

from __future__ import annotations

import secrets
import time

import numpy as np

from searcheval.bench.common import nominal_capacity, say, throwaway_database, verdict
from searcheval.types import Collection, Query, Resource

GOAL_CAPACITY = 0.9
GOAL_OVERHEAD_MS = 1.0
GOAL_CACHED_S = 2.0


def synthetic_collection(name: str, pairs: int) -> tuple[Collection, list[tuple[str, str]]]:
    """`pairs` (query, document) pairs: 100 queries x pairs / 100 documents."""
    queries_n = 100 if pairs >= 100 else 1
    docs_n = -(-pairs // queries_n)
    queries = [Query(id=f"q{i:03d}", text=f"benchmark query {i} about topic {i % 17}",
                     category=("a", "b", "c")[i % 3]) for i in range(queries_n)]
    resources = [Resource(id=f"d{j:05d}", name=f"Document {j}",
                          description=f"A document about topic {j % 17}, number {j}.")
                 for j in range(docs_n)]
    wanted = [(q.id, r.id) for q in queries for r in resources][:pairs]
    return Collection(name=name, resources=resources, queries=queries, judgments=[]), wanted


def bare_capacity(base_url: str, requests: int, concurrency: int) -> float:
    """Requests per second a bare httpx client gets from the server at `concurrency`."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    body = {"model": "bench-model", "messages": [{"role": "user", "content": "bare"}]}
    with httpx.Client(limits=httpx.Limits(max_connections=concurrency,
                                          max_keepalive_connections=concurrency)) as client:
        def one(_):
            return client.post(base_url + "/chat/completions", json=body).status_code

        started = time.perf_counter()
        with ThreadPoolExecutor(concurrency) as pool:
            codes = list(pool.map(one, range(requests)))
        took = time.perf_counter() - started
    failed = [c for c in codes if c != 200]
    if failed:  # a capacity of failed requests would flatter the server
        raise RuntimeError(f"the chat server answered {len(failed)} of {requests} bare requests "
                           f"with a status other than 200 (first: {failed[0]})")
    return requests / took


def benchmark_judge(database_url: str | None = None, *, pairs: int = 10_000,
                    delay_ms: float = 50.0, concurrency: int = 8) -> dict:
    from searcheval.bench.chat_server import serve_chat
    from searcheval.judging.judges import judges_from
    from searcheval.judging.labelling import label
    from searcheval.store.database import connect, resolve_url

    nonce = secrets.token_hex(4)  # a judge of its own: nothing cached by an earlier benchmark
    capacity = nominal_capacity(concurrency, delay_ms)
    say(f"benchmark judge: {pairs} pairs, openai kind, server answering in {delay_ms:g} ms, "
        f"concurrency {concurrency} (capacity {capacity:.1f} pairs/s)")
    with throwaway_database(resolve_url(database_url), "judge") as url, \
            serve_chat(delay_ms=delay_ms) as base_url, connect(url) as conn:
        raw = {"judges": {"bench": {"kind": "openai", "model": "bench-model", "params": {
            "base_url": base_url, "concurrency": concurrency, "timeout_s": 30.0,
            "prompt": f"[{nonce}] Query: {{query}}\nDocument: {{title}}\n{{text}}\n"
                      'Answer as JSON {"grade": 0-3, "rationale": "..."}'}}}}
        judge = judges_from(raw, "<benchmark>")["bench"]
        bare = max(200, pairs // 5)
        before = bare_capacity(base_url, bare, concurrency)
        collection, wanted = synthetic_collection(f"bench_judge_{nonce}", pairs)
        overheads: list[float] = []
        trips: list[float] = []

        def timing(_pair, answer) -> None:
            extra = answer.extra
            if "total_s" in extra:
                overheads.append(extra["total_s"] - extra["round_trip_s"] - extra["waited_s"])
                trips.append(extra["round_trip_s"])

        cpu = time.process_time()
        started = time.perf_counter()
        first = label(conn, judge, collection, wanted, on_answer=timing)
        wall = time.perf_counter() - started
        cpu = time.process_time() - cpu
        after = bare_capacity(base_url, bare, concurrency)
        measured = max(before, after)
        say(f"  the server's measured capacity (a bare httpx client, {bare} requests before and "
            f"after): {before:.1f} and {after:.1f} requests/s; {measured:.1f} is "
            f"{measured / capacity:.1%} of nominal")
        rate = first.graded / wall if wall > 0 else float("inf")
        share = rate / measured
        over = np.array(overheads) * 1000.0
        p50, p95 = float(np.percentile(over, 50)), float(np.percentile(over, 95))
        say(f"  first run:  {first.graded} graded, {first.failed} failed, {first.requests} "
            f"requests in {wall:.1f} s = {rate:.1f} pairs/s: {share:.1%} of the server's measured "
            f"capacity (goal >= {GOAL_CAPACITY:.0%}), {rate / capacity:.1%} of its nominal one")
        say(f"  round trip (httpx's elapsed: request sent to answer read): p50 "
            f"{np.percentile(trips, 50) * 1000:.1f} ms, p95 {np.percentile(trips, 95) * 1000:.1f}"
            f" ms, of which the server sleeps {delay_ms:g} ms")
        say(f"  client overhead per request (prompt to parsed grade, less round trip and slot "
            f"wait): p50 {p50:.3f} ms, p95 {p95:.3f} ms (goal p50 < {GOAL_OVERHEAD_MS:g} ms); "
            f"process CPU {cpu / max(1, first.requests) * 1000:.3f} ms per request, database "
            f"writes included")
        copy, _ = synthetic_collection(f"bench_judge_{nonce}_again", pairs)
        started = time.perf_counter()
        second = label(conn, judge, copy, wanted)
        again = time.perf_counter() - started
        say(f"  second run (another judgment set, same judge): {second.from_cache} from the "
            f"cache, {second.requested} asked, {second.written} grade rows written in "
            f"{again:.2f} s (goal < {GOAL_CACHED_S:g} s)")
    goals = {"capacity": share >= GOAL_CAPACITY, "overhead": p50 < GOAL_OVERHEAD_MS,
             "cached": again < GOAL_CACHED_S and second.requested == 0}
    met = all(goals.values())
    verdicts = ", ".join(f"{k} {verdict(v)}" for k, v in goals.items())
    say(f"  goals: {verdicts}")
    return {"pairs": pairs, "pairs_per_s": rate, "capacity": capacity, "measured": measured,
            "share": share, "nominal_share": rate / capacity,
            "overhead_ms_p50": p50, "overhead_ms_p95": p95, "cached_s": again,
            "from_cache": second.from_cache, "goals": goals, "goal_met": met}
