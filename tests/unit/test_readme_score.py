"""docs/metrics.md's `searcheval score` examples, executed on the example run (tests/unit/test_readme_*)."""

import shlex
from pathlib import Path

from searcheval.cli import main

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8") \
    .split("### Scoring TREC runs: `searcheval score`")[1].split("```")[1]


def test_every_score_example_runs(tmp_path, capsys):
    qrels = (ROOT / "fixtures" / "example_qrels.trec").read_text()
    run = (ROOT / "fixtures" / "example_run.trec").read_text()
    (tmp_path / "qrels.trec").write_text(qrels)
    (tmp_path / "a.trec").write_text(run)
    (tmp_path / "b.trec").write_text(run)
    commands = [line.split("#")[0].split() for line in SECTION.strip().splitlines()]
    assert len(commands) == 4
    for words in commands:
        assert words[:2] == ["searcheval", "score"]
        args = [str(tmp_path / w) if w.endswith(".trec") else w for w in words[2:]]
        assert main(args and ["score", *args]) == 0, shlex.join(words)
        assert capsys.readouterr().out
