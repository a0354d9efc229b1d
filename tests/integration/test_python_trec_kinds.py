"""The `python` and `trec` kinds, and kinds from the `searcheval.kinds` entry-point group: a
retriever that asks the example search service over real HTTP, a run file of its answers, each
scored exactly as the service's own answers are."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from searcheval import load_collection
from searcheval.errors import InputError
from searcheval.io.trec import write_trec_run
from searcheval.metrics.engine import evaluate
from searcheval.metrics.scoring import score_run
from searcheval.rankers import registry
from searcheval.rankers.configs import configurations_from
from searcheval.rankers.registry import RunContext, run_configuration
from searcheval.types import RankedRun

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
COLLECTION = load_collection(fixtures=ROOT / "fixtures")
QUERIES = COLLECTION.queries
METRICS = ("ndcg@10", "mrr", "recall@20")

RETRIEVER = '''
import httpx

def retrieve(query, k, base_url, fail_on=None, ids_only=False):
    if query.id == fail_on:
        raise RuntimeError("index is being rebuilt")
    f = query.filters
    params = {"q": query.text, "k": k}
    params.update({n: v for n, v in (("network", f.network), ("asset", f.asset),
                                     ("max_price_usd", f.max_price_usd)) if v is not None})
    hits = httpx.get(base_url + "/search", params=params).json()["hits"]
    if ids_only:
        return [h["id"] for h in hits]
    return [(h["id"], h["score"]) for h in hits]

def broken(query, k):
    return {"not": "a list"}
'''


@pytest.fixture
def service(example_service):
    example_service.set_knobs()
    yield example_service


@pytest.fixture
def retriever_folder(tmp_path):
    folder = tmp_path / "src"
    folder.mkdir()
    (folder / "team_retriever.py").write_text(RETRIEVER)
    yield folder
    sys.modules.pop("team_retriever", None)


def one(entry: dict, file: str = "test.yaml"):
    return configurations_from({"configurations": {"mine": {**entry, "served": True}}},
                               file)["mine"]


def service_answers(service) -> dict:
    out = {}
    for q in QUERIES:
        f = q.filters
        params = {"q": q.text, "k": 100}
        params.update({n: v for n, v in (("network", f.network), ("asset", f.asset),
                                         ("max_price_usd", f.max_price_usd)) if v is not None})
        out[q.id] = [(h["id"], h["score"])
                     for h in httpx.get(f"{service.url}/search", params=params).json()["hits"]]
    return out


def direct(answers) -> dict:
    return evaluate(COLLECTION.qrels(), {q: dict(h) for q, h in answers.items()}, list(METRICS),
                    query_ids=[q.id for q in QUERIES]).means


def test_a_python_retriever_is_scored_as_its_own_answers(service, retriever_folder):
    configuration = one({"kind": "python", "params": {
        "callable": "team_retriever:retrieve", "python_path": str(retriever_folder),
        "options": {"base_url": service.url}, "concurrency": 2}})
    run = run_configuration(configuration, RunContext(), QUERIES, None, 100)
    assert run.errors == {} and run.configuration == "mine"
    assert score_run(run, COLLECTION.qrels(), QUERIES, METRICS).means \
        == pytest.approx(direct(service_answers(service)), abs=1e-12)
    assert set(run.latency_ms) == {q.id for q in QUERIES}
    # ids alone keep the order they come in (scores n, n - 1, ...)
    ids_only = one({"kind": "python", "params": {
        "callable": "team_retriever:retrieve", "python_path": str(retriever_folder),
        "options": {"base_url": service.url, "ids_only": True}}})
    run = run_configuration(ids_only, RunContext(), QUERIES[:1], None, 100)
    ids = [d for d, _ in service_answers(service)[QUERIES[0].id]]
    assert run.results[QUERIES[0].id] == [(d, float(len(ids) - i)) for i, d in enumerate(ids)]


def test_a_failing_call_is_an_error_of_that_query(service, retriever_folder):
    failing = one({"kind": "python", "params": {
        "callable": "team_retriever:retrieve", "python_path": str(retriever_folder),
        "options": {"base_url": service.url, "fail_on": QUERIES[1].id}}})
    run = run_configuration(failing, RunContext(), QUERIES[:3], None, 100)
    assert run.errors == {QUERIES[1].id: {"cause": "RuntimeError: index is being rebuilt",
                                          "attempts": 1}}
    assert set(run.results) == {QUERIES[0].id, QUERIES[2].id}
    broken = one({"kind": "python", "params": {
        "callable": "team_retriever:broken", "python_path": str(retriever_folder)}})
    run = run_configuration(broken, RunContext(), QUERIES[:1], None, 100)
    assert run.errors[QUERIES[0].id]["cause"].startswith("bad return: ")
    with pytest.raises(InputError) as err:
        one({"kind": "python", "params": {"callable": "not a path"}})
    assert err.value.field == "mine.callable"
    missing = one({"kind": "python", "params": {"callable": "no_such_module_x:f"}})
    with pytest.raises(InputError) as err:
        run_configuration(missing, RunContext(), QUERIES[:1], None, 100)
    assert "cannot import no_such_module_x:f" in err.value.message


def test_a_trec_run_file_is_scored_as_the_answers_it_holds(service, tmp_path):
    answers = service_answers(service)
    path = write_trec_run(RankedRun("engine", {q: h for q, h in answers.items() if h}),
                          tmp_path / "runs" / "engine.trec")
    # relative to the configurations file
    configuration = one({"kind": "trec", "params": {"path": "runs/engine.trec"}},
                        file=str(tmp_path / "configurations.yaml"))
    assert configuration.params["path"] == str(path.resolve())
    run = run_configuration(configuration, RunContext(), QUERIES, None, 100)
    # TREC keeps 6 decimals of a score: the same ranks, so the same metrics
    assert score_run(run, COLLECTION.qrels(), QUERIES, METRICS).means \
        == pytest.approx(direct(answers), abs=1e-12)
    empty = [q for q, h in answers.items() if not h]
    assert empty and all(run.results[q] == [] for q in empty)  # missing: empty
    strict = one({"kind": "trec", "params": {"path": str(path), "missing": "error"}})
    run = run_configuration(strict, RunContext(), QUERIES, None, 100)
    assert set(run.errors) == set(empty)
    # another file is another configuration
    path.write_text(path.read_text().replace(" engine\n", " engine2\n", 1))
    assert one({"kind": "trec", "params": {"path": str(path)}}).sha256 != configuration.sha256
    (tmp_path / "bad.trec").write_text("q01 Q0 x 1\n")
    with pytest.raises(InputError) as err:
        one({"kind": "trec", "params": {"path": str(tmp_path / "bad.trec")}})
    assert err.value.line == 1


def test_a_packaged_kind_registers_through_the_entry_point_group(tmp_path, monkeypatch):
    (tmp_path / "fixed_kind.py").write_text(textwrap.dedent('''
        from searcheval.rankers.params import Param
        from searcheval.rankers.registry import Kind
        from searcheval.types import RankedRun

        def run(configuration, context, queries, vectors, k):
            doc = configuration.params["doc"]
            return RankedRun(configuration.name, {q.id: [(doc, 1.0)] for q in queries})

        KIND = Kind(name="fixed", params={"doc": Param("string")}, run=run)
    '''))
    dist = tmp_path / "fixed_kind-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fixed-kind\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[searcheval.kinds]\nfixed = fixed_kind:KIND\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(registry, "_kinds", dict(registry._kinds))
    configuration = one({"kind": "fixed", "params": {"doc": "weather-forecast"}})
    run = run_configuration(configuration, RunContext(), QUERIES[:2], None, 10)
    assert run.results == {q.id: [("weather-forecast", 1.0)] for q in QUERIES[:2]}
    with pytest.raises(InputError) as err:
        one({"kind": "fixed", "params": {}})
    assert err.value.field == "mine.doc"
