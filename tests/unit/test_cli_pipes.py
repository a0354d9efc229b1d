"""A closed stdout (`searcheval ... | head` after head quit) ends a command quietly: the real CLI
in a subprocess, its stdout a pipe whose reader is already gone."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEARCHEVAL = str(Path(sys.executable).parent / "searcheval")


def run_into_a_closed_pipe(*args: str) -> subprocess.CompletedProcess:
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return subprocess.run([SEARCHEVAL, *args], cwd=ROOT, stdout=writer,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(writer)


def test_score_into_a_closed_pipe_ends_quietly_with_exit_0():
    done = run_into_a_closed_pipe("score", "--qrels", "fixtures/example_qrels.trec", "--run",
                                  "fixtures/example_run.trec", "--format", "json")
    assert done.returncode == 0
    assert done.stderr == ""  # no BrokenPipeError traceback, no "Exception ignored"

