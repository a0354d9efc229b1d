"""`searcheval benchmark load`: load time and peak memory of each loader on a generated dataset of
WANDS' shape (42,994 products, 480 queries, 233,448 labels by default), against pandas.read_csv of
the same files (what WANDS' own notebook does; it checks nothing).

The generator writes WANDS' three tab-separated files with text of realistic length (names,
descriptions of a few hundred words' characters, feature lists, ratings), some values holding
U+0085 and U+2028, and the same tables as Parquet and JSONL with a table mapping for each. Every
loader runs in a fresh process of its own, so its peak resident memory (ru_maxrss) is its own;
"above imports" subtracts what the process held before loading. All loaders must give the same
judgments (a digest of the qrels) and the same documents. Goal: each loader under 5 s and under
500 MB.
"""

from __future__ import annotations

import hashlib
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

GOAL_SECONDS = 5.0
GOAL_BYTES = 500 * 1024 ** 2
LABELS = ("Exact", "Partial", "Irrelevant")
PRODUCT_COLUMNS = ("product_id", "product_name", "product_class", "category hierarchy",
                   "product_description", "product_features", "rating_count", "average_rating",
                   "review_count")
LOADERS = ("wands", "mapped-tsv", "mapped-parquet", "mapped-jsonl", "pandas.read_csv")
WORDS = ("solid wood platform bed frame oak pine walnut modern rustic farmhouse upholstered linen "
         "velvet tufted storage drawer shelf cabinet desk chair sofa sectional ottoman bench stool "
         "table coffee accent side console dining kitchen bathroom vanity sink faucet shower lamp "
         "pendant chandelier rug runner pillow throw blanket curtain mirror wall art outdoor patio "
         "garden planter grill umbrella kids teen nursery crib dresser nightstand headboard "
         "mattress memory foam queen king twin full metal glass marble ceramic stainless steel "
         "black white grey brown blue green gold brass chrome matte gloss set piece inch wide "
         "tall deep adjustable reversible washable waterproof assembly required").split()
CLASSES = ("Beds", "Sofas", "Accent Chairs", "Coffee & Cocktail Tables", "Area Rugs", "Desks",
           "Bar Stools", "Dining Table Sets", "Kitchen Sinks", "Accent Pillows", "Wall Mirrors",
           "Outdoor Umbrellas", "Pendant Lighting", "Bathroom Vanities", "Dressers & Chests")


