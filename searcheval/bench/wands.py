"""`searcheval benchmark wands`: the whole nightly on a WANDS-sized collection, as a user meets
it (issue #27, "a WANDS-scale nightly").

The collection is WANDS itself where `dataset` names it (Wayfair's three files), or one of its
shape written by `searcheval.bench.load.generate(searchable=True)`: 42,994 products, 480 queries,
233,448 labels by default, over a vocabulary of 6,000 words with each query made of words of a
product it judges relevant, so the rankers find something.

- raw: sentence-transformers alone, in a process of its own, encoding the texts the nightly
  embeds (the same texts and normalisation, `batch_size` 64), as `benchmark run` does: the
  reference the cold embedding is measured against. The run's own model batches hold at most
  64 x 32 padded tokens (`embeddings.MAX_BATCH_TOKENS`: 8 texts at the model's 256), for its
  memory; the reference keeps sentence-transformers' plain batches of 64, so whatever the
  smaller batches cost shows in the ratio. Skipped with `raw=False` (43k texts take most of an
  hour on 2 busy cores) or when no configuration embeds.
- cold: `searcheval run --dataset ...` in a fresh working folder: no database, no embedding cache,
  no Prefect server; validation not cached; every text embedded (when a configuration embeds).
- warm (`warm_runs` times): the same command again: the kept Prefect server and the embedded
  Postgres running, nothing to embed.

Peak memory is the largest sum of the resident memory of the run's process tree, sampled every
0.2 s from the kernel's counters (/proc/PID/status): the `searcheval run` process, every process
it started (the embedded Postgres and its backends, the kept Prefect server), and those servers
while they run (a warm run uses them). The working folder's servers are looked up at every sample: the
embedded Postgres a cold run starts daemonizes (its parent becomes pid 1) and was left out of the
cold runs' peaks before 2026-12-06. The sum of RSS counts a page two processes share twice
(Postgres' shared buffers), so it is an upper bound; the sum of PSS, which shares it out, is
printed beside it. PSS needs a walk of every mapping of a process (smaps_rollup: 28 ms for the
run's process at WANDS size, holding its memory map's lock), so it is read at a new peak of RSS (at
most once a second) and every 5 s; before 2026-12-07 both were read every 0.2 s, and the sampler
took 14% of a core from the cold run.

The cold embedding is split into the time in the model (`cost.embedding.model_seconds` of the run's
metrics.json, the measure raw's `encode` call is), the time around it, and its batches' task runs
one by one. Each pass's CPU is shown beside what every other process on the machine used and
what the hypervisor stole meanwhile (/proc/stat): on a shared machine, a pass 10% slower than
its reference with 200 s of its neighbours' CPU beside it is not a slower code.

Goals (issue #27): warm end to end under 60 s, the validation step under 5 s (the cold run's
validate task: the warm run's is served from the cache), peak memory under 2 GiB, the cold
embedding within 1.1x of raw sentence-transformers on the same texts.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from searcheval.bench.common import say

GOAL_WARM_S = 60.0
GOAL_VALIDATE_S = 5.0
GOAL_PEAK_BYTES = 2 * 1024 ** 3
GOAL_EMBED_RATIO = 1.1
MODEL_CONFIGURATIONS = ("bm25", "dense", "fused")  # the shipped run: embeds every text
NO_MODEL_CONFIGURATIONS = ("bm25",)
SAMPLE_S = 0.2
#: PSS (smaps_rollup, a walk of every mapping of a process) read at most this often, and at any
#: sample whose RSS sum is a new peak once PSS_MIN_S has passed: read every 0.2 s it took 28 ms
#: for the run's process (1,700 mappings) and 10 ms for the Prefect server, 14% of a core taken
#: from the model the cold run measures, and the walk holds the process's memory map lock that
#: its allocations wait for; RSS comes from /proc/PID/status, the kernel's counters
PSS_EVERY_S = 5.0
PSS_MIN_S = 1.0


# --------------------------------------------------------------------------- memory of a tree


def _children() -> dict[int, list[int]]:
    """Each process's children, from /proc."""
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _cpu_ticks(pid: int) -> int:
    """User and system CPU of a process so far, in clock ticks (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return 0
    fields = stat[stat.rindex(b")") + 2:].split()
    return int(fields[11]) + int(fields[12])  # utime, stime: the 14th and 15th of proc(5)


def _role(pid: int, root: int) -> str:
    """"process" for the measured process itself, "postgres" for a Postgres process, "rest"
    for any other of its tree and servers (the Prefect server, the validation's process)."""
    if pid == root:
        return "process"
    try:
        with open(f"/proc/{pid}/comm", "rb") as fh:
            name = fh.read().strip()
    except OSError:
        return "rest"
    return "postgres" if name.startswith(b"postgres") else "rest"


def machine_ticks() -> tuple[int, int]:
    """(busy, stolen) clock ticks of the whole machine so far, from /proc/stat's `cpu` line:
    busy is user, nice, system, irq and softirq; stolen is the time the hypervisor gave this
    machine's CPUs to another (0 where not reported)."""
    with open("/proc/stat", "rb") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = values[:7]
    return user + nice + system + irq + softirq, (values[7] if len(values) > 7 else 0)


def _kib_field(path: str, key: bytes) -> int:
    """The `key` line of a /proc file that counts kB (`VmRSS:`, `Pss:`), in bytes; 0 when the
    process is gone, a zombie or the line is absent."""
    try:
        with open(path, "rb") as fh:
            for line in fh:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def _rss(pid: int) -> int:
    """Resident memory of a process in bytes from the kernel's counters (/proc/PID/status:
    no walk of its mappings)."""
    return _kib_field(f"/proc/{pid}/status", b"VmRSS:")


def _pss(pid: int) -> int:
    """Proportional resident memory of a process in bytes (a shared page shared out among the
    processes mapping it), from /proc/PID/smaps_rollup: a walk of every mapping."""
    return _kib_field(f"/proc/{pid}/smaps_rollup", b"Pss:")


class TreeMemory:
    """Samples, on a thread, the summed memory of `root`'s process tree and of `also` (the pids
    of servers a run uses without starting them) and their trees. A process once seen in the
    tree is counted while it lives, also after it was reparented (a server started in the
    background). Beside it, the CPU those processes used while sampled (`.cpu_ticks()`: each
    process's last sample; a process's CPU between its last sample and its end is missed)."""

    def __init__(self, root: int, also: tuple[int, ...] = (), interval: float = SAMPLE_S,
                 servers=None):
        self.roots = (root, *also)
        #: called at every sample: pids of servers the run may have started meanwhile and that
        #: left its tree (the embedded Postgres daemonizes: its parent is then pid 1)
        self.servers = servers
        self.interval = interval
        self.seen: set[int] = set()
        self.peak_rss = self.peak_pss = 0
        self._first = True
        self._pss_at = float("-inf")  # when PSS was last read
        self._start_ticks: dict[int, int] = {}  # a server's CPU before the pass is not its own
        self._ticks: dict[int, int] = {}
        self._roles: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> None:
        children = _children()
        roots = (*self.roots, *(self.servers() if self.servers else ()))
        todo = [p for p in roots if os.path.exists(f"/proc/{p}")]
        while todo:
            pid = todo.pop()
            if pid in self.seen and pid not in roots:
                continue
            self.seen.add(pid)
            todo.extend(children.get(pid, ()))
        rss = 0
        for pid in list(self.seen):
            r = _rss(pid)
            if r == 0:
                self.seen.discard(pid)
                continue
            ticks = _cpu_ticks(pid)
            # what ran before the first sample (the servers a warm pass finds) counts from there
            before = ticks if self._first and pid != self.roots[0] else 0
            self._start_ticks.setdefault(pid, before)
            if pid not in self._roles:
                self._roles[pid] = _role(pid, self.roots[0])
            self._ticks[pid] = max(self._ticks.get(pid, 0), ticks)
            rss += r
        self._first = False
        now = time.monotonic()
        since = now - self._pss_at
        if since >= PSS_EVERY_S or (since >= PSS_MIN_S and rss > self.peak_rss):
            self._pss_at = now
            self.peak_pss = max(self.peak_pss, sum(_pss(pid) for pid in self.seen))
        self.peak_rss = max(self.peak_rss, rss)

    def cpu_ticks(self, role: str | None = None) -> int:
        """CPU clock ticks the sampled processes (of `role`: "process", the root; "postgres";
        "rest", every other) used since they were first seen (a server the pass found
        running: since then)."""
        return sum(t - self._start_ticks.get(pid, 0) for pid, t in self._ticks.items()
                   if role is None or self._roles.get(pid) == role)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _server_pids(work: Path) -> tuple[int, ...]:
    """The kept Prefect server's and the embedded Postgres' pids of the working folder."""
    from searcheval import prefect_server
    from searcheval.store import database

    pids = []
    kept = prefect_server.read_state(prefect_server.state_dir(work))
    if kept is not None:
        pids.append(kept.pid)
    pid_file = work / database.EMBEDDED_PGDATA / "postmaster.pid"
    try:
        pids.append(int(pid_file.read_text().split()[0]))
    except (OSError, ValueError, IndexError):
        pass
    return tuple(pids)


def run_measured(command: list[str], cwd: Path, env: dict[str, str], work: Path) -> dict:
    """Run `command` to its end; its wall time, start and end (epoch), the peak memory of its
    tree (TreeMemory) and the CPU seconds meanwhile: of its tree and servers (`own_s`: the
    process itself `process_s`, Postgres `postgres_s`, the rest `rest_s`), of every
    other process on the machine (`others_s`: the machine's busy time less its own; the
    benchmark's sampler among them), and stolen by the hypervisor (`stolen_s`). On a shared
    machine the last two say whether a slow pass was the code or its neighbours."""
    also = _server_pids(work)
    busy, stolen = machine_ticks()
    start = time.time()
    process = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    with TreeMemory(process.pid, also, servers=lambda: _server_pids(work)) as memory:
        stdout, stderr = process.communicate(timeout=3 * 3600)
    end = time.time()
    busy_end, stolen_end = machine_ticks()
    tick = os.sysconf("SC_CLK_TCK")
    own = memory.cpu_ticks() / tick
    if process.returncode not in (0, 1):  # 1: the gate tripped, a finished run all the same
        raise RuntimeError(f"{' '.join(command[:3])} failed (exit {process.returncode}): "
                           f"{stderr.strip()[-1500:]}")
    return {"start": start, "end": end, "wall_s": end - start, "stdout": stdout,
            "peak_rss": memory.peak_rss, "peak_pss": memory.peak_pss,
            "cpu": {"own_s": own, "process_s": memory.cpu_ticks("process") / tick,
                    "postgres_s": memory.cpu_ticks("postgres") / tick,
                    "rest_s": memory.cpu_ticks("rest") / tick,
                    "others_s": max(0.0, (busy_end - busy) / tick - own),
                    "stolen_s": (stolen_end - stolen) / tick}}


# --------------------------------------------------------------------------- the benchmark


def benchmark_wands(*, dataset: str | Path | None = None, products: int = 42_994,
                    queries: int = 480, labels: int = 233_448, seed: int = 0,
                    configurations: tuple[str, ...] = MODEL_CONFIGURATIONS,
                    warm_runs: int = 2, raw: bool = True, batch_size: int = 64,
                    project: str | Path = ".", directory: str | Path | None = None,
                    out=say) -> dict:
    """Print the tables; return the figures (seconds, bytes, goals). `dataset`: a real WANDS
    folder (else one is generated); `directory`: where the collection, the run's working folder
    and its output are kept (default: a temporary folder, removed)."""
    from searcheval import prefect_server
    from searcheval.bench.load import _in_a_fresh_process, generate
    from searcheval.bench.run import (RAW_SCRIPT, STAGE_NAMES, _environment, _searcheval,
                                      pass_figure)
    from searcheval.errors import InputError
    from searcheval.evaluation.pipeline import collection_texts
    from searcheval.io.collection import load_collection
    from searcheval.io.wands import wands_folder
    from searcheval.rankers import embeddings
    from searcheval.store import database
    from searcheval.timings import ENV as TIMINGS

    project = Path(project).resolve()
    if not (project / "flows").is_dir():
        raise InputError("expected the project folder (with flows/ and tasks/)", field="project")
    if warm_runs < 1:
        raise InputError("expected at least 1 warm run", field="warm_runs")
    own = directory is None
    base = Path(tempfile.mkdtemp(prefix="se-bench-wands-")) if own else Path(directory).resolve()
    base.mkdir(parents=True, exist_ok=True)
    embeds = any(c != "bm25" for c in configurations)
    figures: dict = {"configurations": list(configurations), "warm": []}
    try:
        if dataset is not None:
            folder = wands_folder(dataset)
            if folder is None:
                raise InputError("expected WANDS' product.csv, query.csv and label.csv",
                                 file=str(dataset))
            origin = f"WANDS at {folder}"
        else:
            folder = base / "wands"
            started = time.perf_counter()
            generate(folder, products=products, queries=queries, labels=labels, seed=seed,
                     searchable=True, copies=False)
            origin = (f"generated (seed {seed}, {SEARCHABLE_NOTE}) in "
                      f"{time.perf_counter() - started:.1f} s")
        collection = load_collection(dataset=folder)
        texts = collection_texts(collection)
        figures.update(products=len(collection.resources), queries=len(collection.queries),
                       labels=len(collection.judgments), texts=len(texts))
        out(f"WANDS-shaped collection: {len(collection.resources)} products, "
            f"{len(collection.queries)} queries, {len(collection.judgments)} labels; {origin}")
        out(f"configurations: {', '.join(configurations)}"
            + (f"; {len(texts)} distinct texts to embed" if embeds else " (no model)"))
        out("validation alone, in a fresh process ...")
        figures["validation"] = _in_a_fresh_process("validation", folder)
        work = base / "work"
        work.mkdir(exist_ok=True)
        env = _environment(work, project)
        try:
            if embeds and raw:
                model_path = str(embeddings.resolve_model_path(None))
                spec = work / "texts.json"
                spec.write_text(json.dumps({"texts": texts, "model_path": model_path,
                                            "batch_size": batch_size}), encoding="utf-8")
                out("raw sentence-transformers on the same texts ...")
                done = run_measured([sys.executable, "-c", RAW_SCRIPT, str(spec)], work, env,
                                    work)
                figures["raw"] = {"wall_s": done["wall_s"], "peak_rss": done["peak_rss"],
                                  "cpu": done["cpu"],
                                  **json.loads(done["stdout"].strip().splitlines()[-1])}
                spec.unlink()
            command = [*_searcheval(), "run", "--dataset", str(folder), "--output",
                       str(base / "out"), "--configurations-file",
                       str(project / "configurations.yaml"),
                       "--configurations", ",".join(configurations),
                       "--no-baseline", "--quiet"]
            for number, label in enumerate(["cold", *(["warm"] * warm_runs)]):
                out(f"searcheval run, {label} ...")
                timings = work / f"timings-{number}.jsonl"
                done = run_measured(command, work, {**env, TIMINGS: str(timings)}, work)
                figure = {**pass_figure(work, base / "out", timings, done["start"], done["end"]),
                          "wall_s": done["wall_s"], "peak_rss": done["peak_rss"],
                          "peak_pss": done["peak_pss"], "cpu": done["cpu"]}
                if label == "warm":
                    figures["warm"].append(figure)
                else:
                    figures["cold"] = figure
        finally:
            was = prefect_server.stop(work)
            database.stop_embedded(work / database.EMBEDDED_PGDATA)
        figures["server_stopped"] = was.state == "running" and was.server is not None \
            and not prefect_server.group_alive(was.server.pid)
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)

    report(figures, warm_runs=warm_runs, embeds=embeds, stage_names=STAGE_NAMES, out=out)
    return figures


