"""`searcheval validate`: the inputs through the Great Expectations suites, without a run."""

from __future__ import annotations

import argparse

from searcheval import defaults
from searcheval.cli.common import EXIT_OK, add_collection, collection_arguments, print_json


def cmd_validate(args: argparse.Namespace) -> int:
    from searcheval.evaluation.validation import validate_collection
    from searcheval.evaluation.inputs import load_collection

    collection = load_collection(**collection_arguments(args))
    report = validate_collection(collection, max_age_days=args.max_age_days)
    if args.format == "json":
        print_json(report.to_dict())
    else:
        print(f"{collection.name}: {len(collection.resources)} resources, "
              f"{len(collection.queries)} queries, {len(collection.judgments)} judgments")
        for f in report.findings:
            print(f"{f.severity}: {f.suite} / {f.expectation}: {f.message}")
        for note in report.notes:
            print(f"note: {note}")
        print(f"stale judgments: {len(report.stale)}")
        print("valid" if report.ok else "refused")
    report.raise_for_errors()
    return EXIT_OK


def add_validate(sub) -> None:
    p = sub.add_parser("validate", help="check the inputs with the Great Expectations suites")
    add_collection(p)
    p.add_argument("--max-age-days", type=int, default=defaults.MAX_AGE_DAYS,
                   help=f"judgments older than this are stale (default {defaults.MAX_AGE_DAYS})")
    p.add_argument("--format", choices=["table", "json"], default="table",
                   help="table (default) or the report as JSON")
    p.set_defaults(handler=cmd_validate)
