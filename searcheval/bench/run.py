"""`searcheval benchmark run`: whole `searcheval run` processes on a dataset, as a user meets them,
and where their time goes, stage by stage.

- raw: sentence-transformers alone, in a process of its own, encoding the texts the run embeds
  (the same texts, batch size and normalisation): the floor a cold run cannot go under.
- cold: `searcheval run` in a fresh working folder: no database (initdb), no embedding cache, no
  BM25 index cache, no Prefect server (the run starts the folder's kept one: a new Prefect database, its migrations),
  validation not cached; the model loads and every text is embedded.
- warm (`warm_runs` times): the same command again in the same folder: the kept server and the
  embedded Postgres are running, nothing to embed, no model loaded, the BM25 index read from the
  folder's `.searcheval/cache`.
- temporary: one more warm run with SEARCHEVAL_PREFECT_SERVER=temporary, as every run was before
  issue #27: Prefect starts a server for the run and stops it at its end.

Each run's stages come from the marks the command leaves (searcheval.timings: the command began,
the preflight passed, Prefect and the flows were imported, the server was ready, the flow
returned), the flow run's task runs as the Prefect server recorded them, and the process's start
and end measured here. The stages add up to the run's wall time: where tasks overlap (the model
loads beside the judgments), the overlap counts once, in the earlier stage.

Goals: issue #14, cold <= 1.15 x raw + 20 s; issue #27, warm <= 8 s on the example project's
fixtures (`make run`) and <= 10 s on any other dataset (SciFact); the kept server stops and leaves
no process.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from searcheval.bench.common import say

GOAL_COLD_RATIO = 1.15
GOAL_COLD_SLACK_S = 20.0
GOAL_WARM_FIXTURES_S = 8.0  # `make run`: the example project's fixtures
GOAL_WARM_S = 10.0  # any other dataset, SciFact's 5,183 documents and 300 queries

RAW_SCRIPT = """
import json, sys, time
start = time.perf_counter()
spec = json.load(open(sys.argv[1], encoding="utf-8"))
from sentence_transformers import SentenceTransformer
model = SentenceTransformer(spec["model_path"], device="cpu")
loaded = time.perf_counter()
model.encode(spec["texts"], batch_size=spec["batch_size"], show_progress_bar=False,
             convert_to_numpy=True, normalize_embeddings=True)
