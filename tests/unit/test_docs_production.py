"""docs/production.md: every `$` line of its `console` blocks runs, in order, in a fresh folder
(and a fresh database), and exits 0; what the page states about the defaults is what the code does."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from searcheval import defaults
from searcheval.production import clicks, monitor, sampling

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "production.md").read_text(encoding="utf-8")


def console_lines() -> list[str]:
    blocks = re.findall(r"```console\n(.*?)```", PAGE, re.S)
    return [line[2:] for block in blocks for line in block.splitlines() if line.startswith("$ ")]


def test_every_console_example_runs(tmp_path, new_database):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SEARCHEVAL_DATABASE_URL": new_database("docs"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    lines = console_lines()
    assert len(lines) == 7
    outputs = []
    for line in lines:
        cmd = line.replace("python -m", f"{sys.executable} -m", 1)
        done = subprocess.run(cmd, shell=True, cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, (line, done.stderr)
        outputs.append(done.stdout)
    assert len((tmp_path / "traces.jsonl").read_text().splitlines()) == 20000
    golden = json.loads((tmp_path / "golden_queries.json").read_text())
    assert (golden["sample"]["method"], golden["sample"]["seed"], len(golden["queries"])) == \
        ("pps", 7, 5)
    assert "position bias (pbm: examination relative to rank 1)" in outputs[3]
    assert "rank  2  0.4" in outputs[3]  # the simulated 1/2, as the page shows
    rows = [json.loads(x) for x in (tmp_path / "implicit.jsonl").read_text().splitlines()]
    assert rows and all(r["source"] == "implicit" and r["judge"] == "implicit:coec"
                        for r in rows)
    live = outputs[6].splitlines()
    # 24 windows of 15 minutes from midnight to 06:00; the traces (one a second) end at 05:33:19
    assert len(live) == 24 and live[0].startswith("2026-03-01T00:00:00+00:00     900 traces")
    assert live[-1] == "2026-03-01T05:45:00+00:00       0 traces       0 labelled  mrr -, " \
                       "precision@5 -"


def test_the_page_states_the_defaults():
    assert clicks.DEFAULT_THRESHOLDS == {"pbm": (0.1, 0.3, 0.6), "coec": (0.5, 1.0, 2.0)}
    assert "`0.1,0.3,0.6` (PBM) and `0.5,1,2` (COEC)" in PAGE
    assert sampling.DEFAULT_EXCLUDE == ("email", "phone", "number")
    s = monitor.MonitorSettings()
    assert (s.interval_minutes, s.cusum_k, s.cusum_h, s.warmup, s.min_labelled) == \
        (defaults.LIVE_INTERVAL_MINUTES, defaults.LIVE_CUSUM_K, defaults.LIVE_CUSUM_H,
         defaults.LIVE_WARMUP, defaults.LIVE_MIN_LABELLED) == (15, 0.02, 0.15, 4, 10)
    assert f"(default {defaults.AGREEMENT_FLOOR})" in PAGE
    # the worked CUSUM numbers of the page
    assert not any(monitor.run_detector([(0.6, 20)] * 4 + [(0.45, 20)], s))
    assert monitor.run_detector([(0.6, 20)] * 4 + [(0.52, 20)] * 3, s) == [False] * 6 + [True]
