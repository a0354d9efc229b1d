"""`searcheval judgments import|export|pool|agreement` and `searcheval rate`: the judgment loop."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import (EXIT_OK, add_collection, add_database_url,
                                   collection_arguments, import_project_module, print_json)
from searcheval.errors import InputError


def judgment_set(collection) -> str:
    """The judgment set of a collection (imported here, not at the CLI's start: `searcheval score`
    never needs it)."""
    from searcheval.judging.judgments import judgment_set as of

    return of(collection)


def _collection(args):
    from searcheval.evaluation.inputs import load_collection

    return load_collection(**collection_arguments(args))


def _entry_value(args, name: str, default):
    """A setting of the command's dataset in the project settings, else `default`."""
    from searcheval.cli.common import resolve_args

    resolved = resolve_args(args, {name: default})
    return resolved.values[name]


def _effective(conn, collection, args, *, as_the_run_counts: bool = False):
    """The effective judgments. `as_the_run_counts`: only the sources a run counts (the project's
    `judgment_sources`, else the dataset's setting or default), as `judgments export` shows them;
    otherwise every stored grade (the pool leaves out pairs anyone graded, agreement compares
    every judge)."""
    from searcheval.judging.judgments import parse_rule
    from searcheval.judging.source import counted_sources, preview_judgments

    rule = args.rule or _entry_value(args, "judgment_rule", defaults.JUDGMENT_RULE)
    counted, counted_from = "all", "default"
    if as_the_run_counts:
        from searcheval.cli.common import resolve_args

        resolved = resolve_args(args, {"judgment_sources": None})
        counted, counted_from = counted_sources(collection,
                                                resolved.values["judgment_sources"],
                                                resolved.sources.get("judgment_sources"))
    return preview_judgments(conn, collection, parse_rule(rule),
                             max_age_days=args.max_age_days, counted=counted,
                             counted_from=counted_from)


def _write(text: str, target: Path | None) -> None:
    if target is None:
        sys.stdout.write(text)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    print(f"wrote {target}", file=sys.stderr)


def cmd_import(args: argparse.Namespace) -> int:
    from searcheval.judging.files import read_judgment_file
    from searcheval.store import judgments as store
    from searcheval.store.database import open_database

    collection = _collection(args)
    guideline = args.guideline
    if guideline is None and args.source != "import":  # the team's grades: the version of the
        # dataset's guideline file, when the project names one
        from searcheval.cli.common import resolve_args
        from searcheval.judging.app import Guideline

        entry = resolve_args(args, {}).entry
        if entry is not None and entry.get("guideline"):
            guideline = Guideline.from_file(entry.get("guideline")).version
    rows = read_judgment_file(args.file, collection, judge=args.judge, source=args.source,
                              guideline=guideline, fmt=args.format)
    with open_database(args.database_url) as conn:
        added = store.add_judgments(conn, judgment_set(collection), rows)
    judges = sorted({r.judge for r in rows})
    print(f"imported {len(rows)} judgment(s) of {args.file} into {judgment_set(collection)} by "
          f"{', '.join(judges)}: {added} new, {len(rows) - added} already there")
    return EXIT_OK


def cmd_export(args: argparse.Namespace) -> int:
    from searcheval.judging.files import export_effective, export_rows
    from searcheval.judging.source import seed_rows
    from searcheval.store import judgments as store
    from searcheval.store.database import open_database

    collection = _collection(args)
    with open_database(args.database_url) as conn:
        if args.all:
            if args.format == "trec":
                export_rows([], "trec")  # refuses: one grade per pair
            stored = store.load_judgment_rows(conn, judgment_set(collection), include_retracted=True,
                                              include_seed=False)
            text = export_rows(seed_rows(collection) + stored, args.format)
        else:
            _, effective = _effective(conn, collection, args, as_the_run_counts=True)
            text = export_effective(effective, args.format)
    _write(text, args.output)
    return EXIT_OK


