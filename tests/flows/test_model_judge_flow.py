"""A nightly in which a model judge labels the run's own pool, and its grades start counting once
its human audit passes: before, they are reported and not counted (validation warns, the report
says why); after, the judged share rests partly on the model and the report shows the means with
and without its grades. The judge is the `openai` kind against a real local chat-completions
server; the humans' audit grades are written as the rating page writes them (store.record_grade;
the page itself is driven by a browser in tests/integration/test_judge_audit_page.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from searcheval.bench.chat_server import serve_chat
from searcheval.cli import main
from searcheval.judging.judgments import JudgmentRow
from searcheval.store import database
from searcheval.store import judgments as jstore

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def fixtures_with_half_the_judgments(target: Path) -> Path:
    target.mkdir()
    for name in ("catalog.json", "golden_queries.json"):
        shutil.copy(ROOT / "fixtures" / name, target / name)
    lines = (ROOT / "fixtures" / "judgments.csv").read_text().splitlines()
    (target / "judgments.csv").write_text("\n".join([lines[0]] + lines[1::2]) + "\n")
    return target


def run(fixtures: Path, out: Path, *extra: str) -> tuple[int, dict, str]:
    code = main(["run", "--fixtures", str(fixtures), "--output", str(out), "--no-baseline",
                 "--configurations", "bm25", "-q", *extra])
    return code, json.loads((out / "metrics.json").read_text()), (out / "report.md").read_text()


def test_model_grades_count_once_the_audit_passes(flow_env, tmp_path, capsys):
    fixtures = fixtures_with_half_the_judgments(tmp_path / "fixtures")
    with serve_chat(delay_ms=1) as base_url:
        judges = tmp_path / "judges.yaml"
        judges.write_text(
            "judges:\n  small:\n    kind: openai\n    model: small-judge-1\n    params:\n"
            f"      base_url: {base_url}\n      concurrency: 4\n"
            "      prompt: 'Query: {query}\\nDocument: {title}\\n{text}\\n"
            "Answer with JSON {\"grade\": 0-3, \"rationale\": \"...\"}'\n"
            "    audit: {minimum: 5, share: 0.2, floor: 0.667, seed: 3}\n")
        code, first, _ = run(fixtures, tmp_path / "one", "--judge", f"{judges}:small")
        assert code == 0
        assert first["judging"]["judgments"]["model_judges"] == {}  # labelled after publishing
        with database.connect(flow_env) as conn:
            model_rows = [r for r in jstore.load_judgment_rows(conn, "fixtures")
                          if r.source == "model"]
        pool = first["judging"]["configurations"]["bm25"]["pool"]
        assert len(model_rows) == pool > 0  # the run's own unjudged top 10, each graded once
        # the same pool through the CLI (--run latest): nothing left to label
        capsys.readouterr()
        assert main(["judgments", "label", "--run", "latest", "--run-output",
                     str(tmp_path / "one"), "--judges-file", str(judges), "--fixtures",
                     str(fixtures), "--dry-run"]) == 0
        err = capsys.readouterr().err
        assert f"0 pair(s) to label, {pool} already graded" in err
        # a judge that does not exist is refused before any work (exit 2, nothing written)
        capsys.readouterr()
        assert main(["run", "--fixtures", str(fixtures), "--output", str(tmp_path / "refused"),
                     "--no-baseline", "--configurations", "bm25", "--judge",
                     f"{judges}:nobody"]) == 2
        assert "no judge 'nobody'" in capsys.readouterr().err
        assert not (tmp_path / "refused").exists()

    # the next run: the grades are there, the audit is empty: reported, not counted
    code, second, report = run(fixtures, tmp_path / "two")
    audit = second["judging"]["judgments"]["model_judges"]["small"]
    assert audit["counts"] is False and audit["graded"] == len(model_rows)
    assert audit["reason"] == "audit too small: 0 of the 5 audited pair(s) it needs"
    assert second["judging"]["configurations"]["bm25"]["pool"] == pool  # still unjudged
    assert "model:small" not in second["judging"]["configurations"]["bm25"]["sources"]["counts"]
    findings = [f for f in second["validation"]["findings"] if f["expectation"] == "model_audit"]
    assert len(findings) == 1 and "reported, not counted" in findings[0]["message"]
    assert "NOT counted: audit too small" in report

    # humans audit the queued sample, agreeing with the model
    capsys.readouterr()
    assert main(["judgments", "audit", "--judges-file", str(judges), "--fixtures", str(fixtures),
                 "--queue", "--format", "json"]) == 0
    queued = json.loads(capsys.readouterr().out)["queued"]
    assert queued["pairs"] == max(5, -(-len(model_rows) * 2 // 10))
    by_pair = {(r.query_id, r.doc_id): r for r in model_rows}
    with database.connect(flow_env) as conn:
        _, items = jstore.load_pool(conn, queued["pool_id"])
        for item in items:
            m = by_pair[(item["query_id"], item["doc_id"])]
            jstore.record_grade(conn, "fixtures", JudgmentRow(
                item["query_id"], item["doc_id"], m.grade, "ann", source="human",
                content_hash=m.content_hash), None)

    code, third, report = run(fixtures, tmp_path / "three")
    audit = third["judging"]["judgments"]["model_judges"]["small"]
    assert audit["counts"] is True and audit["agreement"]["items"] == len(items)
    assert audit["agreement"]["alpha"] == pytest.approx(1.0)
    bm25 = third["judging"]["configurations"]["bm25"]
    assert bm25["pool"] == 0  # every pair of its top 10 now has a grade
    counts = bm25["sources"]["counts"]
    # the audited pairs rest on the humans' grades, the rest of the pool on the model's
    assert counts["human"] == len(items) and counts["model:small"] == pool - len(items)
    assert set(bm25["means_without_model"]) >= {"ndcg@10", "mrr"}
    assert "What the numbers rest on" in report and "model judge small" in report
