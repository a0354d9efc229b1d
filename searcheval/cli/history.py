"""`searcheval history`: the last runs' metrics, as a table and a PNG chart (filtered by dataset,
configuration, label and source); `searcheval history prune`: old snapshots removed."""

from __future__ import annotations

import argparse
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import EXIT_OK, Parser, add_database_url


def cmd_history(args: argparse.Namespace) -> int:
    from searcheval.evaluation.history import history_chart, history_table, recent_runs

    runs = recent_runs(args.last, args.configuration, args.database_url, dataset=args.dataset,
                       label=args.label, source=args.source)
    print(history_table(runs, args.configuration))
    if runs:
        path = history_chart(runs, args.configuration, args.output / "history.png")
        print(f"chart: {path}")
    return EXIT_OK


def cmd_prune(args: argparse.Namespace) -> int:
    from searcheval.store.database import open_database
    from searcheval.store.snapshots import parse_age, prune_snapshots

    age = parse_age(args.older_than)
    with open_database(args.database_url) as conn:
        pruned = prune_snapshots(conn, age)
    print(f"removed {pruned['rows']} snapshot rows of {pruned['runs']} run(s) started before "
          f"{pruned['before']:%Y-%m-%d %H:%M} UTC; their metrics history is kept")
    return EXIT_OK


def add_history(sub) -> None:
    p = sub.add_parser("history", help="the last runs' metrics, as a table and a PNG chart")
    p.add_argument("--last", type=int, default=20, help="how many runs (default 20)")
    p.add_argument("--configuration", default=defaults.GATED_CONFIGURATION,
                   help=f"whose metrics (default {defaults.GATED_CONFIGURATION})")
    p.add_argument("--dataset", help="runs of this dataset only (its collection name)")
    p.add_argument("--label", help="runs with this label only")
    p.add_argument("--source", choices=["nightly", "manual", "candidate", "replay"],
                   help="runs of this kind only (replay: the replay history)")
    p.add_argument("--output", type=Path, default=Path(defaults.OUTPUT),
                   help=f"where history.png is written (default {defaults.OUTPUT})")
    add_database_url(p)
    p.set_defaults(handler=cmd_history)
    hsub = p.add_subparsers(dest="history_command", required=False, parser_class=Parser)
    prune = hsub.add_parser("prune", help="remove the ranked lists of old runs (metrics stay)")
    prune.add_argument("--older-than", default=defaults.SNAPSHOT_RETENTION,
                       help="age of the runs whose snapshots go, e.g. 90d, 12h, 2w "
                            f"(default {defaults.SNAPSHOT_RETENTION}, the retention setting)")
    add_database_url(prune)
    prune.set_defaults(handler=cmd_prune)
