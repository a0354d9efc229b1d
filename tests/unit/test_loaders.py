"""Loaders: the fixtures, BEIR layout, TREC qrels and runs; every bad input names file and line."""

import json
from pathlib import Path

import pytest

from searcheval.errors import InputError
from searcheval.io.beir import load_beir
from searcheval.io.files import input_hashes
from searcheval.io.fixtures import load_catalog, load_fixtures, load_judgments, load_queries
from searcheval.io.trec import load_qrels, load_trec_qrels, load_trec_run

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
DATASETS = ROOT.parent / "shared" / "datasets"
HEADER = "query_id,resource_id,grade,judged_at,judge\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_fixtures_load_completely():
    c = load_fixtures(FIXTURES)
    assert (len(c.resources), len(c.queries), len(c.judgments)) == (18, 15, 270)
    assert {q.category for q in c.queries} == {"exact-name", "paraphrase", "filtered", "no-result",
                                               "adversarial"}
    assert len(c.qrels()) == 15 and all(len(d) == 18 for d in c.qrels().values())
    assert set(input_hashes(c.sources)) == {"catalog", "queries", "judgments"}


def test_example_files_agree_with_the_fixtures():
    qrels = load_trec_qrels(FIXTURES / "example_qrels.trec")
    assert qrels == load_fixtures(FIXTURES).qrels()
    run = load_trec_run(FIXTURES / "example_run.trec")
    assert set(run) <= set(qrels)


@pytest.mark.parametrize("row, message", [
    ("q01,weather-forecast,4,2026-11-25T00:00:00Z,a", r"judgments.csv:2 field 'grade': expected a whole grade in 0..3, got '4'"),
    ("q01,weather-forecast,-1,2026-11-25T00:00:00Z,a", r"judgments.csv:2 field 'grade'"),
    ("q01,weather-forecast,two,2026-11-25T00:00:00Z,a", r"judgments.csv:2 field 'grade'.*'two'"),
    ("q01,weather-forecast,1.5,2026-11-25T00:00:00Z,a", r"judgments.csv:2 field 'grade'"),
    ("q01,weather-forecast,1,yesterday,a", r"judgments.csv:2 field 'judged_at': expected an ISO 8601"),
    ("q01,weather-forecast,1", r"judgments.csv:2: expected 5 columns, got 3"),
    ("q99,weather-forecast,1,2026-11-25T00:00:00Z,a", r"judgments.csv:2 field 'query_id'.*q99.*not a golden query"),
])
def test_bad_judgment_rows_name_file_line_and_field(tmp_path, row, message):
    path = write(tmp_path, "judgments.csv", HEADER + row + "\n")
    with pytest.raises(InputError, match=message):
        load_judgments(path, query_ids={"q01"})


def test_duplicate_judgment_names_both_lines(tmp_path):
    row = "q01,weather-forecast,1,2026-11-25T00:00:00Z,a\n"
    path = write(tmp_path, "judgments.csv", HEADER + row + row)
    with pytest.raises(InputError, match=r"judgments.csv:3: duplicate judgment of \(q01, weather-forecast\); first at line 2"):
        load_judgments(path)


@pytest.mark.parametrize("header, message", [
    ("query_id,resource_id,grade,judged_at\n", "missing column.*judge"),
    ("query_id,resource_id,grade,judged_at,judge,score\n", "unknown column.*score"),
    ("qid,resource_id,grade,judged_at,judge\n", "missing column.*query_id.*unknown column.*qid"),
])
def test_missing_or_unknown_columns(tmp_path, header, message):
    path = write(tmp_path, "judgments.csv", header + "x\n")
    with pytest.raises(InputError, match=r"judgments.csv:1: " + message):
        load_judgments(path)


@pytest.mark.parametrize("text, message", [("", "the file is empty"), ("  \n", "the file is empty")])
def test_empty_files(tmp_path, text, message):
    for loader, name in ((load_judgments, "j.csv"), (load_catalog, "c.json"),
                         (load_trec_run, "r.trec"), (load_qrels, "q.trec")):
        with pytest.raises(InputError, match=f"{name}: {message}"):
            loader(write(tmp_path, name, text))


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(InputError, match="nope.json: file not found"):
        load_catalog(tmp_path / "nope.json")
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match=r"bin.csv:1: UTF-16 text \(byte 1 of the line"):
        load_judgments(binary)
    latin = tmp_path / "latin.json"
    latin.write_bytes('[\n  {"id": "caf\u00e9"}\n]\n'.encode("latin-1"))
    column = len('  {"id": "caf') + 1  # the e-acute, one byte in Latin-1
    before = len("[\n")  # the first line's bytes
    with pytest.raises(InputError, match=rf"latin.json:2: not UTF-8 text \(byte {column} of the "
                                         rf"line\) at byte {before + column} of the file"):
        load_catalog(latin)


