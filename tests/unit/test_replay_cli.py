"""`searcheval replay`: JSON contract, exit codes 0 / 1 / 2, A/B, the fixtures, the benchmark."""

import json
from pathlib import Path

import pytest

from searcheval.bench.replay import benchmark_replay
from searcheval.cli import build_parser, main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def rec(tid, retrieved, segment="web", **fields):
    return {"trace_id": tid, "ts": "2026-12-01T10:00:00Z", "query": f"query {tid}",
            "segment": segment, "retrieved_ids": retrieved, **fields}


def write(tmp_path, name, rows):
    path = tmp_path / name
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def run(capsys, *args):
    code = main(["replay", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def simple(tmp_path):
    traces = write(tmp_path, "traces.jsonl", [
        rec("t1", ["a", "b"], relevant_ids=["a"]),  # mrr 1
        rec("t2", ["a", "b"], relevant_ids=["b"]),  # mrr 1/2
        rec("t3", ["a", "b"], segment="app", relevance_scores={"b": 3}),  # mrr 1/2
        rec("t4", ["a", "b"], segment="app"),  # unlabelled
    ])
    return tmp_path, traces


def test_json_contract_and_pass(simple, capsys):
    tmp_path, traces = simple
    thresholds = write(tmp_path, "t.json", [{"default": {"mrr": 0.5}, "min_coverage": 0.75}])
    code, out, _ = run(capsys, "--traces", traces, "--thresholds", thresholds, "--metrics", "mrr",
                       "--format", "json")
    data = json.loads(out)
    assert code == 0
    assert list(data)[:5] == ["passed", "traces", "coverage", "segments", "failures"]
    assert data["passed"] is True and data["traces"] == 4 and data["failures"] == []
    assert data["segments"] == {"app": {"mrr": 1 / 2}, "web": {"mrr": (1 + 1 / 2) / 2}}
    assert data["coverage"]["share"] == 3 / 4
    assert data["coverage"]["segments"]["app"] == {"share": 1 / 2, "labelled": 1,
                                                   "unlabelled": 1, "traces": 2}
    assert data["overall"] == {"mrr": (1 + 1 / 2 + 1 / 2) / 3}
    assert data["bad_lines"]["count"] == 0 and data["stale_labels"] is None
    assert data["ab"] is None


def test_threshold_miss_exits_1_with_the_failure(simple, capsys):
    tmp_path, traces = simple
    thresholds = write(tmp_path, "t.json", [{"default": {"mrr": 0.8},
                                             "segments": {"app": {"mrr": 0.4}}}])
    code, out, _ = run(capsys, "--traces", traces, "--thresholds", thresholds, "--format", "json")
    data = json.loads(out)
    assert code == 1 and data["passed"] is False
    # web: (1 + 1/2) / 2 < 0.8 misses; app: 1/2 >= its own floor 0.4
    assert [{k: f[k] for k in ("segment", "metric", "value", "threshold")}
            for f in data["failures"]] == [{"segment": "web", "metric": "mrr",
                                            "value": (1 + 1 / 2) / 2, "threshold": 0.8}]
    assert data["failures"][0]["message"] == "segment=web mrr=0.750 < 0.800 (-0.050)"
    assert data["metrics"] == ["ndcg@10", "mrr", "precision@10", "recall@20", "map"]


def test_threshold_miss_table(simple, capsys):
    tmp_path, traces = simple
    thresholds = write(tmp_path, "t.json", [{"default": {"mrr": 0.8}}])
    code, out, _ = run(capsys, "--traces", traces, "--thresholds", thresholds)
    assert code == 1
    assert "FAILED: 2 miss(es)" in out
    assert "  segment=app mrr=0.500 < 0.800 (-0.300)" in out.splitlines()
    assert "  segment=web mrr=0.750 < 0.800 (-0.050)" in out.splitlines()


def test_coverage_under_the_minimum_exits_1(simple, capsys):
    tmp_path, traces = simple
    thresholds = write(tmp_path, "t.json", [{"min_coverage": 0.8}])
    code, out, _ = run(capsys, "--traces", traces, "--thresholds", thresholds, "--format", "json")
    data = json.loads(out)
    assert code == 1
    assert data["coverage"]["passed"] is False
    assert data["failures"][0] == {"segment": "(all)", "metric": "coverage", "value": 3 / 4,
                                   "threshold": 0.8, "delta": 3 / 4 - 0.8,
                                   "message": "segment=(all) coverage=0.750 < 0.800 (-0.050)"}


def test_too_many_bad_lines_refused_in_one_line(tmp_path, capsys):
    traces = write(tmp_path, "traces.jsonl", [rec("t1", ["a"]), "{oops", rec("t3", ["a"])])
    code, out, err = run(capsys, "--traces", traces)
    assert code == 2 and out == ""
    assert err == (f"searcheval: {traces}: 1 of 3 lines are bad (33.3%, more than the 1.0% "
                   "allowed); first, line 2: invalid JSON: Expecting property name enclosed in "
                   "double quotes (column 2)\n")


def test_bad_lines_within_the_share_are_counted(tmp_path, capsys):
    traces = write(tmp_path, "traces.jsonl", [rec("t1", ["a"], relevant_ids=["a"]),
                                              rec("t2", ["a", "a"]), rec("t3", ["a"])])
    code, out, _ = run(capsys, "--traces", traces, "--max-bad-share", "0.5", "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["traces"] == 2
    assert data["bad_lines"] == {"count": 1, "lines": 3, "share": 1 / 3, "max_share": 0.5,
                                 "first": [{"line": 2, "reason": "field 'retrieved_ids': "
                                            "duplicate id 'a' at positions 1 and 2"}]}


@pytest.mark.parametrize("args, message", [
    (["--metrics", "ndcg"], "--metrics: metric 'ndcg' needs a cutoff, e.g. ndcg@10"),
    (["--relevance-level", "4"], "--relevance-level: expected a relevance level in 1..3, got 4"),
    (["--thresholds", "missing.json"], "missing.json: file not found"),
    (["--traces-b", "x.jsonl", "--configurations", "a,b"], "--configurations: "
                                                            "--configurations splits one"),
])
def test_refused_options(simple, capsys, args, message):
    _, traces = simple
    code, _, err = run(capsys, "--traces", traces, *args)
    assert code == 2 and message in err and err.count("\n") == 1


def test_ab_from_two_files(tmp_path, capsys):
    a = write(tmp_path, "a.jsonl", [rec("a1", ["x", "r"], query_id="q1", relevant_ids=["r"],
                                        configuration="control"),
                                    rec("a2", ["r"], query_id="q2", relevant_ids=["r"],
                                        configuration="control")])
    b = write(tmp_path, "b.jsonl", [rec("b1", ["r"], query_id="q1", relevant_ids=["r"],
                                        configuration="treatment"),
                                    rec("b2", ["r"], query_id="q2", relevant_ids=["r"],
                                        configuration="treatment")])
    code, out, _ = run(capsys, "--traces", a, "--traces-b", b, "--metrics", "mrr", "--format",
                       "json")
    ab = json.loads(out)["ab"]
    assert code == 0
    assert (ab["a"], ab["b"], ab["pairs"]) == ("control", "treatment", 2)
    assert ab["segments"]["web"]["mrr"] == {"pairs": 2, "wins": 1, "losses": 0, "ties": 1,
                                            "mean_a": (1 / 2 + 1) / 2, "mean_b": 1.0,
                                            "delta": 1.0 - (1 / 2 + 1) / 2,
                                            "p_value": 4 / 4}  # d = (1/2, 0): |sum| is 1/2
                                                               # under every sign flip
    assert ab["b_report"]["traces"] == 2


def test_ab_from_one_file_with_two_configurations_table(tmp_path, capsys):
    traces = write(tmp_path, "t.jsonl", [
        rec("a1", ["x", "r"], query_id="q1", relevant_ids=["r"], configuration="v1"),
        rec("b1", ["r"], query_id="q1", relevant_ids=["r"], configuration="v2")])
    code, out, _ = run(capsys, "--traces", traces, "--metrics", "mrr")
    assert code == 0
    assert "A/B: v1 (A, 1 traces) vs v2 (B, 1 traces, coverage 100.0%)" in out
    row = next(line for line in out.splitlines() if line.startswith("(all)") and "mrr" in line)
    assert row.split() == ["(all)", "mrr", "1", "1", "0", "0", "0.5000", "1.0000", "+0.5000",
                           "1.0000"]


def test_fixtures_without_and_with_judgments(capsys):
    traces, thresholds = FIXTURES / "traces.jsonl", FIXTURES / "thresholds.json"
    code, out, _ = run(capsys, "--traces", traces, "--thresholds", thresholds, "--format", "json")
    data = json.loads(out)
    # 19 traces carry relevance_scores, 11 relevant_ids; 10 carry no label: 30 of 40 < 0.8
    assert code == 1 and data["coverage"]["share"] == 30 / 40
    assert [f["metric"] for f in data["failures"]] == ["coverage"]
    code, out, _ = run(capsys, "--traces", traces, "--thresholds", thresholds, "--catalog",
                       FIXTURES / "catalog.json", "--judgments", FIXTURES / "judgments.csv",
                       "--queries", FIXTURES / "golden_queries.json", "--format", "json")
    data = json.loads(out)
    # judgments label 6 of the 10 (5 by query_id, 1 by its text); 3 labels name retired
    # resources, and one trace loses its only label: (30 + 6 - 1) of 40
    assert code == 0 and data["passed"] is True
    assert data["coverage"]["share"] == 35 / 40
    assert data["labels"] == {"relevance_scores": 18, "relevant_ids": 11, "judgments": 6,
                              "none": 5}
    assert data["stale_labels"] == {"dropped": 3, "traces": 3, "left_unlabelled": 1}
    assert sorted(data["segments"]) == ["agent-api", "dashboard", "mcp-tool"]


def test_benchmark_replay_is_registered_and_runs_small(capsys, monkeypatch):
    args = build_parser().parse_args(["benchmark", "replay", "--traces", "5"])
    assert (args.traces, args.depth) == (5, 20)
    # ru_maxrss here is the peak of the whole test session (every model and benchmark before
    # this test), not the benchmark's: its memory budget is checked where it runs as a process
    # of its own (`searcheval benchmark replay`); here, the agreement and the report
    monkeypatch.setattr("searcheval.bench.replay.MEMORY_BUDGET", float("inf"))
    code = benchmark_replay(traces=400, depth=8, docs=2000, queries=50)
    out = capsys.readouterr().out
    assert code == 0
    assert "peak memory (ru_maxrss):" in out
    assert "agreement with the engine on plain dicts: max |difference| = 0.0e+00" in out


def test_output_writes_the_json_and_the_report(simple, capsys):
    tmp_path, traces = simple
    code, out, _ = run(capsys, "--traces", traces, "--metrics", "mrr", "--output",
                       tmp_path / "out", "--format", "json")
    assert code == 0
    assert json.loads((tmp_path / "out" / "replay.json").read_text()) == json.loads(out)
    assert (tmp_path / "out" / "report.md").read_text().startswith("# searcheval replay: PASSED")


@pytest.mark.parametrize("args, message", [
    (["--from-db", "--traces", "t.jsonl"], "argument --traces: not allowed with argument "
                                           "--from-db"),
    ([], "one of the arguments --traces --from-db is required"),
])
def test_one_source_exactly_usage_errors(capsys, args, message):
    with pytest.raises(SystemExit) as exit_:
        main(["replay", *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err == f"searcheval: {message}\n"


def test_from_db_has_no_second_file(capsys):
    code, out, err = run(capsys, "--from-db", "--traces-b", "b.jsonl")
    assert code == 2 and out == ""
    assert err.startswith("searcheval: --traces-b: --traces-b is a second file against "
                          "--traces; with --from-db split the table with --configurations")


def ab_files(tmp_path, losing: int):
    """A finds the relevant document first on 6 queries; B finds it second on `losing` of them."""
    a = write(tmp_path, "a.jsonl", [rec(f"a{i}", ["r", "x"], query_id=f"q{i}", relevant_ids=["r"],
                                        configuration="control") for i in range(6)])
    b = write(tmp_path, "b.jsonl", [rec(f"b{i}", ["x", "r"] if i < losing else ["r", "x"],
                                        query_id=f"q{i}", relevant_ids=["r"],
                                        configuration="treatment") for i in range(6)])
    return a, b


def test_ab_verdict_b_loses_with_0_wins_and_6_losses_and_exits_1(tmp_path, capsys):
    a, b = ab_files(tmp_path, 6)
    code, out, _ = run(capsys, "--traces", a, "--traces-b", b, "--metrics", "mrr", "--format",
                       "json")
    doc = json.loads(out)
    assert code == 1 and doc["passed"] is False and doc["ab"]["verdict"] == "B loses"
    # 6 losses > 0 wins; and the mean drops by 1/2 with p = 2 / 2^6 (all signs alike) <= 0.05
    assert [(x["kind"], x["losses"], x["wins"]) for x in doc["ab"]["losing"]] == \
        [("losses", 6, 0), ("significant-drop", 6, 0)]
    assert doc["ab"]["losing"][1]["p_value"] == 2 / 2**6
    code, out, _ = run(capsys, "--traces", a, "--traces-b", b, "--metrics", "mrr")
    assert code == 1
    assert "A/B verdict: B loses" in out and "B loses on mrr: 6 queries worse, 0 better" in out
    assert out.rstrip().splitlines()[-3] == "FAILED: 2 miss(es)"


def test_ab_verdict_allows_losses_up_to_max_losses_when_the_drop_is_not_significant(tmp_path,
                                                                                    capsys):
    a, b = ab_files(tmp_path, 3)  # 3 losses, 0 wins: p = 2 / 2^3 > 0.05
    assert run(capsys, "--traces", a, "--traces-b", b, "--metrics", "mrr")[0] == 1
    code, out, _ = run(capsys, "--traces", a, "--traces-b", b, "--metrics", "mrr",
                       "--max-losses", "3", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["ab"]["verdict"] == "B holds" and doc["ab"]["losing"] == []
    assert run(capsys, "--traces", a, "--traces-b", b, "--max-losses", "-1")[0] == 2
