"""One exit-code table for every command (searcheval.errors.EXIT_CODES), through real processes:
a database that cannot be reached exits 3 with one line on stderr naming it, no traceback and no
password; `--debug` shows the traceback. The run goes through Prefect, whose own exception logging
is demoted too (flows/boundary.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from searcheval.errors import (
    EXIT_CODES,
    DatabaseError,
    GateTripped,
    InputError,
    ModelError,
    RunIncomplete,
    ThresholdsMissed,
    exit_code,
)

ROOT = Path(__file__).resolve().parents[2]
SEARCHEVAL = str(Path(sys.executable).parent / "searcheval")
# nothing listens on port 1: every connection is refused at once
UNREACHABLE = "postgresql://someone:hunter2secret@127.0.0.1:1/nothing"

COMMANDS = {
    "history": ["history"],
    "history prune": ["history", "prune"],
    "diff": ["diff", "run-a", "run-b"],
    "baseline update": ["baseline", "update", "--from-run", "run-a", "--reason", "test",
                        "--dry-run"],
    "judgments export": ["judgments", "export", "--output", "{tmp}/out.csv"],
    "judgments agreement": ["judgments", "agreement"],
    "traces load": ["traces", "load", str(ROOT / "fixtures" / "traces.jsonl")],
}


def run_cli(args: list[str], tmp_path: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "SEARCHEVAL_DATABASE_URL": UNREACHABLE, "HF_HUB_OFFLINE": "1"}
    env.pop("SEARCHEVAL_DEBUG", None)
    return subprocess.run([SEARCHEVAL, *[a.format(tmp=tmp_path) for a in args]], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


def test_the_table_maps_each_outcome_to_its_code():
    assert exit_code(InputError("x")) == 2
    assert exit_code(GateTripped("x")) == 1
    assert exit_code(ThresholdsMissed("x")) == 1
    assert exit_code(RunIncomplete("x")) == 3  # published, marked incomplete, not gated (issue 23)
    assert exit_code(DatabaseError("x")) == 3
    assert exit_code(ModelError("x")) == 3
    assert exit_code(RuntimeError("a bug")) is None  # a bug keeps its traceback
    import psycopg

    assert exit_code(psycopg.OperationalError("gone")) == 3  # a database failing mid-query
    assert set(EXIT_CODES.values()) == {1, 2, 3}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_database_that_cannot_be_reached_exits_3_with_one_line(name, tmp_path):
    done = run_cli(COMMANDS[name], tmp_path)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr and len(lines) == 1, done.stderr
    assert lines[0].startswith("searcheval: cannot connect to the database someone@127.0.0.1:1/"
                               "nothing"), lines
    assert "hunter2secret" not in done.stderr + done.stdout


def test_debug_shows_the_traceback(tmp_path):
    done = run_cli(["history", "--debug"], tmp_path)
    assert done.returncode == 3
    assert "Traceback" in done.stderr and "DatabaseError" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("searcheval: cannot connect")


@pytest.mark.slow
def test_a_run_without_its_database_exits_3_without_any_traceback(tmp_path):
    done = run_cli(["run", "--no-baseline", "--configurations", "bm25"], tmp_path, timeout=600)
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("searcheval: the run failed: DatabaseError: cannot connect"), last
    assert "hunter2secret" not in done.stderr + done.stdout
