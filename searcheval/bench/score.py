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


def benchmark_score(*, queries: int = 20_000, depth: int = 100, judged: int = 15, seed: int = 0,
                    repeat: int = 3, trec_eval_source: Path = TREC_EVAL_SOURCE,
                    directory: Path | None = None, in_process: bool = True,
                    out=say) -> dict:
    """Print the table; return the figures (times, peaks, agreement, ratios)."""
    with tempfile.TemporaryDirectory(prefix="se-bench-score-") as tmp:
        where = Path(directory) if directory else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        out(f"generating {queries} queries x {depth} results, {judged} judged per query "
            f"(seed {seed}) in {where}")
        qrels, run = generate(where, queries, depth, judged, seed)  # FIXME ids
        trec_eval = build_trec_eval(Path(trec_eval_source), Path(tmp))
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
            for tool, command in commands.items():
                result = measured(command)
                if tool not in best or result[0] < best[tool][0]:
                    best[tool] = (result[0], max(result[1], best.get(tool, (0, 0))[1]), result[2])
        means = {
            "searcheval": {row.split(",")[1]: float(row.split(",")[2])
                           for row in best["searcheval"][2].splitlines()[1:]},
            "trec_eval": _trec_eval_means(best["trec_eval"][2]),
            "pytrec_eval": {m: v for m, v in zip(METRICS, json.loads(best["pytrec_eval"][2])
                                                 .values())},
            "ranx": {m: json.loads(best["ranx"][2])[RANX_NAMES[m]] for m in METRICS},
        }
        ours = means["searcheval"]
        agreement = {tool: max(abs(ours[m] - values[m]) for m in METRICS)
                     for tool, values in means.items() if tool != "searcheval"}
        t_ours, m_ours = best["searcheval"][0], best["searcheval"][1]
        out(f"whole processes, best of {repeat} ({', '.join(METRICS)}):")
        out(f"{'tool':<13}{'seconds':>9}{'x searcheval':>14}{'peak MiB':>10}"
            f"{'max |mean - searcheval|':>26}")
        for tool, (secs, peak, _) in best.items():
            diff = "" if tool == "searcheval" else f"{agreement[tool]:.1e}"
            out(f"{tool:<13}{secs:>9.2f}{secs / t_ours:>13.2f}x{peak / 2**20:>10.0f}{diff:>26}")
        figures = {
            "seconds": {tool: b[0] for tool, b in best.items()},
            "peak_bytes": {tool: b[1] for tool, b in best.items()},
            "agreement": agreement,
            "speedup_vs_trec_eval": best["trec_eval"][0] / t_ours,
            "memory_vs_trec_eval": m_ours / best["trec_eval"][1],
        }
        # trec_eval prints 4 decimals; pytrec_eval carries full precision; ranx orders tied
        # scores its own way (not by document id, descending), so its means move by ~1e-6
        agree = agreement["trec_eval"] <= 5e-5 and agreement["pytrec_eval"] <= 1e-9 and \
            agreement["ranx"] <= 1e-4
        out(f"agreement: {'the same numbers' if agree else 'DISAGREEMENT'} (trec_eval to its 4 "
            f"printed decimals, pytrec_eval to 1e-9, ranx to 1e-4: it breaks ties its own way)")
        out(f"searcheval vs trec_eval: {figures['speedup_vs_trec_eval']:.2f}x faster (goal >= 5x), "
            f"peak memory {figures['memory_vs_trec_eval']:.2f}x trec_eval's (goal <= 1x)")
        figures["agree"] = agree
        if in_process:
            figures.update(_in_process(qrels, run, repeat, out))
        return figures


def _trec_eval_means(text: str) -> dict[str, float]:
    values = {}
    for line in text.splitlines():
        name, _, value = line.split()
        values[name] = float(value)
    return {m: values[TREC_NAMES[m]] for m in METRICS}


