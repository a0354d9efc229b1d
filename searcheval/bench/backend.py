"""`searcheval benchmark backend`: the `http` kind against the example search service
(examples/search_service, a subprocess on a free port), beside a bare httpx client.

The service sleeps `delay_ms` before every answer (an `asyncio.sleep`: its requests overlap), in
one uvicorn process with no concurrency limit, so `concurrency / delay` is its nominal capacity.

`benchmark_backend` (the default command, issue 27): `queries` (10,000) at `concurrency` (32)
against the service sleeping 20 ms, in `rounds` (3) alternating rounds of a bare httpx client and
the `http` kind, so that a burst of load elsewhere falls on both. Figures, as in
`searcheval benchmark judge`:

- the service's capacity: nominal (`concurrency / delay`) and measured (the queries per second the
  bare client gets from it: the same GETs from `concurrency` threads, each with an httpx client
  keeping one connection alive, hits read from the JSON, nothing else; the best of its rounds,
  the stricter goal); goal: the `http` kind's best round at >= 90% of the measured capacity;
- the client's overhead per query: the time from building the request to the parsed hits, less
  the round trip (request sent to the answer's last byte read; httpx's `response.elapsed` for the
  bare client): templates, the concurrency slot and rate limit, the bounded reader's checks, JSON
  decoding, the hits path (p50 and p95); goal: p50 < 1 ms;
- CPU per query of the client process and of the service process, how busy each kept one core,
  the most requests the service held at once and the connections they came on (its `/_stats`:
  a pooled keep-alive client uses at most `concurrency`), and the load average when the round
  ended: on a shared machine these say whether the service, the client or the machine set the
  pace.

`benchmark_backend_concurrency` (`--compare LOW,HIGH`, issue 11): the `http` kind at concurrency 1
and 8 beside the bare client; goals: at 8 at least 4x the queries per second of 1, and a client
overhead under 1 ms at p50.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from searcheval.bench.common import load_average, nominal_capacity, say, verdict

GOAL_CAPACITY = 0.9
GOAL_OVERHEAD_MS = 1.0
GOAL_SPEEDUP = 4.0
_LISTENING = re.compile(r"search_service: serving .* on (http://\S+)")
_SETTINGS = re.compile(r"search_service: server (.*)")
BARE, OURS = "bare httpx", "searcheval http"


@dataclass
class ExampleService:
    url: str
    pid: int
    settings: str  # the server's settings, as the service printed them

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the service process used so far; None off Linux."""
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def reset_stats(self, delay_ms: float) -> None:
        """Set the knobs again (only the delay): the service's counters start from zero."""
        import httpx

        httpx.post(f"{self.url}/_knobs", json={"delay_ms": delay_ms},
                   timeout=10).raise_for_status()

    def stats(self) -> dict:
        import httpx

        response = httpx.get(f"{self.url}/_stats", timeout=10)
        response.raise_for_status()
        return response.json()


@contextmanager
def example_service(project: Path, delay_ms: float, log: Path):
    """The example service over the project's fixtures, sleeping `delay_ms`, until the block
    ends; yields an `ExampleService`."""
    import httpx

    command = [sys.executable, "-m", "examples.search_service", "--fixtures",
               str(project / "fixtures"), "--host", "127.0.0.1", "--port", "0",
               "--delay-ms", str(delay_ms), "--watch-parent"]
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=project, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
        try:
            deadline, url = time.monotonic() + 60, None
            while time.monotonic() < deadline and url is None:
                if process.poll() is not None:
                    raise RuntimeError(f"the example service exited: {log.read_text()}")
                match = _LISTENING.search(log.read_text())
                if match:
                    url = match[1]
                    httpx.get(f"{url}/health", timeout=5).raise_for_status()
                else:
                    time.sleep(0.05)
            if url is None:
                raise RuntimeError(f"the example service did not start: {log.read_text()}")
            settings = _SETTINGS.search(log.read_text())
            yield ExampleService(url, process.pid, settings[1] if settings else "(not printed)")
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _configuration(url: str, concurrency: int):
    from searcheval.rankers.configs import configurations_from

    entry = {"kind": "http", "served": True, "params": {
        "base_url": url, "url": "/search", "query_params": {
            "q": "{text}", "k": "{k}", "network": "{network}", "asset": "{asset}",
            "max_price_usd": "{max_price_usd}"},
        "id": "hits[*].id", "score": "hits[*].score", "concurrency": concurrency,
        "retries": 0, "timeout_s": 30}}
    return configurations_from({"configurations": {f"bench-c{concurrency}": entry}},
                               "<benchmark>")[f"bench-c{concurrency}"]


