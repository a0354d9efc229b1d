"""An engine that holds its own documents (issue 11): a dataset of golden queries and judgments
only, searched and looked up over real HTTP (the example service's /search and /documents/{id}),
through `searcheval run`. A document edited between two runs (the service's `edited_documents`
knob) makes its judgments stale (`document-changed`), left out of scoring, counted and alerted;
the diff of the two runs, the pool export and the rating page show the titles and text the
lookup returned, as kept in Postgres; a grade on the rating page records the hash of the version
the judge saw."""

from __future__ import annotations

import html
import json
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
import yaml

from searcheval import load_collection
from searcheval.cli import main
from searcheval.judging.pool import ranked_ids
from searcheval.judging.versions import Observed, record_versions
from searcheval.metrics.engine import evaluate
from searcheval.store import database
from searcheval.store import documents as looked_up
from searcheval.store import judgments as jstore
from tests.example_service import answers as service_answers

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = load_collection(fixtures=ROOT / "fixtures")
METRICS = ["ndcg@10", "mrr", "recall@20"]
NAME = "engine-docs"  # the dataset's folder: its judgments and document versions


def answers(service) -> dict[str, dict[str, float]]:
    """The service's answers per golden query, as the `native` configuration asks."""
    return service_answers(service.url, FIXTURES.queries)


def document(service, doc_id: str) -> dict:
    return httpx.get(f"{service.url}/documents/{doc_id}").raise_for_status().json()


def ndcg(run: dict, grades: dict, left_out: str | None = None) -> dict[str, float | None]:
    qrels: dict = {}
    for (q, d), g in grades.items():
        if d != left_out:
            qrels.setdefault(q, {})[d] = g
    per_query = evaluate(qrels, run, ["ndcg@10"],
                         query_ids=[q.id for q in FIXTURES.queries]).per_query()
    return {q: v["ndcg@10"] for q, v in per_query.items()}


def edit_that_matters(run: dict, ranked: dict, grades: dict) -> tuple[str, str]:
    """(query, document): a relevant document in the query's top 3 whose judgments, left out,
    change that query's nDCG@10 (so the diff of the two runs details it)."""
    before = ndcg(run, grades)
    for q in FIXTURES.queries:
        for d in ranked[q.id][:3]:
            if grades.get((q.id, d), 0) >= 1:
                after = ndcg(run, grades, left_out=d)
                if abs((after[q.id] or 0.0) - (before[q.id] or 0.0)) > 1e-6:
                    return q.id, d
    raise AssertionError("no judged document whose staleness would change a query's nDCG@10")


@pytest.fixture(scope="module")
def two_runs(example_service, database_module_url, webhook, tmp_path_factory):
    """Run 1 on the service as it is; run 2 after one judged, relevant document (the top hit of a
    query) was edited. The dataset leaves out the judgments of three results of another query, so
    that there is a pool. Runs in the fixture: Prefect's log handlers keep the streams of the
    module's first run."""
    service = example_service
    service.set_knobs()
    run = answers(service)
    ranked = ranked_ids(run)  # in rank order, ties as the scoring breaks them
    grades = {(j.query_id, j.doc_id): j.grade for j in FIXTURES.judgments}
    edited_query, edited = edit_that_matters(run, ranked, grades)
    pool_query = next(q.id for q in reversed(FIXTURES.queries) if q.id != edited_query
                      and len([d for d in ranked[q.id][:10] if d != edited]) >= 3)
    dropped = {(pool_query, d) for d in [d for d in ranked[pool_query][:10] if d != edited][:3]}

    base = tmp_path_factory.mktemp("engine")
    dataset = base / NAME
    dataset.mkdir()
    shutil.copy(ROOT / "fixtures" / "golden_queries.json", dataset / "golden_queries.json")
    lines = (ROOT / "fixtures" / "judgments.csv").read_text().splitlines()
    kept = [lines[0]] + [line for line in lines[1:]
                         if tuple(line.split(",")[:2]) not in dropped]
    (dataset / "judgments.csv").write_text("\n".join(kept) + "\n")
    document_ = yaml.safe_load((ROOT / "examples/configurations/native.yaml").read_text())
    entry = document_["configurations"]["native"]
    entry["params"]["base_url"] = service.url
    entry["documents"] = {"url": f"{service.url}/documents/{{id}}",
                          "content_hash": "content_hash"}
    configurations = base / "configurations.yaml"
    configurations.write_text(yaml.safe_dump(document_))

    patch = pytest.MonkeyPatch()
    patch.setenv("SEARCHEVAL_DATABASE_URL", database_module_url)
    patch.setenv("SEARCHEVAL_ALERT_WEBHOOK", webhook.url)
    patch.setenv("HF_HUB_OFFLINE", "1")
    runs = []
    try:
        for knobs in ({}, {"edited_documents": [edited]}):
            service.set_knobs(**knobs)
            webhook.bodies.clear()
            out = base / f"out{len(runs) + 1}"
            code = main(["run", "--dataset", str(dataset), "--output", str(out),
                         "--no-baseline", "--configurations-file", str(configurations)])
            runs.append({"code": code, "out": out, "alerts": list(webhook.bodies),
                         "metrics": json.loads((out / "metrics.json").read_text())})
    finally:
        patch.undo()
    yield {"service": service, "dataset": dataset, "configurations": configurations,
           "edited": edited, "edited_query": edited_query, "dropped": dropped, "runs": runs,
           "run": run, "ranked": ranked, "grades": grades, "url": database_module_url}
    service.set_knobs()


