"""docs/configurations-and-backends.md's "Evaluate your own search" examples, executed: the configurations file loads, the
refusal it quotes is the one searcheval prints, the command lines are ones the CLI accepts, the
http example is the shipped Elasticsearch example (tested against the example service in
tests/integration/test_http_kind.py), the Python retriever runs as a `python` configuration and
the `trec` entry runs a run file."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from searcheval import load_collection
from searcheval.cli import build_parser, main
from searcheval.io.trec import write_trec_run
from searcheval.rankers.configs import configurations_from, load_configurations
from searcheval.rankers.registry import RunContext, run_configuration
from searcheval.types import RankedRun

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "docs" / "configurations-and-backends.md").read_text(encoding="utf-8") \
    .split("## Evaluate your own search")[1].split("\n## ")[0]
QUERIES = load_collection(fixtures=ROOT / "fixtures").queries


def blocks(heading: str, language: str) -> list[str]:
    part = SECTION.split(f"### {heading}")[1].split("\n### ")[0]
    return re.findall(rf"```{language}\n(.*?)```", part, re.S)


def test_the_configurations_file_example_loads_and_its_variant_has_its_own_hash():
    text = blocks("The configurations file", "yaml")[0]
    configurations = configurations_from(yaml.safe_load(text), "configurations.yaml")
    shipped = load_configurations(ROOT / "configurations.yaml")
    assert configurations.served == "fused"
    assert {n: configurations[n].sha256 for n in ("bm25", "dense", "fused")} \
        == {n: shipped[n].sha256 for n in ("bm25", "dense", "fused")}
    variant = configurations["bm25_b05"]
    assert variant.params["b"] == 0.5 and variant.params["k1"] == 1.2
    assert variant.sha256 != shipped["bm25"].sha256
    assert variant.prices == {"per_cpu_second": 0.00005}


def test_the_quoted_refusal_is_the_one_printed(capsys, tmp_path):
    quoted = re.search(r"```\n(searcheval: configurations.yaml .*?)\n```", SECTION).group(1)
    code = main(["run", "--set", "fused.rrf_k=-3", "--output", str(tmp_path / "out")])
    assert code == 2 and capsys.readouterr().err.strip() == quoted


def test_the_command_lines_are_accepted():
    commands = [line.split("#")[0].strip() for line in
                blocks("Try a change without editing a file", "")[0].splitlines()]
    parser = build_parser()
    for command in filter(None, commands):
        args = parser.parse_args(shlex.split(command)[1:])
        assert args.command == "run"
    assert args.candidate == "bm25_b05"


def test_the_http_example_is_the_shipped_elasticsearch_example():
    readme = yaml.safe_load(blocks("Your search service: `http`", "yaml")[0])
    shipped = yaml.safe_load((ROOT / "examples/configurations/elasticsearch.yaml").read_text())
    assert readme == shipped


def test_the_python_example_runs_as_a_configuration(tmp_path, monkeypatch):
    code, config = blocks("Your retriever in Python: `python`", "python")[0], \
        blocks("Your retriever in Python: `python`", "yaml")[0]
    (tmp_path / "my_search.py").write_text(code)
    monkeypatch.chdir(ROOT)  # the example loads fixtures/ and puts "." on sys.path
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        configuration = configurations_from(yaml.safe_load(config), "c.yaml")["mine"]
        run = run_configuration(configuration, RunContext(), QUERIES, None, 10)
        import my_search

        assert run.errors == {}
        assert run.results == {q.id: [(d, float(s)) for d, s in my_search.retrieve(q, 10)]
                               for q in QUERIES}
        assert any(run.results.values())
    finally:
        sys.modules.pop("my_search", None)


def test_the_trec_example_runs_a_run_file(tmp_path):
    (tmp_path / "configurations.yaml").write_text(blocks("A run file: `trec`", "yaml")[0])
    write_trec_run(RankedRun("engine", {"q01": [("email-validation", 2.0), ("ocr", 1.0)]}),
                   tmp_path / "runs" / "engine-v2.trec")
    configuration = load_configurations(tmp_path / "configurations.yaml")["engine_v2"]
    run = run_configuration(configuration, RunContext(), QUERIES[:2], None, 10)
    assert run.results == {"q01": [("email-validation", 2.0), ("ocr", 1.0)],
                           QUERIES[1].id: []}


def test_the_document_lookup_example_loads_and_reads_its_header_from_the_environment(
        tmp_path, monkeypatch):
    from searcheval.defaults import DIFF_TOP_K, POOL_DEPTH
    from searcheval.errors import InputError
    from searcheval.rankers.documents import look_up

    text = blocks("An engine that holds its own documents", "yaml")[0]
    native = configurations_from(yaml.safe_load(text), "configurations.yaml")["native"]
    lookup = native.documents
    assert (lookup["url"], lookup["title"], lookup["text"], lookup["content_hash"]) \
        == ("http://127.0.0.1:8900/documents/{id}", "title", "text", "content_hash")
    assert lookup["depth"] == DIFF_TOP_K == POOL_DEPTH  # what the diff and the pool show
    assert native.resolved()["documents"]["headers"] == {"Authorization": {"env": "DOCS_TOKEN"}}
    monkeypatch.delenv("DOCS_TOKEN", raising=False)
    with pytest.raises(InputError, match="DOCS_TOKEN is not set"):  # before any request
        look_up(lookup, ["a"])
    # the same keys in a JSONL file (`file:` instead of `url:`)
    (tmp_path / "documents.jsonl").write_text(
        '{"id": "a", "title": "A", "text": "about a", "content_hash": "h1"}\n')
    entry = yaml.safe_load(text)
    entry["configurations"]["native"]["documents"].pop("url")
    entry["configurations"]["native"]["documents"]["file"] = "documents.jsonl"
    from_file = configurations_from(entry, str(tmp_path / "c.yaml"))["native"].documents
    found = look_up(from_file, ["a", "b"])
    assert found["documents"]["a"] == {"title": "A", "text": "about a", "content_hash": "h1",
                                       "hash_source": "field"}
    assert found["gone"] == ["b"]