def _status(field: str) -> int | None:
    """A memory figure of this process from /proc/self/status (bytes), None where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def peak_rss_bytes() -> int:
    """Peak resident memory of this process. VmHWM belongs to the process image, so a fresh
    interpreter starts from zero; ru_maxrss is not used on Linux because it survives exec and
    would report the parent's peak (the generator's) for every child."""
    peak = _status("VmHWM")
    if peak is not None:
        return peak
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value if sys.platform == "darwin" else value * 1024


def current_rss_bytes() -> int:
    current = _status("VmRSS")
    return current if current is not None else peak_rss_bytes()


# --------------------------------------------------------------------------- the dataset


SEARCHABLE_WORDS = 6_000


def vocabulary(size: int = SEARCHABLE_WORDS) -> tuple[str, ...]:
    """WORDS, then made-up words (`w` and a number) up to `size` words: a vocabulary as wide as a
    product catalog's, so that a query's words are rare enough for BM25 to rank products by them
    (over WORDS' 120 words every product holds every query word)."""
    return tuple(WORDS) + tuple(f"w{i}" for i in range(max(0, size - len(WORDS))))


def _texts(rng, n: int, low: int, high: int, words=WORDS) -> list[str]:
    """`n` texts of `low`..`high` words drawn from `words` (uniformly for WORDS; for a wider
    vocabulary with Zipf-like frequencies, as natural text has them)."""
    lengths = rng.integers(low, high + 1, size=n)
    total = int(lengths.sum())
    if len(words) == len(WORDS):
        picks = rng.integers(0, len(WORDS), size=total)
    else:
        weights = 1.0 / np.arange(1, len(words) + 1)
        picks = rng.choice(len(words), size=total, p=weights / weights.sum())
    words = [words[i] for i in picks.tolist()]
    out, start = [], 0
    for length in lengths.tolist():
        out.append(" ".join(words[start:start + length]))
        start += length
    return out


def generate(directory: Path, *, products: int = 42_994, queries: int = 480,
             labels: int = 233_448, seed: int = 0, searchable: bool = False,
             copies: bool = True) -> dict:
    """Write the WANDS-shaped tables to `directory` (WANDS' TSV files and, with `copies`, Parquet
    and JSONL copies and a mapping for each) and return what was written.

    `searchable`: text over a vocabulary of SEARCHABLE_WORDS words (`vocabulary`), each query
    made of words of the products it judges Exact or Partial, so BM25 finds them (a nightly's
    benchmark, `searcheval benchmark wands`); otherwise over WORDS' 120 words (`benchmark load`,
    which only loads the files)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if labels > products * queries:
        raise ValueError("more labels than (query, product) pairs")
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    ids = [str(i) for i in range(products)]
    words = vocabulary() if searchable else WORDS
    names = _texts(rng, products, 3, 9, words)
    descriptions = _texts(rng, products, 30, 250, words)
    for i in range(0, products, 997):  # some values hold U+0085 or U+2028 (a line ends only at \n)
        descriptions[i] = descriptions[i].replace(" ", "\x85", 1).replace(" ", "\u2028", 1)
    for i in range(5, products, 50):
        descriptions[i] = ""  # WANDS has products without a description
    classes = [CLASSES[i] for i in rng.integers(0, len(CLASSES), size=products).tolist()]
    hierarchy = [f"Furniture / {c} / All {c}" for c in classes]
    features = ["|".join(f"{w}:{int(v)}" for w, v in zip(ws.split(), rng.integers(1, 99, 6)))
                for ws in _texts(rng, products, 10, 40, words)]
    counts = rng.integers(0, 500, size=products)
    ratings = np.round(rng.uniform(1, 5, size=products), 1)
    rating_count = ["" if c == 0 else f"{float(c):.1f}" for c in counts.tolist()]
    average = ["" if c == 0 else f"{r:.1f}" for c, r in zip(counts.tolist(), ratings.tolist())]
    reviews = ["" if c == 0 else f"{float(c // 2):.1f}" for c in counts.tolist()]
    product_table = {"product_id": ids, "product_name": names, "product_class": classes,
                     "category hierarchy": hierarchy, "product_description": descriptions,
                     "product_features": features, "rating_count": rating_count,
                     "average_rating": average, "review_count": reviews}
    qids = [str(i) for i in range(queries)]
    query_table = {"query_id": qids, "query": _texts(rng, queries, 1, 6),
                   "query_class": [CLASSES[i % len(CLASSES)] for i in range(queries)]}
    # labels: each query judges distinct products, as many as its share of the total
    per_query = np.full(queries, labels // queries)
    per_query[: labels % queries] += 1
    label_q, label_p = [], []
    for q, n in enumerate(per_query.tolist()):
        chosen = rng.choice(products, size=n, replace=False)
        label_q.extend([qids[q]] * n)
        label_p.extend(ids[p] for p in chosen.tolist())
    grades = rng.choice(3, size=labels, p=[0.3, 0.35, 0.35])
    label_table = {"id": [str(i) for i in range(labels)], "query_id": label_q,
                   "product_id": label_p, "label": [LABELS[g] for g in grades.tolist()]}
    if searchable:  # each query: 1..4 words of the name of one product it judges relevant
        grade_of = grades.tolist()
        start = 0
        texts = []
        for n in per_query.tolist():
            relevant = [i for i in range(start, start + n) if grade_of[i] < 2] or [start]
            name = names[int(label_p[relevant[int(rng.integers(len(relevant)))]])].split()
            size = min(len(name), int(rng.integers(1, 5)))
            texts.append(" ".join(name[i] for i in sorted(rng.choice(len(name), size=size,
                                                                       replace=False).tolist())))
            start += n
        query_table["query"] = texts
    tables = {"product": product_table, "query": query_table, "label": label_table}
    for name, table in tables.items():
        _write_tsv(directory / f"{name}.csv", table)
        if not copies:
            continue
        pq.write_table(pa.table(table), directory / f"{name}.parquet")
        columns = list(table)
        with open(directory / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for row in zip(*table.values()):
                fh.write(json.dumps(dict(zip(columns, row)), ensure_ascii=False) + "\n")
    for fmt, ext in (("tsv", "csv"), ("parquet", "parquet"), ("jsonl", "jsonl"))[
            : 3 if copies else 0]:
        (directory / f"mapping-{fmt}.yaml").write_text(_mapping(fmt, ext), encoding="utf-8")
    size = sum((directory / f"{n}.csv").stat().st_size for n in tables)
    return {"products": products, "queries": queries, "labels": labels, "tsv_bytes": size}


def _write_tsv(path: Path, table: dict[str, list[str]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("\t".join(table) + "\n")
        for row in zip(*table.values()):
            fh.write("\t".join(row) + "\n")


def _mapping(fmt: str, ext: str) -> str:
    return f"""\
name: wands-like
documents:
  file: product.{ext}
  format: {fmt}
  id: product_id
  title: product_name
  body: product_description
  tags: product_class
  fields: [product_class, category hierarchy, product_features, rating_count, average_rating,
           review_count]
queries:
  file: query.{ext}
  format: {fmt}
  id: query_id
  text: query
  category: query_class
judgments:
  file: label.{ext}
  format: {fmt}
  query_id: query_id
  doc_id: product_id
  grade: label
settings:
  grade_map: {{Exact: 3, Partial: 1, Irrelevant: 0}}
"""


# --------------------------------------------------------------------------- one loader, one process


def measure(kind: str, directory: Path) -> dict:
    """Load the dataset with one loader (in this process) and say how long and how much memory."""
    from searcheval.evaluation.inputs import load_collection

    if kind == "pandas.read_csv":
        import pandas as pd
    before = current_rss_bytes()
    start = time.perf_counter()
    if kind == "wands":
        collection = load_collection(dataset=directory)
    elif kind.startswith("mapped-"):
        collection = load_collection(mapping=directory / f"mapping-{kind.split('-', 1)[1]}.yaml")
    elif kind == "pandas.read_csv":
        frames = {n: pd.read_csv(directory / f"{n}.csv", sep="\t") for n in
                  ("product", "query", "label")}
    else:
        raise ValueError(kind)
    seconds = time.perf_counter() - start
    peak = peak_rss_bytes()
    if kind == "pandas.read_csv":
        label = frames["label"]
        grade = label["label"].map({"Exact": 3, "Partial": 1, "Irrelevant": 0})
        pairs = sorted(zip(label["query_id"].astype(str), label["product_id"].astype(str),
                           grade.astype(int)))
        counts = (len(frames["product"]), len(frames["query"]), len(label))
        documents = hashlib.sha256("\n".join(frames["product"]["product_id"].astype(str))
                                   .encode()).hexdigest()
    else:
        pairs = sorted((j.query_id, j.doc_id, j.grade) for j in collection.judgments)
        counts = (len(collection.resources), len(collection.queries), len(collection.judgments))
        documents = hashlib.sha256("\n".join(r.id for r in collection.resources).encode()).hexdigest()
    qrels = hashlib.sha256("\n".join(f"{q} {d} {g}" for q, d, g in pairs).encode()).hexdigest()
    return {"kind": kind, "seconds": seconds, "peak_bytes": peak, "before_bytes": before,
            "counts": counts, "qrels_digest": qrels, "documents_digest": documents}


def measure_validation(directory: Path, repeat: int = 3) -> dict:
    """The validation step (`validate_collection`: the Great Expectations suites, one batch each)
    on the dataset loaded by the WANDS loader, in this process: GX's context and suites are built
    once per process (timed apart), then `repeat` validations, best wall and CPU time."""
    from searcheval.evaluation import validation
    from searcheval.io.collection import load_collection

    collection = load_collection(dataset=directory)
    start = time.perf_counter()
    validation._validation_definitions()
    setup = time.perf_counter() - start
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        report = validation.validate_collection(collection)
        best = min(best, (time.perf_counter() - wall, time.process_time() - cpu))
    return {"kind": "validation", "seconds": best[0], "cpu_seconds": best[1],
            "setup_seconds": setup, "findings": len(report.findings), "stale": len(report.stale),
            "labels": len(collection.judgments)}


def _in_a_fresh_process(kind: str, directory: Path) -> dict:
    code = ("import json, sys; from pathlib import Path; "
            "from searcheval.bench.load import measure, measure_validation; "
            "print(json.dumps(measure_validation(Path(sys.argv[2])) if sys.argv[1] == "
            "'validation' else measure(sys.argv[1], Path(sys.argv[2]))))")
    done = subprocess.run([sys.executable, "-c", code, kind, str(directory)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise RuntimeError(f"the {kind} loader failed: {tail[0]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def benchmark_load(*, products: int = 42_994, queries: int = 480, labels: int = 233_448,
                   seed: int = 0, directory: Path | None = None, loaders=LOADERS,
                   repeat: int = 3, validate: bool = True, out=print) -> int:
    """Generate, then load with each loader in a fresh process, `repeat` rounds (each round runs
    every loader once, in turn, so a burst of load elsewhere falls on all alike); print the best
    time and the largest peak memory of each. 0 = every searcheval loader agrees and meets the
    goal (5 s, 500 MB), 1 otherwise."""
    own = directory is None
    folder = Path(tempfile.mkdtemp(prefix="se-load-")) if own else Path(directory)
    validated = None
    try:
        t0 = time.perf_counter()
        written = generate(folder, products=products, queries=queries, labels=labels, seed=seed)
        generated = time.perf_counter() - t0
        rounds = [[_in_a_fresh_process(kind, folder) for kind in loaders] for _ in range(repeat)]
        validated = _in_a_fresh_process("validation", folder) if validate else None
        results = []
        for i, kind in enumerate(loaders):
            runs = [r[i] for r in rounds]
            best = min(runs, key=lambda r: r["seconds"])
            results.append({**best, "peak_bytes": max(r["peak_bytes"] for r in runs),
                            "before_bytes": min(r["before_bytes"] for r in runs),
                            "seconds_all": [r["seconds"] for r in runs]})
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
    out(f"WANDS-shaped dataset: {products} products, {queries} queries, {labels} labels "
        f"({written['tsv_bytes'] / 2**20:.0f} MiB of TSV), seed {seed}; generated in "
        f"{generated:.1f} s; best of {repeat} fresh processes per loader")
    out(f"{'loader':<18}{'seconds':>9}{'peak MiB':>10}{'above imports':>15}  documents / queries / "
        "judgments")
    for r in results:
        out(f"{r['kind']:<18}{r['seconds']:>9.2f}{r['peak_bytes'] / 2**20:>10.0f}"
            f"{(r['peak_bytes'] - r['before_bytes']) / 2**20:>15.0f}  "
            + " / ".join(str(c) for c in r["counts"]))
    ours = [r for r in results if r["kind"] != "pandas.read_csv"]
    same = len({(r["qrels_digest"], r["documents_digest"], tuple(r["counts"]))
                for round_ in rounds for r in round_}) == 1
    out(f"every loader read the same documents and judgments: {'yes' if same else 'NO'}")
    slow = [r["kind"] for r in ours if r["seconds"] > GOAL_SECONDS]
    big = [r["kind"] for r in ours if r["peak_bytes"] > GOAL_BYTES]
    out(f"goal: under {GOAL_SECONDS:g} s and {GOAL_BYTES / 2**20:.0f} MiB peak per searcheval loader: "
        + ("met" if not slow and not big and same else
           "MISSED (" + "; ".join(filter(None, [f"slow: {', '.join(slow)}" if slow else "",
                                                 f"memory: {', '.join(big)}" if big else "",
                                                 "loaders disagree" if not same else ""])) + ")"))
    slow_validation = False
    if validated is not None:
        slow_validation = validated["seconds"] > GOAL_SECONDS
        out(f"validation (Great Expectations: 4 suites, one batch of a pandas frame each) of the "
            f"{validated['labels']} labels loaded by the WANDS loader: best of {repeat} "
            f"{validated['seconds']:.2f} s wall, {validated['cpu_seconds']:.2f} s CPU "
            f"({validated['findings']} findings, {validated['stale']} stale); GX's context and "
            f"suites, built once a process: {validated['setup_seconds']:.2f} s")
        out(f"goal: validation under {GOAL_SECONDS:g} s: "
            f"{'met' if not slow_validation else 'MISSED'}")
    return 0 if same and not slow and not big and not slow_validation else 1
