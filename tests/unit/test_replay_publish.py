"""What the replay CLI and flow share: options, sources, references, sides, and publishing
(replay.json / report.md, history rows, the alert, the artifact rows). Known answers."""

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from searcheval.errors import InputError
from searcheval.io.files import sha256_file
from searcheval.io.traces import TraceTable, parse_trace
from searcheval.replay.compose import (
    choose_sides,
    load_references,
    new_replay_id,
    plan_replay,
    replay_settings,
    replay_source,
)
from searcheval.replay.report import (
    replay_alert,
    replay_document,
    replay_history,
    replay_markdown,
    replay_table_rows,
    write_replay_outputs,
)
from searcheval.replay.scoring import ALL, parse_thresholds, replay

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
T0 = datetime(2026, 12, 2, 8, tzinfo=timezone.utc)


def trace(tid, retrieved, segment, configuration="fused", **fields):
    return parse_trace({"trace_id": tid, "ts": "2026-12-01T10:00:00Z", "query": f"q {tid}",
                        "segment": segment, "configuration": configuration,
                        "retrieved_ids": retrieved, **fields})


def table(*traces, source="mem"):
    return TraceTable.from_traces(traces, source=source)


THRESHOLDS = parse_thresholds({"default": {"mrr": 0.8},
                               "segments": {"app": {"mrr": 0.4, "min_coverage": 0.9}},
                               "min_coverage": 0.8})


@pytest.fixture
def report():
    tab = table(trace("t1", ["a", "b"], "web", relevant_ids=["a"]),  # mrr 1
                trace("t2", ["a", "b"], "web", relevant_ids=["b"]),  # mrr 1/2
                trace("t3", ["a", "b"], "app", relevance_scores={"b": 3}),  # mrr 1/2
                trace("t4", ["a", "b"], "app"))  # unlabelled
    sides, excluded = choose_sides(tab)
    return replay(sides, metrics=["mrr"], thresholds=THRESHOLDS, excluded=excluded)


def test_the_misses_of_the_report(report):
    # coverage 3/4 < 0.8; app coverage 1/2 < 0.9; web mrr (1 + 1/2) / 2 < 0.8; app mrr 1/2 >= 0.4
    assert [(f.segment, f.metric, f.value) for f in report.failures] == [
        (ALL, "coverage", 3 / 4), ("app", "coverage", 1 / 2), ("web", "mrr", (1 + 1 / 2) / 2)]


def test_history_rows_per_segment_with_counts_and_floors(report):
    run, rows = replay_history(report, run_id="r1", source="replay:mem", started_at=T0,
                               input_hashes={"thresholds": "abc"}, label="v2",
                               thresholds=THRESHOLDS)
    assert {k: run[k] for k in ("run_id", "source", "configuration", "traces", "labelled",
                                "coverage", "min_coverage", "passed", "input_hashes")} == {
        "run_id": "r1", "source": "replay:mem", "configuration": "fused", "traces": 4,
        "labelled": 3, "coverage": 3 / 4, "min_coverage": 0.8, "passed": False,
        "input_hashes": {"thresholds": "abc"}}
    assert run["summary"]["label"] == "v2" and len(run["summary"]["failures"]) == 3
    assert [(r["segment"], r["metric"], r["value"], r["n"], r["threshold"]) for r in rows] == [
        ("app", "mrr", 1 / 2, 1, 0.4), ("app", "coverage", 1 / 2, 2, 0.9),
        ("web", "mrr", (1 + 1 / 2) / 2, 2, 0.8), ("web", "coverage", 2 / 2, 2, None),
        (ALL, "mrr", (1 + 1 / 2 + 1 / 2) / 3, 3, None), (ALL, "coverage", 3 / 4, 4, 0.8)]
    assert {r["configuration"] for r in rows} == {"fused"}


def test_the_alert_names_each_miss(report):
    alert = replay_alert(report, "r1", where="out/report.md")
    assert [(r["kind"], r["segment"]) for r in alert.reasons] == [
        ("coverage", ALL), ("coverage", "app"), ("threshold", "web")]
    assert alert.reasons[0]["summary"] == ("annotation coverage of (all) is 0.750 (3 of 4 traces "
                                           "labelled), under the minimum 0.800")
    assert alert.reasons[1]["summary"] == ("annotation coverage of app is 0.500 (1 of 2 traces "
                                           "labelled), under the minimum 0.900")
    assert alert.reasons[2]["summary"] == ("replay threshold missed: segment=web mrr=0.750 < "
                                           "0.800 (-0.050)")
    assert alert.subject == "searcheval run r1: coverage, threshold"
    assert alert.where == "out/report.md"


def test_a_passing_replay_has_no_alert():
    sides, _ = choose_sides(table(trace("t1", ["a"], "web", relevant_ids=["a"])))
    assert replay_alert(replay(sides, metrics=["mrr"], thresholds=THRESHOLDS), "r") is None


