"""Like with like, on hand-made inputs whose arithmetic is written out: the same queries on both
sides, the judgments' changes since the baseline, which judgments count, and the pieces of an
engine that is down (fail fast, its cause, its URL without secrets)."""

from __future__ import annotations

import socket
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest

from searcheval.errors import InputError
from searcheval.evaluation.baseline import baseline_from_scores, diff_baselines
from searcheval.evaluation.gate import (
    check_gate,
    judgment_changes,
    judgment_changes_line,
    like_with_like_lines,
)
from searcheval.io.collection import load_collection
from searcheval.io.settings import check_judgment_sources, settings_from
from searcheval.judging.source import counted_sources
from searcheval.metrics.scoring import score_run
from searcheval.rankers.configs import FAIL_FAST_AFTER, load_configurations
from searcheval.rankers.breaker import Breaker
from searcheval.rankers.http import endpoint, transport_cause
from searcheval.types import Query, RankedRun

ROOT = Path(__file__).resolve().parents[2]
QUERIES = [Query(q, q, "c") for q in ("q1", "q2", "q3", "q4")]
QRELS = {q.id: {f"rel-{q.id}": 1} for q in QUERIES}


def scores(ranks: dict[str, int], failed: tuple[str, ...] = (), queries=QUERIES):
    """Each query's relevant document at `ranks[q]`; `failed` queries are errors of the run."""
    results = {}
    for qid, rank in ranks.items():
        docs = [f"junk{i}" for i in range(rank - 1)] + [f"rel-{qid}"]
        results[qid] = [(d, float(10 - i)) for i, d in enumerate(docs)]
    run = RankedRun("served", {q: r for q, r in results.items() if q not in failed},
                    errors={q: {"cause": "HTTP 500", "attempts": 3} for q in failed})
    return score_run(run, QRELS, queries, ("mrr", "ndcg@10", "recall@20"))


def test_a_failed_query_is_left_out_of_both_sides_of_the_gate():
    baseline = baseline_from_scores(scores({"q1": 1, "q2": 2, "q3": 4, "q4": 1}), run_id="r0",
                                    model=None)
    assert baseline.metrics["mrr"] == pytest.approx((1 + 1 / 2 + 1 / 4 + 1) / 4)
    # q3 (the baseline's worst query) fails today; the others rank as before
    now = scores({"q1": 1, "q2": 2, "q3": 4, "q4": 1}, failed=("q3",))
    assert now.means["mrr"] == pytest.approx((1 + 1 / 2 + 1) / 3)  # higher, over fewer queries
    assert now.incomplete_means == "1 query failed: means over 3 of 4"
    result = check_gate(baseline, now, tolerance=0.0)
    mrr = result.compared["mrr"]
    # both sides over q1, q2, q4: no change, where the plain means differ by +0.0625
    assert mrr["baseline"] == pytest.approx((1 + 1 / 2 + 1) / 3)
    assert mrr["value"] == pytest.approx((1 + 1 / 2 + 1) / 3)
    assert mrr["delta"] == pytest.approx(0.0) and mrr["queries"] == 3
    assert result.passed and not result.improved
    assert like_with_like_lines(result.like_with_like)[0] == (
        "1 query failed: the gate compares means over the 3 queries both sides answered")


def test_a_drop_on_the_queries_both_answered_trips_even_when_the_plain_mean_rose():
    baseline = baseline_from_scores(scores({"q1": 1, "q2": 1, "q3": 10, "q4": 1}), run_id="r0",
                                    model=None)
    now = scores({"q1": 1, "q2": 2, "q3": 1, "q4": 1}, failed=("q3",))
    # plain means: (1 + 1 + 1/10 + 1) / 4 = 0.775 then, (1 + 1/2 + 1) / 3 = 0.833 now: "better";
    # over q1, q2, q4: 1.0 then, 0.833 now: a drop of 1/6
    result = check_gate(baseline, now, tolerance=0.02)
    assert not result.passed
    trip = next(t for t in result.tripped if t.metric == "mrr")
    assert trip.delta == pytest.approx((1 + 1 / 2 + 1) / 3 - 1)


def test_the_same_queries_on_both_sides_keep_the_plain_means():
    s = scores({"q1": 1, "q2": 2, "q3": 4, "q4": 1})
    result = check_gate(baseline_from_scores(s, run_id="r0", model=None), s, tolerance=0.0)
    assert result.passed and "queries" not in result.compared["mrr"]
    assert like_with_like_lines(result.like_with_like) == []


def test_judgment_changes_count_added_changed_removed_by_judge():
    then = {("q1", "d2"): 1, ("q2", "d4"): 1, ("q2", "d1"): 0}
    now = {("q1", "d2"): 1, ("q1", "d1"): 2, ("q1", "d3"): 1, ("q2", "d4"): 2}
    judges = {("q1", "d1"): "ann", ("q1", "d3"): "ann", ("q2", "d4"): "bob,dataset"}
    changes = judgment_changes(then, now, judges)
    assert (changes["added"], changes["changed"], changes["removed"]) == (2, 1, 1)
    assert changes["by_judge"] == {"ann": 2, "bob": 1, "dataset": 1}
    assert judgment_changes_line(changes) == ("judgments changed since the baseline: 2 grades "
                                              "added, 1 grade changed, 1 grade removed "
                                              "(by ann 2, bob 1, dataset 1)")
    assert judgment_changes_line(judgment_changes(then, dict(then))) is None


