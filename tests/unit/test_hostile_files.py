"""Issue 28: everything written is escaped for where it goes (TREC ids, CSV cells, markdown), and
every reader refuses instead of crashing (deep JSON, NUL, CSV newlines and oversize fields, YAML
alias bombs, symbolic links out of a dataset folder)."""

from __future__ import annotations

import json
import shutil
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from searcheval import load_collection
from searcheval.defaults import MAX_FIELD_CHARS
from searcheval.errors import InputError
from searcheval.evaluation.diff import diff_markdown
from searcheval.io.escape import csv_cell, csv_value, md
from searcheval.io.files import read_json, read_yaml_mapping
from searcheval.io.traces import read_traces
from searcheval.io.trec import load_trec_run, write_trec_run
from searcheval.judging.files import export_effective, export_rows, read_judgment_file
from searcheval.judging.judgments import JudgmentRow
from searcheval.judging.pool import write_pool
from searcheval.types import RankedRun

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
HOSTILE = ("[click](http://127.0.0.1:9/steal) ![img](http://127.0.0.1:9/p.png) "
           "<img src=x onerror=alert(1)> <script>alert(2)</script> | `tick` **bold** "
           "http://bare.example www.bare.example\n# heading")


# -- TREC run files (medium 8): ids with whitespace are refused, never written raw -------------

@pytest.mark.parametrize("doc", ["d1 d2", "d3\nq02 Q0 evil 1 99 injected", "tab\there", ""])
def test_a_trec_run_file_refuses_an_id_with_whitespace(tmp_path, doc):
    run = RankedRun(configuration="web", results={"q01": [("ok", 2.0), (doc, 1.0)]})
    path = tmp_path / "web.trec"
    with pytest.raises(InputError) as refused:
        write_trec_run(run, path)
    assert "holds whitespace or a control character" in refused.value.message
    assert not path.exists()


def test_a_trec_run_file_of_plain_ids_reads_back_unchanged(tmp_path):
    run = RankedRun(configuration="web", results={"q01": [("a-1", 2.5), ("é/ü:2", 1.0)]})
    assert load_trec_run(write_trec_run(run, tmp_path / "web.trec")) == {
        "q01": {"a-1": 2.5, "é/ü:2": 1.0}}


# -- CSV (medium 9): OWASP's formula rule ---------------------------------------------------

FORMULAS = ["=HYPERLINK(\"http://127.0.0.1:9/\",\"x\")", "=cmd|' /C calc'!A0", "+1+1", "-2+3",
            "@SUM(A1)", "\tx", "\rx"]


def test_csv_cells_that_start_a_formula_are_neutralised_and_read_back():
    for value in FORMULAS:
        assert csv_cell(value) == "'" + value
        assert csv_value(csv_cell(value)) == value
    assert csv_cell("plain") == "plain" and csv_cell(3) == 3 and csv_value("'plain") == "'plain"


def test_judgments_export_neutralises_formulas_and_imports_back_the_same_rows(tmp_path):
    collection = load_collection(fixtures=FIXTURES)
    query, doc = collection.queries[0].id, collection.resources[0].id
    when = datetime(2026, 12, 1, tzinfo=timezone.utc)
    rows = [JudgmentRow(query_id=query, doc_id=doc, grade=2, judge="=cmd|' /C calc'!A0",
                        judged_at=when, note="=HYPERLINK(\"http://127.0.0.1:9/\",\"x\")",
                        guideline="@1")]
    text = export_rows(rows, "csv")
    cells = [line.split(",") for line in text.splitlines()]
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r", "\"=")) for row in cells
                   for cell in row), text
    path = tmp_path / "export.csv"
    # the importer reads the fixtures' columns; keep the ones it takes
    lines = text.splitlines()
    header = lines[0].split(",")
    keep = ["query_id", "resource_id", "grade", "judged_at", "judge", "note", "guideline"]
    import csv as _csv
    import io as _io

    reader = list(_csv.reader(_io.StringIO(text)))
    picked = [[row[header.index(c)] for c in keep] for row in reader]
    out = _io.StringIO()
    _csv.writer(out, lineterminator="\n").writerows(picked)
    path.write_text(out.getvalue())
    (back,) = read_judgment_file(path, collection)
    assert (back.judge, back.note, back.guideline) == (rows[0].judge, rows[0].note, "@1")


def test_a_pool_file_neutralises_titles_and_texts():
    rows = [{"position": 1, "query_id": "q01", "query": "-rain", "doc_id": "d1",
             "title": "=HYPERLINK(\"http://127.0.0.1:9/\",\"x\")", "text": "@SUM(A1)",
             "judges_needed": 1}]
    text = write_pool(rows, "csv")
    assert "'=HYPERLINK" in text and "'@SUM(A1)" in text and "'-rain" in text
    assert ",1\n" in text  # numbers as they are


# -- markdown (medium 10): no link, image or HTML from data renders ---------------------------

def rendered(markdown: str) -> str:
    # CommonMark with GFM's tables and strikethrough (bare-address autolinks: see below)
    return MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(markdown)


def test_markdown_from_data_renders_as_the_same_text_and_nothing_else():
    html = rendered(f"| a |\n|---|\n| {md(HOSTILE)} |\n\n{md(HOSTILE)}\n")
    for tag in ("<a ", "<img", "<script", "<strong", "<code", "<h1"):
        assert tag not in html, html
    assert "&lt;script&gt;" in html and "[click](http://127.0.0.1:9/steal)" in html
    # GFM's bare-address autolinks (Prefect's UI renders them) need "://" or "www.": broken
    assert "://" not in md(HOSTILE) and "www." not in md(HOSTILE)