def test_an_edited_document_makes_its_judgments_stale_and_they_are_left_out(two_runs):
    first, second = two_runs["runs"]
    edited, grades = two_runs["edited"], two_runs["grades"]
    assert first["code"] == second["code"] == 0
    judged = {pair: g for pair, g in grades.items() if pair not in two_runs["dropped"]}
    # the first run is the first version the lookup reported: what the judgments were made on
    assert first["metrics"]["validation"]["stale"]["judgments"] == []
    stale = second["metrics"]["validation"]["stale"]
    of_edited = sorted((q, d) for q, d in judged if d == edited)
    assert sorted((s["query_id"], s["doc_id"]) for s in stale["judgments"]) == of_edited
    assert {s["reason"] for s in stale["judgments"]} == {"document-changed"}
    assert stale["by_reason"]["document-changed"] == len(of_edited)
    per_judge = second["metrics"]["judging"]["judgments"]["stale_by_judge"]["annotator-a"]
    assert per_judge["document-changed"] == len(of_edited)
    # left out of scoring: the means are those of the judgments without the edited document's
    run = two_runs["run"]
    query_ids = [q.id for q in FIXTURES.queries]

    def means(qrels):
        return evaluate(qrels, run, METRICS, query_ids=query_ids).means

    qrels: dict = {}
    for (q, d), g in judged.items():
        qrels.setdefault(q, {})[d] = g
    fresh = {q: {d: g for d, g in docs.items() if d != edited} for q, docs in qrels.items()}
    got = [{m: r["metrics"]["configurations"]["native"]["means"][m] for m in METRICS}
           for r in (first, second)]
    assert got[0] == pytest.approx(means(qrels), abs=1e-12)
    assert got[1] == pytest.approx(means(fresh), abs=1e-12)
    assert got[0] != pytest.approx(got[1], abs=1e-6)  # the edited document mattered
    # counted and alerted like any stale judgment
    reasons = [r for body in second["alerts"] for r in body["reasons"]
               if r["kind"] == "stale-judgments"]
    assert reasons and reasons[0]["count"] == len(of_edited)
    assert reasons[0]["by_reason"]["document-changed"] == len(of_edited)
    assert "document-changed" in (second["out"] / "report.md").read_text()


def cell(entry: dict, titles: dict) -> str:
    grade = "unjudged" if entry["grade"] is None else f"grade {entry['grade']}"
    return f"{titles[entry['doc_id']]} ({entry['doc_id']}, {grade})"


def test_the_diff_of_the_two_runs_shows_what_each_run_looked_up(two_runs, tmp_path):
    first, second = two_runs["runs"]
    service, edited = two_runs["service"], two_runs["edited"]
    a, b = first["metrics"]["run_id"], second["metrics"]["run_id"]
    database_url = ["--database-url", two_runs["url"]]
    assert main(["diff", a, b, "--format", "json", "--output", str(tmp_path / "d.json"),
                 *database_url]) == 0
    assert main(["diff", a, b, "--output", str(tmp_path / "d.md"), *database_url]) == 0
    diff = json.loads((tmp_path / "d.json").read_text())
    markdown = (tmp_path / "d.md").read_text()
    assert (diff["a"]["configuration"], diff["b"]["configuration"]) == ("native", "native")
    service.set_knobs()
    shown = {e["doc_id"] for q in diff["queries"] for side in "ab" for e in q[side]}
    truth = {d: document(service, d) for d in shown}
    titles = {d: t["title"] for d, t in truth.items()}
    assert edited in shown
    for q in diff["queries"]:
        for side in "ab":
            for e in q[side]:
                assert e["title"] == titles[e["doc_id"]]
                # each side shows the text its own run looked up: run 2 saw the edit
                edit = " [edited at run time]" if side == "b" and e["doc_id"] == edited else ""
                assert e["text"] == truth[e["doc_id"]]["text"] + edit
    detailed = [q for q in diff["queries"] if q["status"] != "unchanged"]
    row = next(q for q in detailed if q["query_id"] == two_runs["edited_query"])
    assert edited in [e["doc_id"] for e in row["b"]]
    for q in detailed:
        for i in range(max(len(q["a"]), len(q["b"]))):
            line = (f"| {i + 1} | {cell(q['a'][i], titles) if i < len(q['a']) else ''} | "
                    f"{cell(q['b'][i], titles) if i < len(q['b']) else ''} |")
            assert line in markdown
    # run 2's own diff against the previous run (the nightly's diff.md) shows them too
    nightly = (second["out"] / b / "diff.md").read_text()
    assert f"{titles[edited]} ({edited}, unjudged)" in nightly


