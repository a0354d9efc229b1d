"""The project settings (searcheval.project): finding the file, its refusals, the resolution order
command line > the project's dataset entry > the dataset folder's own searcheval.yaml > the
library's defaults (with where each value came from), the deployments it generates, and the
example project at the repository's root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from searcheval import defaults
from searcheval.errors import InputError
from searcheval.evaluation.conventions import resolve_conventions
from searcheval.io.collection import load_collection
from searcheval.project import (
    RUN_DEFAULTS,
    deployment_entries,
    find_project,
    load_project,
    pool_flags,
    project_key,
    resolve_run,
    which_dataset,
)

ROOT = Path(__file__).resolve().parents[2]


def beir(folder: Path, settings: str | None = None) -> Path:
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "title": "one", "text": "first"}\n'
                                         '{"_id": "d2", "title": "two", "text": "second"}\n')
    (folder / "queries.jsonl").write_text('{"_id": "q1", "text": "first"}\n')
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    if settings is not None:
        (folder / "searcheval.yaml").write_text(settings)
    return folder


def project(tmp_path: Path, entry: str, extra: str = "") -> Path:
    path = tmp_path / "searcheval.yaml"
    path.write_text(f"project: acme\n{extra}datasets:\n  sci:\n{entry}")
    return path


def test_the_project_file_is_found_above_the_working_directory_never_a_dataset_folder(tmp_path):
    data = beir(tmp_path / "data" / "sci", settings="gain: linear\n")
    file = project(tmp_path, f"    dataset: {data}\n")
    found = find_project(data, environ={})  # the dataset's own searcheval.yaml has no project:
    assert found.file == file and found.name == "acme"
    assert find_project(tmp_path.parent, environ={}) is None
    assert find_project(ROOT / "searcheval", environ={}).file == ROOT / "searcheval.yaml"
    assert find_project("/", environ={"SEARCHEVAL_SETTINGS": str(file)}).file == file


@pytest.mark.parametrize("text, field, message", [
    ("project: acme\n", "datasets", "expected a mapping of dataset names"),
    ("project: 'a b'\ndatasets: {x: {dataset: d}}\n", "project", "expected a project name"),
    ("project: a\ndatasets: {x: {}}\n", "datasets.x", "expected exactly one of dataset"),
    ("project: a\ndatasets: {x: {dataset: d, depth: 0}}\n", "datasets.x.depth",
     "expected a whole number >= 1, got 0"),
    ("project: a\ndatasets: {x: {dataset: d, coverage_floor: 2}}\n", "datasets.x.coverage_floor",
     "expected a share between 0 and 1"),
    ("project: a\ndatasets: {x: {dataset: d, judgment_rule: best}}\n", "datasets.x.judgment_rule",
     "expected a judgment rule"),
    ("project: a\ndatasets: {x: {dataset: d, schedul: '0 3 * * *'}}\n", "datasets.x.schedul",
     "unknown setting 'schedul'"),
    ("project: a\ndatasets: {x: {dataset: d, schedule: '0 3 * *'}}\n", "datasets.x.schedule.cron",
     "expected a cron line of five fields"),
    ("project: a\ndefault_dataset: y\ndatasets: {x: {dataset: d}}\n", "default_dataset",
     r"names no dataset of `datasets` \(x\)"),
])
def test_a_broken_settings_file_is_refused_naming_the_file_and_the_key(tmp_path, text, field,
                                                                          message):
    path = tmp_path / "searcheval.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match=message) as raised:
        load_project(path)
    assert str(raised.value.file) == str(path) and raised.value.field == field


def test_resolution_order_command_line_then_project_then_dataset_folder_then_defaults(
        tmp_path, monkeypatch):
    data = beir(tmp_path / "sci", settings="gain: linear\ncoverage_floor: 0.5\nno_relevant: zero\n")
    file = project(tmp_path, f"    dataset: {data}\n    coverage_floor: 0.05\n    depth: 50\n"
                             "    judgment_rule: judge:dataset\n    baseline: b/sci.json\n")
    monkeypatch.chdir(tmp_path)
    settings = load_project(file)
    resolved = resolve_run({"gain": "exponential"}, project=settings)
    v, sources = resolved.values, resolved.values["sources"]
    assert (v["dataset"], v["dataset_name"]) == ("sci", "sci")
    assert v["depth"] == 50 and v["judgment_rule"] == "judge:dataset"
    assert v["baseline"] == "b/sci.json"  # relative to the settings file, shown from here
    assert v["configurations_file"] == defaults.CONFIGURATIONS_FILE  # nothing set: the default
    assert sources["depth"] == f"project setting datasets.sci.depth in {file}"
    assert sources["gain"] == "run parameter gain"
    assert "configurations_file" not in sources and set(RUN_DEFAULTS) <= set(v)
    # the conventions: the command line's gain, the project's floor over the folder's 0.5, the
    # folder's no_relevant, the library's relevance level
    collection = load_collection(dataset=v["dataset"], name=v["dataset_name"])
    conventions = resolve_conventions(collection, gain=v["gain"], coverage_floor=v["coverage_floor"],
                                      sources=sources)
    assert (conventions.gain, conventions.coverage_floor, conventions.no_relevant,
            conventions.relevance_level) == ("exponential", 0.05, "zero", 1)
    assert conventions.source("coverage_floor") == \
        f"project setting datasets.sci.coverage_floor in {file}"
    assert conventions.source("no_relevant") == "dataset setting in sci/searcheval.yaml"
    assert conventions.source("relevance_level") == "default"
    # the project names the dataset: its identity when the folder declares none
    assert collection.declared_name == "sci"


def test_a_folder_given_on_the_command_line_takes_its_entry_if_one_names_it(tmp_path, monkeypatch):
    data, other = beir(tmp_path / "sci"), beir(tmp_path / "other")
    file = project(tmp_path, f"    dataset: {data}\n    depth: 50\n")
    monkeypatch.chdir(tmp_path)
    settings = load_project(file)
    assert resolve_run({"dataset": str(data)}, project=settings).values["depth"] == 50
    assert resolve_run({"dataset": "sci"}, project=settings).values["depth"] == 50
    plain = resolve_run({"dataset": str(other)}, project=settings).values
    assert plain["depth"] == defaults.DEPTH and plain["dataset_name"] is None
    assert plain["sources"]["dataset"] == "run parameter dataset"


def test_which_dataset_never_falls_back_to_the_fixtures(tmp_path):
    with pytest.raises(InputError, match="which dataset\\? no --dataset, --fixtures or --mapping"):
        which_dataset(None)
    path = tmp_path / "searcheval.yaml"
    path.write_text(f"project: two\ndatasets:\n  a: {{dataset: {tmp_path}}}\n"
                    f"  b: {{dataset: {tmp_path}}}\n")
    with pytest.raises(InputError, match="has a, b and no `default_dataset`"):
        which_dataset(load_project(path))
    with pytest.raises(InputError, match="no dataset 'c' in project 'two'; its datasets: a, b"):
        load_project(path).entry("c")


def test_deployments_come_from_the_settings_one_nightly_per_scheduled_dataset(tmp_path):
    path = tmp_path / "searcheval.yaml"
    path.write_text("project: acme\ndefault_dataset: sci\ndatasets:\n"
                    "  sci: {dataset: d, schedule: '0 2 * * *', output: runs/sci}\n"
                    "  wands: {dataset: w, schedule: {cron: '0 4 * * 1', timezone: Europe/Berlin}}\n"
                    "  adhoc: {dataset: x}\n")
    entries = {e["name"]: e for e in deployment_entries(load_project(path))}
    assert sorted(entries) == ["nightly", "nightly-wands", "ranking-change",
                               "ranking-change-adhoc", "ranking-change-wands"]
    assert entries["nightly"]["schedules"] == [{"cron": "0 2 * * *", "timezone": "UTC",
                                                "active": True}]
    assert entries["nightly"]["parameters"] == {"dataset": "sci", "output": "runs/sci/nightly",
                                                "label": "nightly", "allow_dirty": False}
    assert entries["nightly-wands"]["schedules"][0]["timezone"] == "Europe/Berlin"
    assert entries["nightly-wands"]["tags"] == ["acme", "nightly"]


def test_artifact_keys_carry_the_projects_name_and_keep_the_examples_shape():
    assert project_key("searcheval-metrics", "acme") == "acme-metrics"
    assert project_key("searcheval-metrics", "searcheval") == "searcheval-metrics"
    assert project_key("searcheval-metrics", None) == "searcheval-metrics"


def test_the_pool_command_names_the_dataset_and_the_output(tmp_path):
    flags = pool_flags({"dataset": "sci", "dataset_name": "sci",
                        "sources": {"dataset": "project setting datasets.sci.dataset in f"}},
                       str(tmp_path / "out dir"))
    assert flags == f"--dataset sci --run-output '{tmp_path / 'out dir'}'"
    given = pool_flags({"dataset": str(tmp_path), "split": "dev", "dataset_name": None,
                        "sources": {"dataset": "run parameter dataset"}}, None)
    assert given == f"--dataset {tmp_path} --split dev"


def test_the_repository_root_is_the_example_project_naming_the_fixtures():
    example = load_project(ROOT / "searcheval.yaml")
    entry = example.entry()
    assert (example.name, entry.name, entry.location) == ("searcheval", "fixtures", "fixtures")
    assert entry.path == str(ROOT / "fixtures") and entry.get("served") == "fused"
    assert Path(entry.get("guideline")).is_file() and entry.get("grade_labels")[3]
    baseline = json.loads(Path(entry.get("baseline")).read_text())
    assert baseline["configuration"] == entry.get("served")


def test_the_library_names_no_fixtures_default():
    """Nothing in the library defaults to the shipped fixtures: the example project's settings
    file names them."""
    assert not hasattr(defaults, "FIXTURES")
    for folder in ("cli", "judging"):
        for path in (ROOT / "searcheval" / folder).glob("*.py"):
            text = path.read_text()
            assert "default=Path(\"fixtures\")" not in text and "defaults.FIXTURES" not in text, \
                path


def test_docs_project_settings_load_and_its_commands_parse(tmp_path):
    """docs/project.md: its settings example is a valid project file, and every command it shows
    is one the CLI takes (the loop itself runs in tests/integration/test_project.py)."""
    import re
    import shlex

    from searcheval.cli import build_parser

    text = (ROOT / "docs" / "project.md").read_text()
    [settings] = re.findall(r"```yaml\n(.*?)```", text, re.S)
    (tmp_path / "searcheval.yaml").write_text(settings)
    example = load_project(tmp_path / "searcheval.yaml")
    entry = example.entry()
    assert (example.name, entry.name, entry.get("judgment_rule"), entry.get("coverage_floor")) \
        == ("acme", "scifact", "judge:dataset", 0.05)
    parser = build_parser()
    commands, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and line.startswith("searcheval "):
            commands.append(line.split("  #")[0].strip())
    assert len(commands) >= 10
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])  # a usage error exits 2
        assert callable(args.handler), command


def test_init_writes_a_settings_file_the_loader_reads_and_never_overwrites_it(tmp_path, capsys):
    from searcheval.cli import main

    data = beir(tmp_path / "data" / "sci")
    folder = tmp_path / "acme"
    assert main(["init", "--folder", str(folder), "--dataset", str(data)]) == 0
    example = load_project(folder / "searcheval.yaml")
    entry = example.entry()
    assert (example.name, entry.name, entry.get("served")) == ("acme", "sci", "bm25")
    assert entry.get("coverage_floor") == 0.05  # a BEIR collection: only relevant docs judged
    assert entry.get("configurations_file") == str(folder / "configurations.yaml")
    assert entry.get("baseline") == str(folder / "baselines" / "sci.json")
    written = (folder / "searcheval.yaml").read_text()
    capsys.readouterr()
    assert main(["init", "--folder", str(folder), "--dataset", str(data)]) == 2
    assert "init never overwrites" in capsys.readouterr().err
    assert (folder / "searcheval.yaml").read_text() == written
    assert main(["init", "--folder", str(tmp_path / "b"), "--dataset", str(data),
                 "--served", "dense"]) == 2
    assert "the starter serves 'bm25', not 'dense'" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()  # refused: nothing written
    (folder / "searcheval.yaml").unlink()
    assert main(["init", "--folder", str(folder), "--dataset", str(data),
                 "--served", "dense"]) == 2
    assert "marks 'bm25' `served: true`, not 'dense'" in capsys.readouterr().err
    assert not (folder / "searcheval.yaml").exists()