def _figures(queries: int, seconds: float, cpu: float, total, round_trip) -> dict:
    total, round_trip = np.asarray(total), np.asarray(round_trip)
    over = total - round_trip
    return {"queries": queries, "seconds": seconds, "qps": queries / seconds,
            "client_cpu_ms": cpu / queries * 1000.0,
            "round_trip_p50": float(np.percentile(round_trip, 50)),
            "overhead_p50": float(np.percentile(over, 50)),
            "overhead_p95": float(np.percentile(over, 95)), "overhead_ms": over}


def run_searcheval(url: str, queries, concurrency: int, k: int) -> dict:
    """The `http` kind (`run_configuration`, as a run calls it) over `queries`."""
    from searcheval.rankers.registry import RunContext, run_configuration

    configuration = _configuration(url, concurrency)
    cpu, started = time.process_time(), time.perf_counter()
    run = run_configuration(configuration, RunContext(), queries, None, k)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if run.errors:
        qid, error = next(iter(run.errors.items()))
        raise RuntimeError(f"{len(run.errors)} queries failed; {qid}: {error['cause']}")
    return _figures(len(queries), seconds, cpu,
                    [t["total_ms"] for t in run.timing.values()],
                    [t["round_trip_ms"] for t in run.timing.values()])


def run_bare(url: str, queries, concurrency: int, k: int) -> dict:
    """The reference: the same GETs with bare httpx clients, hits read from the JSON, nothing
    else. One client per thread, each keeping one connection alive (`concurrency` threads and
    connections; a client shared by the threads costs about 0.2 ms of CPU per request in its
    pool's bookkeeping at 32 connections, which would lower the capacity measured: the reference
    drives the service as fast as httpx can)."""
    import httpx

    def params(q):
        f = q.filters
        out = {"q": q.text, "k": k}
        out.update({n: v for n, v in (("network", f.network), ("asset", f.asset),
                                      ("max_price_usd", f.max_price_usd)) if v is not None})
        return out

    cpu, started = time.process_time(), time.perf_counter()  # its clients made, as the kind's
    ssl_context, local, clients = httpx.create_ssl_context(), threading.local(), []

    def one(q):
        t = time.perf_counter()
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(
                limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                timeout=30, verify=ssl_context)
            clients.append(client)
        response = client.get(f"{url}/search", params=params(q))
        if response.status_code != 200:  # a capacity of failed requests would flatter it
            raise RuntimeError(f"the service answered the bare client {response.status_code}")
        [(h["id"], h["score"]) for h in response.json()["hits"]]
        total = (time.perf_counter() - t) * 1000.0
        return total, response.elapsed.total_seconds() * 1000.0

    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            timings = list(pool.map(one, queries))
    finally:
        for client in clients:
            client.close()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return _figures(len(queries), seconds, cpu, [t for t, _ in timings],
                    [r for _, r in timings])


def measured(service: ExampleService, fn, queries, concurrency: int, k: int,
             delay_ms: float) -> dict:
    """`fn`'s figures with the service's side: its CPU per query and share of one core, the
    most requests it held at once, and the load average at the end."""
    service.reset_stats(delay_ms)
    before = service.cpu_seconds()
    row = fn(service.url, queries, concurrency, k)
    after = service.cpu_seconds()
    stats = service.stats()
    served = stats["by_endpoint"].get("native", 0)
    if stats["failed"] or served != len(queries):
        raise RuntimeError(f"the service answered {served} searches, {stats['failed']} failed, "
                           f"for {len(queries)} queries sent")
    cpu = None if before is None or after is None else after - before
    row.update(service_cpu_ms=None if cpu is None else cpu / len(queries) * 1000.0,
               service_busy=None if cpu is None else cpu / row["seconds"],
               client_busy=row["client_cpu_ms"] * len(queries) / 1000.0 / row["seconds"],
               in_flight=stats["max_in_flight"], connections=stats["connections"],
               load=os.getloadavg()[0])
    return row


