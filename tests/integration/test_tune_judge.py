"""searcheval tune with a model judge before the held-out verdict, against a real local
chat-completions server (searcheval.bench.chat_server, a subprocess) and the real Postgres: a
trustworthy judge (its human audit holds) raises the flagged trials' judged@10 and its grades
count in the verdict; a judge whose audit fails (alpha below the floor) labels, is reported, and
is not counted; the limit caps the pairs; a resumed study whose grades changed is rescored;
`judgments label --pool-file` labels the pool.csv tune wrote; tune scores with the stored
effective grades, not only the dataset's file."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from searcheval.bench.chat_server import serve_chat
from searcheval.bench.tune import CONFIGURATIONS
from searcheval.io.collection import load_collection
from searcheval.judging.judges import load_judges
from searcheval.judging.labelling import label
from searcheval.store import judgments as rows_store
from searcheval.store import tuning as tuning_store
from searcheval.tuning import study
from searcheval.tuning.verdict import held_out_verdict
from searcheval.types import JudgmentRow

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SPACE = {"hybrid.weights.bm25": "0..2", "hybrid.weights.dense": "0..2",
         "hybrid.method": ["combsum", "rrf", "combmnz"]}
JUDGES = """\
judges:
  {name}:
    kind: openai
    model: test-small
    params:
      base_url: {url}
      api_key: {{env: JUDGE_TEST_KEY}}
      prompt: "Query: {{query}}\\nDocument: {{title}}\\n{{text}}\\nAnswer as JSON"
      retries: 1
      backoff_s: 0.05
      timeout_s: 5
      concurrency: 4
    audit: {{minimum: 8, floor: 0.667}}
"""
AUDITED = 12  # pairs both the judge and a person graded, before the study


@pytest.fixture(scope="module")
def chat():
    patch = pytest.MonkeyPatch()
    patch.setenv("JUDGE_TEST_KEY", "sk-test-123")
    with serve_chat(delay_ms=1, api_key_env="JUDGE_TEST_KEY") as url:
        yield url
    patch.undo()


@pytest.fixture(scope="module")
def files(tmp_path_factory, chat) -> dict:
    folder = tmp_path_factory.mktemp("tune_judge")
    (folder / "configurations.yaml").write_text(CONFIGURATIONS)
    for name in ("good", "bad"):
        (folder / f"{name}.yaml").write_text(JUDGES.format(name=name, url=chat))
    return {"configurations": str(folder / "configurations.yaml"),
            "good": f"{folder / 'good.yaml'}:good", "bad": f"{folder / 'bad.yaml'}:bad",
            "folder": folder}


def thinned(name: str):
    """The fixtures with every other irrelevant judgment left out (its own judgment set), so the
    trials' top 10 hold unjudged documents; (collection, the pairs left judged)."""
    collection = load_collection(fixtures=str(ROOT / "fixtures"))
    kept = [j for i, j in enumerate(collection.judgments) if i % 2 == 0 or j.grade > 0]
    return replace(collection, name=name, judgments=kept), kept


def audit(conn, collection, kept, reference: str, agree: bool) -> None:
    """The judge grades AUDITED already-judged pairs; a person grades them too, as the judge did
    (agree: alpha 1) or mirrored on the 0..3 scale (3 - grade: alpha below 0)."""
    file, name = reference.rsplit(":", 1)
    judge = load_judges(file)[name]
    pairs = sorted({(j.query_id, j.doc_id) for j in kept})[::7][:AUDITED]
    assert label(conn, judge, collection, pairs).graded == AUDITED
    graded = {(r.query_id, r.doc_id): r.grade
              for r in rows_store.load_judgment_rows(conn, collection.name) if r.judge == name}
    assert len(set(graded.values())) >= 2  # varied grades: alpha is defined
    now = datetime.now(timezone.utc)
    rows_store.add_judgments(conn, collection.name, [
        JudgmentRow(query_id=q, doc_id=d, grade=g if agree else 3 - g, judge="alice",
                    judged_at=now, source="human") for (q, d), g in graded.items()])


def tune(conn, files, collection, tmp_path, **kw):
    request = study.TuneRequest(fixtures=str(ROOT / "fixtures"),
                                configurations_file=files["configurations"], params=dict(SPACE),
                                trials=3, held_out=0.5, seed=3, unjudged_threshold=0.0, **kw)
    prepared = study.check(request, collection=collection)
    study.prepare(prepared, conn)
    results = study.run_trials(prepared)
    judging = None
    if request.judge:
        results, judging = study.judge_before_verdict(prepared, results)
    document = study.conclude(prepared, results, str(tmp_path), judging=judging)
    return prepared, results, document


