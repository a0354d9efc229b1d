"""Table mappings over CSV, TSV, JSONL and Parquet files: the same collection whatever the format,
grade maps and scales, query notes, values holding U+0085 / U+2028, and refusals naming the file,
the line (or row) and the column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searcheval.errors import InputError
from searcheval.io.collection import load_collection
from searcheval.io.mapped import load_mapped

DOCS = [
    {"sku": "A1", "title": "oak desk", "about": "a desk\x85 of solid oak", "kind": "Desks|Office",
     "stars": "4.5"},
    {"sku": "B2", "title": "pine shelf", "about": "five shelves\u2028in pine", "kind": "Shelves",
     "stars": ""},
    {"sku": "C3", "title": "lamp", "about": "", "kind": "", "stars": "3"},
]
QUERIES = [
    {"qid": "q1", "text": 'oak "writing desk"', "segment": "furniture", "why": "a desk to write at",
     "who": "a student"},
    {"qid": "q2", "text": "shelf 5 tier", "segment": "furniture", "why": "", "who": ""},
    {"qid": "q3", "text": "lamp", "segment": "", "why": "light for\u2028reading", "who": ""},
]
GRADES = [("q1", "A1", "Exact"), ("q1", "B2", "Irrelevant"), ("q2", "B2", "Partial"),
          ("q3", "C3", "Exact")]

MAPPING = """\
name: shop
documents:
  file: docs.{ext}
  id: sku
  title: title
  body: about
  tags: kind
  fields: [stars]
queries:
  file: queries.{ext}
  id: qid
  text: text
  category: segment
  intent: why
  persona: who
judgments:
  file: grades.{ext}
  query_id: qid
  doc_id: sku
  grade: label
settings:
  grade_map: {{Exact: 3, Partial: 1, Irrelevant: 0}}
  relevance_level: 2
  coverage_floor: 0.5
