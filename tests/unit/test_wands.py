"""The WANDS loader on small samples in WANDS' published schema, written by the tests (the full
collection is not in the repository): fields, grades through the grade map, settings, streaming
of lines that hold U+0085 / U+2028, and every refusal naming file, line and column."""

from __future__ import annotations

from pathlib import Path

import pytest

from searcheval.errors import InputError
from searcheval.io.collection import dataset_layout, load_collection
from searcheval.io.wands import load_wands

PRODUCT_HEADER = ("product_id\tproduct_name\tproduct_class\tcategory hierarchy\tproduct_description"
                  "\tproduct_features\trating_count\taverage_rating\treview_count\n")
PRODUCTS = [
    "0\tsolid wood platform bed\tBeds\tFurniture / Bedroom Furniture / Beds & Headboards / Beds"
    "\tgood , deep sleep\x85 on a 27.5 '' frame\toverallwidth-sidetoside:64.7|color:brown\t15.0"
    "\t4.5\t15.0\n",
    "1\tall-clad 7 qt . slow cooker\tSlow Cookers\tKitchen & Tabletop / Small Kitchen Appliances"
    "\tcreate delicious\u2028slow-cooked meals\tcapacity:7 qt\t\t\t\n",
    "2\tfletcher 27.5 '' wide armchair\tTeen Lounge Furniture|Accent Chairs\tFurniture / Living Room"
    "\t\tseat:foam\t3.0\t4.0\t2.0\n",
]
QUERIES = "query_id\tquery\tquery_class\n0\tsalon chair\tMassage Chairs\n1\tslow cooker 7\u2028qt\tSlow Cookers\n2\tdesk for kids\t\n"
LABELS = ("id\tquery_id\tproduct_id\tlabel\n0\t0\t2\tPartial\n1\t0\t0\tIrrelevant\n"
          "2\t1\t1\tExact\n3\t1\t0\tIrrelevant\n4\t2\t0\tPartial\n")


def write_sample(folder: Path, *, products=None, queries=QUERIES, labels=LABELS,
                 settings: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "product.csv").write_text(
        products if products is not None else PRODUCT_HEADER + "".join(PRODUCTS), encoding="utf-8")
    (folder / "query.csv").write_text(queries, encoding="utf-8")
    (folder / "label.csv").write_text(labels, encoding="utf-8")
    if settings is not None:
        (folder / "searcheval.yaml").write_text(settings, encoding="utf-8")
    return folder


def test_products_queries_and_labels_load_with_their_fields(tmp_path):
    c = load_wands(write_sample(tmp_path / "wands"))
    assert dataset_layout(tmp_path / "wands") == "wands"
    assert [r.id for r in c.resources] == ["0", "1", "2"]
    bed, cooker, chair = c.resources
    # U+0085 and U+2028 stay inside the value: a line ends only at "\n"
    assert bed.description == "good , deep sleep\x85 on a 27.5 '' frame"
    assert cooker.description == "create delicious\u2028slow-cooked meals"
    assert bed.tags == ("Beds",) and chair.tags == ("Teen Lounge Furniture", "Accent Chairs")
    assert dict(bed.fields) == {
        "product_class": "Beds",
        "category hierarchy": "Furniture / Bedroom Furniture / Beds & Headboards / Beds",
        "product_features": "overallwidth-sidetoside:64.7|color:brown",
        "rating_count": "15.0", "average_rating": "4.5", "review_count": "15.0"}
    assert "rating_count" not in dict(cooker.fields)  # empty ratings are left out
    assert chair.description == ""
    assert [(q.id, q.text, q.category) for q in c.queries] == [
        ("0", "salon chair", "Massage Chairs"), ("1", "slow cooker 7\u2028qt", "Slow Cookers"),
        ("2", "desk for kids", "unclassified")]
    # the default grade map: Exact=3, Partial=1, Irrelevant=0
    assert c.qrels() == {"0": {"2": 1, "0": 0}, "1": {"1": 3, "0": 0}, "2": {"0": 1}}
    assert [j.line for j in c.judgments] == [2, 3, 4, 5, 6]
    assert c.grade_scale == (0, 3)
    assert set(c.sources) == {"products", "queries", "labels"}
    assert c.provenance["grade_map"].startswith("default")