def _asked(project: Path, queries: int):
    from dataclasses import replace

    from searcheval.io.collection import load_collection

    golden = load_collection(fixtures=project / "fixtures").queries
    return [replace(golden[i % len(golden)], id=f"{golden[i % len(golden)].id}-{i}")
            for i in range(queries)]


def _ms(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


HEADER = (f"{'round':<6}{'client':<16}{'queries/s':>10}{'round trip p50':>15}"
          f"{'overhead p50':>13}{'p95':>7}{'CPU ms/query: client':>22}{'service':>8}"
          f"{'busy: client':>13}{'service':>8}{'in flight':>10}{'connections':>12}{'load':>6}")


def row_line(label: str, client: str, r: dict) -> str:
    return (f"{label:<6}{client:<16}{r['qps']:>10.1f}{r['round_trip_p50']:>12.2f} ms"
            f"{r['overhead_p50']:>10.3f} ms{r['overhead_p95']:>7.2f}"
            f"{r['client_cpu_ms']:>22.3f}{_ms(r['service_cpu_ms']):>8}"
            f"{_pct(r['client_busy']):>13}{_pct(r['service_busy']):>8}"
            f"{r['in_flight']:>10}{r['connections']:>12}{r['load']:>6.2f}")


def benchmark_backend(project: Path, queries: int = 10_000, concurrency: int = 32,
                      delay_ms: float = 20.0, rounds: int = 3, k: int = 100,
                      log_dir: Path | None = None, out=say) -> dict:
    """The http kind at scale (issue 27), printed through `out`; returns the figures with
    `goals` ({name: met}) and `goal_met`."""
    import tempfile

    asked = _asked(project, queries)
    nominal = nominal_capacity(concurrency, delay_ms)
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="se-bench-backend-"))
    rows: list[dict] = []
    with example_service(project, delay_ms, log_dir / "search_service.log") as service:
        out(f"benchmark backend: {queries} queries at concurrency {concurrency} against the "
            f"example service sleeping {delay_ms:g} ms per answer (asyncio.sleep; nominal "
            f"capacity {concurrency} / {delay_ms:g} ms = {nominal:.0f} queries/s); k={k}; "
            f"{rounds} alternating rounds; {os.cpu_count()} cores, load {load_average()}")
        out(f"the service: {service.settings}")
        warm = asked[:2 * concurrency]  # connections opened, code paths warm, on both sides
        run_bare(service.url, warm, concurrency, k)
        run_searcheval(service.url, warm, concurrency, k)
        out(HEADER)
        for round_ in range(1, rounds + 1):
            for client, fn in ((BARE, run_bare), (OURS, run_searcheval)):
                row = {"round": round_, "client": client,
                       **measured(service, fn, asked, concurrency, k, delay_ms)}
                rows.append(row)
                out(row_line(str(round_), client, row))
    figures = summarise(rows, queries=queries, concurrency=concurrency, delay_ms=delay_ms,
                        nominal=nominal)
    for line in summary_lines(figures):
        out(line)
    return figures


def summarise(rows: list[dict], *, queries: int, concurrency: int, delay_ms: float,
              nominal: float) -> dict:
    """The goals from the rounds: each client's best round by queries per second (the bare
    client's is the measured capacity, the stricter goal), the overhead over every query of
    the http kind's rounds."""
    best = {c: max((r for r in rows if r["client"] == c), key=lambda r: r["qps"])
            for c in (BARE, OURS)}
    capacity, ours = best[BARE]["qps"], best[OURS]["qps"]
    overhead = np.concatenate([r["overhead_ms"] for r in rows if r["client"] == OURS])
    p50, p95 = float(np.percentile(overhead, 50)), float(np.percentile(overhead, 95))
    share = ours / capacity
    goals = {"capacity": share >= GOAL_CAPACITY, "overhead": p50 < GOAL_OVERHEAD_MS}
    return {"queries": queries, "concurrency": concurrency, "delay_ms": delay_ms,
            "rows": rows, "best": best, "nominal": nominal, "measured": capacity,
            "qps": ours, "share": share, "nominal_share": ours / nominal,
            "overhead_p50": p50, "overhead_p95": p95, "goals": goals,
            "goal_met": all(goals.values())}