def test_artifact_rows_markdown_and_files(report, tmp_path):
    rows = replay_table_rows(report)
    assert rows == [
        {"segment": "app", "traces": 2, "labelled": 1, "coverage": 0.5, "mrr": 0.5,
         "status": "missed: coverage"},
        {"segment": "web", "traces": 2, "labelled": 2, "coverage": 1.0, "mrr": 0.75,
         "status": "missed: mrr"},
        {"segment": ALL, "traces": 4, "labelled": 3, "coverage": 0.75,
         "mrr": round((1 + 1 / 2 + 1 / 2) / 3, 4), "status": "missed: coverage"}]
    md = replay_markdown(report, run_id="r1")
    assert md.startswith("# searcheval replay r1: FAILED (3 miss(es))\n")
    assert "| web | 2 | 2 | 100.0% | 0.7500 | missed: mrr |" in md.splitlines()
    assert "- segment=web mrr=0.750 < 0.800 (-0.050)" in md.splitlines()
    paths = write_replay_outputs(report, tmp_path / "out", run_id="r1")
    doc = json.loads(paths["replay.json"].read_text())
    assert doc == json.loads(json.dumps(replay_document(report, run_id="r1")))
    assert list(doc)[:5] == ["passed", "traces", "coverage", "segments", "failures"]
    assert doc["run_id"] == "r1" and "run_id" not in replay_document(report)
    assert paths["report.md"].read_text() == md


def test_ab_history_rows_carry_both_sides():
    a = table(trace("a1", ["x", "r"], "web", "v1", query_id="q1", relevant_ids=["r"]))
    b = table(trace("b1", ["r"], "web", "v2", query_id="q1", relevant_ids=["r"]))
    sides, _ = choose_sides(a, b)
    assert [name for name, _ in sides] == ["v1", "v2"]
    report = replay(sides, metrics=["mrr"], thresholds=THRESHOLDS)
    _, rows = replay_history(report, run_id="r", source="s", started_at=T0,
                             thresholds=THRESHOLDS)
    mrr = {(r["configuration"], r["segment"]): (r["value"], r["threshold"]) for r in rows
           if r["metric"] == "mrr"}
    assert mrr == {("v1", "web"): (1 / 2, 0.8), ("v1", ALL): (1 / 2, None),
                   ("v2", "web"): (1.0, None), ("v2", ALL): (1.0, None)}
    # two files of the same configuration are named by their files
    same = choose_sides(table(trace("a1", ["x"], "web"), source="a.jsonl"),
                        table(trace("b1", ["x"], "web"), source="b.jsonl"))[0]
    assert [name for name, _ in same] == ["a.jsonl", "b.jsonl"]


@pytest.mark.parametrize("args, message", [
    ((None, None, False), "field 'traces': expected `traces` (a file) or `from_db`"),
    (("t.jsonl", None, True), "field 'traces': expected `traces` (a file) or `from_db`, not both"),
    ((None, "b.jsonl", True), "field 'traces_b': `traces_b` is a second file"),
    (("t.jsonl", "b.jsonl", False, ["x"]), "field 'configurations': `configurations` splits"),
])
def test_exactly_one_source(args, message):
    with pytest.raises(InputError) as err:
        replay_source(*args)
    assert str(err.value).startswith(message)


def test_sources_name_the_history_source():
    assert replay_source(None, None, True) == "replay:db"
    assert replay_source("t.jsonl") == "replay:t.jsonl"
    assert replay_source("a.jsonl", "b.jsonl") == "replay:a.jsonl,b.jsonl"
    assert new_replay_id(T0).startswith("replay-20261202T080000Z-")


@pytest.mark.parametrize("kwargs, message", [
    ({"max_grade": 0}, "field 'max_grade': expected a top grade >= 1, got 0"),
    ({"relevance_level": 4}, "field 'relevance_level': expected a relevance level in 1..3"),
    ({"max_bad_share": 2.0}, "field 'max_bad_share': expected a share in [0, 1], got 2.0"),
    ({"permutations": 0}, "field 'permutations': expected at least 1 permutation"),
])
def test_settings_refusals(kwargs, message):
    with pytest.raises(InputError) as err:
        replay_settings(**kwargs)
    assert str(err.value).startswith(message)


def test_references_from_the_fixtures():
    refs = load_references(plan_replay(traces="unused.jsonl",
                                       thresholds=FIXTURES / "thresholds.json",
                                       catalog=FIXTURES / "catalog.json",
                                       judgments=FIXTURES / "judgments.csv",
                                       queries=FIXTURES / "golden_queries.json"))
    assert refs.thresholds.min_coverage == 0.8
    assert len(refs.catalog) == 18 and len(refs.queries) == 15
    assert sum(len(v) for v in refs.judgments.values()) == 15 * 18
    assert refs.input_hashes == {name: sha256_file(FIXTURES / file) for name, file in [
        ("thresholds", "thresholds.json"), ("catalog", "catalog.json"),
        ("judgments", "judgments.csv"), ("queries", "golden_queries.json")]}
    empty = load_references(plan_replay(traces="unused.jsonl"))
    assert (empty.thresholds, empty.catalog, empty.judgments, empty.input_hashes) == \
        (None, None, None, {})