"""


def write_table(path: Path, rows: list[dict], fmt: str) -> None:
    columns = list(rows[0])
    if fmt in ("csv", "tsv"):
        import csv

        with open(path, "w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
            writer.writerow(columns)
            writer.writerows([[r[c] for c in columns] for r in rows])
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                        encoding="utf-8")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({c: [r[c] for r in rows] for c in columns}), path)


def write_dataset(folder: Path, fmt: str, mapping: str = MAPPING, *, docs=DOCS, queries=QUERIES,
                  grades=GRADES) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_table(folder / f"docs.{fmt}", docs, fmt)
    write_table(folder / f"queries.{fmt}", queries, fmt)
    write_table(folder / f"grades.{fmt}", [{"qid": q, "sku": d, "label": g} for q, d, g in grades],
                fmt)
    (folder / "mapping.yaml").write_text(mapping.format(ext=fmt), encoding="utf-8")
    return folder / "mapping.yaml"


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_every_format_gives_the_same_collection(tmp_path, fmt):
    c = load_collection(mapping=write_dataset(tmp_path / fmt, fmt))
    assert c.name == "shop"
    assert [(r.id, r.name, r.description, r.tags, r.fields) for r in c.resources] == [
        ("A1", "oak desk", "a desk\x85 of solid oak", ("Desks", "Office"), (("stars", "4.5"),)),
        ("B2", "pine shelf", "five shelves\u2028in pine", ("Shelves",), ()),
        ("C3", "lamp", "", (), (("stars", "3"),)),
    ]
    assert [(q.id, q.text, q.category, q.intent, q.persona) for q in c.queries] == [
        ("q1", 'oak "writing desk"', "furniture", "a desk to write at", "a student"),
        ("q2", "shelf 5 tier", "furniture", "", ""),
        ("q3", "lamp", "unclassified", "light for\u2028reading", ""),
    ]
    assert c.qrels() == {"q1": {"A1": 3, "B2": 0}, "q2": {"B2": 1}, "q3": {"C3": 3}}
    assert c.grade_scale == (0, 3)
    assert (c.settings.relevance_level, c.settings.coverage_floor) == (2, 0.5)
    assert c.categories == "data"
    assert set(c.sources) == {"mapping", "documents", "queries", "judgments"}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_repeated_query_or_document_id_is_one_string(tmp_path, fmt):
    # a run keeps the judgments to its end: one string per distinct id, not one per row
    j = load_mapped(write_dataset(tmp_path / fmt, fmt)).judgments
    assert [(x.query_id, x.doc_id) for x in j] == [(q, d) for q, d, _ in GRADES]
    assert j[0].query_id is j[1].query_id  # q1 on rows 1 and 2
    assert j[1].doc_id is j[2].doc_id  # B2 on rows 2 and 3


def test_whole_number_grades_need_no_map_and_infer_the_scale(tmp_path):
    mapping = MAPPING.split("settings:")[0]
    path = write_dataset(tmp_path / "n", "csv", mapping,
                         grades=[("q1", "A1", "2"), ("q2", "B2", "1.0"), ("q3", "C3", "0")])
    c = load_mapped(path)
    assert c.qrels() == {"q1": {"A1": 2}, "q2": {"B2": 1}, "q3": {"C3": 0}}
    assert c.grade_scale == (0, 2)
    assert c.provenance["grade_scale"].startswith("inferred")
    assert load_mapped(path, grade_scale=(0, 4)).grade_scale == (0, 4)
    with pytest.raises(InputError, match=r"grade 2 is outside the grade scale 0..1") as err:
        load_mapped(path, grade_scale=(0, 1))
    assert (err.value.line, err.value.field) == (2, "label")


def test_a_parameter_grade_map_overrides_the_mappings(tmp_path):
    c = load_mapped(write_dataset(tmp_path / "m", "csv"),
                    grade_map={"Exact": 2, "Partial": 1, "Irrelevant": 0})
    assert c.qrels()["q1"] == {"A1": 2, "B2": 0} and c.grade_scale == (0, 2)


def refusal(tmp_path, fmt="csv", mapping=MAPPING, **tables) -> InputError:
    path = write_dataset(tmp_path / "bad", fmt, mapping, **tables)
    with pytest.raises(InputError) as err:
        load_mapped(path)
    return err.value


def test_a_mapped_column_the_table_lacks_is_refused_with_the_columns_it_has(tmp_path):
    err = refusal(tmp_path, mapping=MAPPING.replace("title: title", "title: name"))
    assert err.file == str((tmp_path / "bad" / "docs.csv").resolve())
    assert (err.line, err.field) == (1, "name")
    assert "no column 'name' (mapped as documents.title in mapping.yaml); the columns are " \
           "sku, title, about, kind, stars" in err.message


def test_parquet_and_jsonl_name_the_row_or_line(tmp_path):
    err = refusal(tmp_path, "parquet", mapping=MAPPING.replace("grade: label", "grade: grade"))
    assert err.field == "grade" and "no column 'grade'" in err.message
    dup = refusal(tmp_path, "parquet", docs=DOCS + [DOCS[0]])
    assert dup.field == "sku" and dup.message.startswith("row 4: duplicate document id 'A1'; "
                                                         "first at row 1")
    missing = refusal(tmp_path, "jsonl", queries=QUERIES[:2] + [{"qid": "q3", "segment": "x",
                                                                 "why": "", "who": ""}])
    assert (missing.line, missing.field) == (3, "text")
    assert "no key 'text' on this line" in missing.message


@pytest.mark.parametrize("tables, line, field, message", [
    ({"docs": DOCS + [DOCS[1]]}, 5, "sku", "duplicate document id 'B2'; first at line 3"),
    ({"queries": QUERIES + [QUERIES[0]]}, 5, "qid", "duplicate query id 'q1'; first at line 2"),
    ({"grades": GRADES + [("q1", "A1", "Partial")]}, 6, None,
     "duplicate judgment of (q1, A1); first at line 2"),
    ({"grades": GRADES + [("q2", "A1", "Great")]}, 6, "label",
     "grade 'Great' is not in the grade map (Exact=3, Partial=1, Irrelevant=0)"),
    ({"grades": GRADES + [("q9", "A1", "Exact")]}, 6, "qid",
     "judgment of query 'q9', which the queries table does not list"),
    ({"queries": QUERIES + [{"qid": "q4", "text": " ", "segment": "", "why": "", "who": ""}]}, 5,
     "text", "expected the query's text"),
])
def test_bad_rows_name_the_line_and_column(tmp_path, tables, line, field, message):
    err = refusal(tmp_path, **tables)
    assert (err.line, err.field) == (line, field)
    assert message in err.message


def test_empty_tables_and_files_are_refused(tmp_path):
    path = write_dataset(tmp_path / "e", "csv")
    (tmp_path / "e" / "grades.csv").write_text("qid,sku,label\n", encoding="utf-8")
    with pytest.raises(InputError, match="the table holds no judgment"):
        load_mapped(path)
    (tmp_path / "e" / "grades.csv").write_text("", encoding="utf-8")
    with pytest.raises(InputError, match="grades.csv:1: the file is empty"):
        load_mapped(path)


@pytest.mark.parametrize("change, field, message", [
    (lambda m: m.replace("  id: sku\n", "", 1), "documents.id", "missing; name the column"),
    (lambda m: m.replace("  title: title", "  headline: title"), "documents.headline",
     "unknown key 'headline'"),
    (lambda m: m.replace("  file: docs.csv", "  file: docs.xls"), "documents.format",
     "cannot tell the format of docs.xls"),
    (lambda m: m.replace("relevance_level: 2", "relevance_level: 0"), "settings.relevance_level",
     "expected a whole number >= 1"),
    (lambda m: m.replace("relevance_level: 2", "gain: cubic"), "settings.gain",
     "expected exponential or linear"),
    (lambda m: m.replace("coverage_floor: 0.5", "coverage_floor: 90"), "settings.coverage_floor",
     "expected a share between 0 and 1"),
    (lambda m: m.replace("judgments:", "labels:"), "labels", "unknown key 'labels'"),
    (lambda m: m.replace("  file: queries.csv", "  file: queries.csv\n  sql: SELECT 1"),
     "queries", "expected exactly one of `file` or `sql`"),
])
def test_bad_mappings_name_the_key(tmp_path, change, field, message):
    path = write_dataset(tmp_path / "m", "csv")
    path.write_text(change(path.read_text()), encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_mapped(path)
    assert err.value.file == str(path) and err.value.field == field
    assert message in err.value.message


def test_a_missing_data_file_is_named(tmp_path):
    path = write_dataset(tmp_path / "m", "csv")
    (tmp_path / "m" / "queries.csv").unlink()
    with pytest.raises(InputError, match=r"queries.csv: file not found \(named by queries.file"):
        load_mapped(path)