done = time.perf_counter()
print(json.dumps({"import_and_load_s": loaded - start, "encode_s": done - loaded}))
"""

#: the flow's tasks by stage, in the order of the flow (a task run's name: its task's name, then
#: `-` and a suffix; the query shards are `run-NAME-IofN`, the embedding batches `embed-N`)
TASK_STAGES = {
    "load": ("plan_run", "judged_documents", "look_up_judged", "judgments"),
    "validate": ("validate",),
    "seed": ("seed_catalog", "seed_judgments"),
    "embed": ("load_model", "embed", "index_collection"),
    "search": ("run",),
    "score": ("look_up_results", "coverage", "score", "gate"),
    "publish": ("publish", "send_alert"),
}

STAGE_NAMES = {
    "start": "interpreter start, the CLI's imports",
    "preflight": "preflight: reading and checking the inputs",
    "import": "importing Prefect and the flows",
    "server": "Prefect server: reached (or started)",
    "flow_start": "flow run: created and started",
    "load": "task load: the plan, the judgments",
    "validate": "task validate (Great Expectations, or its cache)",
    "seed": "tasks seed: catalog and judgments into Postgres",
    "embed": "tasks embed: the model, the cache, the index",
    "search": "tasks search: every configuration's shards",
    "score": "tasks score: lookups, coverage, metrics, gate",
    "publish": "task publish: Postgres, files, artifacts",
    "other_tasks": "other tasks",
    "flow_steps": "flow run: its own steps, the engine between tasks",
    "flow_end": "flow run: finished, its state reported",
    "exit": "results printed, process exit",
}


def _environment(work: Path, project: Path) -> dict[str, str]:
    """The environment of every timed process: the project's flows, a Prefect home, an
    embedded database and a BM25 index cache of the working folder's own, no Prefect server or
    database of the user's, the kept Prefect server (whatever SEARCHEVAL_PREFECT_SERVER says
    here)."""
    from searcheval import prefect_server
    from searcheval.rankers import bm25_cache
    from searcheval.store import database

    env = {k: v for k, v in os.environ.items()
           if k not in ("PREFECT_API_URL", database.ENV_URL, "PREFECT_HOME",
                        prefect_server.ENV_MODE, bm25_cache.ENV_DIR)}
    env.update({"SEARCHEVAL_PROJECT": str(project), "PREFECT_HOME": str(work / "prefect-home"),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    return env


def _timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float, str]:
    """(start, end) as seconds since the epoch, and stdout, of `command` run to its end."""
    start = time.time()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=3600, check=False)
    end = time.time()
    if done.returncode not in (0, 1):  # 1: the gate tripped, a finished run all the same
        raise RuntimeError(f"{' '.join(command[:3])} failed (exit {done.returncode}): "
                           f"{done.stderr.strip()[-1500:]}")
    return start, end, done.stdout


def _searcheval() -> list[str]:
    script = Path(sys.executable).with_name("searcheval")
    return [str(script)] if script.exists() else [sys.executable, "-m", "searcheval.cli"]


# --------------------------------------------------------------------------- the flow run's tasks


def _api(api_url: str, path: str, body: dict | None = None):
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback
    request = urllib.request.Request(
        f"{api_url}{path}", method="POST" if body is not None else "GET",
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Content-Type": "application/json"})
    with opener.open(request, timeout=30) as response:
        return json.loads(response.read())


def _epoch(text: str | None) -> float | None:
    return datetime.fromisoformat(text).timestamp() if text else None


def flow_run_times(api_url: str, flow_run_id: str) -> dict:
    """The flow run's start and end, and each of its task runs' (name, start, end), as the
    Prefect server at `api_url` recorded them (seconds since the epoch)."""
    flow = _api(api_url, f"/flow_runs/{flow_run_id}")
    tasks, offset = [], 0
    while True:
        page = _api(api_url, "/task_runs/filter",
                    {"flow_runs": {"id": {"any_": [flow_run_id]}}, "limit": 200,
                     "offset": offset})
        tasks += [(t["name"], _epoch(t["start_time"]), _epoch(t["end_time"])) for t in page
                  if t.get("start_time") and t.get("end_time")]
        if len(page) < 200:
            break
        offset += 200
    return {"start": _epoch(flow["start_time"]), "end": _epoch(flow["end_time"]),
            "tasks": tasks}


def embed_batches(flow: dict | None) -> list[tuple[float, float]]:
    """(start, end) of each embedding batch's task run (`embed-N`), in the order of N; empty
    without the flow run's times."""
    if flow is None:
        return []
    numbered = [(int(name.split("-")[1]), a, b) for name, a, b in flow["tasks"]
                if name.startswith("embed-") and name.split("-")[1].isdigit()]
    return [(a, b) for _, a, b in sorted(numbered)]


def task_stage(name: str) -> str:
    """The stage of a task run by its name (TASK_STAGES), `other_tasks` for any other."""
    base = name.split("-", 1)[0] if name.startswith(("run-", "embed-")) else name.rsplit("-", 1)[0]
    for stage, tasks in TASK_STAGES.items():
        if base in tasks:
            return stage
    return "other_tasks"