def test_the_pool_and_the_rating_page_show_the_looked_up_document_and_a_grade_keeps_its_hash(
        two_runs, tmp_path):
    from fastapi.testclient import TestClient

    from searcheval.judging.app import RatingSession, create_app

    second = two_runs["runs"][1]
    service, edited, dataset = two_runs["service"], two_runs["edited"], two_runs["dataset"]
    run_id = second["metrics"]["run_id"]
    pool_file = tmp_path / "pool.jsonl"
    assert main(["judgments", "pool", "--run", run_id, "--run-output", str(second["out"]),
                 "--dataset", str(dataset), "--format", "jsonl", "--file", str(pool_file),
                 "--save", "--database-url", two_runs["url"]]) == 0
    rows = [json.loads(line) for line in pool_file.read_text().splitlines()]
    # the unjudged results of the top 10: the three left out, and the edited document's (stale)
    fresh = {pair for pair in two_runs["grades"]
             if pair not in two_runs["dropped"] and pair[1] != edited}
    expected = {(q, d) for q, ids in two_runs["ranked"].items() for d in ids[:10]
                if (q, d) not in fresh}
    assert {(r["query_id"], r["doc_id"]) for r in rows} == expected
    assert two_runs["dropped"] <= expected and (two_runs["edited_query"], edited) in expected
    service.set_knobs(edited_documents=[edited])  # the service as run 2 saw it
    truth = {r["doc_id"]: document(service, r["doc_id"]) for r in rows}
    for r in rows:
        assert (r["title"], r["text"]) == (truth[r["doc_id"]]["title"],
                                           truth[r["doc_id"]]["text"])
    assert truth[edited]["text"].endswith(" [edited at run time]")

    collection = load_collection(dataset=dataset)
    with database.connect(two_runs["url"]) as conn:
        pool, items = jstore.load_pool(conn, "latest")
    session = RatingSession(database_url=two_runs["url"], collection=collection, pool=pool,
                            items=items, judge="carol")
    client = TestClient(create_app(session), base_url="http://127.0.0.1")
    query = two_runs["edited_query"]
    page = client.get(f"/q/{query}").text
    client.headers["X-CSRF-Token"] = re.search(r'name="csrf-token" content="([^"]+)"', page)[1]
    assert html.escape(truth[edited]["title"]) in page
    assert html.escape(truth[edited]["text"]) in page
    forms = re.findall(r'name="doc_id" value="([^"]+)">\s*<input type="hidden" name="expected" '
                       r'value="[^"]*">\s*<input type="hidden" name="version" value="(\d*)"', page)
    version = dict(forms)[edited]
    assert version == "2"  # the first report, then the edit
    # a run sees yet another version after the page was loaded: the grade is of what was shown
    with database.connect(two_runs["url"]) as conn, conn.transaction(), conn.cursor() as cur:
        record_versions(cur, NAME, Observed(
            at=datetime.now(timezone.utc), documents={edited: {"content_hash": "newer"}}), "x")
    answer = client.post("/grade", data={"query_id": query, "doc_id": edited, "grade": "2",
                                         "expected": "", "version": version},
                         headers={"Accept": "application/json"})
    assert answer.status_code == 200, answer.text
    with database.connect(two_runs["url"]) as conn:
        graded = [r for r in jstore.load_judgment_rows(conn, NAME) if r.judge == "carol"]
        latest = looked_up.latest_versions(conn, NAME, [edited])[edited]
    assert [(r.doc_id, r.grade, r.content_hash) for r in graded] \
        == [(edited, 2, truth[edited]["content_hash"])]
    assert (latest.version, latest.content_hash) == (3, "newer")
    # a version the page never showed is refused, and nothing is written
    for bad in ("9", "²", "99999999999", "x"):
        refused = client.post("/grade", data={"query_id": query, "doc_id": edited, "grade": "1",
                                              "expected": str(graded[0].id), "version": bad},
                              headers={"Accept": "application/json"})
        assert refused.status_code == 400 and "nothing was written" in refused.json()["error"]
    with database.connect(two_runs["url"]) as conn:
        assert len([r for r in jstore.load_judgment_rows(conn, NAME) if r.judge == "carol"]) == 1
