"""`searcheval benchmark score`: `searcheval score`, NIST's trec_eval (built from its C source in a
temporary folder), pytrec_eval and ranx on the same generated TREC files, each as a whole process
(wall time and peak resident memory), then in-process (arrays / DataFrame and dicts against
pytrec_eval), and whether the numbers agree.

The files: `queries` queries x `depth` results, scores rounded to 6 decimals (so some tie, as real
runs do) and written best first, and `judged` judgments per query, half of them of retrieved
documents, grades 0..3.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from searcheval.bench.common import say

METRICS = ("ndcg@10", "mrr", "recall@20", "precision@10", "map")
TREC_EVAL_MEASURES = ("ndcg_cut.10", "recip_rank", "recall.20", "P.10", "map")
TREC_NAMES = {"ndcg@10": "ndcg_cut_10", "mrr": "recip_rank", "recall@20": "recall_20",
              "precision@10": "P_10", "map": "map"}
RANX_NAMES = {"ndcg@10": "ndcg@10", "mrr": "mrr", "recall@20": "recall@20",
              "precision@10": "precision@10", "map": "map"}
TREC_EVAL_SOURCE = Path("../shared/tools/trec_eval")


def generate(directory: Path, queries: int, depth: int = 100, judged: int = 15, seed: int = 0,
             ids: int = 100_000, block: int = 5000) -> tuple[Path, Path]:
    """Write `run.trec` and `qrels.trec` in `directory`, a block of queries at a time, shaped like a
    team's run (`draw_documents`): document ids drawn from `ids` values, popular ones retrieved for
    many queries, ids of varying length as an engine prints them (`document_ids`)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    rng = np.random.default_rng(seed)
    run_path, qrels_path = directory / "run.trec", directory / "qrels.trec"
    spread = rng.permutation(ids) if ids >= queries * depth else None  # one id per row
    with open(run_path, "wb") as run, open(qrels_path, "wb") as qrels:
        for start in range(0, queries, block):
            n = min(block, queries - start)
            values = draw_documents(rng, n, depth + judged, ids)
            if spread is not None:  # every retrieved row its own document
                values[:, :depth] = spread[start * depth:(start + n) * depth].reshape(n, depth)
                values[:, depth:] = _distinct_from(rng, values, depth, ids)
            scores = np.round(-np.sort(-rng.random((n, depth)), axis=1), 6)
            qid = pc.binary_join_element_wise("q", pa.array(np.arange(start, start + n)).cast(
                pa.string()), "")
            run_q = qid.take(pa.array(np.repeat(np.arange(n), depth)))
            docs = document_ids(values[:, :depth].ravel(), ids)
            rank = pa.array(np.tile(np.arange(1, depth + 1), n)).cast(pa.string())
            score = pa.array(scores.ravel()).cast(pa.string())
            run.write(_joined([run_q, "Q0", docs, rank, score, "gen\n"]))
            half = judged // 2  # a pool judges the top of the runs, and some found elsewhere
            picked = np.concatenate([values[:, :half], values[:, depth:depth + judged - half]],
                                    axis=1)
            qrels_q = qid.take(pa.array(np.repeat(np.arange(n), judged)))
            jdocs = document_ids(picked.ravel(), ids)
            grades = pa.array(rng.integers(0, 4, size=n * judged)).cast(pa.string())
            qrels.write(_joined([qrels_q, "0", jdocs, pc.binary_join_element_wise(
                grades, "\n", "")]))
    return qrels_path, run_path


def draw_documents(rng, n: int, m: int, ids: int, skew: float = 2.0) -> np.ndarray:
    """n x m document numbers in [0, ids), distinct within each row: drawn as ids * u**skew, so
    the low numbers (the popular documents of a catalog) come up for many queries and the rest
    spread over the whole space; a number drawn twice for a query is drawn again, uniformly."""
    if m > ids:
        raise ValueError(f"cannot draw {m} distinct documents from {ids}")
    values = (ids * rng.random((n, m)) ** skew).astype(np.int64)
    rows = np.arange(n)[:, None]
    while True:
        order = np.argsort(values, axis=1, kind="stable")
        ranked = np.take_along_axis(values, order, axis=1)
        again = np.zeros(values.shape, dtype=bool)
        again[rows, order[:, 1:]] = ranked[:, 1:] == ranked[:, :-1]
        count = int(again.sum())
        if not count:
            return values
        values[again] = rng.integers(0, ids, size=count)


