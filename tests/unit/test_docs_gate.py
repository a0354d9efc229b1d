"""docs/gate.md, executed: its settings and configurations load, its commands parse, and the lines
it quotes are the ones searcheval prints."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from searcheval.cli import build_parser
from searcheval.evaluation.alerts import incomplete_summary
from searcheval.evaluation.gate import like_with_like_lines
from searcheval.io.settings import settings_from
from searcheval.rankers.configs import load_configurations

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "gate.md").read_text(encoding="utf-8")


def blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", PAGE, re.S)


def quoted(line_start: str) -> str:
    return next(line.strip() for text in blocks("text") for line in text.splitlines()
                if line.strip().startswith(line_start))


def test_the_dataset_setting_loads():
    settings = settings_from(yaml.safe_load(blocks("yaml")[0]), file="searcheval.yaml")
    assert settings.judgment_sources == "all" and settings.name == "scifact"


def test_the_configuration_loads_with_its_allowance_and_fail_fast(tmp_path):
    path = tmp_path / "configurations.yaml"
    path.write_text(blocks("yaml")[1])
    lucene = load_configurations(path).entries["lucene"]
    assert (lucene.kind, lucene.max_failed_queries, lucene.fail_fast_after) == ("http", 5, 3)


def test_the_commands_parse():
    parser = build_parser()
    commands = [line.strip() for text in blocks("sh") for line in text.splitlines()
                if line.startswith("searcheval ")]
    assert len(commands) == 4
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])
        assert callable(args.handler)


def test_the_quoted_lines_are_what_searcheval_prints():
    like = {"queries": {"compared": 295, "failed": 5},
            "baseline": {"status": "re-scored", "recorded": {"ndcg@10": 0.683},
                         "rescored": {"ndcg@10": 0.686},
                         "judgments": {"added": 12, "changed": 0, "removed": 0,
                                       "by_judge": {"ann": 12}}}}
    lines = like_with_like_lines(like)
    assert lines[0] == quoted("5 queries failed: the gate")
    assert lines[1] == quoted("judgments changed since the baseline")
    assert lines[2] == quoted("baseline under today's judgments")
    from searcheval.metrics.scoring import ConfigurationScores

    partial = ConfigurationScores.incomplete_means.fget(
        type("S", (), {"failed": tuple(range(5)),
                       "evaluation": type("E", (), {"query_ids": list(range(295))})})())
    assert f"native: {partial}" == quoted("native: 5 queries failed")
    errors = {f"q{i}": {"cause": "connection refused after 3 attempts", "attempts": 3}
              for i in range(3)}
    errors |= {f"q{i}": {"cause": "not sent", "attempts": 0, "not_sent": True}
               for i in range(3, 300)}
    down = {"failed": 300, "queries": 300, "allowed": 5, "errors": errors, "not_sent": 297,
            "down": True, "endpoint": "http://127.0.0.1:8900/search"}
    assert quoted("searcheval: run incomplete") == \
        f"searcheval: run incomplete, not gated: {incomplete_summary('native', down)}"
