"""`searcheval benchmark wands` at a small size, bm25 only: the nightly runs cold and warm on the
generated WANDS-shaped collection, the tables parse, the goals are reported, and the metrics the
nightly published equal pytrec_eval's on the run file it wrote and the labels it was given."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from searcheval.bench.load import generate, vocabulary
from searcheval.cli import main
from searcheval.io.collection import load_collection

pytestmark = pytest.mark.slow  # three whole `searcheval run` processes, a Prefect server (~40 s)

ROOT = Path(__file__).resolve().parents[2]
#: searcheval's metric -> pytrec_eval's measure
MEASURES = {"ndcg@10": "ndcg_cut_10", "mrr": "recip_rank", "recall@20": "recall_20",
            "precision@10": "P_10", "map": "map"}


def test_the_searchable_generator_makes_queries_bm25_can_answer(tmp_path):
    generate(tmp_path, products=300, queries=12, labels=600, seed=4, searchable=True,
             copies=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["label.csv", "product.csv",
                                                         "query.csv"]
    collection = load_collection(dataset=tmp_path)
    words = set(vocabulary())
    assert len(words) == 6000
    relevant = {}
    for j in collection.judgments:
        if j.grade > 0:
            relevant.setdefault(j.query_id, set()).add(j.doc_id)
    names = {r.id: set(r.name.split()) for r in collection.resources}
    for q in collection.queries:  # every query word is in the name of a product it judges
        assert q.text and set(q.text.split()) <= words
        assert any(set(q.text.split()) <= names[d] for d in relevant[q.id]), q.text


@pytest.fixture(scope="module")
def benchmarked(tmp_path_factory):
    import contextlib
    import io

    base = tmp_path_factory.mktemp("wands")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = main(["benchmark", "wands", "--products", "800", "--queries", "24", "--labels",
                     "2400", "--seed", "2", "--no-model", "--warm-runs", "1", "--project",
                     str(ROOT), "--directory", str(base)])
    return code, printed.getvalue(), base


def test_the_tables_parse_and_the_goals_are_reported(benchmarked):
    code, out, _ = benchmarked
    assert code in (0, 1), out
    assert "800 products, 24 queries, 2400 labels" in out
    rows = dict(re.findall(r"^\| (searcheval run, (?:cold|warm 1)).*?\|\s+([\d.]+) \|", out,
                           re.M))
    assert set(rows) == {"searcheval run, cold", "searcheval run, warm 1"}
    stages = re.findall(r"^\| (.+?)\s+\|\s+([\d.-]+) \|\s+([\d.-]+) \|$", out, re.M)
    whole = [s for s in stages if s[0] == "whole process"]
    assert whole and abs(float(whole[0][1]) - float(rows["searcheval run, cold"])) < 0.1
    validate = [s for s in stages if s[0].startswith("task validate")]
    assert validate and float(validate[0][1]) > 0  # the cold run validated
    for goal in ("warm end to end under 60 s", "the validation step under 5 s",
                 "peak memory under 2 GiB"):
        assert re.search(rf"^goal: {goal}: .*: (met|MISSED)$", out, re.M), goal
    peak = int(re.search(r"peak memory under 2 GiB: (\d+) MiB", out).group(1))
    assert 50 < peak < 4096  # a Python process, Postgres and a Prefect server: not nothing
    assert "not measured (no configuration embeds)" in out
    assert "the kept server stopped, no process left: yes" in out


def test_the_published_metrics_equal_pytrec_eval(benchmarked):
    import pytrec_eval

    _, _, base = benchmarked
    collection = load_collection(dataset=base / "wands")
    metrics = json.loads((base / "out" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["conventions"]["gain"] == "exponential"
    # exponential gain (2^grade - 1) given to trec_eval's linear nDCG as the grade itself;
    # relevant (binary measures) from grade 1: Partial and Exact, 1 and 7 here, both >= 1
    qrels: dict[str, dict[str, int]] = {}
    for j in collection.judgments:
        qrels.setdefault(j.query_id, {})[j.doc_id] = 2 ** int(j.grade) - 1
    run: dict[str, dict[str, float]] = {}
    lines = (base / "out" / "runs" / "bm25.trec").read_text(encoding="utf-8").splitlines()
    for line in lines:
        qid, _, doc, _, score, _ = line.split()
        run.setdefault(qid, {})[doc] = float(score)
    # at this size a query of only frequent words (held by half the products) finds nothing:
    # pytrec_eval leaves such a query out, searcheval scores it 0
    assert len(run) >= len(collection.queries) // 2
    theirs = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES.values())).evaluate(run)
    with open(base / "out" / "per_query.csv", encoding="utf-8", newline="") as fh:
        ours = {(r["query_id"], r["metric"]): float(r["value"]) for r in csv.DictReader(fh)
                if r["configuration"] == "bm25"}
    compared = 0
    for q in collection.queries:
        for metric, measure in MEASURES.items():
            expected = theirs[q.id][measure] if q.id in theirs else 0.0
            assert abs(ours[(q.id, metric)] - expected) <= 1e-9, (q.id, metric)
            compared += 1
    assert compared == len(collection.queries) * len(MEASURES)
    means = metrics["configurations"]["bm25"]["means"]
    for metric, measure in MEASURES.items():
        mean = sum(v[measure] for v in theirs.values()) / len(collection.queries)
        assert abs(means[metric] - mean) <= 1e-9, metric
    assert means["ndcg@10"] > 0.05  # the queries match their products
