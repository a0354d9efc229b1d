"""The nightly flow reads its judgments from Postgres: seeded from the fixtures' file, extended by
a second judge's import, combined by the stated rule; agreement under its floor is published and
alerted; low coverage points to the pool command, whose pool matches the report's size."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from searcheval.cli import main
from searcheval.store import database
from searcheval.store import judgments as jstore

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def run(fixtures: Path, out: Path, *extra: str) -> tuple[int, dict, str]:
    code = main(["run", "--fixtures", str(fixtures), "--output", str(out), "--no-baseline",
                 *extra])
    return code, json.loads((out / "metrics.json").read_text()), (out / "report.md").read_text()


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, database_module_url):
    """The module's first run, outside any test's captured output (Prefect's log handlers keep
    the streams of the first run in the process)."""
    import os

    fixtures = tmp_path_factory.mktemp("first") / "fixtures"
    fixtures.mkdir()
    for name in ("catalog.json", "golden_queries.json", "judgments.csv"):
        (fixtures / name).write_bytes((ROOT / "fixtures" / name).read_bytes())
    os.environ["SEARCHEVAL_DATABASE_URL"] = database_module_url
    try:
        return run(fixtures, tmp_path_factory.mktemp("first-out"))
    finally:
        os.environ.pop("SEARCHEVAL_DATABASE_URL")


def test_judgments_come_from_postgres_and_a_second_judge_changes_grades_and_agreement(
        first_run, flow_env, webhook, fixtures_copy, tmp_path, capsys):
    code, metrics, report = first_run
    assert code == 0
    before = metrics["input_hashes"]
    judging = metrics["judging"]
    assert judging["judgments"]["rule"] == "median"
    assert judging["judgments"]["judges"] == {"annotator-a": 270}
    assert judging["agreement"]["items"] == 0 and judging["agreement"]["below_floor"] is False
    assert "## Judging" in report and "effective grade: `median`" in report
    assert "No pair is graded by two judges yet" in report
    with database.connect(flow_env) as conn:
        assert jstore.count_judgments(conn, "fixtures") == 270
    # a second run seeds nothing twice
    assert run(fixtures_copy, tmp_path / "two")[0] == 0
    with database.connect(flow_env) as conn:
        assert jstore.count_judgments(conn, "fixtures") == 270

    # bob grades the 30 first pairs of the file the other way round (3 - g)
    original = list(csv.DictReader((fixtures_copy / "judgments.csv").read_text().splitlines()))
    flipped = tmp_path / "bob.qrels"
    flipped.write_text("".join(f"{r['query_id']} 0 {r['resource_id']} {3 - int(r['grade'])}\n"
                               for r in original[:30]))
    assert main(["judgments", "import", str(flipped), "--judge", "bob", "--fixtures",
                 str(fixtures_copy)]) == 0
    webhook.bodies.clear()
    code, metrics, report = run(fixtures_copy, tmp_path / "three")
    assert code == 0  # low agreement is published and alerted, it does not stop the run
    judging = metrics["judging"]
    assert judging["judgments"]["judges"] == {"annotator-a": 270, "bob": 30}
    # the file is unchanged; what the run scored with is not
    assert metrics["input_hashes"]["judgments"] == before["judgments"]
    assert metrics["input_hashes"]["judgments_effective"] != before["judgments_effective"]
    assert judging["judgments"]["multiply_judged"] == 30
    agreement = judging["agreement"]
    assert agreement["items"] == 30 and agreement["judges"] == ["annotator-a", "bob"]
    assert agreement["alpha"] < 0 and agreement["below_floor"] is True  # opposite grades
    assert agreement["kappa"][0]["items"] == 30 and agreement["kappa"][0]["kappa"] < 0
    reasons = [r for b in webhook.bodies for r in b["reasons"] if r["kind"] == "agreement"]
    assert len(reasons) == 1 and reasons[0]["items"] == 30
    assert "Krippendorff's alpha (ordinal) over 30 pair(s)" in report
    # checked by validation beside coverage and staleness: a warning finding, not a refusal
    found = [f for f in metrics["validation"]["findings"] if f["expectation"] == "agreement_floor"]
    assert len(found) == 1 and found[0]["severity"] == "warning" and found[0]["count"] == 30
    # `searcheval judgments agreement` says the same as the run
    capsys.readouterr()
    assert main(["judgments", "agreement", "--format", "json", "--fixtures",
                 str(fixtures_copy)]) == 0
    measured = json.loads(capsys.readouterr().out)
    assert measured["alpha"] == pytest.approx(agreement["alpha"]) and measured["items"] == 30
    # the effective grade of a pair both graded: median of (g, 3 - g) -> the lower, min(g, 3 - g)
    assert main(["judgments", "export", "--format", "trec", "--fixtures",
                 str(fixtures_copy)]) == 0
    exported = {(line.split()[0], line.split()[2]): int(line.split()[3])
                for line in capsys.readouterr().out.splitlines()}
    for r in original[:30]:
        g = int(r["grade"])
        assert exported[(r["query_id"], r["resource_id"])] == min(g, 3 - g)
    # per configuration: judged share, pool size (0: everything judged) and the bounds
    for name, c in judging["configurations"].items():
        assert c["pool"] == 0 and c["judged_share"] == 1.0
        # bob graded every pair of q01 (18) and 12 of q02: part of each top 10, never more
        assert 1 <= c["agreement"]["items"] <= 20 and c["agreement"]["alpha"] is not None
        for metric, (lo, hi) in c["bounds"].items():
            mean = metrics["configurations"][name]["means"][metric]
            if mean is not None:  # fully judged: the mean cannot move
                assert lo == pytest.approx(mean) and hi == pytest.approx(mean)


def test_low_coverage_points_to_the_pool_and_the_pool_has_that_size(first_run, flow_env, webhook,
                                                                     fixtures_copy, tmp_path,
                                                                     capsys):
    # forget every judgment of q04..q08 but their first (every golden query must stay judged):
    # most of their results are unjudged now
    lines = (fixtures_copy / "judgments.csv").read_text().splitlines()
    dropped = ("q04,", "q05,", "q06,", "q07,", "q08,")
    seen: set[str] = set()
    kept = []
    for line in lines:
        query = line.split(",")[0] + ","
        if query in dropped and query in seen:
            continue
        seen.add(query)
        kept.append(line)
    (fixtures_copy / "judgments.csv").write_text("\n".join(kept) + "\n")
    webhook.bodies.clear()
    out = tmp_path / "out"
    code, metrics, report = run(fixtures_copy, out, "--min-per-category", "1")
    judging = metrics["judging"]
    pool = judging["pool"]
    assert pool["size"] > 0
    # the command names the run's dataset and output folder: it works as printed (issue 23)
    assert pool["command"] == (f"searcheval judgments pool --run {metrics['run_id']} --depth 10 "
                               f"--fixtures {fixtures_copy.resolve()} --run-output {out.resolve()}")
    below = [r for b in webhook.bodies for r in b["reasons"] if r["kind"] == "coverage"]
    assert below and all(r["command"] == pool["command"] for r in below)
    assert all(r["pool"] == judging["configurations"][r["configuration"]]["pool"] for r in below)
    assert f"{pool['size']} unjudged pair(s)" in report
    # the bounds: unjudged documents can move the means
    fused = judging["configurations"]["fused"]
    lo, hi = fused["bounds"]["precision@10"]
    assert lo <= metrics["configurations"]["fused"]["means"]["precision@10"] <= hi and hi > lo
    capsys.readouterr()
    import shlex

    assert main([*shlex.split(pool["command"])[1:], "--save"]) == 0  # as printed, and kept
    assert f"{pool['size']} unjudged pair(s)" in capsys.readouterr().err
    with database.connect(flow_env) as conn:
        saved, items = jstore.load_pool(conn, "latest")
    assert saved["run_id"] == metrics["run_id"] and len(items) == pool["size"]
    assert {i["query_id"] for i in items} <= {"q04", "q05", "q06", "q07", "q08"}


def test_the_rating_pages_token_can_come_from_a_prefect_secret_block(first_run, monkeypatch):
    from prefect.blocks.system import Secret

    from searcheval.cli.judgments import rate_token

    Secret(value="from-the-block").save("searcheval-rate-token", overwrite=True)
    monkeypatch.setenv("SEARCHEVAL_RATE_TOKEN", "from-the-environment")
    assert rate_token("searcheval-rate-token") == "from-the-block"
    assert rate_token(None) == "from-the-environment"
    monkeypatch.delenv("SEARCHEVAL_RATE_TOKEN")
    assert rate_token(None) is None


def test_rate_refuses_another_address_without_a_token_and_a_missing_pool(first_run, flow_env,
                                                                         monkeypatch, capsys):
    monkeypatch.delenv("SEARCHEVAL_RATE_TOKEN", raising=False)
    assert main(["rate", "--host", "0.0.0.0", "--fixtures", str(ROOT / "fixtures")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == ("searcheval: --host: the rating page on 0.0.0.0 (not a loopback address) "
                       "needs a token: set SEARCHEVAL_RATE_TOKEN or pass --token-secret BLOCK")
    assert main(["rate", "--pool", "pool-nope", "--fixtures", str(ROOT / "fixtures")]) == 2
    assert "no pool 'pool-nope'" in capsys.readouterr().err
