"""A table mapping whose tables are SQL queries over the project's Postgres (the real embedded
server): rows load like a file's, the statements run read-only, and Postgres' refusals are named."""

from __future__ import annotations

import pytest

from searcheval.errors import InputError
from searcheval.evaluation.inputs import load_collection
from searcheval.io.collection import collection_hashes
from searcheval.store import database

pytestmark = pytest.mark.slow

MAPPING = """\
documents:
  sql: SELECT sku, title, about FROM shop_products ORDER BY sku
  id: sku
  title: title
  body: about
queries:
  sql: SELECT qid, text, segment, intent FROM shop_queries ORDER BY qid
  id: qid
  text: text
  category: segment
  intent: intent
judgments:
  sql: {judgments}
  query_id: qid
  doc_id: sku
  grade: grade
"""
JUDGMENTS = "SELECT qid, sku, grade FROM shop_grades ORDER BY qid, sku"


@pytest.fixture(scope="module")
def shop(database_module_url):
    with database.connect(database_module_url) as conn:
        conn.execute("CREATE TABLE shop_products (sku text, title text, about text)")
        conn.execute("CREATE TABLE shop_queries (qid text, text text, segment text, intent text)")
        conn.execute("CREATE TABLE shop_grades (qid text, sku text, grade integer)")
        conn.execute("INSERT INTO shop_products VALUES ('A1', 'oak desk', 'solid\u0085oak'), "
                     "('B2', 'pine shelf', 'five\u2028shelves')")
        conn.execute("INSERT INTO shop_queries VALUES ('q1', 'oak desk', 'furniture', 'to write'),"
                     " ('q2', 'shelf', 'furniture', NULL)")
        conn.execute("INSERT INTO shop_grades VALUES ('q1', 'A1', 2), ('q1', 'B2', 0), "
                     "('q2', 'B2', 1)")
    return database_module_url


def write(tmp_path, judgments=JUDGMENTS):
    path = tmp_path / "shop.yaml"
    path.write_text(MAPPING.format(judgments=judgments), encoding="utf-8")
    return path


def test_sql_tables_load_like_files(shop, tmp_path):
    c = load_collection(mapping=write(tmp_path), database_url=shop)
    assert c.name == "shop"
    assert [(r.id, r.name, r.description) for r in c.resources] == [
        ("A1", "oak desk", "solid\u0085oak"), ("B2", "pine shelf", "five\u2028shelves")]
    assert [(q.id, q.category, q.intent) for q in c.queries] == [("q1", "furniture", "to write"),
                                                                  ("q2", "furniture", "")]
    assert c.qrels() == {"q1": {"A1": 2, "B2": 0}, "q2": {"B2": 1}}
    assert c.grade_scale == (0, 2)
    assert set(c.sources) == {"mapping"}
    # the rows are the tables' part of the fingerprint: a changed grade changes it
    before = collection_hashes(c)
    assert set(before) == {"mapping", "documents (sql)", "queries (sql)", "judgments (sql)"}
    with database.connect(shop) as conn:
        conn.execute("UPDATE shop_grades SET grade = 1 WHERE qid = 'q1' AND sku = 'B2'")
    try:
        after = collection_hashes(load_collection(mapping=write(tmp_path), database_url=shop))
    finally:
        with database.connect(shop) as conn:
            conn.execute("UPDATE shop_grades SET grade = 0 WHERE qid = 'q1' AND sku = 'B2'")
    assert after["judgments (sql)"] != before["judgments (sql)"]
    assert after["documents (sql)"] == before["documents (sql)"]


def test_a_statement_that_writes_is_refused_and_changes_nothing(shop, tmp_path):
    path = write(tmp_path, "DELETE FROM shop_grades RETURNING qid, sku, grade")
    with pytest.raises(InputError) as err:
        load_collection(mapping=path, database_url=shop)
    assert err.value.file == str(path) and err.value.field == "judgments.sql"
    assert "read-only transaction" in err.value.message
    with database.connect(shop) as conn:
        assert conn.execute("SELECT count(*) FROM shop_grades").fetchone()[0] == 3


def test_postgres_refusals_and_bad_rows_are_named(shop, tmp_path):
    with pytest.raises(InputError, match='relation "no_such_table" does not exist') as err:
        load_collection(mapping=write(tmp_path, "SELECT qid, sku, grade FROM no_such_table"),
                        database_url=shop)
    assert err.value.field == "judgments.sql"
    with pytest.raises(InputError) as err:
        load_collection(mapping=write(tmp_path, "SELECT qid, sku, grade FROM shop_grades "
                                                "UNION ALL SELECT 'q2', 'A1', -1"),
                        database_url=shop)
    assert err.value.field == "grade"
    assert err.value.message == "judgments.sql: row 4: grade -1 is outside the grade scale >= 0"
    with pytest.raises(InputError, match="no column 'grade'"):
        load_collection(mapping=write(tmp_path, "SELECT qid, sku FROM shop_grades"),
                        database_url=shop)
