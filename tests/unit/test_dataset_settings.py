"""Dataset settings (searcheval.yaml), BEIR qrels without a header, query notes (intent, persona)
in every format, and the layout detection of a --dataset folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from searcheval.errors import InputError
from searcheval.io.beir import load_beir, load_beir_qrels
from searcheval.io.collection import dataset_layout, load_collection
from searcheval.io.fixtures import load_queries
from searcheval.io.settings import load_settings, parse_grade_map
from searcheval.io.trec import load_qrels
from searcheval.types import Query

ROOT = Path(__file__).resolve().parents[2]


def beir(folder: Path, qrels: str, *, settings: str | None = None, queries=None) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text(
        '{"_id": "d1", "title": "one", "text": "first\u0085passage"}\n'
        '{"_id": "d2", "title": "two", "text": "second\u2028passage"}\n', encoding="utf-8")
    rows = queries or [{"_id": "q1", "text": "first"}, {"_id": "q2", "text": "second"}]
    (folder / "queries.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n"
                                                  for r in rows), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    if settings is not None:
        (folder / "searcheval.yaml").write_text(settings, encoding="utf-8")
    return folder


def test_beir_qrels_without_a_header_are_read_and_noted(tmp_path):
    c = load_beir(beir(tmp_path / "b", "q1\td1\t2\nq2\td2\t1\n"))
    assert c.qrels() == {"q1": {"d1": 2}, "q2": {"d2": 1}}
    assert c.notes == ["test.tsv has no header line: read as query-id, corpus-id, score from its "
                       "first line"]
    # the passages keep U+0085 and U+2028: a JSONL line ends only at "\n"
    assert [r.description for r in c.resources] == ["first\u0085passage", "second\u2028passage"]
    with_header = load_beir(beir(tmp_path / "h", "query-id\tcorpus-id\tscore\nq1\td1\t2\n"))
    assert with_header.notes == [] and with_header.qrels()["q1"] == {"d1": 2}
    # `searcheval score` / searcheval.load_qrels read it too
    assert load_qrels(tmp_path / "b" / "qrels" / "test.tsv") == {"q1": {"d1": 2}, "q2": {"d2": 1}}


def test_a_wrong_beir_header_is_still_refused(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text("query-id\tdoc-id\tscore\nq1\td1\t1\n")
    with pytest.raises(InputError, match="q.tsv:1: expected the header"):
        load_beir_qrels(path)
    path.write_text("q1 d1 1 extra more\n")
    with pytest.raises(InputError, match="or a first line of 3 tab-separated columns"):
        load_beir_qrels(path)


def test_the_settings_file_declares_the_conventions(tmp_path):
    folder = beir(tmp_path / "b", "q1\td1\t2\nq2\td2\t1\n",
                  settings="gain: linear\nrelevance_level: 2\nno_relevant: zero\n"
                           "grade_scale: [0, 3]\ncoverage_floor: 0.4\n")
    c = load_collection(dataset=folder)
    s = c.settings
    assert (s.gain, s.relevance_level, s.no_relevant, s.grade_scale, s.coverage_floor) == \
        ("linear", 2, "zero", (0, 3), 0.4)
    assert s.source == str(folder / "searcheval.yaml")
    assert c.grade_scale == (0, 3)  # declared, not the largest grade in the file (2)
    assert c.provenance["grade_scale"] == f"dataset setting in {folder / 'searcheval.yaml'}"
    assert c.sources["settings"] == folder / "searcheval.yaml"
    # a parameter overrides the declared scale; a grade above it is refused
    with pytest.raises(InputError, match=r"test.tsv:1 field 'score': expected a whole grade in 0..1"):
        load_collection(dataset=folder, grade_scale=[0, 1])


@pytest.mark.parametrize("text, field, message", [
    ("gain: cubic\n", "gain", "expected exponential or linear, got 'cubic'"),
    ("relevance_level: two\n", "relevance_level", "expected a whole number >= 1"),
    ("grade_scale: [3, 0]\n", "grade_scale", "expected [lowest, highest] whole grades"),
    ("coverage_floor: 1.5\n", "coverage_floor", "expected a share between 0 and 1"),
    ("floor: 0.5\n", "floor", "unknown setting 'floor'; expected one of gain, relevance_level"),
    ("grade_map: [Exact]\n", "grade_map", "expected a mapping of labels to whole grades"),
    ("- gain\n", None, "expected a mapping of keys to values"),
    ("gain: [linear\n", None, "not valid YAML"),
])
def test_bad_settings_name_the_file_and_key(tmp_path, text, field, message):
    (tmp_path / "searcheval.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_settings(tmp_path)
    assert err.value.file == str(tmp_path / "searcheval.yaml")
    assert err.value.field == field and message in err.value.message


def test_a_folder_without_settings_declares_nothing(tmp_path):
    assert load_settings(tmp_path).declared() == {}


def test_grade_map_flag_syntax():
    assert parse_grade_map("Exact=2, Partial=1,Irrelevant=0") == (("Exact", 2), ("Partial", 1),
                                                                  ("Irrelevant", 0))
    with pytest.raises(InputError, match="expected LABEL=GRADE pairs") as err:
        parse_grade_map("Exact:2")
    assert err.value.field == "grade_map"
    with pytest.raises(InputError, match="expected a whole grade for label 'Exact', got 'x'"):
        parse_grade_map("Exact=x")


def test_golden_queries_keep_intent_and_persona(tmp_path):
    path = tmp_path / "golden_queries.json"
    path.write_text(json.dumps([
        {"id": "q1", "text": "t", "category": "paraphrase", "filters": {},
         "intent": "wants a forecast\u2028for tomorrow", "persona": "a farmer's agent"},
        {"id": "q2", "text": "u", "category": "paraphrase", "filters": {}}]), encoding="utf-8")
    q1, q2 = load_queries(path)
    assert (q1.intent, q1.persona) == ("wants a forecast\u2028for tomorrow", "a farmer's agent")
    assert (q2.intent, q2.persona) == ("", "")
    path.write_text(json.dumps([{"id": "q1", "text": "t", "category": "paraphrase",
                                 "filters": {}, "persona": 7}]), encoding="utf-8")
    with pytest.raises(InputError, match=r"field 'persona': expected a non-empty string, got 7"):
        load_queries(path)


def test_beir_queries_carry_notes_and_categories_in_their_metadata(tmp_path):
    rows = [{"_id": "q1", "text": "first", "metadata": {"intent": "find one", "persona": "a",
                                                        "category": "head"}},
            {"_id": "q2", "text": "second", "metadata": {}}]
    c = load_beir(beir(tmp_path / "b", "q1\td1\t1\nq2\td2\t1\n", queries=rows))
    assert [(q.category, q.intent, q.persona) for q in c.queries] == [("head", "find one", "a"),
                                                                       ("all", "", "")]
    assert c.categories == "data"


def test_notes_reach_a_backend_only_when_asked():
    q = Query("q1", "text", intent="a forecast", persona="")
    assert q.notes(["intent"]) == {"intent": "a forecast"}
    assert q.notes([]) == {}
    assert q.notes() == {"intent": "a forecast"}  # empty notes are left out
    with pytest.raises(InputError, match="unknown query note\\(s\\) 'mood'") as err:
        q.notes(["mood"])
    assert err.value.field == "notes"


def test_dataset_layouts_are_detected(tmp_path):
    assert dataset_layout(ROOT.parent / "shared" / "datasets" / "scifact") == "beir"
    shutil.copytree(ROOT / "fixtures", tmp_path / "fx")
    assert dataset_layout(tmp_path / "fx") == "fixtures"
    assert len(load_collection(dataset=tmp_path / "fx").queries) == 15
    with pytest.raises(InputError, match="expected exactly one of `fixtures`"):
        load_collection(fixtures=tmp_path / "fx", dataset=tmp_path / "fx")
    with pytest.raises(InputError, match="a grade map applies to text labels") as err:
        load_collection(dataset=tmp_path / "fx", grade_map={"Exact": 3})
    assert err.value.field == "grade_map"


def test_the_msmarco_subset_loads_with_its_raw_u0085():
    c = load_collection(dataset=ROOT.parent / "shared" / "datasets" / "msmarco-trecdl-subset")
    assert len(c.resources) == 5000 and len(c.queries) == 43
    passage = next(r for r in c.resources if r.id == "3843267")
    assert "\x85" in passage.description
    assert c.grade_scale == (0, 3)