def cmd_pool(args: argparse.Namespace) -> int:
    from searcheval.judging import pool as pooling
    from searcheval.store import documents as looked_up
    from searcheval.store import judgments as store
    from searcheval.store import last_runs
    from searcheval.store.database import open_database

    collection = _collection(args)
    configurations = [c.strip() for c in args.configurations.split(",")] \
        if args.configurations else None
    judges = [j.strip() for j in args.judges.split(",") if j.strip()] if args.judges else []
    pool_id = pooling.new_pool_id()
    with open_database(args.database_url) as conn:
        if args.run == "latest":
            from searcheval.store.snapshots import find_runs

            runs = find_runs(conn, n=1, dataset=judgment_set(collection)) \
                or last_runs(conn, 1)  # a run that recorded no dataset: the latest of all
            if not runs:
                raise InputError(f"no run of {judgment_set(collection)} in the history yet: run "
                                 "`searcheval run` first", field="run")
            run_id = runs[0]["run_id"]
        else:
            if store.run_row(conn, args.run) is None:
                raise InputError(f"no run {args.run!r} in the history (searcheval history lists "
                                 "them)", field="run")
            run_id = args.run
        run_output = args.run_output or Path(_entry_value(args, "output", defaults.OUTPUT))
        rankings = pooling.load_run_rankings(pooling.run_folder(run_output, run_id),
                                             configurations)
        golden = {q.id for q in collection.queries}
        if not any(set(ranking) & golden for ranking in rankings.values()):
            raise InputError(f"run {run_id} ranked no golden query of {judgment_set(collection)}: pass "
                             "the run's collection (--fixtures / --dataset / --mapping)",
                             field="run")
        _, effective = _effective(conn, collection, args)
        items = pooling.build_pool(rankings, set(effective.grades()), args.depth,
                                   {q.id for q in collection.queries})
        items = pooling.assign(items, args.overlap, judges, pool_id)
        held = {r.id for r in collection.resources}
        documents = looked_up.latest_versions(conn, judgment_set(collection),
                                              {i.doc_id for i in items if i.doc_id not in held})
        if args.save:
            store.save_pool(conn, {"pool_id": pool_id, "catalog": judgment_set(collection),
                                   "run_id": run_id, "depth": args.depth,
                                   "configurations": sorted(rankings), "overlap": args.overlap,
                                   "judges": judges},
                            [{"position": n, "query_id": i.query_id, "doc_id": i.doc_id,
                              "best_rank": i.best_rank, "configurations": i.configurations,
                              "judges_needed": i.judges_needed, "assigned": list(i.assigned)}
                             for n, i in enumerate(items, start=1)])
    rows = pooling.pool_rows(items, collection, documents)
    if args.file is not None or not args.save:
        _write(pooling.write_pool(rows, args.format), args.file)
    doubles = sum(1 for i in items if i.judges_needed == 2)
    where = f"kept as {pool_id} (searcheval rate --pool {pool_id})" if args.save else "not kept"
    print(f"pool of run {run_id}: {len(items)} unjudged pair(s) in the top {args.depth} of "
          f"{', '.join(sorted(rankings))}; {doubles} for two judges; {where}", file=sys.stderr)
    return EXIT_OK


def cmd_agreement(args: argparse.Namespace) -> int:
    from searcheval.judging.agreement import agreement
    from searcheval.store.database import open_database

    collection = _collection(args)
    with open_database(args.database_url) as conn:
        _, effective = _effective(conn, collection, args)
    result = agreement(effective.latest, {q.id: q.category for q in collection.queries},
                       collection.grade_scale, floor=args.floor)
    if args.format == "json":
        print_json(result)
        return EXIT_OK
    if not result["items"]:
        print("no pair is graded by two judges: nothing to measure")
        return EXIT_OK
    alpha = result["alpha"]
    print(f"Krippendorff's alpha (ordinal): {'-' if alpha is None else f'{alpha:.3f}'} over "
          f"{result['items']} pair(s), judges {', '.join(result['judges'])} (floor "
          f"{result['floor']:g}{', below it' if result['below_floor'] else ''})")
    for k in result["kappa"]:
        value = "-" if k["kappa"] is None else f"{k['kappa']:.3f}"
        print(f"Cohen's weighted kappa {k['judges'][0]} / {k['judges'][1]}: {value} over "
              f"{k['items']} pair(s)")
    for category, c in result["by_category"].items():
        value = "-" if c["alpha"] is None else f"{c['alpha']:.3f}"
        print(f"  {category}: alpha {value} over {c['items']} pair(s)")
    for d in result["disagreements"]:
        print(f"  disagreement {d['query_id']} / {d['doc_id']}: "
              + ", ".join(f"{j}={g}" for j, g in d["grades"].items()))
    return EXIT_OK