def model_rows(conn, catalog: str, judge: str) -> list[JudgmentRow]:
    return [r for r in rows_store.load_judgment_rows(conn, catalog) if r.judge == judge]


def test_a_trustworthy_judge_fills_the_pool_and_counts_in_the_verdict(conn, files, tmp_path):
    collection, kept = thinned("tune_judge_good")
    audit(conn, collection, kept, files["good"], agree=True)
    prepared, results, document = tune(conn, files, collection, tmp_path, judge=files["good"])
    judging = document["judge"]
    assert judging["counts"] and judging["reason"].startswith("audit holds: alpha 1.000")
    assert judging["labelled"] > 0 and judging["failed"] == 0
    # every pooled trial (flagged, among the top 3) had unjudged results; the judge graded them
    # all (no limit), so each is now judged@10 = 1.0, from below 1.0 before
    assert judging["flagged_before"]
    for n in judging["flagged_before"]:
        assert judging["judged_before"][n] < 1.0
        assert judging["judged_after"][n] == pytest.approx(1.0)
    assert {t.number: t.judged for t in results} == judging["judged_after"]
    stored = {r["number"]: r["judged"] for r in tuning_store.load_trials(conn, prepared.study_id)}
    assert stored == judging["judged_after"]  # the rescored trials were stored
    # the verdict: the chosen and the served configurations' held-out top 10 were labelled too,
    # and the verdict was scored with those grades (nothing is left for the pool)
    chosen = study.chosen_configuration(prepared, results)[1]
    held = [p for p in ((q, d) for c in (chosen, prepared.resolved[prepared.served])
                        for q, docs in prepared.held_runner.run(c).results.items()
                        for d, _ in docs[:10])]
    by_model = {p for p in held if prepared.effective.rests_on.get(p, "").startswith("model:good")}
    assert by_model and all(prepared.qrels[q][d] is not None for q, d in by_model)
    again = held_out_verdict(prepared.held_runner, chosen, prepared.resolved[prepared.served],
                             prepared.held_runner.queries, prepared.qrels, "ndcg@10",
                             ("ndcg@10", "mrr", "recall@20"), prepared.settings, seed=3)
    assert document["verdict"]["means"] == again["means"]
    without = {q: {d: g for d, g in docs.items() if (q, d) not in by_model}
               for q, docs in prepared.qrels.items()}
    served_then = held_out_verdict(prepared.held_runner, chosen,
                                   prepared.resolved[prepared.served],
                                   prepared.held_runner.queries, without, "ndcg@10",
                                   ("ndcg@10", "mrr", "recall@20"), prepared.settings, seed=3)
    assert served_then["means"] != again["means"]  # the model's grades moved the verdict
    assert document["verdict"]["grades"]["model_judges"]["good"]["counts"]
    assert document["pool"] is None and not (tmp_path / "pool.csv").exists()
    report = (tmp_path / "report.md").read_text()
    assert "its grades are **counted in this verdict**: audit holds" in report


def test_a_judge_whose_audit_fails_is_reported_not_counted_and_capped(conn, files, tmp_path,
                                                                       database_module_url,
                                                                       capsys):
    collection, kept = thinned("tune_judge_bad")
    audit(conn, collection, kept, files["bad"], agree=False)
    prepared, results, document = tune(conn, files, collection, tmp_path, judge=files["bad"],
                                       judge_limit=5)
    judging = document["judge"]
    assert not judging["counts"]
    assert judging["reason"].startswith("agreement below the floor: alpha -")
    # the limit: 5 pairs asked in all (the pool holds more), 5 more rows of the judge
    assert sum(r["pairs"] for r in judging["runs"]) == 5 and judging["labelled"] == 5
    assert sum(r["pool"] for r in judging["runs"]) > 5
    assert len(model_rows(conn, collection.name, "bad")) == AUDITED + 5
    # not counted: no trial's judged@10 moved, the pool still holds the pairs it graded
    assert judging["judged_after"] == judging["judged_before"]
    pool = list(csv.DictReader(io.StringIO((tmp_path / "pool.csv").read_text())))
    graded = {(r.query_id, r.doc_id) for r in model_rows(conn, collection.name, "bad")}
    assert graded & {(r["query_id"], r["doc_id"]) for r in pool}
    report = (tmp_path / "report.md").read_text()
    assert "its grades are **NOT COUNTED in this verdict**: agreement below the floor" in report
    assert "model judge `bad`: NOT COUNTED: agreement below the floor" in report

    # the pool.csv labelled later, by `judgments label --pool-file` (a judgment set of the
    # fixtures' own name: the command reads the collection from --fixtures)
    from searcheval.cli import main

    fixtures = load_collection(fixtures=str(ROOT / "fixtures"))
    file, name = files["bad"].rsplit(":", 1)
    code = main(["judgments", "label", "--pool-file", str(tmp_path / "pool.csv"),
                 "--judges-file", file, "--judge", name, "--limit", "4", "--format", "json",
                 "--fixtures", str(ROOT / "fixtures"), "--configurations-file",
                 files["configurations"], "--database-url", database_module_url])
    assert code == 0
    out = capsys.readouterr().out
    assert '"graded": 4' in out and '"pairs": 4' in out
    labelled = model_rows(conn, fixtures.name, "bad")
    first = [(r["query_id"], r["doc_id"]) for r in pool[:4]]  # the file's order: its head
    assert sorted((r.query_id, r.doc_id) for r in labelled) == sorted(first)


