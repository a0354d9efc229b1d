"""`benchmark embed` and `benchmark search` on tiny inputs: the structure of their figures and the
properties that must hold whatever the machine's speed (no timing thresholds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searcheval import store
from searcheval.bench import common, embed, search
from searcheval.cli import main
from searcheval.errors import InputError
from searcheval.io.beir import load_beir
from searcheval.metrics.engine import Settings, evaluate
from searcheval.rankers import embeddings
from searcheval.rankers.bm25 import run_bm25
from searcheval.store import database

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"
SLICE_DOCS = 200
SLICE_QUERIES = 8
CONFIGURATIONS = ["dense", "dense-exact", "bm25", "fused"]


def write_slice(out: Path, n_docs: int, n_queries: int) -> Path:
    """`n_docs` SciFact documents in BEIR layout: the judged documents of the first `n_queries`
    test queries, then the corpus in order; those queries and their judgments."""
    (out / "qrels").mkdir(parents=True)
    rows = [line.split("\t") for line in
            (SCIFACT / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    qids = list(dict.fromkeys(r[0] for r in rows))[:n_queries]
    judged = [r for r in rows if r[0] in qids]
    needed = {r[1] for r in judged}
    docs = [json.loads(line) for line in
            (SCIFACT / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    keep = [d for d in docs if d["_id"] in needed]
    keep += [d for d in docs if d["_id"] not in needed][:n_docs - len(keep)]
    queries = [json.loads(line) for line in
               (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    (out / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in keep),
                                      encoding="utf-8")
    (out / "queries.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in queries if q["_id"] in qids), encoding="utf-8")
    (out / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join("\t".join(r) + "\n" for r in judged),
        encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def scifact_slice(tmp_path_factory) -> Path:
    """200 SciFact documents and 8 test queries (write_slice)."""
    return write_slice(tmp_path_factory.mktemp("bench") / "scifact-slice", SLICE_DOCS,
                       SLICE_QUERIES)


@pytest.fixture(scope="module")
def searched(scifact_slice, new_database, embedding_model) -> tuple[str, dict, list[str]]:
    """The search benchmark once on the slice, in a fresh database (so its cache is cold):
    the database URL, the figures and the lines it printed. Later runs there read the cache."""
    url = new_database("bench_search")
    lines: list[str] = []
    figures = search.benchmark_search(scifact_slice, database_url=url, say=lines.append)
    return url, figures, lines


def databases(url: str) -> set[str]:
    with database.connect(url) as conn:
        return {row[0] for row in conn.execute("SELECT datname FROM pg_database").fetchall()}


def test_embed_benchmark_cold_then_warm_without_the_model(scifact_slice, database_url,
                                                          embedding_model):
    # short texts (SciFact claims) keep the model's share of the test small
    texts = [json.loads(line)["text"] for line in
             (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines()[:20]]
    assert len(set(texts)) == 20
    lines: list[str] = []
    f = embed.benchmark_embed(texts, database_url, batch_size=8, rounds=2, say=lines.append)

    assert (f["texts"], f["batch_size"], f["model"]) == (20, 8, "all-MiniLM-L6-v2")
    assert f["model_loaded_here"] is False  # the session fixture loaded it already
    assert f["cached"]["embedded"] == 20 and f["cached"]["from_cache"] == 0
    for path in ("cached", "raw"):
        assert f[path]["seconds"] > 0
        assert f[path]["texts_per_s"] == 20 / f[path]["seconds"]
    assert f["ratio"] == f["cached"]["texts_per_s"] / f["raw"]["texts_per_s"]
    assert f["max_abs_diff"] <= 1e-6  # the same model, batches and normalisation

    warm = f["warm_in_process"]
    assert (warm["embedded"], warm["from_cache"], warm["model_loads"]) == (0, 20, 0)
    assert warm["same_vectors"] is True
    new = f["warm_new_process"]
    assert (new["embedded"], new["from_cache"], new["model_loads"]) == (0, 20, 0)
    assert new["imported_sentence_transformers"] is False and new["imported_torch"] is False
    assert new["same_vectors"] is True
    assert new["wall_s"] > new["embed_s"] > 0

    assert f["goals"]["warm passes embed nothing"] is True
    assert f["goals"]["warm passes load no model"] is True
    assert f["goals"]["same vectors every way"] is True
    assert f["goals"]["cached cold >= 0.9x raw encode"] is (f["ratio"] >= 0.9)
    assert f["goal_met"] is all(f["goals"].values())
    # the cold cache was a throwaway database, gone afterwards
    assert f["database"].rsplit("/", 1)[-1] not in databases(database_url)
    table = lines[-1]
    for row in ("raw SentenceTransformer.encode", "CachedEmbedder, cold",
                "CachedEmbedder, warm, same process", "CachedEmbedder, warm, new process"):
        assert f"| {row}" in table
    assert f"cached cold / raw: {f['ratio']:.3f}x" in table


def test_embed_benchmark_refuses_no_text_and_bad_counts(scifact_slice):
    with pytest.raises(InputError) as err:
        embed.benchmark_embed([], "postgresql://unused/db")
    assert err.value.field == "texts"
    with pytest.raises(InputError) as err:
        common.beir_texts(scifact_slice, SLICE_DOCS + 1)
    assert f"at least {SLICE_DOCS + 1} distinct" in err.value.message
    assert err.value.file == str(scifact_slice / "corpus.jsonl")


def test_throwaway_database_is_dropped_even_after_an_error(database_url):
    with pytest.raises(RuntimeError, match="boom"), \
            common.throwaway_database(database_url, "oops") as url:
        name = database.describe(url).rsplit("/", 1)[-1]
        assert name in databases(database_url)
        with database.connect(url) as conn:  # migrated
            assert database.applied_migrations(conn)
        raise RuntimeError("boom")
    assert name not in databases(database_url)


def test_search_benchmark_figures_and_a_warm_rerun(scifact_slice, searched):
    url, f, lines = searched
    collection = load_beir(scifact_slice)
    n_queries = len(collection.queries)
    assert n_queries == SLICE_QUERIES

    assert (f["dataset"], f["documents"], f["queries"], f["k"], f["depth"]) == (
        "scifact-slice", SLICE_DOCS, SLICE_QUERIES, 10, 100)
    assert f["index"] | {"seconds": 0} == {"seconds": 0, "documents": SLICE_DOCS,
                                           "embedded": SLICE_DOCS, "from_cache": 0}
    assert f["query_embedding"]["embedded"] == SLICE_QUERIES
    assert 0.0 <= f["hnsw_recall"]["value"] <= 1.0
    ef_at_10 = min(max(10, store.EF_SEARCH_MIN), store.EF_SEARCH_MAX)  # ef_search follows k
    assert (f["hnsw_recall"]["k"], f["hnsw_recall"]["ef_search"]) == (10, ef_at_10)
    assert f["hnsw_recall"]["at_depth"]["depth"] == 100
    assert f["hnsw_recall"]["at_depth"]["ef_search"] == 100
    assert 0.0 <= f["hnsw_recall"]["at_depth"]["value"] <= 1.0
    assert list(f["configurations"]) == CONFIGURATIONS
    for figures in f["configurations"].values():
        assert 0 < figures["p50_ms"] <= figures["p95_ms"]
        assert 0.0 <= figures["ndcg@10"] <= 1.0
    # the nDCG@10 printed for bm25 is the metric engine's on the bm25 run
    qids = [q.id for q in collection.queries]
    bm25 = run_bm25(collection.resources, collection.queries, k=100)
    expected = evaluate(collection.qrels(), bm25.as_run(), ["ndcg@10"], Settings(trec_compat=True),
                        query_ids=qids).means["ndcg@10"]
    assert f["configurations"]["bm25"]["ndcg@10"] == expected
    assert f["beir_bm25_ndcg@10"] is None  # not a collection BEIR reports on
    assert f["goal_met"] is (f["hnsw_recall"]["value"] >= 0.99)
    table = lines[-1]
    for label in ("dense (HNSW)", "dense (exact)", "bm25", "fused"):
        assert f"| {label:<14} |" in table

    # again: everything comes from the cache, the model is not touched
    loads = embeddings.load_count
    again = search.benchmark_search(scifact_slice, database_url=url, say=lines.append)
    assert again["index"] | {"seconds": 0} == {"seconds": 0, "documents": SLICE_DOCS,
                                               "embedded": 0, "from_cache": SLICE_DOCS}
    assert again["query_embedding"]["embedded"] == 0
    assert again["query_embedding"]["from_cache"] == SLICE_QUERIES
    assert embeddings.load_count == loads
    assert {name: c["ndcg@10"] for name, c in again["configurations"].items()} == {
        name: c["ndcg@10"] for name, c in f["configurations"].items()}


def test_search_benchmark_refuses_bad_cutoffs(scifact_slice):
    with pytest.raises(InputError) as err:
        search.benchmark_search(scifact_slice, k=0, database_url="postgresql://unused/db")
    assert err.value.field == "k"


def test_cli_benchmarks(scifact_slice, searched, database_url, capsys):
    url = searched[0]  # its cache holds the slice already
    code = main(["benchmark", "search", "--dataset", str(scifact_slice), "--queries", "3",
                 "--database-url", url])
    out = capsys.readouterr().out
    assert "scifact-slice (test): 200 documents, 3 judged queries" in out
    assert code == (0 if "met   HNSW recall@10 >= 0.99" in out else 1)

    code = main(["benchmark", "embed", "--dataset", str(scifact_slice), "--texts", "2",
                 "--batch-size", "2", "--database-url", database_url])
    out = capsys.readouterr().out
    assert "embedding 2 texts, all-MiniLM-L6-v2, batch 2" in out
    assert code == (0 if "MISSED" not in out else 1)

    assert main(["benchmark", "search", "--dataset", str(scifact_slice), "--k", "0",
                 "--database-url", url]) == 2
    assert "expected a whole k >= 1" in capsys.readouterr().err


def test_score_benchmark_runs_every_tool_on_the_same_files_and_they_agree(tmp_path, capsys):
    """`benchmark score` small: trec_eval built from ../shared/tools, pytrec_eval (and ranx) as
    whole processes beside `searcheval score` on each id space and a large run, then the public
    API in-process; the numbers must agree."""
    from searcheval.bench import score

    lines: list[str] = []
    figures = score.benchmark_score(queries=60, depth=30, judged=8, repeat=1,
                                    trec_eval_source=ROOT.parent / "shared" / "tools" / "trec_eval",
                                    directory=tmp_path, id_spaces=(1800, 40), large_queries=90,
                                    ranx=True, out=lines.append)
    cases = figures["cases"]
    assert list(cases) == ["60 x 30, ids from 1,800 (an id per row)", "60 x 30, ids from 40",
                           "90 x 30, ids from 2,700 (an id per row)"]
    for label, case in cases.items():
        tools = ["searcheval", "trec_eval"] + ([] if label.startswith("90") else
                                               ["pytrec_eval", "ranx"])
        assert list(case["seconds"]) == tools
        assert all(case["seconds"][t] > 0 and case["peak_bytes"][t] > 0 for t in tools)
        assert case["agree"] is True and case["agreement"]["trec_eval"] <= 5e-5
        assert case["speedup_vs_trec_eval"] == pytest.approx(
            case["seconds"]["trec_eval"] / case["seconds"]["searcheval"])
    assert figures["speedup_vs_trec_eval"] == min(c["speedup_vs_trec_eval"]
                                                  for c in cases.values())
    assert lines[1].split()[:2] == ["run", "searcheval"]
    assert [line.split(",")[0] for line in lines[2:5]] == ["60 x 30", "60 x 30", "90 x 30"]
    # the generated files are what the run says: 60 queries x 30 results, 8 judged each, every
    # row of the first its own document
    run = (tmp_path / "q60-ids1800" / "run.trec").read_text().splitlines()
    assert len(run) == 60 * 30 and len({line.split()[2] for line in run}) == 60 * 30
    assert len((tmp_path / "q60-ids1800" / "qrels.trec").read_text().splitlines()) == 60 * 8
    # in-process: every shape, the defaults and trec_compat, agreeing with pytrec_eval
    assert set(figures["in_process"]) == {"dicts", "DataFrame, string ids",
                                          "DataFrame, integer ids", "numpy arrays, integer ids"}
    assert figures["in_process_agreement"] <= 1e-9
    assert figures["in_process_defaults_agreement"] <= 1e-12


def test_the_generator_draws_distinct_documents_with_popular_ones():
    """Each query's documents are distinct; a small space is used whole and its low numbers
    (the popular documents) come up more often than its high ones."""
    import numpy as np

    from searcheval.bench.score import document_ids, draw_documents

    values = draw_documents(np.random.default_rng(0), 500, 60, 200)
    assert all(len(set(row)) == 60 for row in values.tolist())
    counts = np.bincount(values.ravel(), minlength=200)
    assert counts[:20].sum() > counts[-20:].sum()
    ids = document_ids(np.arange(1000), 1000).to_pylist()
    assert len(set(ids)) == 1000 and len({len(i) for i in ids}) > 1  # distinct, varying length


def test_score_benchmark_refuses_bad_counts(capsys):
    assert main(["benchmark", "score", "--queries", "0"]) == 2
    assert "--queries" in capsys.readouterr().err


def test_run_benchmark_times_whole_runs_and_where_their_time_goes():
    """`benchmark run` on the example project's fixtures (`make run`'s data): raw
    sentence-transformers, then a cold, a warm and a temporary-server `searcheval run` as real
    processes in a fresh folder. The cold run embeds every text and starts the folder's kept
    Prefect server, the warm ones embed nothing and reuse it; each run's stages add up to its
    wall time; the goals are what the numbers say, and the server is stopped at the end."""
    from searcheval.bench import run

    lines: list[str] = []
    figures = run.benchmark_run(ROOT / "fixtures", project=ROOT, warm_runs=1, out=lines.append)
    texts = figures["texts"]
    assert texts == 18 + 15  # the fixtures' 18 documents and 15 queries, each text once
    assert figures["cold"]["embeddings"]["embedded"] == texts
    for warm in figures["warm"]:
        assert (warm["embeddings"]["embedded"], warm["embeddings"]["from_cache"]) == (0, texts)
    # the stage table: every column adds up to its run's wall time (each cell printed to 0.01)
    table = lines[lines.index("where the time goes (seconds; warm: the median run)") + 3:]
    table = [line for line in table[:table.index("")]]
    *stages, whole = [[cell.strip() for cell in line.split("|")[1:-1]] for line in table]
    assert whole[0] == "whole process"
    [median] = figures["warm"]
    for column, wall in enumerate((figures["cold"]["wall_s"], median["wall_s"],
                                   figures["temporary"]["wall_s"]), start=1):
        cells = [float(stage[column]) for stage in stages if stage[column]]
        assert sum(cells) == pytest.approx(float(whole[column]), abs=0.005 * len(cells) + 1e-9)
        assert float(whole[column]) == pytest.approx(wall, abs=0.01)
    by_name = {stage[0]: stage for stage in stages}
    server = by_name["Prefect server: reached (or started)"]
    assert float(server[1]) > float(server[2])  # the cold run started it, the warm one reused it
    # the temporary run reaches no server before its flow (Prefect starts one inside the flow
    # run), and starting it costs the temporary run more than the warm one's reuse
    assert float(server[3]) < 0.5
    assert figures["temporary"]["wall_s"] > median["wall_s"]
    assert float(by_name["tasks search: every configuration's shards"][2]) > 0
    goals = figures["goals"]
    assert goals["warm <= 8 s"] == (figures["warm_s"] <= 8)  # the fixtures: `make run`'s goal
    assert goals["cold <= 1.15 x raw + 20 s"] == (
        figures["cold"]["wall_s"] <= 1.15 * figures["raw"]["encode_s"] + 20)
    assert goals["the kept server stopped, no process left"] is True
    assert figures["goal_met"] == all(goals.values())
    assert any(line.startswith("goal: warm <= 8 s: ") for line in lines)