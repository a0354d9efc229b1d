"""docs/tuning.md's examples, executed: the configurations load (the `fuse` entry included), the
space file is the space the flags give, the `tune --check` command passes, the `run --candidate`
command is one the CLI accepts."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

from searcheval.cli import build_parser, main
from searcheval.rankers.configs import configurations_from
from searcheval.tuning.space import build_space

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "tuning.md").read_text(encoding="utf-8")


def fenced(page: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced block, in order."""
    out, language, lines = [], None, []
    for line in page.splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].strip(), []
            else:
                out.append((language, "\n".join(lines) + "\n"))
                language = None
        elif language is not None:
            lines.append(line)
    return out


YAML = [text for language, text in fenced(PAGE) if language == "yaml"]
COMMANDS = [line for language, text in fenced(PAGE) if language == ""
            for line in text.splitlines() if line.startswith("searcheval ")]


def test_the_fuse_example_loads(tmp_path):
    raw = yaml.safe_load(YAML[0])
    c = configurations_from(raw, "configurations.yaml")["hybrid"]
    assert c.kind == "fuse" and c.params["weights"] == {"bm25": 1.0, "dense": 0.7}


def test_the_space_file_and_the_tune_command(tmp_path, monkeypatch):
    (tmp_path / "configurations.yaml").write_text(YAML[0])
    space = yaml.safe_load(YAML[1])["space"]
    dims = build_space(space, "space.yaml", yaml.safe_load(YAML[0]), "configurations.yaml",
                       target="hybrid").dimensions
    assert [d.path for d in dims] == ["hybrid.weights.bm25", "hybrid.weights.dense",
                                      "hybrid.method"]
    tune = [c for c in COMMANDS if c.startswith("searcheval tune")][0]
    monkeypatch.chdir(tmp_path)
    args = shlex.split(tune)[1:] + ["--fixtures", str(ROOT / "fixtures")]
    assert main(args) == 0  # --check: the inputs pass, nothing runs


def test_the_candidate_command_parses():
    run = [c for c in COMMANDS if c.startswith("searcheval run")][0]
    args = build_parser().parse_args(shlex.split(run)[1:])
    assert args.candidate == "hybrid,bm25"


def test_the_judge_commands_parse():
    parser = build_parser()
    tune = [c for c in COMMANDS if c.startswith("searcheval tune") and "--judge" in c][0]
    args = parser.parse_args(shlex.split(tune)[1:])
    assert (args.judge, args.judge_limit) == ("gpt-small", 500)
    label = [c for c in COMMANDS if c.startswith("searcheval judgments label")][0]
    args = parser.parse_args(shlex.split(label)[1:])
    assert args.pool_file == Path("tune-out/pool.csv") and callable(args.handler)
    rate = [c for c in COMMANDS if c.startswith("searcheval rate")][0]
    assert parser.parse_args(shlex.split(rate)[1:]).pool.startswith("tune:")
