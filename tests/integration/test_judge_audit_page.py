"""A model judge's audit on the rating page, end to end with real parts: a pool labelled by the
`openai` kind through `searcheval judgments label` against a local chat-completions server, a
sample queued by `searcheval judgments audit --queue`, graded by a human in headless Chromium on
the rating page (which never shows the model's grade or rationale), then the agreement and the
judge's standing; and the CLI's refusals and dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_rating_page import Served, save_pool

from searcheval.bench.chat_server import serve_chat
from searcheval.cli import main
from searcheval.io.fixtures import load_fixtures
from searcheval.judging.app import RatingSession, create_app
from searcheval.store import judgments as jstore
from searcheval.store.database import connect

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
POOLED = {"q04": ["weather-forecast", "nimbus-outlook", "geocoding", "email-validation"],
          "q05": ["email-validation", "document-ocr", "weather-forecast"]}


def write_judges(path: Path, base_url: str, **extra: str) -> Path:
    lines = ["judges:", "  small:", "    kind: openai", "    model: small-judge-1",
             "    params:", f"      base_url: {base_url}",
             "      prompt: 'Query: {query}\\nDocument: {title}\\n{text}\\nGuideline: {guideline}'",
             *[f"      {k}: {v}" for k, v in extra.items()],
             "    prices: {per_request: 0.01}",
             "    audit: {minimum: 5, share: 1.0, seed: 1}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_label_audit_on_the_rating_page_and_agreement(database_module_url, browser, tmp_path,
                                                       capsys):
    url = database_module_url
    common = ["--fixtures", str(ROOT / "fixtures"), "--database-url", url]
    with connect(url) as conn:
        save_pool(conn, "judge-pool", "fixtures", "r", POOLED)
    with serve_chat(delay_ms=1) as base_url:
        judges = write_judges(tmp_path / "judges.yaml", base_url)
        code, out, err = cli(capsys, "judgments", "label", "--pool", "judge-pool",
                             "--judges-file", str(judges), "--dry-run", *common)
        assert code == 0 and out.count("\n") == 7  # the 7 pooled pairs, one a line
        assert "7 request(s)" in err and "estimated cost 0.0700" in err  # 7 x 0.01 a request
        code, out, err = cli(capsys, "judgments", "label", "--pool", "judge-pool",
                             "--judges-file", str(judges), "--limit", "3", *common)
        assert code == 0 and "3 pair(s) graded" in out and "cost 0.0300" in out
        code, out, err = cli(capsys, "judgments", "label", "--pool", "judge-pool",
                             "--judges-file", str(judges), *common)
        assert code == 0 and "4 pair(s) graded" in out and "3 already graded" in out
    with connect(url) as conn:
        model = {(r.query_id, r.doc_id): r for r in jstore.load_judgment_rows(conn, "fixtures")
                 if r.source == "model"}
    assert len(model) == 7

    code, out, _ = cli(capsys, "judgments", "audit", "--judges-file", str(judges), "--queue",
                       "--format", "json", "--bootstrap", "0", *common)
    state = json.loads(out)
    assert state["counts"] is False and state["reason"].startswith("audit too small: 0 of the 5")
    pool_id = state["queued"]["pool_id"]
    assert state["queued"]["pairs"] == 7  # share 1.0: every grade

    with connect(url) as conn:
        pool, items = jstore.load_pool(conn, pool_id)
    session = RatingSession(database_url=url, collection=load_fixtures(ROOT / "fixtures"),
                            pool=pool, items=items, judge="ann")
    served = Served(create_app(session))
    context = browser.new_context()
    page = context.new_page()
    try:
        judged = 0
        for qid in session.order:
            page.goto(f"{served.url}/q/{qid}")
            shown = page.locator("body").inner_text()
            assert "by the test server" not in shown and "small" not in shown  # no model's grade
            assert page.locator(".doc.graded").count() == 0  # no grade shown but the human's own
            docs = [page.locator(f"#doc-{i}").get_attribute("data-doc")
                    for i in range(page.locator(".doc").count())]
            for doc in docs:
                page.keyboard.press(str(model[(qid, doc)].grade))
                judged += 1
                # a selector, not a script: the page's CSP forbids eval (docs/security.md)
                page.wait_for_selector(f"#progress[data-judged='{judged}']")
    finally:
        context.close()
        served.stop()
    with connect(url) as conn:
        human = {(r.query_id, r.doc_id): r.grade for r in jstore.load_judgment_rows(conn, "fixtures")
                 if r.judge == "ann"}
    assert human == {p: r.grade for p, r in model.items()}

    code, out, _ = cli(capsys, "judgments", "audit", "--judges-file", str(judges), "--format",
                       "json", "--bootstrap", "200", *common)
    state = json.loads(out)
    a = state["agreement"]
    assert a["items"] == 7 and state["counts"] is True
    # two labelling runs recorded: 3 then 4 requests at 0.01 each
    assert state["labelling"]["runs"] == 2 and state["labelling"]["requests"] == 7
    assert state["labelling"]["cost"] == pytest.approx(7 * 0.01)
    assert a["alpha"] == pytest.approx(1.0) and a["kappa"] == pytest.approx(1.0)
    assert sum(map(sum, a["confusion"])) == 7
    assert all(a["confusion"][i][j] == 0 for i in range(4) for j in range(4) if i != j)
    code, out, _ = cli(capsys, "judgments", "audit", "--judges-file", str(judges), *common)
    assert "COUNTS: audit holds: alpha 1.000 >= 0.667 over 7 audited pair(s)" in out

    # exports carry the model's provenance
    code, out, _ = cli(capsys, "judgments", "export", "--all", *common)
    header, *rows = out.splitlines()
    assert header.endswith("judge_hash,prompt_version,rationale,content_hash")
    assert sum(1 for r in rows if ",model," in r) == 7


@pytest.mark.parametrize("spec, field", [
    ("    params: {base_url: u, prompt: '{query}', api_key: sk-live-abc}", "small.api_key"),
    ("    params: {base_url: u, prompt: '{query} {brand}'}", "small.prompt"),
])
def test_cli_refusals_exit_2_naming_file_judge_and_field(database_module_url, tmp_path, capsys,
                                                         spec, field):
    judges = tmp_path / "judges.yaml"
    judges.write_text("judges:\n  small:\n    kind: openai\n    model: m\n" + spec + "\n")
    code, out, err = cli(capsys, "judgments", "label", "--pool", "judge-pool", "--judges-file",
                         str(judges), "--fixtures", str(ROOT / "fixtures"), "--database-url",
                         database_module_url)
    assert code == 2 and out == ""
    assert str(judges) in err and field in err and "sk-live-abc" not in err


def test_cli_refuses_a_judge_that_is_a_configurations_model(database_module_url, tmp_path,
                                                            capsys):
    judges = tmp_path / "judges.yaml"
    judges.write_text("judges:\n  mini:\n    kind: openai\n    model: all-MiniLM-L6-v2\n"
                      "    params: {base_url: u, prompt: '{query}'}\n")
    code, _, err = cli(capsys, "judgments", "label", "--pool", "judge-pool", "--judges-file",
                       str(judges), "--fixtures", str(ROOT / "fixtures"), "--database-url",
                       database_module_url, "--configurations-file",
                       str(ROOT / "configurations.yaml"))
    assert code == 2 and "'dense'" in err and "all-MiniLM-L6-v2" in err and "mini" in err
