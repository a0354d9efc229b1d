"""`searcheval history`: the last runs' metrics, as a table and a PNG chart (filtered by dataset,
configuration, label and source); `searcheval history prune`: old snapshots removed."""

from __future__ import annotations

import argparse
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import EXIT_OK, Parser, add_database_url


def cmd_history(args: argparse.Namespace) -> int:
    """The runs of every dataset (or of --dataset: a project dataset's name or a collection
    name), each with the numbers of the configuration it served unless --configuration names
    another."""
    from searcheval.cli.common import current_project
    from searcheval.evaluation.history import history_chart, history_table, recent_runs
    from searcheval.project import default_dataset_name

    dataset = default_dataset_name(current_project(), args.dataset) \
        if args.dataset is not None else None
    runs = recent_runs(args.last, args.configuration, args.database_url, dataset=dataset,
                       label=args.label, source=args.source)
    print(history_table(runs, args.configuration))
    if runs and args.output is not None:
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
    if args.output_folder is not None:
        from searcheval.evaluation.retention import prune_outputs

        gone = prune_outputs(args.output_folder, age)
        print(f"removed {len(gone['removed'])} run folder(s) of {args.output_folder} started "
              f"before {gone['before']:%Y-%m-%d %H:%M} UTC; kept {gone['kept']} (and anything "
              "searcheval did not write)")
    return EXIT_OK


def add_history(sub) -> None:
    p = sub.add_parser("history", help="the last runs' metrics, as a table and a PNG chart")
    p.add_argument("--last", type=int, default=20, help="how many runs (default 20)")
    p.add_argument("--configuration",
                   help="whose metrics (default: each run's served configuration)")
    p.add_argument("--dataset", help="runs of this dataset only (a project dataset's name, or a "
                                     "collection name; default: every dataset, each row with "
                                     "its dataset and served configuration)")
    p.add_argument("--label", help="runs with this label only")
    p.add_argument("--source", choices=["nightly", "manual", "candidate", "replay"],
                   help="runs of this kind only (replay: the replay history)")
    p.add_argument("--output", type=Path,
                   help="write the chart to OUTPUT/history.png (default: no chart)")
    add_database_url(p)
    p.set_defaults(handler=cmd_history)
    hsub = p.add_subparsers(dest="history_command", required=False, parser_class=Parser)
    prune = hsub.add_parser("prune", help="remove the ranked lists of old runs (metrics stay)")
    prune.add_argument("--older-than", default=defaults.SNAPSHOT_RETENTION,
                       help="age of the runs whose snapshots go, e.g. 90d, 12h, 2w "
                            f"(default {defaults.SNAPSHOT_RETENTION}, the retention setting)")
    prune.add_argument("--output-folder", type=Path,
                       help="also delete the run folders searcheval wrote in this output folder "
                            "(e.g. out/nightly) older than --older-than; never the latest, "
                            "never a folder without searcheval's marker")
    add_database_url(prune)
    prune.set_defaults(handler=cmd_prune)
