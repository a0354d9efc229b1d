"""Proof on real data: the whole nightly flow on a subset of the graded TREC-DL collection
(../shared/datasets/msmarco-trecdl-subset), with its convention that grade >= 2 is relevant, and
the published means checked against pytrec_eval computed from the TREC run files the run wrote.

The subset keeps four judged queries and their 60 judged passages, plus unjudged passages that
hold a raw U+0085 / U+2028, so the model embeds about 70 texts; its qrels are written without a
header line (as many BEIR exports are), and its searcheval.yaml declares the conventions.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searcheval import store
from searcheval.cli import main
from searcheval.io.collection import load_collection
from searcheval.store import database

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT.parent / "shared" / "datasets" / "msmarco-trecdl-subset"
QUERIES = ("855410", "1121709", "1037798", "1103812")
UNJUDGED = ("1093687", "1123354", "8754404")  # passages with U+0085 / U+2028 nobody judged here
SETTINGS = "gain: linear\nrelevance_level: 2\nno_relevant: zero\ncoverage_floor: 0.8\n"
# searcheval's metric -> trec_eval's measure
MEASURES = {"ndcg@10": "ndcg_cut_10", "mrr": "recip_rank", "recall@20": "recall_20",
            "precision@10": "P_10", "map": "map"}


def plain_qrels(text: str) -> dict[str, dict[str, int]]:
    """The subset's qrels read with plain Python, not with searcheval's reader."""
    qrels: dict[str, dict[str, int]] = {}
    for line in text.split("\n"):
        if line.strip():
            qid, doc, grade = line.split("\t")
            qrels.setdefault(qid, {})[doc] = int(grade)
    return qrels


@pytest.fixture(scope="module")
def subset(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("trecdl-subset")
    (folder / "qrels").mkdir()
    lines = (SOURCE / "qrels" / "test.tsv").read_bytes().split(b"\n")[1:]  # drop the header
    kept = [line for line in lines if line.split(b"\t")[0].decode() in QUERIES]
    (folder / "qrels" / "test.tsv").write_bytes(b"\n".join(kept) + b"\n")
    judged = {line.split(b"\t")[1].decode() for line in kept}
    wanted = judged | set(UNJUDGED)
    corpus = [line for line in (SOURCE / "corpus.jsonl").read_bytes().split(b"\n")
              if line.strip() and json.loads(line)["_id"] in wanted]  # bytes kept as they are
    (folder / "corpus.jsonl").write_bytes(b"\n".join(corpus) + b"\n")
    queries = [line for line in (SOURCE / "queries.jsonl").read_bytes().split(b"\n")
               if line.strip() and json.loads(line)["_id"] in QUERIES]
    (folder / "queries.jsonl").write_bytes(b"\n".join(queries) + b"\n")
    (folder / "searcheval.yaml").write_text(SETTINGS, encoding="utf-8")
    return folder


def raw_u0085(folder: Path) -> set[str]:
    """Ids of the passages whose JSON line holds a raw U+0085 (not the escape \\u0085)."""
    return {json.loads(line)["_id"] for line in (folder / "corpus.jsonl").read_bytes().split(b"\n")
            if "\x85".encode() in line}


@pytest.fixture(scope="module")
def graded_run(subset, tmp_path_factory, database_module_url):
    import os

    os.environ["SEARCHEVAL_DATABASE_URL"] = database_module_url
    try:
        out = tmp_path_factory.mktemp("graded-out")
        code = main(["run", "--dataset", str(subset), "--configurations", "bm25,fused",
                     "--no-baseline", "--output", str(out)])
    finally:
        os.environ.pop("SEARCHEVAL_DATABASE_URL")
    return code, json.loads((out / "metrics.json").read_text()), out


def test_the_run_completes_with_the_datasets_conventions(graded_run, subset):
    code, metrics, out = graded_run
    assert code == 0
    assert set(metrics["configurations"]) == {"bm25", "fused"}
    conventions = metrics["conventions"]
    setting = f"dataset setting in {subset / 'searcheval.yaml'}"
    assert (conventions["gain"], conventions["relevance_level"], conventions["no_relevant"],
            conventions["coverage_floor"]) == ("linear", 2, "zero", 0.8)
    assert conventions["sources"]["relevance_level"] == setting
    assert conventions["grade_scale"] == [0, 3]
    assert conventions["sources"]["grade_scale"].startswith("inferred")
    assert metrics["validation"]["notes"] == [
        "test.tsv has no header line: read as query-id, corpus-id, score from its first line"]
    report = (out / "report.md").read_text(encoding="utf-8")
    assert f"- relevant for MRR, Precision, Recall, MAP: grade >= 2 ({setting})" in report
    assert "- note: test.tsv has no header line" in report
    # the settings file is part of the dataset's fingerprint, and so are the effective judgments
    # read from Postgres (a stored re-judgment changes what the run scored with)
    assert set(metrics["input_hashes"]) == {"corpus", "queries", "qrels", "settings",
                                            "judgments_effective"}
    # 60 judged passages + 3 unjudged ones + 4 queries reached the model
    assert metrics["embeddings"]["embedded"] == 63 + 4


def test_published_means_equal_pytrec_eval_on_the_written_run_files(graded_run, subset):
    import pytrec_eval

    _, metrics, out = graded_run
    qrels = plain_qrels((subset / "qrels" / "test.tsv").read_text(encoding="utf-8"))
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(MEASURES.values()), relevance_level=2)
    for name in ("bm25", "fused"):
        run: dict[str, dict[str, float]] = {}
        for line in (out / "runs" / f"{name}.trec").read_text(encoding="utf-8").split("\n"):
            if line.strip():
                qid, _, doc, _, score, _ = line.split()
                run.setdefault(qid, {})[doc] = float(score)
        per_query = evaluator.evaluate(run)
        means = metrics["configurations"][name]["means"]
        for ours, theirs in MEASURES.items():
            # trec_eval leaves out a query the run does not list; searcheval scores it 0 under
            # the `zero` policy: sum over the queries trec_eval saw, divided by all four
            expected = sum(v[theirs] for v in per_query.values()) / len(QUERIES)
            assert means[ours] == pytest.approx(expected, abs=1e-9), (name, ours)


def test_segments_and_the_raw_u0085_reach_the_history(graded_run, subset, flow_env):
    _, metrics, _ = graded_run
    texts = {qid: q["text"] for qid, q in metrics["queries"].items()}
    assert set(texts) == set(QUERIES)
    assert sum(metrics["segments"][s] for s in ("words:1", "words:2", "words:3", "words:4+")
               if s in metrics["segments"]) == 4
    with database.connect(flow_env) as conn:
        rows = store.run_segment_metrics(conn, metrics["run_id"])
        by_segment = metrics["configurations"]["fused"]["by_segment"]
        stored = {r["segment"]: r["value"] for r in rows
                  if (r["configuration"], r["metric"]) == ("fused", "ndcg@10")}
        assert stored == pytest.approx({s: v["ndcg@10"] for s, v in by_segment.items()})
        # the catalog is stored under its content's fingerprint, never the folder's name
        catalog = load_collection(dataset=subset).catalog_id
        assert catalog.startswith("sha256:") and store.load_resources(conn, subset.name) == []
        passages = {r.id: r for r in store.load_resources(conn, catalog)}
    raw = raw_u0085(subset)
    assert len(raw) >= 2  # 3843267 (judged) and 1093687 (not) hold one
    assert all("\x85" in passages[pid].description for pid in raw)
