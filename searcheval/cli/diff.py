"""`searcheval diff A B`: which queries got worse or better between two snapshots, and why."""

from __future__ import annotations

import argparse
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import EXIT_OK, add_database_url


def cmd_diff(args: argparse.Namespace) -> int:
    from searcheval.evaluation.diff import DiffRequest, diff_json, diff_markdown, diff_runs
    from searcheval.metrics.engine import parse_metrics
    from searcheval.store.database import open_database

    metrics = tuple(m.strip() for m in args.metrics.split(",")) if args.metrics \
        else defaults.GATED_METRICS
    parse_metrics([args.metric, *metrics])
    from searcheval.cli.common import current_project
    from searcheval.project import default_dataset_name

    project = current_project()
    explicit = all(side.split(":")[0] not in ("latest", "previous") for side in (args.a, args.b))
    # `latest` and `previous` are of the project's default dataset; run ids name their own runs
    dataset = default_dataset_name(project, args.dataset) if not explicit or args.dataset \
        else None
    entry = None
    if project is not None and (args.dataset is None or args.dataset in project.datasets):
        entry = project.entry(args.dataset)
    configuration = args.configuration  # None: each run's own served configuration
    baseline = args.baseline or Path(entry.get("baseline") if entry is not None
                                     and entry.get("baseline") else defaults.BASELINE)
    request = DiffRequest(a=args.a, b=args.b, configuration=configuration,
                          dataset=dataset, baseline=baseline, metric=args.metric,
                          k=args.k, metrics=metrics)
    with open_database(args.database_url) as conn:
        diff = diff_runs(conn, request)
    text = diff_json(diff) if args.format == "json" else diff_markdown(diff)
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text, encoding="utf-8")
        print(diff["headline"])
        print(f"diff: {args.output}")
    else:
        print(text, end="")
    return EXIT_OK


def add_diff(sub) -> None:
    p = sub.add_parser(
        "diff", help="compare two snapshots query by query (run ids, latest, previous, baseline)",
        description="A and B are RUN[:CONFIGURATION]: a run id, `latest`, `previous` (the run "
                    "before the latest of its dataset) or `baseline` (the run the baseline was "
                    "made from); e.g. `searcheval diff previous latest` or "
                    "`searcheval diff latest:bm25 latest:fused`.")
    p.add_argument("a", help="the side before (RUN[:CONFIGURATION])")
    p.add_argument("b", help="the side after (RUN[:CONFIGURATION])")
    p.add_argument("--configuration", help="configuration of a side that names none (default: "
                   "the configuration that run served)")
    p.add_argument("--dataset", help="`latest` and `previous` of this dataset only (default: "
                   "the project's default dataset, else any)")
    p.add_argument("--baseline", type=Path,
                   help="the baseline `baseline` refers to (default: the project's setting, "
                        f"else {defaults.BASELINE})")
    p.add_argument("--metric", default=defaults.DIFF_METRIC,
                   help=f"metric whose delta sorts the queries (default {defaults.DIFF_METRIC})")
    p.add_argument("--metrics", help="comma-separated metrics shown per query "
                   f"(default {','.join(defaults.GATED_METRICS)})")
    p.add_argument("-k", "--k", type=int, default=defaults.DIFF_TOP_K,
                   help=f"results shown side by side (default {defaults.DIFF_TOP_K})")
    p.add_argument("--format", choices=["markdown", "json"], default="markdown",
                   help="markdown (default) or json, for other tools")
    p.add_argument("--output", type=Path, help="write the diff to this file, print the headline")
    add_database_url(p)
    p.set_defaults(handler=cmd_diff)