def _distinct_from(rng, values: np.ndarray, depth: int, ids: int) -> np.ndarray:
    """Numbers for columns depth: of `values` (judged, not retrieved) distinct from the row's
    retrieved ones."""
    extra = values[:, depth:].copy()
    rows = np.arange(extra.shape[0])[:, None]
    while True:
        clash = (extra[:, :, None] == values[:, None, :depth]).any(axis=2)
        order = np.argsort(extra, axis=1, kind="stable")
        ranked = np.take_along_axis(extra, order, axis=1)
        clash[rows, order[:, 1:]] |= ranked[:, 1:] == ranked[:, :-1]
        count = int(clash.sum())
        if not count:
            return extra
        extra[clash] = rng.integers(0, ids, size=count)


def document_ids(values: np.ndarray, ids: int):
    """Document numbers as the ids an engine prints: "D" and a decimal number, scrambled over ten
    times the space (a bijection, so distinct numbers stay distinct) so that ids have varying
    lengths and their string order is not the numbers' order, as with MS MARCO's or a catalog's."""
    import pyarrow as pa
    import pyarrow.compute as pc

    space = 10 * ids
    scrambled = (values.astype(np.int64) * 2_654_435_761 + 97) % space  # (ids < 3e9: no overflow)
    return pc.binary_join_element_wise("D", pa.array(scrambled).cast(pa.string()), "")


def _joined(columns) -> bytes:
    import pyarrow.compute as pc

    lines = pc.binary_join_element_wise(*columns, " ")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32, count=len(lines) + 1,
                            offset=lines.offset * 4)
    return lines.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]


def build_trec_eval(source: Path, into: Path) -> Path:
    """trec_eval compiled from its source in a copy under `into` (the source folder is read-only)."""
    from searcheval.errors import InputError

    if not (source / "Makefile").exists():
        raise InputError("expected trec_eval's source (a folder with its Makefile)", file=source)
    copy = into / "trec_eval"
    shutil.copytree(source, copy)
    subprocess.run(["make", "-C", str(copy)], check=True, capture_output=True)
    return copy / "trec_eval"


