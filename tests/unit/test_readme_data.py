"""docs/configurations-and-backends.md's "Bring your own data" examples, executed: the mapping loads over tables written in
the shapes it names, the settings file gives TREC-DL's conventions, the segment floors trip the
gate, and the WANDS command line is one the CLI accepts for a folder it detects as WANDS."""

from __future__ import annotations

import csv
import json
import re
import shlex
import sys
from pathlib import Path

import yaml

from searcheval.cli import build_parser
from searcheval.evaluation.baseline import Baseline
from searcheval.evaluation.conventions import resolve_conventions
from searcheval.evaluation.gate import check_gate
from searcheval.io.collection import collection_hashes, dataset_layout, load_collection
from searcheval.io.settings import settings_from
from searcheval.metrics.scoring import score_run
from searcheval.metrics.segments import is_segment
from searcheval.types import Collection, Judgment, Query, RankedRun, Resource

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "docs" / "configurations-and-backends.md").read_text(encoding="utf-8").split("## Bring your own data")[1] \
    .split("\n## ")[0]


def block(heading: str, language: str) -> str:
    part = SECTION.split(f"### {heading}")[1].split("\n### ")[0]
    return re.search(rf"```{language}\n(.*?)```", part, re.S).group(1)


def write_rows(path: Path, columns: list[str], rows: list[list]) -> None:
    if path.suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)}), path)
        return
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t" if path.suffix == ".tsv" else ",",
                            lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)


def test_the_mapping_example_loads(tmp_path):
    text = block("A mapping of your own tables", "yaml")
    spec = yaml.safe_load(text)
    (tmp_path / "shop.yaml").write_text(text, encoding="utf-8")
    d, q, j = spec["documents"], spec["queries"], spec["judgments"]
    doc_columns = [d["id"], d["title"], *d["body"], d["tags"], *d["fields"]]
    write_rows(tmp_path / d["file"], doc_columns,
               [["s1", "oak desk", "solid oak", "two drawers", "Desks|Office", "Acme", "4.5"],
                ["s2", "lamp", "brass\u2028lamp", "", "Lighting", "Lumo", ""]])
    write_rows(tmp_path / q["file"], [q["id"], q["text"], q["category"], q["intent"], q["persona"]],
               [["q1", "oak desk", "furniture", "a desk to write at", "a student"],
                ["q2", "brass lamp 40w", "lighting", "", ""]])
    labels = list(spec["settings"]["grade_map"])
    write_rows(tmp_path / j["file"], [j["query_id"], j["doc_id"], j["grade"]],
               [["q1", "s1", labels[0]], ["q1", "s2", labels[-1]], ["q2", "s2", labels[1]]])
    c = load_collection(mapping=tmp_path / "shop.yaml")
    assert c.name == "shop"
    assert c.resources[0].description == "solid oak\ntwo drawers"
    assert c.resources[0].tags == ("Desks", "Office")
    assert dict(c.resources[0].fields) == {"brand": "Acme", "rating": "4.5"}
    assert c.qrels() == {"q1": {"s1": 3, "s2": 0}, "q2": {"s2": 2}}
    assert (c.queries[0].intent, c.queries[0].persona) == ("a desk to write at", "a student")
    conventions = resolve_conventions(c)
    assert conventions.relevance_level == 2 and conventions.grade_scale == (0, 3)
    assert set(collection_hashes(c)) == {"mapping", "documents", "queries", "judgments"}


def test_the_settings_example_is_trec_dls_conventions():
    settings = settings_from(yaml.safe_load(block("Dataset settings", "yaml")),
                             file="searcheval.yaml")
    collection = Collection("dl", [Resource("d", "", "")], [Query("q", "x")],
                            [Judgment("q", "d", 3)], grade_scale=(0, 3), settings=settings)
    c = resolve_conventions(collection)
    assert (c.gain, c.relevance_level, c.no_relevant, c.grade_scale, c.coverage_floor) == \
        ("linear", 2, "zero", (0, 3), 0.5)
    assert c.settings().gain == "linear"


def test_the_segment_floors_example_trips_on_long_queries():
    floors = json.loads(block("Segments from the query itself", "json"))["category_floors"]
    assert all(is_segment(label) for label in floors)
    queries = [Query("a", "oak desk"), Query("b", "solid oak desk for kids")]
    run = RankedRun("fused", {"a": [("x", 1.0)], "b": [("y", 1.0)]})
    scores = score_run(run, {"a": {"x": 1}, "b": {"x": 1}}, queries, ("ndcg@10", "recall@20"))
    gate = check_gate(Baseline("fused", {"ndcg@10": scores.means["ndcg@10"]},
                               category_floors=floors), scores)
    assert [(t.category, t.metric) for t in gate.tripped] == [("words:4+", "ndcg@10")]


def test_the_wands_command_line_is_accepted_for_a_wands_checkout(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_wands import write_sample

    line = next(c for c in block("WANDS", "").strip().split("\n") if c.startswith("searcheval"))
    monkeypatch.chdir(tmp_path)
    write_sample(tmp_path / "WANDS" / "dataset")  # the repository's layout
    args = build_parser().parse_args(shlex.split(line)[1:])
    assert args.command == "run" and dataset_layout(args.dataset) == "wands"
    assert len(load_collection(dataset=args.dataset).judgments) == 5
    paper = build_parser().parse_args(
        ["run", "--dataset", "WANDS", "--grade-map", "Exact=2,Partial=1,Irrelevant=0"])
    assert paper.grade_map == re.search(r"--grade-map (\S+)`", SECTION).group(1)


def test_every_flag_of_the_conventions_table_is_a_flag_of_run():
    from searcheval.cli.common import option_flags

    flags = set(option_flags(build_parser()).values())
    table = SECTION.split("| convention |")[1].split("\n\n")[0]
    named = re.findall(r"`(--[a-z-]+)", table)
    assert named == ["--gain", "--relevance-level", "--no-relevant", "--grade-scale",
                     "--grade-map", "--coverage-floor"]
    assert set(named) <= flags and "--mapping" in flags
