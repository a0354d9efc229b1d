"""docs/gate-and-baselines.md's "Snapshots and diffs" examples, executed: the commands are ones the CLI accepts,
the per-query rules load as a baseline's, and the minimum detectable effect quoted is the
arithmetic's."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path
from statistics import NormalDist

from searcheval.cli import build_parser
from searcheval.evaluation.baseline import load_baseline
from searcheval.metrics.stats import min_detectable_effect, smallest_p

ROOT = Path(__file__).resolve().parents[2]
SECTION = (ROOT / "docs" / "gate-and-baselines.md").read_text(encoding="utf-8").split("## Snapshots and diffs")[1] \
    .split("\n## ")[0]


def blocks(language: str = "") -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", SECTION, re.S)


def test_the_commands_parse():
    parser = build_parser()
    commands = [line.split("#")[0].strip() for text in blocks() for line in text.splitlines()
                if line.startswith("searcheval ")]
    assert len(commands) == 5
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])
        assert callable(args.handler)
    assert str(args.output_folder) == "out/nightly"  # the last: the run folders pruned too
    args = parser.parse_args(["diff", "latest:bm25", "latest:fused"])
    assert (args.a, args.b, args.metric, args.k) == ("latest:bm25", "latest:fused", "ndcg@10", 10)


def test_the_query_rules_load(tmp_path):
    rules = json.loads(blocks("json")[0])
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps({"configuration": "fused", "metrics": {"ndcg@10": 0.9}, **rules}))
    assert load_baseline(path).query_rules == rules["query_rules"]


def test_the_quoted_statistics():
    assert smallest_p(4) == 2 / 2**4 == 0.125
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    assert f"{min_detectable_effect(0.3, 15):.3f}" == f"{z * 0.3 / math.sqrt(15):.3f}" == "0.217"
    assert "a drop below 0.217 nDCG@10" in " ".join(SECTION.split())
