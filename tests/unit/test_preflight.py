"""The preflight: every input checked before any work, every problem collected, the gate never
silently off. Pure logic over real files (the fixtures, copied and broken), no database."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from searcheval.cli import main
from searcheval.errors import InputError
from searcheval.evaluation.preflight import Refused, RunRequest, preflight, webhook_problem

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fixtures(tmp_path) -> Path:
    target = tmp_path / "fixtures"
    shutil.copytree(ROOT / "fixtures", target,
                    ignore=shutil.ignore_patterns("traces*", "thresholds*", "*.md"))
    return target


@pytest.fixture
def baseline(tmp_path) -> Path:
    path = tmp_path / "baseline.json"
    shutil.copy(ROOT / "baseline.json", path)
    return path


def request(fixtures: Path, baseline: Path, **changes) -> RunRequest:
    return RunRequest(fixtures=str(fixtures), baseline=str(baseline), environ={}, **changes)


def fields(found) -> list[str | None]:
    return [p.field for p in found.problems]


def edit_baseline(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def test_the_shipped_inputs_pass_and_are_gated(fixtures, baseline):
    found = preflight(request(fixtures, baseline))
    assert found.ok, [str(p) for p in found.problems]
    assert found.collection is not None and len(found.collection.queries) == 15
    assert found.baseline.configuration == "fused"
    assert found.not_gated_reason is None


@pytest.mark.parametrize("tolerance", [float("nan"), float("inf"), float("-inf"), -0.01, 1.5,
                                       10 ** 400])
def test_a_tolerance_that_is_not_finite_or_not_in_0_1_is_refused(fixtures, baseline, tolerance):
    found = preflight(request(fixtures, baseline, tolerance=tolerance))
    assert fields(found) == ["tolerance"]


@pytest.mark.parametrize("tolerance", [0, 0.0, 0.02, 1])
def test_a_finite_tolerance_in_range_passes(fixtures, baseline, tolerance):
    assert preflight(request(fixtures, baseline, tolerance=tolerance)).ok


@pytest.mark.parametrize("name,value", [
    ("shards", 0), ("shards", -3), ("shards", 10 ** 9), ("embed_batch", 0), ("depth", 0),
    ("coverage_k", 0), ("max_queries", 0), ("min_per_category", -1), ("max_age_days", -1),
    ("max_age_days", 10 ** 12), ("relevance_level", 0), ("coverage_floor", float("nan")),
    ("coverage_floor", 1.5), ("coverage_floor", -0.1), ("shards", True), ("depth", 2.5)])
def test_every_numeric_option_is_checked(fixtures, baseline, name, value):
    found = preflight(request(fixtures, baseline, **{name: value}))
    assert fields(found) == [name]


def test_a_gated_configuration_left_out_of_the_run_is_refused(fixtures, baseline):
    found = preflight(request(fixtures, baseline, configurations=["bm25", "dense"]))
    assert fields(found) == ["configurations"]
    assert "'fused'" in found.problems[0].message and "no_baseline" in found.problems[0].message


def test_no_baseline_on_purpose_is_not_gated_and_says_why(fixtures, baseline):
    found = preflight(request(fixtures, baseline, configurations=["bm25"], no_baseline=True))
    assert found.ok and found.baseline is None
    assert "no_baseline" in found.not_gated_reason


def test_no_baseline_given_and_not_said_on_purpose_is_refused(fixtures, tmp_path):
    # an empty baseline takes the project's, else the library's `baseline.json`: where that file
    # is missing, the run is refused unless no_baseline says the run is not gated on purpose
    missing = tmp_path / "baseline.json"
    found = preflight(RunRequest(fixtures=str(fixtures), baseline=str(missing), environ={}))
    assert [str(p) for p in found.problems] == [f"{missing}: file not found"]
    assert preflight(RunRequest(fixtures=str(fixtures), baseline=str(missing), no_baseline=True,
                                configurations=["bm25"], environ={})).ok


def test_a_baseline_naming_a_configuration_that_does_not_exist_is_refused(fixtures, baseline):
    edit_baseline(baseline, lambda d: d.update(configuration="fusd"))
    found = preflight(request(fixtures, baseline))
    assert fields(found) == ["configuration"]
    assert found.problems[0].file == str(baseline)


@pytest.mark.parametrize("content,field", [
    ("", None),  # empty
    ("{not json", None),
    ("[1, 2]", None),
    ('{"configuration": "fused"}', "metrics"),
    ('{"configuration": "fused", "metrics": {"ndcg@10": NaN}}', "metrics.ndcg@10"),
    ('{"configuration": "fused", "metrics": {"ndcg@10": Infinity}}', "metrics.ndcg@10"),
    ('{"configuration": "fused", "metrics": {"ndgc@10": 0.5}}', "metrics.ndgc@10"),
    ('{"configuration": "fused", "metrics": {"ndcg@10": "0.5"}}', "metrics.ndcg@10"),
    ('{"configuration": "fused", "metrics": [0.5]}', "metrics"),
    ('{"configuration": 7, "metrics": {"mrr": 0.5}}', "configuration"),
    ('{"configuration": "fused", "metrics": {"mrr": 0.5}, "per_query": {"q01": 0.5}}',
     "per_query.q01"),
    ('{"configuration": "fused", "metrics": {"mrr": 0.5}, "per_query": {"q01": {"mrr": [1]}}}',
     "per_query.q01.mrr"),
    ('{"configuration": "fused", "metrics": {"mrr": 0.5}, "per_query": {"q01": {"mrr": NaN}}}',
     "per_query.q01.mrr"),
    ('{"configuration": "fused", "metrics": {"mrr": 0.5}, "per_query": []}', "per_query"),
    ('{"configuration": "fused", "metrics": {"mrr": 0.5}, "tolerance": -1}', "tolerance"),
])
def test_a_broken_baseline_file_is_refused_naming_the_file(fixtures, baseline, content, field):
    baseline.write_text(content)
    found = preflight(request(fixtures, baseline))
    assert [p.file for p in found.problems] == [str(baseline)]
    assert fields(found) == [field]


def test_a_missing_baseline_file_is_refused(fixtures, tmp_path):
    found = preflight(request(fixtures, tmp_path / "nope.json"))
    assert [(p.file, p.message) for p in found.problems] == [(str(tmp_path / "nope.json"),
                                                              "file not found")]


def test_floors_on_a_metric_not_computed_or_an_unknown_category_are_refused(fixtures, baseline):
    def change(d):
        d["floors"] = {"precision@5": 0.1}
        d["category_floors"] = {"paraphrse": {"ndcg@10": 0.2}, "words:2": {"mrr": 0.1},
                                "filtered": {"recall@7": 0.1}}
    edit_baseline(baseline, change)
    found = preflight(request(fixtures, baseline))
    assert sorted(fields(found)) == ["category_floors.filtered.recall@7",
                                     "category_floors.paraphrse", "floors.precision@5"]
    unknown = next(p for p in found.problems if p.field == "category_floors.paraphrse")
    assert "paraphrase" in unknown.message  # names what exists


def test_a_gated_metric_the_run_does_not_compute_is_refused(fixtures, baseline):
    found = preflight(request(fixtures, baseline, metrics=["ndcg@10", "recall@20"]))
    assert fields(found) == ["metrics.mrr"]


def test_a_malformed_webhook_url_is_refused_without_showing_it(fixtures, baseline):
    secret = "htps//hooks.example.org/T0KEN-s3cret"
    found = preflight(RunRequest(fixtures=str(fixtures), baseline=str(baseline),
                                 environ={"SEARCHEVAL_ALERT_WEBHOOK": secret}))
    assert fields(found) == ["SEARCHEVAL_ALERT_WEBHOOK"]
    assert "s3cret" not in str(found.problems[0])
    for good in ("http://127.0.0.1:9/hook", "https://hooks.example.org/services/T0KEN"):
        assert webhook_problem(good) is None
    for bad in ("ftp://x/y", "http://", "https://host:port/", "http://a b/", "hooks.example.org"):
        assert webhook_problem(bad) is not None, bad


def test_the_alert_block_must_be_named_type_slash_name_and_exist(fixtures, baseline):
    assert fields(preflight(request(fixtures, baseline, alert_block="oncall"))) == ["alert_block"]
    seen = []
    found = preflight(request(fixtures, baseline, alert_block="slack-webhook/oncall",
                              block_exists=lambda name: seen.append(name) or False))
    assert fields(found) == ["alert_block"] and seen == ["slack-webhook/oncall"]
    assert preflight(request(fixtures, baseline, alert_block="slack-webhook/oncall",
                             block_exists=lambda name: True)).ok


def test_every_problem_is_collected_the_first_is_the_refusal(fixtures, baseline):
    (fixtures / "judgments.csv").write_text("query_id,resource_id,grade,judged_at,judge\n"
                                            "q01,email-validation,9,2026-01-01T00:00:00Z,a\n")
    found = preflight(request(fixtures, baseline, tolerance=float("nan"), shards=0))
    assert fields(found) == ["tolerance", "shards", "grade"]
    with pytest.raises(Refused) as refused:
        found.raise_for_problems()
    assert isinstance(refused.value, InputError) and refused.value.field == "tolerance"
    assert len(refused.value.lines()) == 3 and "2 more problems" in refused.value.summary()


def test_a_refusal_survives_pickling_with_its_problems():
    import pickle

    refused = Refused([InputError("bad", file="a.csv", line=3, field="grade"),
                       InputError("worse", field="tolerance")])
    again = pickle.loads(pickle.dumps(refused))
    assert (str(again), again.lines()) == (str(refused), refused.lines())


# -- the CLI's preflight: in this process, before Prefect starts; nothing written


def run(capsys, *args) -> tuple[int, list[str]]:
    code = main(["run", *args])
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("flag,value,named", [
    ("--tolerance", "nan", "--tolerance"), ("--tolerance", "-0.5", "--tolerance"),
    ("--tolerance", "inf", "--tolerance"), ("--shards", "0", "--shards"),
    ("--embed-batch", "-1", "--embed-batch"), ("--coverage-floor", "2", "--coverage-floor"),
    ("--configurations", "bm25,dense", "--configurations"),
    ("--configurations", "bm25,nope", "--configurations"),
    ("--alert-block", "nameonly", "--alert-block"), ("--max-queries", "0", "--max-queries"),
    ("--relevance-level", "0", "--relevance-level"),
    ("--min-per-category", "-2", "--min-per-category")])
def test_a_refused_option_exits_2_naming_it_on_the_last_line(fixtures, baseline, tmp_path,
                                                             capsys, flag, value, named):
    out = tmp_path / "out"
    code, err = run(capsys, "--fixtures", str(fixtures), "--baseline", str(baseline),
                    "--output", str(out), flag, value)
    assert code == 2
    assert err[-1].startswith(f"searcheval: {named}: ")
    assert not any("Traceback" in line for line in err)
    assert not out.exists()


def test_all_errors_prints_every_problem_and_keeps_the_first_last(fixtures, baseline, tmp_path,
                                                                 capsys):
    args = ["--fixtures", str(fixtures), "--baseline", str(baseline), "--output",
            str(tmp_path / "out"), "--tolerance", "nan", "--shards", "0"]
    code, err = run(capsys, *args)
    assert code == 2 and err[-1].startswith("searcheval: --tolerance: ")
    assert "--all-errors" in err[-2] and len(err) == 2
    code, err = run(capsys, *args, "--all-errors")
    assert code == 2 and err[-1].startswith("searcheval: --tolerance: ")
    assert err[:-1] == ["searcheval: also: --shards: expected a whole number in 1..1024, got 0"]


def test_a_broken_baseline_is_refused_before_any_work(fixtures, baseline, tmp_path, capsys):
    baseline.write_text('{"configuration": "fused", "metrics": {"mrr": NaN}}')
    code, err = run(capsys, "--fixtures", str(fixtures), "--baseline", str(baseline),
                    "--output", str(tmp_path / "out"))
    assert code == 2
    assert err == [f"searcheval: {baseline} field 'metrics.mrr': expected a finite number, "
                   "got nan"]


def test_debug_prints_the_traceback_before_the_refusal_line(fixtures, baseline, tmp_path,
                                                            capsys):
    code, err = run(capsys, "--fixtures", str(fixtures), "--baseline", str(baseline),
                    "--output", str(tmp_path / "out"), "--tolerance", "nan", "--debug")
    assert code == 2 and err[0].startswith("Traceback") and err[-1].startswith("searcheval: --")