def _common(p: argparse.ArgumentParser, rule: bool = True) -> None:
    add_collection(p)
    add_database_url(p)
    if rule:
        p.add_argument("--rule",
                       help="effective grade: each judge's latest, then median | majority | "
                            "judge:NAME; judge:dataset: the dataset's own qrels only (default: "
                            f"the project's judgment_rule, else {defaults.JUDGMENT_RULE})")
        p.add_argument("--max-age-days", type=int, default=defaults.MAX_AGE_DAYS,
                       help="judgments older than this are stale "
                            f"(default {defaults.MAX_AGE_DAYS})")


def add_judgments(sub) -> None:
    p = sub.add_parser("judgments", help="judgments in Postgres: import, export, pool, agreement")
    group = p.add_subparsers(dest="judgments_command", required=True,
                             parser_class=type(p))

    i = group.add_parser("import", help="add a file's judgments (CSV, TREC qrels, BEIR tsv, JSONL)")
    i.add_argument("file", type=Path, help="the judgments file")
    i.add_argument("--judge", help="the judge of every row (default: each row's judge column)")
    i.add_argument("--format", choices=["csv", "trec", "beir", "jsonl"],
                   help="default: told by the file name (.csv, .jsonl, .tsv = BEIR, else TREC)")
    i.add_argument("--source", choices=list(defaults.JUDGMENT_SOURCES), default="import",
                   help="who made the grades: human, import (default) or model")
    i.add_argument("--guideline", help="version of the grading guideline the grades followed "
                   "(default for human and model grades: the version of the dataset's guideline "
                   "file in the project settings)")
    _common(i, rule=False)
    i.set_defaults(handler=cmd_import)

    e = group.add_parser("export", help="the effective grades (or every row: --all)")
    e.add_argument("--format", choices=["csv", "trec", "jsonl"], default="csv",
                   help="csv (the fixtures' columns, default), trec qrels or jsonl")
    e.add_argument("--all", action="store_true",
                   help="every row (re-judgments, retracted rows) instead of the effective grades")
    e.add_argument("--output", type=Path, help="file to write (default: stdout)")
    _common(e)
    e.set_defaults(handler=cmd_export)

    q = group.add_parser("pool", help="the unjudged top k of a run's configurations")
    q.add_argument("--run", default="latest",
                   help="a run id from `searcheval history`, or latest (default: the dataset's "
                        "latest run)")
    q.add_argument("--depth", type=int, default=defaults.POOL_DEPTH,
                   help=f"top k of each configuration (default {defaults.POOL_DEPTH})")
    q.add_argument("--configurations", help="comma-separated subset of the run's configurations")
    q.add_argument("--run-output", type=Path,
                   help="the run's output folder, with runs/*.trec (default: the dataset's "
                        f"output in the project settings, else {defaults.OUTPUT})")
    q.add_argument("--format", choices=["csv", "jsonl"], default="csv",
                   help="of the pool file (default csv)")
    q.add_argument("--file", type=Path, help="write the pool here (default: stdout, unless --save)")
    q.add_argument("--save", action="store_true",
                   help="keep the pool in Postgres as the rating page's queue")
    q.add_argument("--overlap", type=float, default=defaults.POOL_OVERLAP,
                   help="share of the pool assigned to two judges, e.g. 0.2 "
                        f"(default {defaults.POOL_OVERLAP:g})")
    q.add_argument("--judges", help="comma-separated judges to assign the pool to, in turn")
    _common(q)
    q.set_defaults(handler=cmd_pool)

    a = group.add_parser("agreement", help="agreement between judges: weighted kappa and alpha")
    a.add_argument("--floor", type=float, default=defaults.AGREEMENT_FLOOR,
                   help=f"alpha below which agreement is too low (default {defaults.AGREEMENT_FLOOR})")
    a.add_argument("--format", choices=["table", "json"], default="table",
                   help="a table of the agreement figures (default), or JSON")
    _common(a)
    a.set_defaults(handler=cmd_agreement)

    from searcheval.cli.production import add_implicit

    add_implicit(group)  # `judgments implicit`: grades from clicks (issue 25)
    from searcheval.cli.judges import add_judge_commands

    add_judge_commands(group)