def test_which_judgments_count_is_a_dataset_setting_with_a_default_per_kind():
    assert check_judgment_sources("dataset") == "dataset"
    assert check_judgment_sources("all") == "all"
    assert check_judgment_sources("model,human") == ("human", "model")
    assert check_judgment_sources(["import"]) == ("import",)
    with pytest.raises(InputError) as error:
        settings_from({"judgment_sources": "clicks"}, file="ds/searcheval.yaml")
    assert error.value.field == "judgment_sources" and "expected dataset, all" in str(error.value)
    fixtures = load_collection(fixtures=ROOT / "fixtures")
    assert counted_sources(fixtures) == ("all", "default for a team's own judgments")
    assert counted_sources(fixtures, "dataset") == ("dataset", "run parameter judgment_sources")


def test_a_beir_dataset_counts_its_own_qrels_only_by_default(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "t", "text": "x"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "y"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    beir = load_collection(dataset=tmp_path)
    assert counted_sources(beir) == ("dataset", "default for a benchmark's qrels")
    (tmp_path / "searcheval.yaml").write_text("judgment_sources: [human]\n")
    counted, where = counted_sources(load_collection(dataset=tmp_path))
    assert counted == ("human",) and where.startswith("dataset setting in ")


def test_the_breaker_opens_after_failures_in_a_row_with_none_answered():
    breaker = Breaker(3)
    for _ in range(2):
        breaker.record(True, "connection refused")
    assert not breaker.open
    breaker.record(True, "connection refused")
    assert breaker.open
    assert breaker.skipped()["cause"] == ("not sent: the service looks down (3 queries failed "
                                          "in a row, none answered; first: connection refused)")
    answered = Breaker(3)
    answered.record(False)
    for _ in range(10):  # a service that answered once is not down: its failures are counted
        answered.record(True, "HTTP 500")
    assert not answered.open
    assert not Breaker(0).open  # 0: never


def test_a_closed_port_is_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(httpx.TransportError) as error:
        httpx.get(f"http://127.0.0.1:{port}/search", timeout=5)
    assert transport_cause(error.value) == "connection refused"


def test_the_endpoint_names_no_user_password_or_query(tmp_path):
    path = tmp_path / "configurations.yaml"
    path.write_text("configurations:\n  engine:\n    kind: http\n    served: true\n"
                    "    params:\n      base_url: https://search.example:9200\n"
                    "      url: /idx/_search?q={text}&size=10\n      id: 'hits[*].id'\n")
    engine = load_configurations(path).entries["engine"]
    assert endpoint(engine) == "https://search.example:9200/idx/_search"
    assert engine.fail_fast_after == FAIL_FAST_AFTER == 3
    # a user and password in the URL are refused when the file is loaded (docs/security.md);
    # the endpoint would not print them either
    unloaded = SimpleNamespace(params={"base_url": "https://user:hunter2@search.example:9200",
                                       "url": "/idx/_search?api_key=abc"})
    assert endpoint(unloaded) == "https://search.example:9200/idx/_search"
    path.write_text(path.read_text().replace("    served: true\n",
                                             "    served: true\n    fail_fast_after: 0\n"))
    assert load_configurations(path).entries["engine"].fail_fast_after == 0


def test_baseline_update_prints_what_changed_in_the_configuration():
    s = scores({"q1": 1, "q2": 1, "q3": 1, "q4": 1})
    old = baseline_from_scores(s, run_id="r0", model=None)
    old.configuration_hash, old.configuration_params = "a" * 64, {"k1": 0.9, "fields": {"t": 2}}
    new = baseline_from_scores(s, run_id="r1", model=None)
    new.configuration_hash, new.configuration_params = "b" * 64, {"k1": 1.2, "fields": {"t": 2}}
    lines = diff_baselines(old, new)
    assert "~ configuration_hash: aaaaaaaaaaaa -> bbbbbbbbbbbb" in lines
    assert "~ served.k1: 0.9 -> 1.2" in lines
    assert not any("fields.t" in line for line in lines)


def test_a_candidate_beside_the_served_one_is_compared_on_the_queries_both_answered():
    from searcheval.evaluation.pipeline import compare_candidate
    from searcheval.evaluation.report import candidate_lines

    served = scores({"q1": 1, "q2": 1, "q3": 1, "q4": 1})
    candidate = scores({"q1": 2, "q2": 1, "q3": 1, "q4": 1}, failed=("q4",))
    candidate.configuration = "candidate"
    side = compare_candidate({"served": served, "candidate": candidate}, "candidate", "served")
    # over q1, q2, q3: served MRR 1, candidate (1/2 + 1 + 1) / 3
    assert side["means"]["mrr"]["served"] == pytest.approx(1.0)
    assert side["means"]["mrr"]["candidate"] == pytest.approx((1 / 2 + 1 + 1) / 3)
    assert side["queries"] == 3 and side["same_queries"] is False
    assert candidate_lines(side)[0].endswith("(over the 3 queries both answered)")


def test_queries_only_one_side_has_are_named_for_the_side_that_has_them():
    """`run_only`: queries this run scored that the baseline lacks; `baseline_only`: the
    reverse. The baseline here scored q1..q3, the run q1..q4 (q4 is new)."""
    three = QUERIES[:3]
    baseline = baseline_from_scores(scores({"q1": 1, "q2": 2, "q3": 4}, queries=three),
                                    run_id="r0", model=None)
    result = check_gate(baseline, scores({"q1": 1, "q2": 2, "q3": 4, "q4": 1}), tolerance=0.0)
    queries = result.like_with_like["queries"]
    assert (queries["run_only"], queries["baseline_only"], queries["compared"]) == (1, 0, 3)
    assert like_with_like_lines(result.like_with_like) == [
        "the baseline lacks 1 of this run's queries: compared over the 3 both answered"]
    # the other way round: a baseline of four queries, a run (no failure) of three
    wider = baseline_from_scores(scores({"q1": 1, "q2": 2, "q3": 4, "q4": 1}), run_id="r0",
                                 model=None)
    result = check_gate(wider, scores({"q1": 1, "q2": 2, "q3": 4}, queries=three),
                        tolerance=0.0)
    queries = result.like_with_like["queries"]
    assert (queries["run_only"], queries["baseline_only"], queries["compared"]) == (0, 1, 3)
    assert like_with_like_lines(result.like_with_like) == [
        "this run lacks 1 of the baseline's queries: compared over the 3 both answered"]


def test_which_judgments_count_is_a_project_setting_too(tmp_path):
    from searcheval.project import load_project, resolve_run

    (tmp_path / "searcheval.yaml").write_text(
        "project: acme\ndatasets:\n  d:\n    dataset: data\n    judgment_sources: [human]\n")
    project = load_project(tmp_path / "searcheval.yaml")
    resolved = resolve_run({}, project=project)
    assert resolved.values["judgment_sources"] == ("human",)
    where = resolved.sources["judgment_sources"]
    assert where == f"project setting datasets.d.judgment_sources in {tmp_path / 'searcheval.yaml'}"
    fixtures = load_collection(fixtures=ROOT / "fixtures")
    assert counted_sources(fixtures, ("human",), where) == (("human",), where)
    (tmp_path / "searcheval.yaml").write_text(
        "project: acme\ndatasets:\n  d:\n    dataset: data\n    judgment_sources: clicks\n")
    with pytest.raises(InputError) as error:
        load_project(tmp_path / "searcheval.yaml")
    assert error.value.field == "datasets.d.judgment_sources"


def test_a_python_ranker_that_raises_every_time_is_asked_only_fail_fast_after_times(tmp_path):
    from searcheval.rankers.python import run_python

    (tmp_path / "raising_ranker.py").write_text(
        "calls = []\n"
        "def retrieve(query, k):\n"
        "    calls.append(query.id)\n"
        "    raise ConnectionError('vector store unreachable')\n")
    configurations = tmp_path / "configurations.yaml"
    configurations.write_text(
        "configurations:\n  mine:\n    kind: python\n    served: true\n    fail_fast_after: 2\n"
        f"    params: {{callable: 'raising_ranker:retrieve', python_path: '{tmp_path}'}}\n")
    configuration = load_configurations(configurations)["mine"]
    run = run_python(configuration, None, QUERIES, None, 10)
    import raising_ranker

    assert raising_ranker.calls == ["q1", "q2"]  # one call at a time (concurrency 1)
    assert run.results == {} and set(run.errors) == {"q1", "q2", "q3", "q4"}
    assert run.errors["q1"] == {"cause": "ConnectionError: vector store unreachable",
                                "attempts": 1}
    assert run.errors["q3"] == {"cause": "not sent: the ranker looks down (2 queries failed in a "
                                         "row, none answered; first: ConnectionError: vector "
                                         "store unreachable)", "attempts": 0, "not_sent": True}


def test_the_console_stars_a_mean_over_fewer_queries_and_says_why():
    from searcheval.evaluation.report import EvaluationResult, console_table

    partial = scores({"q1": 1, "q2": 2, "q3": 4, "q4": 1}, failed=("q3",))
    result = EvaluationResult(run_id="r1", started_at=None, finished_at=None, source="s",
                              input_hashes={}, model=None, scores={"served": partial}, gate=None)
    lines = console_table(result).splitlines()
    row = lines[1].split()
    assert row[0] == "served" and all(cell.endswith("*") for cell in row[1:4]), lines
    assert "  * served: 1 query failed: means over 3 of 4" in lines