def resource(**overrides):
    base = {"id": "r1", "name": "R", "description": "d", "tags": [], "network": "base",
            "asset": "USDC", "price_usd": 0.01, "settlement": {"settled_30d": 3, "success_rate": 1.0},
            "updated_at": "2026-10-01T00:00:00Z"}
    base.update(overrides)
    return base


@pytest.mark.parametrize("bad, message", [
    ({"price_usd": -1}, "field 'price_usd': expected a price >= 0"),
    ({"price_usd": "cheap"}, "field 'price_usd': expected a number"),
    ({"settlement": {"settled_30d": 1, "success_rate": 1.5}}, "field 'settlement.success_rate'"),
    ({"name": ""}, "field 'name': expected a non-empty string"),
    ({"tags": "weather"}, "field 'tags': expected a list of strings"),
])
def test_bad_catalog_fields(tmp_path, bad, message):
    path = write(tmp_path, "catalog.json", json.dumps([resource(id="ok"), resource(**bad)], indent=1))
    with pytest.raises(InputError, match=r"catalog.json:\d+ " + message):
        load_catalog(path)


def test_catalog_error_points_at_the_element_line(tmp_path):
    path = write(tmp_path, "catalog.json", json.dumps([resource(id="a"), resource(id="a")], indent=1))
    line = path.read_text().splitlines().index(" {", 2) + 1  # the second element opens here
    with pytest.raises(InputError, match=rf"catalog.json:{line} field 'id': duplicate resource id 'a'"):
        load_catalog(path)


def test_invalid_json_names_the_line(tmp_path):
    path = write(tmp_path, "golden_queries.json", '[\n {"id": "q1",\n oops}\n]')
    with pytest.raises(InputError, match=r"golden_queries.json:3: invalid JSON"):
        load_queries(path)


def test_unknown_query_category_and_filter(tmp_path):
    q = {"id": "q1", "text": "t", "category": "weird", "filters": {}, "intent": ""}
    with pytest.raises(InputError, match="field 'category': expected one of exact-name"):
        load_queries(write(tmp_path, "q.json", json.dumps([q])))
    q.update(category="filtered", filters={"chain": "base"})
    with pytest.raises(InputError, match=r"field 'filters': unknown filter\(s\) \['chain'\]"):
        load_queries(write(tmp_path, "q.json", json.dumps([q])))


@pytest.mark.parametrize("line, message", [
    ("q1 Q0 d1 1 high tag", r"run.trec:2 field 'score': expected a numeric score, got 'high'"),
    ("q1 Q0 d1 1 nan tag", r"run.trec:2 field 'score': expected a finite score"),
    ("q1 Q0 d0 2 0.5 tag", r"run.trec:2 field 'docid': duplicate document 'd0' in the ranking of query 'q1'"),
    ("q1 Q0 d1 1", r"run.trec:2: expected 6 columns"),
])
def test_bad_trec_run_lines(tmp_path, line, message):
    path = write(tmp_path, "run.trec", "q1 Q0 d0 1 0.9 tag\n" + line + "\n")
    with pytest.raises(InputError, match=message):
        load_trec_run(path)


def test_trec_and_beir_qrels(tmp_path):
    trec = write(tmp_path, "q.trec", "1 0 a 2\n1 0 b 0\n2 0 a 1\n")
    assert load_qrels(trec) == {"1": {"a": 2, "b": 0}, "2": {"a": 1}}
    beir = write(tmp_path, "q.tsv", "query-id\tcorpus-id\tscore\n1\ta\t2\n")
    assert load_qrels(beir) == {"1": {"a": 2}}
    with pytest.raises(InputError, match=r"q.trec:1 field 'grade': expected a whole grade in 0..3"):
        load_qrels(write(tmp_path, "q.trec", "1 0 a 7\n"))
    with pytest.raises(InputError, match=r"bad.tsv:1: expected the header"):
        load_qrels(write(tmp_path, "bad.tsv", "query-id\tdoc\tscore\n"))


def test_beir_cranfield_loads_with_its_grade_scale():
    c = load_beir(DATASETS / "cranfield")
    assert len(c.resources) == 1400
    assert len(c.queries) == 225
    assert c.grade_scale == (0, 4)
    assert sum(len(d) for d in c.qrels().values()) == 1612


def test_beir_scifact_test_split():
    c = load_beir(DATASETS / "scifact", "test", max_queries=50)
    assert len(c.resources) == 5183 and len(c.queries) == 50
    assert all(j.grade == 1 for j in c.judgments)