# --------------------------------------------------------------------------- rate


def rate_token(secret_block: str | None) -> str | None:
    """The token of a non-loopback rating page: a Prefect Secret block, else the environment."""
    from searcheval.redaction import remember

    if secret_block:
        token = import_project_module("tasks.secrets").secret_value(secret_block)
    else:
        token = os.environ.get(defaults.RATE_TOKEN_ENV) or None
    remember(token)  # never echoed by anything this process writes or logs
    return token


def rating_session(args: argparse.Namespace):
    """The RatingSession `searcheval rate` serves (the pool, its collection, the judge)."""
    import getpass

    from searcheval.judging.app import RatingSession, check_binding
    from searcheval.store import judgments as store
    from searcheval.store.database import open_database, resolve_url

    token = rate_token(args.token_secret)
    check_binding(args.host, token)
    collection = _collection(args)
    url = resolve_url(args.database_url)
    with open_database(url) as conn:
        found = store.load_pool(conn, args.pool, judgment_set(collection))
    if found is None:
        raise InputError(f"no pool {args.pool!r} in the database: make one with "
                         "`searcheval judgments pool --run latest --save`", field="pool")
    pool, items = found
    if pool["catalog"] != judgment_set(collection):
        raise InputError(f"pool {pool['pool_id']} is of {pool['catalog']}, not of "
                         f"{judgment_set(collection)}: pass its --dataset", field="pool")
    from searcheval.cli.common import resolve_args
    from searcheval.judging.app import Guideline

    entry = resolve_args(args, {}).entry  # the dataset's guideline and grade labels
    guideline = Guideline.from_file(entry.get("guideline") if entry is not None else None,
                                    entry.get("grade_labels") if entry is not None else None)
    return RatingSession(database_url=url, collection=collection, pool=pool, items=items,
                         judge=args.judge or getpass.getuser(), token=token,
                         guideline=guideline)


def cmd_rate(args: argparse.Namespace) -> int:
    import uvicorn

    from searcheval.judging.app import allowed_hosts_for, create_app

    session = rating_session(args)
    print(f"rating pool {session.pool['pool_id']} as {session.judge}: "
          f"http://{args.host}:{args.port}/ (Ctrl-C stops)", file=sys.stderr)
    hosts = allowed_hosts_for(args.host, args.allowed_host or ())
    uvicorn.run(create_app(session, allowed_hosts=hosts), host=args.host, port=args.port,
                log_level="warning")
    return EXIT_OK


def add_rate(sub) -> None:
    p = sub.add_parser("rate", help="the rating page: grade a pool's pairs in a browser")
    p.add_argument("--judge", help="who grades (default: the login name); never a form field")
    p.add_argument("--pool", default="latest", help="a pool id, or latest (default)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; any other address needs a "
                        f"token: {defaults.RATE_TOKEN_ENV} or --token-secret)")
    p.add_argument("--port", type=int, default=defaults.RATE_PORT,
                   help=f"port (default {defaults.RATE_PORT})")
    p.add_argument("--token-secret", help="a Prefect Secret block holding the token")
    p.add_argument("--allowed-host", action="append", metavar="NAME",
                   help="a host name the page answers besides the loopback names and --host "
                        "(repeatable; e.g. the name judges type when it listens on 0.0.0.0); "
                        "any other Host header is refused (DNS rebinding)")
    add_collection(p)
    add_database_url(p)
    p.set_defaults(handler=cmd_rate)
