"""The kept Prefect server's bookkeeping without starting one (tests/integration/
test_prefect_server.py starts real ones): the setting, a folder's status from its state file, a
state file naming a process that is gone or is not a Prefect server (never stopped: not ours), the
one line a run prints about its server, and `benchmark run`'s stage arithmetic."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from searcheval import prefect_server
from searcheval.bench import run as bench_run
from searcheval.errors import InputError


def test_the_setting_is_kept_unless_it_says_temporary():
    assert prefect_server.server_mode({}) == "kept"
    assert prefect_server.server_mode({"SEARCHEVAL_PREFECT_SERVER": " Temporary "}) == "temporary"
    assert prefect_server.server_mode({"SEARCHEVAL_PREFECT_SERVER": "kept"}) == "kept"
    with pytest.raises(InputError) as refused:
        prefect_server.server_mode({"SEARCHEVAL_PREFECT_SERVER": "forever"})
    assert str(refused.value) == ("field 'SEARCHEVAL_PREFECT_SERVER': expected one of kept, "
                                  "temporary, got 'forever'")


def write_state(folder, pid: int) -> None:
    directory = prefect_server.state_dir(folder)
    directory.mkdir(parents=True)
    (directory / "server.json").write_text(json.dumps({
        "pid": pid, "port": 4321, "api_url": "http://127.0.0.1:4321/api",
        "ui_url": "http://127.0.0.1:4321", "prefect_version": "3.0.0", "python": sys.executable,
        "started_at": "2026-01-01T00:00:00+00:00", "home": str(directory)}))


def test_a_folder_without_a_state_file_has_no_server(tmp_path):
    found = prefect_server.status(tmp_path)
    assert (found.state, found.server) == ("stopped", None)
    assert found.describe() == f"stopped: no kept Prefect server in {tmp_path}/.searcheval/prefect"
    assert prefect_server.stop(tmp_path).state == "stopped"


def test_a_state_file_naming_a_process_that_is_gone_is_stale_and_forgotten_by_stop(tmp_path):
    gone = subprocess.Popen(["true"])
    gone.wait()
    write_state(tmp_path, gone.pid)
    found = prefect_server.status(tmp_path)
    assert found.state == "stale" and found.server.pid == gone.pid
    assert f"names pid {gone.pid}, which is gone" in found.describe()
    assert prefect_server.stop(tmp_path).state == "stale"
    assert not (prefect_server.state_dir(tmp_path) / "server.json").exists()


def test_a_pid_reused_by_another_program_is_not_ours_to_stop(tmp_path):
    write_state(tmp_path, os.getpid())  # this test process: alive, not `prefect server start`
    assert prefect_server.status(tmp_path).state == "stale"
    assert prefect_server.stop(tmp_path).state == "stale"
    assert prefect_server.process_alive(os.getpid())  # still here: it was not signalled


def test_a_state_file_that_is_not_ours_counts_as_none(tmp_path):
    directory = prefect_server.state_dir(tmp_path)
    directory.mkdir(parents=True)
    (directory / "server.json").write_text("{not json")
    assert prefect_server.status(tmp_path).state == "stopped"


def test_a_run_names_the_server_it_uses_in_one_line(monkeypatch, capsys):
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.prefect_api import run_api

    with temporary_settings(updates={PREFECT_API_URL: "http://prefect.example:4200/api"}):
        with run_api() as url:
            assert url == "http://prefect.example:4200/api"
        with run_api(quiet=True):
            pass
    assert capsys.readouterr().err == ("searcheval: Prefect server: "
                                       "http://prefect.example:4200/api (PREFECT_API_URL)\n")
    monkeypatch.setenv("SEARCHEVAL_PREFECT_SERVER", "temporary")
    with temporary_settings(restore_defaults={PREFECT_API_URL}):
        with run_api() as url:
            assert url is None and not PREFECT_API_URL.value()  # Prefect starts its own
    assert capsys.readouterr().err == (
        "searcheval: Prefect server: a temporary one for this run, stopped when it ends "
        "(SEARCHEVAL_PREFECT_SERVER=temporary)\n")


def test_task_runs_fall_into_their_stages():
    names = {"plan_run-914": "load", "judgments-f5f": "load", "validate-0ea": "validate",
             "seed_catalog-4c2": "seed", "load_model-37b": "embed", "embed-12": "embed",
             "index_collection-4f6": "embed", "run-bm25-1of1": "search",
             "run-my-ranker-2of4": "search", "gate-58a": "score", "publish-026": "publish",
             "label_pool-1ab": "other_tasks"}
    assert {name: bench_run.task_stage(name) for name in names} == names


def test_the_stages_add_up_to_the_run_and_an_overlap_counts_once():
    # the process ran 0..10 s; the command's marks; the flow run 4.5..9.0 s
    marks = {"command": 0.5, "preflight": 1.0, "imported": 3.0, "server": 4.0, "flow": 9.5}
    flow = {"start": 4.5, "end": 9.0, "tasks": [
        ("plan_run-1", 4.6, 5.0),        # load 0.4
        ("judgments-2", 5.0, 6.0),       # load 1.0
        ("load_model-3", 5.5, 6.5),      # embed: 5.5-6.0 is load's already, 0.5 of it counts
        ("run-bm25-1of1", 7.0, 8.0),     # search 1.0
        ("run-dense-1of1", 7.5, 8.5),    # search: with bm25's, 7.0-8.5 = 1.5 in all
    ]}
    stages = bench_run.stages(0.0, 10.0, marks, flow)
    assert stages["start"] == 0.5 and stages["preflight"] == 0.5
    assert stages["import"] == 2.0 and stages["server"] == 1.0
    assert stages["flow_start"] == 0.5 and stages["flow_end"] == 0.5 and stages["exit"] == 0.5
    assert stages["load"] == pytest.approx(1.4)
    assert stages["embed"] == pytest.approx(0.5)
    assert stages["search"] == pytest.approx(1.5)
    # the flow's 4.5 s less its tasks' 3.4 s (4.6-6.5 and 7.0-8.5)
    assert stages["flow_steps"] == pytest.approx(4.5 - 3.4)
    assert sum(stages.values()) == pytest.approx(10.0)


def test_a_dask_cluster_on_another_machine_is_refused_a_loopback_server():
    """The kept server listens on loopback: workers on another machine cannot report to it."""
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect_dask import DaskTaskRunner

    from flows.runners import api_for_workers

    remote = DaskTaskRunner(address="tcp://10.0.0.5:8786")
    with temporary_settings(updates={PREFECT_API_URL: "http://127.0.0.1:4321/api"}):
        with pytest.raises(InputError) as refused:
            with api_for_workers(remote):
                pass
    assert refused.value.field == "PREFECT_API_URL"
    with temporary_settings(updates={PREFECT_API_URL: "http://prefect-server:4200/api"}):
        with api_for_workers(remote):
            assert PREFECT_API_URL.value() == "http://prefect-server:4200/api"
