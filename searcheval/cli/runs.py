"""`searcheval runs crash FLOW_RUN_ID`: mark a flow run whose worker is gone Crashed (issue 29).

A worker stopped with its flow run (systemd's stop or restart sends SIGTERM to both, then SIGKILL)
can leave the run Running: unless Prefect's engine reports the crash itself (it may, depending on
the moment the signal lands), nothing reports its end. The `searcheval-stuck-run` automation marks
such a run Crashed once its heartbeats stop (deploy/automations.yaml); this command does the same
at once, by hand, for a run an operator knows is dead (or one stuck in Cancelling). The Crashed
state pages through the `searcheval-nightly-failed` automation like any crash, and a waiting
`searcheval run --deployment` returns 3.
"""

from __future__ import annotations

import argparse

from searcheval.cli.common import EXIT_MEANINGS, EXIT_OK, EXIT_REFUSED, epilog, import_project_module


def cmd_runs_crash(args: argparse.Namespace) -> int:
    remote = import_project_module("flows.remote")
    before, after = remote.crash_run(args.flow_run_id)
    print(f"flow run {after.name} ({after.id}): {before.state.lower()} -> {after.state.lower()}"
          + (f", {after.url}" if after.url else ""))
    return EXIT_OK


def add_runs(sub) -> None:
    p = sub.add_parser("runs", help="flow runs on the Prefect server: mark a stuck one crashed",
                       description="Flow runs of the Prefect server that PREFECT_API_URL names.")
    runs = p.add_subparsers(dest="runs_command", required=True, parser_class=type(p))
    crash = runs.add_parser(
        "crash", help="mark a flow run whose worker is gone Crashed",
        description="Mark a flow run that is not final (Running, Pending, Cancelling) Crashed, "
                    "forced: for a run whose worker or process is gone, which nothing else "
                    "will end. The crash is alerted like any other (the failed-run automation).",
        **epilog(["searcheval runs crash 0b5c7d52-3f7e-4c8e-9a36-2d4f5e6a7b8c"],
                 {EXIT_OK: "the run is now Crashed",
                  EXIT_REFUSED: EXIT_MEANINGS[EXIT_REFUSED] + " (an unknown id, or a run "
                                "that already ended)"}))
    crash.add_argument("flow_run_id", metavar="FLOW_RUN_ID",
                       help="the flow run's id (the UI's run page, `prefect flow-run ls`)")
    crash.set_defaults(handler=cmd_runs_crash)