def test_diff_md_escapes_titles_ids_and_query_text():
    side = {"run_id": "r1", "configuration": "web", "asked": None, "dataset": "d"}
    entry = {"rank": 1, "doc_id": "d<1>", "score": 1.0, "grade": None, "title": HOSTILE,
             "text": HOSTILE}
    diff = {"a": side, "b": {**side, "run_id": "r2"}, "headline": "1 worse", "metric": "ndcg@10",
            "metrics": ["ndcg@10"], "k": 10, "notes": [],
            "queries": [{"query_id": "q![x](http://127.0.0.1:9/q.png)", "text": HOSTILE,
                         "category": "c", "status": "worse", "delta": -0.5,
                         "metrics": {"ndcg@10": {"before": 1.0, "after": 0.5, "delta": -0.5}},
                         "first_relevant": {"a": 1, "b": None},
                         "abstained": {"a": False, "b": False},
                         "entered": ["[e](http://127.0.0.1:9/)"], "left": [],
                         "a": [entry], "b": [entry]}]}
    html = rendered(diff_markdown(diff))
    for tag in ("<a ", "<img", "<script"):
        assert tag not in html, html


# -- readers (medium 7, low): refuse instead of crashing --------------------------------------

def test_json_nested_100000_deep_is_refused_naming_the_file(tmp_path):
    path = tmp_path / "catalog.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError) as refused:
        read_json(path)
    assert refused.value.file == str(path) and "nested too deep" in refused.value.message


def test_a_trace_with_nul_or_deep_json_is_a_bad_line_not_a_crash(tmp_path):
    good = (FIXTURES / "traces.jsonl").read_text().splitlines()
    nul = json.loads(good[0])
    nul["trace_id"], nul["query"] = "tr-nul", "email\u0000validation"
    lines = good + [json.dumps(nul), "[" * 100_000 + "]" * 100_000]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines) + "\n")
    table = read_traces(path, max_bad_share=0.5)
    reasons = [b.reason for b in table.bad.first]
    assert any("NUL" in r for r in reasons) and any("nested too deep" in r for r in reasons)
    assert len(table) == len(good)


@pytest.mark.parametrize("text, words", [
    ('query_id,resource_id,grade,judge\n"q0\n1",geocoding,1,a\n', "control character U+000A"),
    ("query_id,resource_id,grade,judge\nq01,geocoding,1,ann\u0000ie\n", "NUL"),
    ("query_id,resource_id,grade,judge,note\nq01,geocoding,1,ann,"
     + "x" * (MAX_FIELD_CHARS + 1) + "\n", "longer than"),
])
def test_a_judgments_import_refuses_newlines_in_ids_nul_and_oversize_fields(tmp_path, text,
                                                                            words):
    collection = load_collection(fixtures=FIXTURES)
    path = tmp_path / "import.csv"
    path.write_text(text)
    with pytest.raises(InputError) as refused:
        read_judgment_file(path, collection)
    assert words in refused.value.message and refused.value.file == str(path)


BOMB = """a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    path = tmp_path / "configurations.yaml"
    path.write_text(BOMB)
    started = time.monotonic()
    with pytest.raises(InputError) as refused:
        read_yaml_mapping(path)
    assert time.monotonic() - started < 5
    assert "expands to more than 100,000 values" in refused.value.message
    # anchors and merge keys of a real file still work
    path.write_text("base: &base {timeout_s: 5}\nweb: {<<: *base, retries: 1}\n")
    assert read_yaml_mapping(path)["web"] == {"timeout_s": 5, "retries": 1}


def test_a_symbolic_link_out_of_the_dataset_folder_is_refused_without_quoting_it(tmp_path):
    secret = tmp_path / "outside.csv"
    secret.write_text("TOP-SECRET-FIRST-LINE\n")
    dataset = tmp_path / "fixtures"
    shutil.copytree(FIXTURES, dataset)
    (dataset / "judgments.csv").unlink()
    (dataset / "judgments.csv").symlink_to(secret)
    with pytest.raises(InputError) as refused:
        load_collection(fixtures=dataset)
    assert "symbolic link to a file outside the dataset folder" in refused.value.message
    assert "TOP-SECRET" not in str(refused.value) and str(secret) not in str(refused.value)
    # a link inside the folder is fine
    (dataset / "judgments.csv").unlink()
    shutil.copy(FIXTURES / "judgments.csv", dataset / "real.csv")
    (dataset / "judgments.csv").symlink_to(dataset / "real.csv")
    assert load_collection(fixtures=dataset).judgments


# -- low: the console table keeps its columns whatever a configuration is called ----------------

def test_the_console_table_keeps_its_columns_for_a_long_configuration_name():
    from searcheval.evaluation.report import TABLE_METRICS, EvaluationResult, console_table
    from searcheval.metrics.scoring import ConfigurationScores

    def scores(name):
        return ConfigurationScores(configuration=name, evaluation=None, categories={},
                                   means={m: 0.5 for _, m in TABLE_METRICS}, ci95={},
                                   by_category={}, latency_ms={"p95": 12.0})

    names = ["bm25", "a-configuration-with-a-very-long-name-indeed"]
    result = EvaluationResult(run_id="r", started_at=datetime.now(timezone.utc),
                              finished_at=None, source="s", input_hashes={}, model="m",
                              scores={n: scores(n) for n in names}, gate=None)
    lines = console_table(result).splitlines()[:3]
    # the first metric's column starts at the same character on every line
    label = TABLE_METRICS[0][0]
    column = lines[0].index(label)
    assert column == len(names[1]) + 2
    assert all(line[column:column + 5] == "0.500" for line in lines[1:]), lines