def test_repeated_ids_classes_and_field_values_are_one_object_each(tmp_path):
    # a run keeps every product and label to its end: at WANDS' size the copies of repeated ids,
    # classes and (column, value) pairs were ~150 MiB of the run's process
    twin = PRODUCTS[0].replace("0\tsolid wood platform bed", "3\tlow platform bed").replace(
        "overallwidth-sidetoside:64.7|color:brown", "color:white")
    c = load_wands(write_sample(tmp_path / "wands",
                                products=PRODUCT_HEADER + "".join(PRODUCTS) + twin))
    bed, twin_bed = c.resources[0], c.resources[3]
    assert twin_bed.id == "3" and twin_bed.tags == ("Beds",) and bed.tags is twin_bed.tags
    shared = {name: value for (name, value) in bed.fields if (name, value) in twin_bed.fields}
    assert shared == {"product_class": "Beds",
                      "category hierarchy": "Furniture / Bedroom Furniture / Beds & Headboards / Beds",
                      "rating_count": "15.0", "average_rating": "4.5", "review_count": "15.0"}
    for pair in bed.fields:
        twins = [other for other in twin_bed.fields if other == pair]
        assert all(other is pair for other in twins), pair  # equal pairs: the same tuple
    assert dict(twin_bed.fields)["product_features"] == "color:white"
    # ids of more than one character (CPython keeps one object per 1-character string anyway)
    products = PRODUCT_HEADER + "".join(PRODUCTS[:2]).replace("0\tsolid", "p100\tsolid").replace(
        "1\tall-clad", "p200\tall-clad")
    queries = "query_id\tquery\tquery_class\nq10\tsalon chair\t\nq20\tslow cooker\t\n"
    labels = ("id\tquery_id\tproduct_id\tlabel\n0\tq10\tp100\tExact\n1\tq10\tp200\tPartial\n"
              "2\tq20\tp100\tIrrelevant\n")
    j = load_wands(write_sample(tmp_path / "ids", products=products, queries=queries,
                                labels=labels)).judgments
    assert [(x.query_id, x.doc_id, x.grade) for x in j] == [
        ("q10", "p100", 3), ("q10", "p200", 1), ("q20", "p100", 0)]
    assert j[0].query_id is j[1].query_id and j[0].doc_id is j[2].doc_id


def test_the_grade_map_is_a_parameter_and_a_dataset_setting(tmp_path):
    paper = load_wands(write_sample(tmp_path / "a"), grade_map={"Exact": 2, "Partial": 1,
                                                               "Irrelevant": 0})
    assert paper.qrels()["1"] == {"1": 2, "0": 0} and paper.grade_scale == (0, 2)
    assert paper.provenance["grade_map"] == "run parameter grade_map"
    folder = write_sample(tmp_path / "b", settings="grade_map: {Exact: 2, Partial: 1, Irrelevant: 0}\n"
                                                   "relevance_level: 2\n")
    declared = load_collection(dataset=folder)
    assert declared.qrels()["1"] == {"1": 2, "0": 0}
    assert declared.settings.relevance_level == 2
    assert declared.provenance["grade_map"] == f"dataset setting in {folder / 'searcheval.yaml'}"
    assert "settings" in declared.sources  # the settings file is part of the fingerprint
    # the parameter wins over the folder's setting
    assert load_wands(folder, grade_map={"Exact": 5, "Partial": 1, "Irrelevant": 0}).qrels()["1"]["1"] == 5


def test_the_repositorys_dataset_subfolder_is_found(tmp_path):
    write_sample(tmp_path / "WANDS" / "dataset")
    c = load_collection(dataset=tmp_path / "WANDS")
    assert len(c.resources) == 3 and c.name == "WANDS"


def test_crlf_line_endings_and_quoted_cells(tmp_path):
    products = (PRODUCT_HEADER + '7\t"a\ttabbed name"\tBeds\t\tdesc\t\t\t\t\n').replace("\n", "\r\n")
    c = load_wands(write_sample(tmp_path / "w", products=products,
                                labels="id\tquery_id\tproduct_id\tlabel\r\n0\t0\t7\tExact\r\n"))
    assert c.resources[0].name == "a\ttabbed name"
    assert c.qrels()["0"] == {"7": 3}