def test_tune_scores_with_the_stored_grades_that_count(conn, files, tmp_path):
    collection, kept = thinned("tune_judge_sources")
    first = study.check(study.TuneRequest(
        configurations_file=files["configurations"], params=dict(SPACE), trials=1, held_out=0.5,
        seed=5, unjudged_threshold=0.0), collection=collection)
    study.prepare(first, conn)
    missing = sorted({(q, d) for q, d, _ in first.objective(0, {}).unjudged})
    assert missing
    now = datetime.now(timezone.utc)
    rows_store.add_judgments(conn, collection.name, [
        JudgmentRow(query_id=q, doc_id=d, grade=2, judge="alice", judged_at=now, source="human")
        for q, d in missing])
    for sources, expected in ((None, 2), ("human", 2), ("dataset", None)):
        request = study.TuneRequest(configurations_file=files["configurations"],
                                    params=dict(SPACE), trials=1, held_out=0.5, seed=5,
                                    judgment_sources=sources)
        prepared = study.prepare(study.check(request, collection=collection), conn)
        # the fixtures' layout counts every stored grade by default; `dataset`: the file only
        assert {prepared.qrels[q].get(d) for q, d in missing} == {expected}
    assert prepared.objective(0, {}).judged < 1.0  # dataset only: the gaps are back


def test_a_resumed_study_whose_grades_changed_is_rescored(conn, files, tmp_path):
    collection, kept = thinned("tune_judge_resume")
    request = dict(configurations_file=files["configurations"], params=dict(SPACE), trials=3,
                   held_out=0.5, seed=9, unjudged_threshold=0.0)
    first = study.check(study.TuneRequest(**request), collection=collection)
    study.prepare(first, conn)
    before = study.run_trials(first)
    assert all(t.judged < 1.0 for t in before)
    # a person grades every unjudged result of trial 0's top 10 between the two runs
    now = datetime.now(timezone.utc)
    unjudged = first.objective(0, before[0].overrides).unjudged
    rows_store.add_judgments(conn, collection.name, [
        JudgmentRow(query_id=q, doc_id=d, grade=3, judge="alice", judged_at=now, source="human")
        for q, d, _ in unjudged])
    again = study.check(study.TuneRequest(**request), collection=collection)
    assert again.study_id == first.study_id  # the same study: new grades are no new study
    study.prepare(again, conn)
    assert again.grades != first.grades
    messages = []
    after = study.run_trials(again, say=messages.append)
    assert [t.number for t in after] == [0, 1, 2]  # no trial added, none rerun as new
    assert any("rescoring them" in m for m in messages)
    assert after[0].judged == pytest.approx(1.0) and before[0].judged < 1.0
    assert after[0].value != before[0].value  # grade 3 on its unjudged results: a higher score
    rows = tuning_store.load_trials(conn, first.study_id)
    assert [r["grades"] for r in rows] == [again.grades] * 3
    assert rows[0]["judged"] == pytest.approx(1.0) and rows[0]["value"] == pytest.approx(
        after[0].value)
    # a third run with the same grades reuses the stored trials as they are
    third = study.check(study.TuneRequest(**request), collection=collection)
    study.prepare(third, conn)
    messages.clear()
    assert [t.value for t in study.run_trials(third, say=messages.append)] == \
        [t.value for t in after]
    assert not any("rescoring" in m for m in messages)