def _in_process(qrels_path: Path, run_path: Path, repeat: int, out) -> dict:
    """searcheval in-process (judgments prepared once, as pytrec_eval's RelevanceEvaluator is:
    from a DataFrame of string ids, of categorical ids, from numpy arrays of integer ids; then
    everything included, and from dicts) against pytrec_eval's evaluate on the same dicts."""
    import pandas as pd
    import pytrec_eval

    import searcheval
    from searcheval.bench.common import best_of
    from searcheval.metrics.engine import Settings
    from searcheval.metrics.engine import evaluate as evaluate_dicts

    run_frame = pd.read_csv(run_path, sep=" ", header=None, usecols=[0, 2, 4],
                            names=["query_id", "doc_id", "score"],
                            dtype={"query_id": str, "doc_id": str, "score": float})
    qrels_frame = pd.read_csv(qrels_path, sep=" ", header=None, usecols=[0, 2, 3],
                              names=["query_id", "doc_id", "grade"],
                              dtype={"query_id": str, "doc_id": str, "grade": int})
    categorical = run_frame.astype({"query_id": "category", "doc_id": "category"})

    def integers(frame, value: str) -> dict:  # "q12" -> 12, "d7" -> 7: the arrays form
        return {"query_id": frame["query_id"].str[1:].astype("int64").to_numpy(),
                "doc_id": frame["doc_id"].str[1:].astype("int64").to_numpy(),
                value: frame[value].to_numpy()}

    run_arrays, qrels_arrays = integers(run_frame, "score"), integers(qrels_frame, "grade")
    run_int_frame = pd.DataFrame(run_arrays)
    with open(qrels_path) as fh:
        qrels = pytrec_eval.parse_qrel(fh)
    with open(run_path) as fh:
        run = pytrec_eval.parse_run(fh)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_EVAL_MEASURES))
    ours = searcheval.Evaluator(qrels_frame, METRICS, trec_compat=True)
    started = time.perf_counter()
    ours_int = searcheval.Evaluator(qrels_arrays, METRICS, trec_compat=True)
    ours_int.evaluate(run_arrays, complete=False)  # numba: its cached machine code loaded once
    first_call = time.perf_counter() - started
    timed_ = best_of(repeat, {
        "DataFrame (string ids)": lambda: ours.evaluate(run_frame, complete=False),
        "DataFrame (categorical)": lambda: ours.evaluate(categorical, complete=False),
        "arrays (integer ids)": lambda: ours_int.evaluate(run_arrays, complete=False),
        "DataFrame (integer ids)": lambda: ours_int.evaluate(run_int_frame, complete=False),
        "DataFrames, judgments too": lambda: searcheval.evaluate(
            qrels_frame, run_frame, METRICS, trec_compat=True, complete=False),
        "dicts": lambda: evaluate_dicts(qrels, run, METRICS, Settings(trec_compat=True),
                                        complete=False),
        "pytrec_eval (dicts)": lambda: evaluator.evaluate(run),
    })
    reference = timed_["pytrec_eval (dicts)"][1]
    worst = 0.0
    for label, (_, ev) in timed_.items():
        if label == "pytrec_eval (dicts)":
            continue
        prefix = "q" if "integer" in label else ""
        for m in METRICS:
            ref = np.array([reference[prefix + q][TREC_NAMES[m]] for q in ev.query_ids])
            worst = max(worst, float(np.abs(ev.values[m] - ref).max()))
    t_ref = timed_["pytrec_eval (dicts)"][0]
    out(f"in-process, best of {repeat} (searcheval's judgments prepared once, as "
        f"pytrec_eval's RelevanceEvaluator):")
    for label, (secs, _) in timed_.items():
        name = label if label.startswith("pytrec_eval") else f"searcheval {label}"
        out(f"{name:<40}{secs:>8.3f} s{t_ref / secs:>8.2f}x pytrec_eval")
    out(f"agreement per query with pytrec_eval: max {worst:.1e}")
    out(f"tables take the compiled path (numba, on all cores; integer ids as they are, others "
        f"coded first); integer judgments prepared and the first call (numba compiles once after "
        f"an install, then loads its cached machine code) took {first_call:.2f} s")
    fastest = min(timed_[k][0] for k in ("DataFrame (string ids)", "DataFrame (categorical)",
                                         "arrays (integer ids)", "DataFrame (integer ids)"))
    out(f"goal: from arrays or a DataFrame >= 20x pytrec_eval: {t_ref / fastest:.2f}x "
        f"({'met' if t_ref / fastest >= 20 else 'missed'}); from dicts >= 3x: "
        f"{t_ref / timed_['dicts'][0]:.2f}x ({'met' if t_ref / timed_['dicts'][0] >= 3 else 'missed'})")
    return {"in_process_seconds": {k: v[0] for k, v in timed_.items()},
            "in_process_agreement": worst,
            "frame_speedup_vs_pytrec_eval": t_ref / timed_["DataFrame (string ids)"][0],
            "arrays_speedup_vs_pytrec_eval": t_ref / timed_["arrays (integer ids)"][0],
            "int_frame_speedup_vs_pytrec_eval": t_ref / timed_["DataFrame (integer ids)"][0],
            "compiled_first_call_seconds": first_call,
            "dicts_speedup_vs_pytrec_eval": t_ref / timed_["dicts"][0]}