@pytest.mark.parametrize("file, text, line, field, message", [
    ("label.csv", LABELS + "5\t2\t1\tMaybe\n", 7, "label", "label 'Maybe' is not in the grade map "
     "(Exact=3, Partial=1, Irrelevant=0)"),
    ("label.csv", LABELS + "5\t0\t2\tExact\n", 7, None, "duplicate label of (0, 2); first at line 2"),
    ("label.csv", LABELS + "3\t2\t1\tExact\n", 7, "id", "duplicate label id '3'; first at line 5"),
    ("label.csv", LABELS + "5\t9\t1\tExact\n", 7, "query_id", "label of query '9', which query.csv "
     "does not list"),
    ("label.csv", "id\tquery\tproduct_id\tlabel\n0\t0\t1\tExact\n", 1, None,
     "missing column(s) 'query_id'"),
    ("label.csv", "", 1, None, "the file is empty"),
    ("label.csv", "id\tquery_id\tproduct_id\tlabel\n", None, None, "the file holds no label"),
    ("query.csv", QUERIES + "1\tagain\tBeds\n", 5, "query_id", "duplicate query id '1'; first at "
     "line 3"),
    ("query.csv", QUERIES + "3\t\tBeds\n", 5, "query", "expected a value"),
    ("query.csv", QUERIES + "3\tonly two\n", 5, None, "expected 3 tab-separated columns, got 2"),
    ("product.csv", PRODUCT_HEADER + PRODUCTS[0] + PRODUCTS[0], 3, "product_id",
     "duplicate product id '0'; first at line 2"),
    ("product.csv", PRODUCT_HEADER + "5\tname\tBeds\t\t\t\tmany\t\t\n", 2, "rating_count",
     "expected a number or nothing, got 'many'"),
    ("product.csv", PRODUCT_HEADER.replace("product_name", "name"), 1, None,
     "missing column(s) 'product_name'"),
])
def test_refusals_name_file_line_and_column(tmp_path, file, text, line, field, message):
    folder = write_sample(tmp_path / "w")
    (folder / file).write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_wands(folder)
    assert err.value.file == str(folder / file)
    assert (err.value.line, err.value.field) == (line, field)
    assert message in err.value.message


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    folder = write_sample(tmp_path / "w")
    (folder / "query.csv").write_bytes(b"\xef\xbb\xbf" + QUERIES.encode())
    assert [q.id for q in load_wands(folder).queries] == ["0", "1", "2"]


def test_text_that_is_not_utf8_names_the_line(tmp_path):
    folder = write_sample(tmp_path / "w")
    # "3", TAB, "c", "a", "f", then 0xE9 (Latin-1 é) as the 6th byte of line 5
    (folder / "query.csv").write_bytes(QUERIES.encode() + b"3\tcaf\xe9\tBeds\n")
    with pytest.raises(InputError, match=r"query.csv:5: not UTF-8 text \(byte 6 of the line\)"):
        load_wands(folder)


def test_a_grade_map_outside_the_declared_scale_is_refused(tmp_path):
    folder = write_sample(tmp_path / "w", settings="grade_scale: [0, 2]\n")
    with pytest.raises(InputError, match="Exact=3, outside the grade scale 0..2") as err:
        load_wands(folder)
    assert err.value.field == "grade_map"
    with pytest.raises(InputError, match="expected a whole grade >= 0 for label 'Exact'"):
        load_wands(folder, grade_map={"Exact": "high"})


def test_a_folder_without_the_three_files_is_not_wands(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "product.csv").write_text(PRODUCT_HEADER)
    with pytest.raises(InputError, match="not a dataset layout searcheval knows"):
        load_collection(dataset=tmp_path / "x")
    with pytest.raises(InputError, match=r"missing: query.csv, label.csv"):
        load_wands(tmp_path / "x")


def test_max_queries_keeps_the_first_queries_and_their_labels(tmp_path):
    c = load_collection(dataset=write_sample(tmp_path / "w"), max_queries=1)
    assert [q.id for q in c.queries] == ["0"] and {j.query_id for j in c.judgments} == {"0"}
