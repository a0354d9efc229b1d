"""`searcheval history`: the last runs' metrics, as a table and a PNG chart."""

from __future__ import annotations

import argparse
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import EXIT_OK, add_database_url


def cmd_history(args: argparse.Namespace) -> int:
    from searcheval.evaluation.history import history_chart, history_table, recent_runs

    runs = recent_runs(args.last, args.configuration, args.database_url)
    print(history_table(runs, args.configuration))
    if runs:
        path = history_chart(runs, args.configuration, args.output / "history.png")
        print(f"chart: {path}")
    return EXIT_OK


def add_history(sub) -> None:
    p = sub.add_parser("history", help="the last runs' metrics, as a table and a PNG chart")
    p.add_argument("--last", type=int, default=20, help="how many runs (default 20)")
    p.add_argument("--configuration", default=defaults.GATED_CONFIGURATION,
                   help=f"whose metrics (default {defaults.GATED_CONFIGURATION})")
    p.add_argument("--output", type=Path, default=Path(defaults.OUTPUT),
                   help=f"where history.png is written (default {defaults.OUTPUT})")
    add_database_url(p)
    p.set_defaults(handler=cmd_history)