def batch_line(batches: list[tuple[float, float]]) -> str:
    """The embedding batches' task runs in one line: their count, the first's, median and last
    one's seconds, the means of the first and second half (does a batch slow down as the run
    goes?) and the time between them (the engine starting the next)."""
    each = [b - a for a, b in batches]
    half = len(each) // 2
    between = sum(max(0.0, nxt[0] - cur[1]) for cur, nxt in zip(batches, batches[1:]))
    return (f"{len(each)} batches (task runs, seconds): the first {each[0]:.1f}, median "
            f"{statistics.median(each):.1f}, the last {each[-1]:.1f}; the first half "
            f"{statistics.mean(each[:half]):.1f} on average, the second "
            f"{statistics.mean(each[half:]):.1f}; {between:.1f} s between them in all")


SEARCHABLE_NOTE = "6,000-word vocabulary, queries from relevant products' names"


def _mib(n: float) -> str:
    return f"{n / 2 ** 20:.0f}"


def report(figures: dict, *, warm_runs: int, embeds: bool, stage_names: dict, out=say) -> None:
    """The tables and the goals, from `benchmark_wands`'s figures (sets figures['goals'])."""
    cold, warms = figures["cold"], figures["warm"]
    warm_s = statistics.median(w["wall_s"] for w in warms)
    median_warm = sorted(warms, key=lambda w: w["wall_s"])[(warm_runs - 1) // 2]
    runs = [cold, *warms]
    peak_rss = max(r["peak_rss"] for r in runs)
    peak_pss = max(r["peak_pss"] for r in runs)
    validate_s = cold["stages"].get("validate")
    raw = figures.get("raw")
    embedded = cold["embeddings"].get("embedded")
    ratio = (cold["embedding_s"] / raw["encode_s"]
             if raw and cold["embedding_s"] and raw["encode_s"] > 0 else None)
    figures["warm_s"], figures["validate_s"] = warm_s, validate_s
    figures["peak_rss"], figures["peak_pss"], figures["embed_ratio"] = peak_rss, peak_pss, ratio

    out("")
    out(f"| {'pass':<48} | {'seconds':>8} | {'peak MiB':>8} | {'':<36} |")
    out(f"| {'-' * 48} | {'-' * 8}:| {'-' * 8}:| {'-' * 36} |")
    rows = []
    if raw:
        rows.append(("raw sentence-transformers, encode only", raw["encode_s"], None,
                     f"{figures['texts']} texts"))
        rows.append(("raw, whole process (imports, model load)", raw["wall_s"], raw["peak_rss"],
                     ""))
    rows.append(("searcheval run, cold (whole process)", cold["wall_s"], cold["peak_rss"],
                 f"{embedded or 0} embedded in {cold['embedding_s'] or 0:.1f} s"))
    for i, w in enumerate(warms, 1):
        rows.append((f"searcheval run, warm {i}", w["wall_s"], w["peak_rss"],
                     f"{w['embeddings'].get('embedded') or 0} embedded"))
    for name, secs, peak, note in rows:
        cell = f"{_mib(peak):>8}" if peak is not None else f"{'':>8}"
        out(f"| {name:<48} | {secs:>8.1f} | {cell} | {note:<36} |")
    out("")
    out("where the time goes (seconds; warm: the median run)")
    out(f"| {'stage':<52} | {'cold':>8} | {'warm':>8} |")
    out(f"| {'-' * 52} | {'-' * 8}:| {'-' * 8}:|")
    for stage, name in stage_names.items():
        values = [cold["stages"].get(stage), median_warm["stages"].get(stage)]
        if stage == "other_tasks" and all(v is None or abs(v) < 0.005 for v in values):
            continue
        cells = [f"{v:>8.2f}" if v is not None else f"{'':>8}" for v in values]
        out(f"| {name:<52} | {cells[0]} | {cells[1]} |")
    out(f"| {'whole process':<52} | {sum(cold['stages'].values()):>8.2f} | "
        f"{sum(median_warm['stages'].values()):>8.2f} |")
    out("")
    passes = [*([("raw sentence-transformers", raw)] if raw else []),
              ("searcheval run, cold", cold),
              *((f"searcheval run, warm {i}", w) for i, w in enumerate(warms, 1))]
    if all(figure.get("cpu") for _, figure in passes):
        out("CPU meanwhile (seconds of a core; 2 cores give 2 per second): the pass's process, "
            "its Postgres, its other processes (the Prefect server, the validation), every other "
            "process on the machine, stolen by the hypervisor")
        out(f"| {'pass':<32} | {'wall':>8} | {'process':>8} | {'Postgres':>8} | {'its rest':>8} "
            f"| {'others':>8} | {'stolen':>8} |")
        out(f"| {'-' * 32} | {'-' * 8}:| {'-' * 8}:| {'-' * 8}:| {'-' * 8}:| {'-' * 8}:| "
            f"{'-' * 8}:|")
        for name, figure in passes:
            cpu = figure["cpu"]
            cells = " | ".join(f"{cpu.get(k, 0.0):>8.1f}" for k in
                               ("process_s", "postgres_s", "rest_s", "others_s", "stolen_s"))
            out(f"| {name:<32} | {figure['wall_s']:>8.1f} | {cells} |")
        out("")
    goals = {
        "warm": warm_s < GOAL_WARM_S,
        "validate": validate_s is not None and validate_s < GOAL_VALIDATE_S,
        "memory": peak_rss < GOAL_PEAK_BYTES,
        "warm embeds nothing": all(w["embeddings"].get("embedded") in (0, None) for w in warms),
        "server stopped": figures["server_stopped"],
    }
    each = ", ".join(f"{w['wall_s']:.1f}" for w in warms)
    out(f"goal: warm end to end under {GOAL_WARM_S:.0f} s: {warm_s:.1f} s (median of "
        f"{warm_runs}; {each}): "
        f"{'met' if goals['warm'] else 'MISSED'}")
    shown = f"{validate_s:.2f} s" if validate_s is not None else "not measured"
    out(f"goal: the validation step under {GOAL_VALIDATE_S:.0f} s: {shown} (the cold run's "
        f"validate task; warm: {median_warm['stages'].get('validate') or 0:.2f} s): "
        f"{'met' if goals['validate'] else 'MISSED'}")
    alone = figures.get("validation")
    if alone:
        out(f"the validation step alone (validate_collection, {alone['labels']} labels, best of "
            f"3 in a fresh process): {alone['seconds']:.2f} s wall, {alone['cpu_seconds']:.2f} s "
            f"CPU; importing GX and building its suites once a process: "
            f"{alone['setup_seconds']:.2f} s; {alone['findings']} findings")
    out(f"goal: peak memory under {GOAL_PEAK_BYTES / 2 ** 30:.0f} GiB: {_mib(peak_rss)} MiB "
        f"(sum of RSS of the run's process tree and its servers; sum of PSS {_mib(peak_pss)} "
        f"MiB): {'met' if goals['memory'] else 'MISSED'}")
    if not embeds:
        out("goal: cold embedding within 1.1x of raw sentence-transformers: not measured "
            "(no configuration embeds)")
    elif ratio is None:
        out(f"goal: cold embedding within {GOAL_EMBED_RATIO}x of raw sentence-transformers: "
            f"not measured (raw skipped); {embedded or 0} texts embedded in "
            f"{cold['embedding_s'] or 0:.1f} s")
    else:
        goals["embedding"] = ratio <= GOAL_EMBED_RATIO
        out(f"goal: cold embedding within {GOAL_EMBED_RATIO}x of raw sentence-transformers: "
            f"{cold['embedding_s']:.1f} s against {raw['encode_s']:.1f} s, {ratio:.2f}x "
            f"({embedded} texts): {'met' if goals['embedding'] else 'MISSED'}")
        model_s = cold.get("model_s")
        if model_s:
            figures["model_ratio"] = model_s / raw["encode_s"]
            out(f"  of its {cold['embedding_s']:.1f} s: {model_s:.1f} s in the model "
                f"({figures['model_ratio']:.2f}x raw), {cold['embedding_s'] - model_s:.1f} s "
                "around it (cache look-ups and writes, the engine between the batches)")
        batches = cold.get("embed_batches") or []
        if len(batches) > 1:
            out("  " + batch_line(batches))
    out(f"the kept server stopped, no process left: "
        f"{'yes' if figures['server_stopped'] else 'NO'}")
    try:
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    out(f"load average at the end: {load}")
    figures["goals"] = goals
    figures["goal_met"] = all(goals.values())
