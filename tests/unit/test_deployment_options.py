"""Issue 29: `searcheval run --deployment` drops no option and exits as a local run does.

Every flag of `run` is a flow parameter, refused (what the deployment's worker decides), or local
to the command (searcheval.cli.run's tables): a new flag that is none of them fails here. A
refused flag, a non-finite number and a flag without its --deployment are exit 2 naming the flag
before any server is asked. The verdict of a finished flow run maps to the one exit-code table.
The real refusals and runs through a Prefect server and a worker: tests/deploy/test_worker_runs.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pytest

from searcheval.cli import build_parser, main
from searcheval.cli.run import (
    LOCAL_ON_DEPLOYMENT,
    REFUSED_ON_DEPLOYMENT,
    check_parameters,
    deployment_flags,
)
from searcheval.errors import (
    DatabaseError,
    GateTripped,
    InputError,
    RunIncomplete,
)
from searcheval.evaluation.preflight import OPTIONS, Refused

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # flows/ is the project's, not installed

from flows import outcome  # noqa: E402
from flows.remote import RemoteRun  # noqa: E402


def run_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_every_flag_of_run_travels_as_its_option_or_is_refused_or_is_local():
    table = deployment_flags(run_parser())
    dests = {a.dest for a in run_parser()._actions}
    assert set(table) == dests  # every flag placed, none invented
    assert set(REFUSED_ON_DEPLOYMENT) | set(LOCAL_ON_DEPLOYMENT) <= dests  # no stale entry
    assert not set(REFUSED_ON_DEPLOYMENT) & set(LOCAL_ON_DEPLOYMENT)
    parameters = {d: kind.split()[1] for d, kind in table.items() if kind.startswith("parameter")}
    # a parameter is an option of the run (RunRequest), the flow parameter of the same name
    assert set(parameters.values()) <= set(OPTIONS), set(parameters.values()) - set(OPTIONS)
    assert parameters["set"] == "overrides"
    assert {d for d, kind in table.items() if kind == "refused"} == {
        "database_url", "task_runner", "dask_address"}
    assert {d for d, kind in table.items() if kind == "local"} == {
        "check", "all_errors", "debug", "quiet", "deployment", "timeout", "help"}


@pytest.mark.parametrize("flags, flag", [
    (["--database-url", "postgresql://me:s3cret@db.example/prod"], "--database-url"),
    (["--task-runner", "dask"], "--task-runner"),
    (["--task-runner", "thread"], "--task-runner"),  # given at all: the worker decides
    (["--dask-address", "tcp://10.0.0.5:8786"], "--dask-address"),
])
def test_each_flag_the_worker_decides_is_refused_naming_it(flags, flag, capsys, monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")  # never reached
    assert main(["run", "--deployment", "ranking-change", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"searcheval: {flag}: not taken by --deployment: the "
                              "deployment's worker decides")
    assert "s3cret" not in "\n".join(err)


def test_every_refused_flag_at_once_says_how_many_more(capsys, monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert main(["run", "--deployment", "x", "--database-url", "postgresql://h/d",
                 "--task-runner", "dask", "--all-errors"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("searcheval: --database-url: ")
    assert err[0].startswith("searcheval: also: --task-runner: ")


@pytest.mark.parametrize("value", ["nan", "inf", "-Infinity"])
def test_a_non_finite_tolerance_is_refused_not_sent_as_null(value, capsys, monkeypatch):
    """JSON has no NaN: sent, it reached the flow as null and the gate ran at the baseline's
    tolerance. The same preflight as a local run refuses it (decision: refused, not sent)."""
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert main(["run", "--deployment", "ranking-change", f"--tolerance={value}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("searcheval: --tolerance: expected a finite tolerance")


def test_the_last_guard_refuses_any_non_finite_parameter():
    check_parameters({"tolerance": 0.05, "label": "v2", "coverage_floor": None})
    with pytest.raises(InputError) as caught:
        check_parameters({"coverage_floor": float("nan")})
    assert caught.value.field == "coverage_floor"


def test_timeout_without_deployment_is_refused_and_a_negative_one_too(capsys, monkeypatch):
    assert main(["run", "--timeout", "60"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(
        "searcheval: --timeout: only with --deployment")
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert main(["run", "--deployment", "x", "--timeout", "-1"]) == 2
    assert "--timeout: expected seconds >= 0" in capsys.readouterr().err


def test_runs_crash_refuses_a_malformed_id_in_one_line(capsys, monkeypatch):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert main(["runs", "crash", "not-a-run"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "searcheval: expected a flow run id (a UUID), got 'not-a-run'"]


# ---------------------------------------------------------------------------- one exit table


@pytest.mark.parametrize("exc, verdict, message", [
    (GateTripped("gate tripped for fused: mrr: 0.8 vs 0.9"), "tripped",
     "GATE TRIPPED: gate tripped for fused: mrr: 0.8 vs 0.9"),
    (Refused([InputError("expected a finite tolerance", field="tolerance"),
              InputError("x", field="depth")]), "refused",
     "REFUSED: field 'tolerance': expected a finite tolerance (and 1 more problem)"),
    (DatabaseError("cannot reach db.example:5432/prod"), "failed",
     "FAILED: cannot reach db.example:5432/prod"),
    (RunIncomplete("2 of 15 queries failed"), "failed", "FAILED: 2 of 15 queries failed"),
    (KeyError("bug"), "failed", "FAILED: KeyError: 'bug'"),
    (TimeoutError("Flow run exceeded timeout of 7200.0 second(s)"), "failed",
     "FAILED: TimeoutError: Flow run exceeded timeout of 7200.0 second(s) "
     "(SEARCHEVAL_RUN_TIMEOUT)"),
])
def test_each_outcome_has_its_verdict_and_message_prefix(exc, verdict, message):
    assert outcome.verdict_of(exc) == verdict
    assert outcome.final_message(exc) == message


@pytest.mark.parametrize("state, message, tags, code", [
    ("COMPLETED", "gate: PASSED (...)", ["searcheval:verdict=passed"], 0),
    ("COMPLETED", "gate: NOT GATED (...)", [], 0),  # no tag (an older flow): its state
    ("FAILED", "GATE TRIPPED: gate tripped for fused", ["searcheval:verdict=tripped"], 1),
    ("FAILED", "GATE TRIPPED: gate tripped for fused", [], 1),  # the prefix alone
    ("FAILED", "REFUSED: field 'tolerance': ...", ["searcheval:verdict=refused"], 2),
    ("FAILED", "FAILED: cannot reach the database", ["searcheval:verdict=failed"], 3),
    ("FAILED", "Flow run encountered an exception: KeyError", [], 3),
    ("CRASHED", "no heartbeat for 90 s", ["searcheval:run=20261205T0300Z-ab"], 3),
    ("CANCELLED", "", [], 3),
    ("RUNNING", "", [], 3),  # still running when the command stopped waiting
])
def test_a_finished_flow_run_exits_with_the_code_of_a_local_run(state, message, tags, code):
    run = RemoteRun(id="x", name="n", state=state, message=message, url=None, tags=tuple(tags))
    assert run.exit_code == code
    assert run.finished == (state != "RUNNING")
