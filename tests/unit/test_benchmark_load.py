"""`searcheval benchmark load` at a tiny size: it runs, every loader reads the same data as
pandas.read_csv does, and the generated tables are in WANDS' schema."""

from __future__ import annotations

import pytest

from searcheval.bench.load import benchmark_load, generate
from searcheval.cli import main
from searcheval.io.collection import load_collection

pytestmark = pytest.mark.slow  # a few fresh interpreters


def test_the_generated_tables_load_the_same_through_every_loader(tmp_path):
    written = generate(tmp_path, products=200, queries=8, labels=400, seed=3)
    assert written["labels"] == 400
    wands = load_collection(dataset=tmp_path)
    header = (tmp_path / "product.csv").read_text(encoding="utf-8").split("\n")[0].split("\t")
    assert header[3] == "category hierarchy"  # the published spelling
    assert (len(wands.resources), len(wands.queries), len(wands.judgments)) == (200, 8, 400)
    assert any("\x85" in r.description for r in wands.resources)  # kept inside the value
    for fmt in ("tsv", "parquet", "jsonl"):
        mapped = load_collection(mapping=tmp_path / f"mapping-{fmt}.yaml")
        assert mapped.qrels() == wands.qrels(), fmt
        assert [(r.id, r.name, r.description, r.tags) for r in mapped.resources] == \
            [(r.id, r.name, r.description, r.tags) for r in wands.resources], fmt


def test_the_benchmark_runs_and_the_loaders_agree(capsys):
    assert benchmark_load(products=300, queries=10, labels=1000, repeat=1) == 0
    out = capsys.readouterr().out
    assert "every loader read the same documents and judgments: yes" in out
    for loader in ("wands", "mapped-tsv", "mapped-parquet", "mapped-jsonl", "pandas.read_csv"):
        assert f"\n{loader} " in out
    assert "goal: under 5 s and 500 MiB peak per searcheval loader: met" in out
    # the validation step on the WANDS loader's collection: its 1000 labels, no finding
    assert "of the 1000 labels loaded by the WANDS loader" in out and "(0 findings, 0 stale)" in out
    assert "goal: validation under 5 s:" in out


def test_the_cli_refuses_impossible_sizes(capsys):
    assert main(["benchmark", "load", "--products", "2", "--queries", "2", "--labels", "5"]) == 2
    assert "--labels: expected at most --products x --queries labels" in capsys.readouterr().err