def summary_lines(f: dict) -> list[str]:
    bare, ours = f["best"][BARE], f["best"][OURS]
    rounds = sum(1 for r in f["rows"] if r["client"] == OURS)
    busy = bare["service_busy"]
    limit = ("the service (one event loop, a core busy)" if busy is not None and busy >= 0.9
             else "the client process (a core busy)" if bare["client_busy"] >= 0.9
             else "neither process alone (the cores are shared with each other and the "
                  "machine's other work)")
    return [
        f"the service's capacity at concurrency {f['concurrency']}: nominal {f['nominal']:.0f} "
        f"queries/s; measured {f['measured']:.1f} (the bare client's best round, {bare['round']}"
        f"; {f['measured'] / f['nominal']:.1%} of nominal); in that round the service was busy "
        f"{_pct(busy)} of a core and the client {_pct(bare['client_busy'])}: the pace was set "
        f"by {limit}",
        f"the http kind's best round ({ours['round']}): {f['qps']:.1f} queries/s = "
        f"{f['share']:.1%} of the measured capacity, {f['nominal_share']:.1%} of nominal; client "
        f"overhead over the {rounds * f['queries']} queries of its rounds p50 "
        f"{f['overhead_p50']:.3f} ms, p95 {f['overhead_p95']:.3f} ms; CPU per query "
        f"{ours['client_cpu_ms']:.3f} ms against the bare client's {bare['client_cpu_ms']:.3f} ms",
        f"goals: >= {GOAL_CAPACITY:.0%} of the service's measured capacity: {f['share']:.1%} "
        f"({verdict(f['goals']['capacity'])}); client overhead p50 < {GOAL_OVERHEAD_MS:g} ms: "
        f"{f['overhead_p50']:.3f} ms ({verdict(f['goals']['overhead'])})",
    ]


def benchmark_backend_concurrency(project: Path, queries: int = 160, delay_ms: float = 20.0,
                                  concurrencies: tuple[int, int] = (1, 8), k: int = 100,
                                  log_dir: Path | None = None, out=say) -> dict:
    """Issue 11's comparison: each client at two concurrencies; returns the figures with
    `goal_met`."""
    import tempfile

    asked = _asked(project, queries)
    low, high = concurrencies
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="se-bench-backend-"))
    rows: list[dict] = []
    with example_service(project, delay_ms, log_dir / "search_service.log") as service:
        out(f"benchmark backend --compare {low},{high}: the http kind against the example "
            f"service sleeping {delay_ms:g} ms per answer; {queries} queries, k={k}; load "
            f"{load_average()}")
        run_searcheval(service.url, asked[:8], 2, k)  # warm up both clients and the service
        run_bare(service.url, asked[:8], 2, k)
        out(HEADER.replace("round ", "conc. ", 1))
        for concurrency in concurrencies:
            for client, fn in ((OURS, run_searcheval), (BARE, run_bare)):
                row = {"client": client, "concurrency": concurrency,
                       **measured(service, fn, asked, concurrency, k, delay_ms)}
                rows.append(row)
                out(row_line(str(concurrency), client, row))
    ours = {r["concurrency"]: r for r in rows if r["client"] == OURS}
    speedup = ours[high]["qps"] / ours[low]["qps"]
    overhead = max(r["overhead_p50"] for r in ours.values())
    goals = {"speedup": speedup >= GOAL_SPEEDUP, "overhead": overhead < GOAL_OVERHEAD_MS}
    out(f"goals: concurrency {high} >= {GOAL_SPEEDUP:g}x the queries/s of concurrency {low}: "
        f"{speedup:.2f}x ({verdict(goals['speedup'])}); client overhead p50 < "
        f"{GOAL_OVERHEAD_MS:g} ms: {overhead:.3f} ms ({verdict(goals['overhead'])})")
    return {"queries": queries, "delay_ms": delay_ms, "k": k, "rows": rows, "speedup": speedup,
            "overhead_p50": overhead, "goals": goals, "goal_met": all(goals.values())}