def measured(command: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak resident bytes (GNU time's %M, the process's own ru_maxrss) and stdout."""
    gnu_time = shutil.which("time") or "/usr/bin/time"
    with tempfile.NamedTemporaryFile("r", suffix=".time") as report:
        start = time.perf_counter()
        proc = subprocess.run([gnu_time, "-f", "%M", "-o", report.name, *command],
                              capture_output=True, text=True)
        elapsed = time.perf_counter() - start
        if proc.returncode:
            raise RuntimeError(f"{command[0]} failed: {proc.stderr[-400:]}")
        peak_kib = int(report.read().strip().splitlines()[-1])
    return elapsed, peak_kib * 1024, proc.stdout


PYTREC_SCRIPT = """
import json, sys, pytrec_eval
with open(sys.argv[1]) as f: qrels = pytrec_eval.parse_qrel(f)
with open(sys.argv[2]) as f: run = pytrec_eval.parse_run(f)
names = sys.argv[3].split(",")
per = pytrec_eval.RelevanceEvaluator(qrels, set(sys.argv[4].split(","))).evaluate(run)
print(json.dumps({n: sum(v[n] for v in per.values()) / len(per) for n in names}))
"""

RANX_SCRIPT = """
import json, sys, warnings
warnings.filterwarnings("ignore")
from ranx import Qrels, Run, evaluate
qrels = Qrels.from_file(sys.argv[1], kind="trec")
run = Run.from_file(sys.argv[2], kind="trec")
print(json.dumps({k: float(v) for k, v in evaluate(qrels, run, sys.argv[3].split(",")).items()}))
"""


def searcheval_command() -> list[str]:
    script = Path(sys.executable).with_name("searcheval")
    return [str(script)] if script.exists() else [sys.executable, "-m", "searcheval.cli"]


ID_SPACES = (2_000_000, 100_000, 1_000)  # the realistic one (an id per row) first
LARGE_QUERIES = 100_000


def _label(queries: int, depth: int, ids: int) -> str:
    per_row = " (an id per row)" if ids >= queries * depth else ""
    return f"{queries:,} x {depth}, ids from {ids:,}{per_row}"


def benchmark_score(*, queries: int = 20_000, depth: int = 100, judged: int = 15, seed: int = 0,
                    repeat: int = 3, trec_eval_source: Path = TREC_EVAL_SOURCE,
                    directory: Path | None = None, in_process: bool = True,
                    id_spaces: tuple[int, ...] = ID_SPACES,
                    large_queries: int | None = LARGE_QUERIES, ranx: bool = False,
                    out=say) -> dict:
    """Whole processes on each id space (and a large run), one table; then in-process through the
    public API on the realistic files. Prints as it goes; returns the figures."""
    with tempfile.TemporaryDirectory(prefix="se-bench-score-") as tmp:
        where = Path(directory) if directory else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        trec_eval = build_trec_eval(Path(trec_eval_source), Path(tmp))
        cases = [(queries, ids) for ids in id_spaces]
        if large_queries:
            cases.append((large_queries, large_queries * depth))  # an id per row
        out(f"searcheval score vs NIST trec_eval (C, built from source) and pytrec_eval, whole "
            f"processes on the same generated files, best of {repeat}; {judged} judgments a "
            f"query; metrics {', '.join(METRICS)}; load average {_load()} before")
        out(f"{'run':<50}{'searcheval':>11}{'trec_eval':>10}{'pytrec_eval':>12}"
            f"{'x trec_eval':>12}{'memory':>8}{'agree':>7}")
        figures: dict = {"cases": {}}
        realistic = None
        for n_queries, ids in cases:
            folder = where / f"q{n_queries}-ids{ids}"
            folder.mkdir(parents=True, exist_ok=True)
            qrels, run = generate(folder, n_queries, depth, judged, seed, ids=ids)
            large = n_queries != queries
            case = _whole_processes(qrels, run, trec_eval, repeat,
                                    tools=("searcheval", "trec_eval") if large else
                                    ("searcheval", "trec_eval", "pytrec_eval",
                                     *(("ranx",) if ranx else ())))
            label = _label(n_queries, depth, ids)
            figures["cases"][label] = case
            secs, peaks = case["seconds"], case["peak_bytes"]
            pytrec = f"{secs['pytrec_eval']:.2f}s" if "pytrec_eval" in secs else "-"
            out(f"{label:<50}{secs['searcheval']:>10.2f}s{secs['trec_eval']:>9.2f}s{pytrec:>12}"
                f"{case['speedup_vs_trec_eval']:>11.2f}x{case['memory_vs_trec_eval']:>7.2f}x"
                f"{'yes' if case['agree'] else 'NO':>7}")
            if realistic is None:
                realistic = (qrels, run)
            if not directory and realistic != (qrels, run):
                for path in (qrels, run):
                    path.unlink()  # the large files are not kept
        worst = min(c["speedup_vs_trec_eval"] for c in figures["cases"].values())
        memory = max(c["memory_vs_trec_eval"] for c in figures["cases"].values())
        figures["agree"] = all(c["agree"] for c in figures["cases"].values())
        figures["speedup_vs_trec_eval"] = worst
        figures["memory_vs_trec_eval"] = memory
        out(f"memory: searcheval's peak resident memory over trec_eval's; agree: the means equal "
            f"trec_eval's to its 4 printed decimals and pytrec_eval's to 1e-9; load average "
            f"{_load()} after")
        out(f"goal: >= 5x trec_eval at no more memory on every run: slowest {worst:.2f}x, "
            f"memory at most {memory:.2f}x ({'met' if worst >= 5 and memory <= 1 else 'missed'})")
        if in_process:
            figures.update(_in_process(*realistic, repeat, out))
        return figures


def _whole_processes(qrels: Path, run: Path, trec_eval: Path, repeat: int,
                     tools: tuple[str, ...]) -> dict:
    """Each tool as a whole process on the files, in turn, `repeat` rounds: best wall time, peak
    resident memory, means, and whether they agree with searcheval's."""
    commands = {
        "searcheval": [*searcheval_command(), "score", "--qrels", str(qrels), "--run",
                       str(run), "--metrics", ",".join(METRICS), "--trec-compat",
                       "--format", "csv"],  # the means at full precision, as the others print
        "trec_eval": [str(trec_eval), *(a for m in TREC_EVAL_MEASURES for a in ("-m", m)),
                      str(qrels), str(run)],
        "pytrec_eval": [sys.executable, "-c", PYTREC_SCRIPT, str(qrels), str(run),
                        ",".join(TREC_NAMES.values()), ",".join(TREC_EVAL_MEASURES)],
        "ranx": [sys.executable, "-c", RANX_SCRIPT, str(qrels), str(run),
                 ",".join(RANX_NAMES.values())],
    }
    best: dict[str, tuple[float, int, str]] = {}
    for _ in range(repeat):  # each round runs every tool once, in turn
        for tool in tools:
            result = measured(commands[tool])
            if tool not in best or result[0] < best[tool][0]:
                best[tool] = (result[0], max(result[1], best.get(tool, (0, 0))[1]), result[2])
    means = {"searcheval": {row.split(",")[1]: float(row.split(",")[2])
                            for row in best["searcheval"][2].splitlines()[1:]},
             "trec_eval": _trec_eval_means(best["trec_eval"][2])}
    if "pytrec_eval" in best:
        means["pytrec_eval"] = dict(zip(METRICS, json.loads(best["pytrec_eval"][2]).values()))
    if "ranx" in best:
        means["ranx"] = {m: json.loads(best["ranx"][2])[RANX_NAMES[m]] for m in METRICS}
    ours = means["searcheval"]
    agreement = {tool: max(abs(ours[m] - values[m]) for m in METRICS)
                 for tool, values in means.items() if tool != "searcheval"}
    # trec_eval prints 4 decimals; pytrec_eval carries full precision; ranx orders tied
    # scores its own way (not by document id, descending), so its means move by ~1e-6
    limits = {"trec_eval": 5e-5, "pytrec_eval": 1e-9, "ranx": 1e-4}
    return {"seconds": {tool: b[0] for tool, b in best.items()},
            "peak_bytes": {tool: b[1] for tool, b in best.items()},
            "agreement": agreement,
            "agree": all(agreement[t] <= limits[t] for t in agreement),
            "speedup_vs_trec_eval": best["trec_eval"][0] / best["searcheval"][0],
            "memory_vs_trec_eval": best["searcheval"][1] / best["trec_eval"][1]}


def _trec_eval_means(text: str) -> dict[str, float]:
    values = {}
    for line in text.splitlines():
        name, _, value = line.split()
        values[name] = float(value)
    return {m: values[TREC_NAMES[m]] for m in METRICS}


def _load() -> str:
    import os

    try:
        return " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:  # no load average on this platform
        return "unknown"


def _read_once(run: dict) -> None:
    """Iterate every item of a `{query: {doc: score}}` run once, in C, and do nothing with it."""
    from collections import deque
    from itertools import chain

    deque(chain.from_iterable(map(dict.items, run.values())), maxlen=0)


def _dict_reader() -> str:
    """Which reader the dict path uses in this install (`searcheval.metrics.dicts`)."""
    from searcheval.metrics import dicts

    if dicts._native is not None:
        return ("searcheval's dict path reads them once in C (searcheval/_native.c, "
                "built by make install), checking every id and score and looking up each judged "
                "document on the way")
    return ("searcheval's dict path reads them in Python here (installed without a C compiler, "
            "so without searcheval/_native.c): three passes (the ids' types, the "
            "scores' types, the scores) and a lookup of each judged document")


def _in_process(qrels_path: Path, run_path: Path, repeat: int, out) -> dict:
    """The public API as a user calls it, on the realistic files read into each shape a user
    has: `searcheval.Evaluator(qrels, metrics)` (judgments prepared once) then `.evaluate(run)`,
    and `searcheval.evaluate(qrels, run, metrics)` (everything included), with the defaults a user
    gets and with trec_compat=True beside; against pytrec_eval's RelevanceEvaluator prepared once
    and its evaluate (and, for `searcheval.evaluate`, constructed in the timing too)."""
    import pandas as pd
    import pytrec_eval

    import searcheval
    from searcheval.bench.common import best_of

    with open(qrels_path) as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    with open(run_path) as fh:
        run = pytrec_eval.parse_run(fh)
    run_frame = pd.read_csv(run_path, sep=" ", header=None, usecols=[0, 2, 4],
                            names=["query_id", "doc_id", "score"],
                            dtype={"query_id": str, "doc_id": str, "score": float})
    qrels_frame = pd.read_csv(qrels_path, sep=" ", header=None, usecols=[0, 2, 3],
                              names=["query_id", "doc_id", "grade"],
                              dtype={"query_id": str, "doc_id": str, "grade": int})

    def integers(frame, value: str) -> dict:  # "q12" -> 12, "D7" -> 7: the arrays form
        return {"query_id": frame["query_id"].str[1:].astype("int64").to_numpy(),
                "doc_id": frame["doc_id"].str[1:].astype("int64").to_numpy(),
                value: frame[value].to_numpy()}

    run_arrays, qrels_arrays = integers(run_frame, "score"), integers(qrels_frame, "grade")
    shapes = {"dicts": (qrels, run),
              "DataFrame, string ids": (qrels_frame, run_frame),
              "DataFrame, integer ids": (pd.DataFrame(qrels_arrays), pd.DataFrame(run_arrays)),
              "numpy arrays, integer ids": (qrels_arrays, run_arrays)}
    goals = {"dicts": 3, "DataFrame, string ids": 10, "DataFrame, integer ids": 20,
             "numpy arrays, integer ids": 20}
    measures = set(TREC_EVAL_MEASURES)
    prepared = pytrec_eval.RelevanceEvaluator(qrels, measures)
    started = time.perf_counter()
    for q, r in shapes.values():  # first calls (numba loads its cached machine code once)
        searcheval.Evaluator(q, METRICS).evaluate(r)
    first_calls = time.perf_counter() - started
    calls: dict = {"pytrec_eval evaluate": lambda: prepared.evaluate(run),
                   "pytrec_eval constructed + evaluate": lambda: pytrec_eval.RelevanceEvaluator(
                       qrels, measures).evaluate(run),
                   "read the dicts once": lambda: _read_once(run)}
    for shape, (q, r) in shapes.items():
        for compat in (False, True):
            evaluator = searcheval.Evaluator(q, METRICS, **({"trec_compat": True} if compat
                                                            else {}))
            calls[(shape, "Evaluator", compat)] = (lambda e=evaluator, r=r: e.evaluate(r))
            calls[(shape, "evaluate", compat)] = (
                lambda q=q, r=r, c=compat: searcheval.evaluate(
                    q, r, METRICS, **({"trec_compat": True} if c else {})))
    load_before = _load()
    timed = best_of(repeat, calls)
    load_after = _load()
    t_prepared = timed["pytrec_eval evaluate"][0]
    t_floor = timed["read the dicts once"][0]
    t_whole = timed["pytrec_eval constructed + evaluate"][0]
    reference = timed["pytrec_eval evaluate"][1]
    # agreement: trec_compat with pytrec_eval per query; the defaults with the dict path's
    worst_compat = worst_defaults = 0.0
    defaults_dicts = timed[("dicts", "Evaluator", False)][1]
    for key, (_, ev) in timed.items():
        if isinstance(key, str):  # pytrec_eval's and the floor's
            continue
        shape, _, compat = key
        prefix = "q" if "integer" in shape else ""
        if compat:
            for m in METRICS:
                ref = np.array([reference[prefix + q][TREC_NAMES[m]] for q in ev.query_ids])
                worst_compat = max(worst_compat, float(np.abs(ev.values[m] - ref).max()))
        else:
            order = {q: i for i, q in enumerate(defaults_dicts.query_ids)}
            at = np.array([order[prefix + q if prefix else q] for q in ev.query_ids])
            for m in METRICS:
                worst_defaults = max(worst_defaults, float(np.nanmax(np.abs(
                    ev.values[m] - defaults_dicts.values[m][at]))))
    out(f"in process, best of {repeat} (load average {load_before} before, {load_after} after): "
        f"the public API on the first run's files, each shape a user has; pytrec_eval's "
        f"evaluate {t_prepared:.3f} s (RelevanceEvaluator prepared once), {t_whole:.3f} s "
        f"constructed too")
    out(f"{'shape':<28}{'Evaluator.evaluate':>20}{'trec_compat':>16}{'evaluate()':>16}"
        f"{'trec_compat':>16}{'goal':>7}{'read once':>16}")
    figures: dict = {"in_process": {}}
    met = True
    for shape in shapes:
        cells, ratios = [], []
        for call, reference_time in (("Evaluator", t_prepared), ("evaluate", t_whole)):
            for compat in (False, True):
                secs = timed[(shape, call, compat)][0]
                ratios.append(reference_time / secs)
                cells.append(f"{secs:.3f}s {reference_time / secs:5.1f}x")
        ok = min(ratios[0], ratios[2]) >= goals[shape]  # the defaults a user gets
        met &= ok
        figures["in_process"][shape] = {"evaluator_x": ratios[0], "evaluator_compat_x": ratios[1],
                                        "evaluate_x": ratios[2], "evaluate_compat_x": ratios[3],
                                        "goal": goals[shape], "met": ok}
        floor = f"{t_floor:.3f}s {t_prepared / t_floor:5.1f}x" if shape == "dicts" else "-"
        out(f"{shape:<28}{cells[0]:>20}{cells[1]:>16}{cells[2]:>16}{cells[3]:>16}"
            f"{'>=' + str(goals[shape]) + 'x':>7}{floor:>16}")
    figures["read_dicts_once_x"] = t_prepared / t_floor
    out("Evaluator.evaluate: evaluator.evaluate(run), the Evaluator(qrels, metrics) built before "
        "the timing; evaluate(): searcheval.evaluate(qrels, run, metrics), judgments read in the "
        "timing; trec_compat: the same call with trec_compat=True; defaults otherwise")
    out("x: pytrec_eval's time over searcheval's (Evaluator.evaluate against the prepared "
        "RelevanceEvaluator's evaluate; evaluate() against constructing one and evaluating)")
    out("read once: only iterating the run's dicts once in Python (every query's items, nothing "
        "done with them), against pytrec_eval's evaluate: the ceiling of any code that reads "
        "dicts in Python; " + _dict_reader())
    out(f"agreement per query: trec_compat with pytrec_eval max {worst_compat:.1e}; the defaults "
        f"(exponential gain, no-relevant policy one) of every shape with the dicts' max "
        f"{worst_defaults:.1e}; first calls of the four shapes {first_calls:.2f} s (numba loads "
        f"its cached machine code once a process)")
    out(f"goal: the defaults from dicts >= 3x, string DataFrame >= 10x, integer DataFrame or "
        f"arrays >= 20x pytrec_eval: {'met' if met else 'missed'}")
    figures.update({"in_process_agreement": worst_compat,
                    "in_process_defaults_agreement": worst_defaults,
                    "in_process_goal_met": met, "first_calls_seconds": first_calls})
    return figures
