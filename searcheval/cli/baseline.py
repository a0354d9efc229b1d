"""`searcheval baseline update`: rewrite the reviewed baseline from a run, on purpose."""

from __future__ import annotations

import argparse
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import (
    EXIT_FAILED,
    EXIT_MEANINGS,
    EXIT_OK,
    EXIT_REFUSED,
    Parser,
    add_database_url,
    epilog,
)


def cmd_baseline_update(args: argparse.Namespace) -> int:
    from searcheval.evaluation.baseline import diff_baselines, load_baseline, write_baseline
    from searcheval.evaluation.history import baseline_from_output, baseline_from_run

    previous = load_baseline(args.baseline) if args.baseline.exists() else None
    if args.from_output:
        new = baseline_from_output(args.from_output, previous)
    else:
        new = baseline_from_run(args.from_run, previous, args.database_url)
    for line in diff_baselines(previous, new):
        print(line)
    if args.dry_run:
        print(f"(dry run: {args.baseline} unchanged)")
        return EXIT_OK
    write_baseline(args.baseline, new)
    print(f"wrote {args.baseline}")
    return EXIT_OK


def add_baseline(sub) -> None:
    p = sub.add_parser("baseline", help="the reviewed baseline of the gate")
    bsub = p.add_subparsers(dest="baseline_command", required=True, parser_class=Parser)
    u = bsub.add_parser("update", help="rewrite baseline.json from a run, on purpose; prints the diff",
                        **epilog(["searcheval baseline update --from-output out --dry-run",
                                  "searcheval baseline update --from-run 20261203T030000Z-1a2b3c"],
                                 {EXIT_OK: "written (or, with --dry-run, only the diff printed)",
                                  EXIT_REFUSED: EXIT_MEANINGS[EXIT_REFUSED],
                                  EXIT_FAILED: "the database failed"}))
    src = u.add_mutually_exclusive_group(required=True)
    src.add_argument("--from-run", help="a run id of the history in Postgres")
    src.add_argument("--from-output", type=Path, help="an output folder of `searcheval run`")
    u.add_argument("--baseline", type=Path, default=Path(defaults.BASELINE),
                   help=f"the baseline file to rewrite (default {defaults.BASELINE})")
    u.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    add_database_url(u)
    u.set_defaults(handler=cmd_baseline_update)