def _length(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def stages(start: float, end: float, marks: dict[str, float], flow: dict | None) -> dict:
    """Seconds of each stage (STAGE_NAMES) of one run: from the process's `start` and `end`, the
    command's `marks`, and the flow run's times. They add up to end - start."""
    out = {"start": marks["command"] - start,
           "preflight": marks["preflight"] - marks["command"],
           "import": marks["imported"] - marks["preflight"],
           "server": marks["server"] - marks["imported"],
           "exit": end - marks["flow"]}
    if flow is None or flow["start"] is None or flow["end"] is None:
        out["flow_steps"] = marks["flow"] - marks["server"]
        return out
    begin, finish = max(flow["start"], marks["server"]), min(flow["end"], marks["flow"])
    out["flow_start"] = begin - marks["server"]
    out["flow_end"] = marks["flow"] - finish
    covered: list[tuple[float, float]] = []
    for stage in [*TASK_STAGES, "other_tasks"]:
        mine = [(max(a, begin), min(b, finish)) for name, a, b in flow["tasks"]
                if task_stage(name) == stage and min(b, finish) > max(a, begin)]
        before = _length(covered)
        covered += mine
        out[stage] = _length(covered) - before  # only what no earlier stage counted
    out["flow_steps"] = (finish - begin) - _length(covered)
    return out


def pass_figure(work: Path, output: Path, timings: Path, start: float, end: float, *,
                kept_server: bool = True) -> dict:
    """One `searcheval run` pass's figures: its wall time, its stages (the marks it left in
    `timings`, and its flow run's task runs as the kept Prefect server of `work` recorded them)
    and what it embedded (from `output`'s metrics.json)."""
    from searcheval import prefect_server
    from searcheval.timings import read_marks

    metrics = json.loads((output / "metrics.json").read_text(encoding="utf-8"))
    kept = prefect_server.read_state(prefect_server.state_dir(work))
    flow = None
    if kept_server and kept is not None and metrics.get("flow_run_id"):
        flow = flow_run_times(kept.api_url, metrics["flow_run_id"])
    return {"wall_s": end - start,
            "stages": stages(start, end, read_marks(timings), flow),
            "embed_batches": embed_batches(flow),
            "embeddings": metrics.get("embeddings", {}),
            "embedding_s": (metrics.get("cost") or {}).get("embedding", {}).get("seconds"),
            "model_s": (metrics.get("cost") or {}).get("embedding", {}).get("model_seconds")}


# --------------------------------------------------------------------------- the benchmark


def benchmark_run(dataset: str | Path, *, project: str | Path = ".", batch_size: int = 64,
                  warm_runs: int = 3, out=say) -> dict:
    """Print the table; return the figures (seconds of each pass and stage, goals)."""
    from searcheval import prefect_server
    from searcheval.errors import InputError
    from searcheval.evaluation.pipeline import collection_texts
    from searcheval.io.collection import load_collection
    from searcheval.rankers import embeddings
    from searcheval.store import database
    from searcheval.timings import ENV as TIMINGS

    dataset, project = Path(dataset).resolve(), Path(project).resolve()
    if not (project / "flows").is_dir():
        raise InputError("expected the project folder (with flows/ and tasks/)", field="project")
    if warm_runs < 1:
        raise InputError("expected at least 1 warm run", field="warm_runs")
    collection = load_collection(dataset=str(dataset))
    texts = collection_texts(collection)
    model_path = str(embeddings.resolve_model_path(None))
    fixtures = dataset == (project / "fixtures").resolve()
    goal_warm = GOAL_WARM_FIXTURES_S if fixtures else GOAL_WARM_S
    out(f"dataset {dataset.name}: {len(collection.resources)} documents, "
        f"{len(collection.queries)} queries: {len(texts)} distinct texts to embed "
        f"(batch {batch_size})")
    figures: dict = {"dataset": dataset.name, "texts": len(texts), "warm": []}
    with tempfile.TemporaryDirectory(prefix="se-bench-run-") as tmp:
        work = Path(tmp)
        env = _environment(work, project)
        try:
            spec = work / "texts.json"
            spec.write_text(json.dumps({"texts": texts, "model_path": model_path,
                                        "batch_size": batch_size}), encoding="utf-8")
            out("raw sentence-transformers on the same texts ...")
            start, end, printed = _timed([sys.executable, "-c", RAW_SCRIPT, str(spec)], work,
                                         env)
            figures["raw"] = {"wall_s": end - start,
                              **json.loads(printed.strip().splitlines()[-1])}
            run = [*_searcheval(), "run", "--dataset", str(dataset), "--output",
                   str(work / "out"), "--configurations-file",
                   str(project / "configurations.yaml"),
                   "--no-baseline", "--quiet"]  # a speed benchmark: the gate costs nothing
            passes = ["cold", *(["warm"] * warm_runs), "temporary"]
            for number, label in enumerate(passes):
                out(f"searcheval run, {label} ...")
                timings = work / f"timings-{number}.jsonl"
                run_env = {**env, TIMINGS: str(timings)}
                if label == "temporary":
                    run_env[prefect_server.ENV_MODE] = "temporary"
                start, end, _ = _timed(run, work, run_env)
                figure = pass_figure(work, work / "out", timings, start, end,
                                     kept_server=label != "temporary")
                if label == "warm":
                    figures["warm"].append(figure)
                else:
                    figures[label] = figure
        finally:
            was = prefect_server.stop(work)
            database.stop_embedded(work / database.EMBEDDED_PGDATA)
        figures["server_stopped"] = was.state == "running" and was.server is not None \
            and not prefect_server.group_alive(was.server.pid)

    raw_s = figures["raw"]["encode_s"]
    cold_s = figures["cold"]["wall_s"]
    warm_s = statistics.median(w["wall_s"] for w in figures["warm"])
    median_warm = sorted(figures["warm"], key=lambda w: w["wall_s"])[(warm_runs - 1) // 2]
    figures["warm_s"] = warm_s
    figures["goals"] = {
        f"cold <= {GOAL_COLD_RATIO} x raw + {GOAL_COLD_SLACK_S:.0f} s":
            cold_s <= GOAL_COLD_RATIO * raw_s + GOAL_COLD_SLACK_S,
        f"warm <= {goal_warm:.0f} s": warm_s <= goal_warm,
        "warm embeds nothing": all(w["embeddings"].get("embedded") == 0 for w in figures["warm"]),
        "the kept server stopped, no process left": figures["server_stopped"],
    }
    figures["goal_met"] = all(figures["goals"].values())

    cold_embedded = figures["cold"]["embeddings"].get("embedded")
    rows = [
        ("raw sentence-transformers, encode only", raw_s, f"{len(texts)} texts"),
        ("raw, whole process (imports, model load)", figures["raw"]["wall_s"], ""),
        ("searcheval run, cold (whole process)", cold_s,
         f"{cold_embedded} embedded in {figures['cold']['embedding_s'] or 0:.1f} s"),
        (f"searcheval run, warm (median of {warm_runs})", warm_s,
         ", ".join(f"{w['wall_s']:.1f}" for w in figures["warm"]) + " s"),
        ("searcheval run, warm, temporary Prefect server", figures["temporary"]["wall_s"],
         "SEARCHEVAL_PREFECT_SERVER=temporary"),
    ]
    out("")
    out(f"| {'pass':<52} | {'seconds':>8} | {'':<40} |")
    out(f"| {'-' * 52} | {'-' * 8}:| {'-' * 40} |")
    for name, secs, note in rows:
        out(f"| {name:<52} | {secs:>8.1f} | {note:<40} |")
    out("")
    columns = [("cold", figures["cold"]), ("warm", median_warm),
               ("temporary", figures["temporary"])]
    out("where the time goes (seconds; warm: the median run)")
    out(f"| {'stage':<52} | {'cold':>8} | {'warm':>8} | {'temporary':>9} |")
    out(f"| {'-' * 52} | {'-' * 8}:| {'-' * 8}:| {'-' * 9}:|")
    for stage, name in STAGE_NAMES.items():
        values = [c["stages"].get(stage) for _, c in columns]
        if all(v is None or abs(v) < 0.005 for v in values) and stage == "other_tasks":
            continue
        cells = [f"{v:>{w}.2f}" if v is not None else f"{'':>{w}}"
                 for v, w in zip(values, (8, 8, 9))]
        out(f"| {name:<52} | {cells[0]} | {cells[1]} | {cells[2]} |")
    totals = [sum(c["stages"].values()) for _, c in columns]
    out(f"| {'whole process':<52} | {totals[0]:>8.2f} | {totals[1]:>8.2f} | {totals[2]:>9.2f} |")
    out("")
    budget = GOAL_COLD_RATIO * raw_s + GOAL_COLD_SLACK_S
    out(f"goal: cold <= {GOAL_COLD_RATIO} x raw + {GOAL_COLD_SLACK_S:.0f} s = {budget:.1f} s: "
        f"{cold_s:.1f} s ({'met' if cold_s <= budget else 'MISSED'}; cold / raw "
        f"{cold_s / raw_s:.2f}x)")
    largest = max(median_warm["stages"], key=median_warm["stages"].get)
    out(f"goal: warm <= {goal_warm:.0f} s: {warm_s:.1f} s "
        f"({'met' if warm_s <= goal_warm else 'MISSED'}; the temporary server's run "
        f"{figures['temporary']['wall_s']:.1f} s); the largest stage: {STAGE_NAMES[largest]}")
    out(f"goal: the kept server stopped, no process left: "
        f"{'met' if figures['server_stopped'] else 'MISSED'}")
    return figures
