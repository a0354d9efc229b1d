"""`searcheval judgments label|audit|calibrate`: model judges and their human audit (issue 24)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import (EXIT_FAILED, EXIT_OK, add_collection, add_database_url,
                                   collection_arguments, import_project_module, print_json)
from searcheval.errors import InputError

JUDGES_FILE = "judges.yaml"


def _collection(args):
    from searcheval.io.collection import load_collection

    return load_collection(**collection_arguments(args))


def _judge(args):
    from searcheval.judging.judges import load_judges, pick_judge

    return pick_judge(load_judges(args.judges_file), args.judge)


def judge_secrets(judge) -> dict[str, str]:
    """The Prefect Secret blocks the judge reads, resolved now (never printed)."""
    from searcheval.judging.grading import secret_blocks

    names = secret_blocks(judge)
    if not names:
        return {}
    secrets = import_project_module("tasks.secrets")
    return {name: secrets.secret_value(name) for name in names}


def check_judge_independent(judge, configurations_file: str | Path,
                            model_path: str | None) -> None:
    """The product's rule, against every configuration of the configurations file."""
    from searcheval.judging.judges import check_against_configurations
    from searcheval.rankers.configs import load_configurations

    check_against_configurations(judge, load_configurations(configurations_file), model_path)


def pool_pairs(conn, collection, args) -> tuple[list[tuple[str, str]], str | None, dict]:
    """(pairs, pool id, documents) of `--pool ID|latest`, of `--pool-file FILE` (a pool file,
    e.g. the `pool.csv` of `searcheval tune`), or of `--run ID|latest` (the run's unjudged top
    `--depth`, as `searcheval judgments pool` builds it)."""
    from searcheval.judging import pool as pooling
    from searcheval.judging.judgments import judgment_set, parse_rule
    from searcheval.judging.source import preview_judgments
    from searcheval.store import documents as looked_up
    from searcheval.store import judgments as store
    from searcheval.store import last_runs

    catalog = judgment_set(collection)
    if getattr(args, "pool_file", None) is not None:
        pairs = pooling.read_pool_file(args.pool_file, collection)
        pool_id = None
    elif args.pool is not None:
        found = store.load_pool(conn, args.pool)
        if found is None:
            raise InputError(f"no pool {args.pool!r} in the database: make one with `searcheval "
                             "judgments pool --run latest --save`", field="pool")
        pool, items = found
        if pool["catalog"] != catalog:
            raise InputError(f"pool {pool['pool_id']} is of {pool['catalog']}, not of {catalog}: "
                             "pass its --fixtures/--dataset", field="pool")
        pairs = [(i["query_id"], i["doc_id"]) for i in items]
        pool_id = pool["pool_id"]
    else:
        if args.run == "latest":
            runs = last_runs(conn, 1)
            if not runs:
                raise InputError("no run in the history yet: run `searcheval run` first",
                                 field="run")
            run_id = runs[0]["run_id"]
        else:
            if store.run_row(conn, args.run) is None:
                raise InputError(f"no run {args.run!r} in the history", field="run")
            run_id = args.run
        rankings = pooling.load_run_rankings(pooling.run_folder(args.run_output, run_id))
        _, effective = preview_judgments(conn, collection, parse_rule(None),
                                         max_age_days=defaults.MAX_AGE_DAYS)
        items = pooling.build_pool(rankings, set(effective.grades()), args.depth,
                                   {q.id for q in collection.queries})
        pairs = [(i.query_id, i.doc_id) for i in items]
        pool_id = None
    held = {r.id for r in collection.resources}
    documents = looked_up.latest_versions(conn, catalog, {d for _, d in pairs if d not in held})
    return pairs, pool_id, documents


def project_guideline(args: argparse.Namespace) -> str | None:
    """The text of the guideline file the project settings name for the command's dataset, with
    its grade labels after it (what the rating page shows people); None when none is named."""
    from searcheval.cli.common import resolve_args

    return guideline_of(resolve_args(args, {}).entry)


def guideline_of(entry) -> str | None:
    """The guideline text (with its grade labels) of a project's dataset entry, else None."""
    from searcheval.judging.app import Guideline

    if entry is None or not entry.get("guideline"):
        return None
    g = Guideline.from_file(entry.get("guideline"), entry.get("grade_labels"))
    labels = "\n".join(f"{k}: {v}" for k, v in sorted(g.labels.items(), reverse=True))
    return g.text + (f"\n\n{labels}" if labels else "")


def cmd_label(args: argparse.Namespace) -> int:
    from searcheval.judging.labelling import label
    from searcheval.store.database import open_database

    if sum(x is not None for x in (args.pool, args.run, args.pool_file)) != 1:
        raise InputError("name what to label, once: --pool ID|latest, --pool-file FILE or --run "
                         "ID|latest", field="pool")
    judge = _judge(args)
    collection = _collection(args)
    check_judge_independent(judge, args.configurations_file, args.model_path)
    secrets = {} if args.dry_run else judge_secrets(judge)
    with open_database(args.database_url) as conn:
        pairs, pool_id, documents = pool_pairs(conn, collection, args)
        result = label(conn, judge, collection, pairs, limit=args.limit, dry_run=args.dry_run,
                       secrets=secrets, pool_id=pool_id, documents=documents,
                       guideline=project_guideline(args))
    if args.format == "json":
        print_json(result.to_dict())
    else:
        for qid, doc in result.planned:  # a dry run's pairs, one a line
            print(f"{qid}\t{doc}")
        for e in result.errors[:20]:
            print(f"  failed {e['query_id']} / {e['doc_id']}: {e['cause']}", file=sys.stderr)
        print(result.describe(), file=sys.stderr if args.dry_run else sys.stdout)
    if not args.dry_run and result.requested and result.failed == result.requested \
            and result.graded == result.from_cache:
        return EXIT_FAILED  # not one answer: the judge is unreachable or broken
    return EXIT_OK


def _policy(judge, args):
    from dataclasses import replace

    policy = judge.audit
    for name in ("share", "minimum", "floor", "seed"):
        value = getattr(args, name)
        if value is not None:
            policy = replace(policy, **{name: value})
    from searcheval.judging.judges import judges_from

    # the same checks as the file's
    judges_from({"judges": {judge.name: {"kind": judge.kind, "model": judge.model,
                                         "params": judge.params, "audit": policy.to_dict()}}},
                judge.file)
    return policy


def cmd_audit(args: argparse.Namespace) -> int:
    from searcheval.judging import pool as pooling
    from searcheval.judging.audit import audit_sample, judge_audits, split_rows
    from searcheval.judging.judgments import judgment_set
    from searcheval.judging.source import collection_rows
    from searcheval.store import judgments as store
    from searcheval.store.database import open_database

    judge = _judge(args)
    policy = _policy(judge, args)
    collection = _collection(args)
    categories = {q.id: q.category for q in collection.queries}
    catalog = judgment_set(collection)
    from searcheval.store import judges as judge_store

    with open_database(args.database_url) as conn:
        rows = collection_rows(conn, collection)
        recorded = judge_store.judge_runs(conn, catalog, judge.name)
        queued = None
        if args.queue:
            models, humans = split_rows(rows)
            grades = models.get(judge.name, {})
            if not grades:
                raise InputError(f"judge {judge.name} has no grade of {catalog} yet: run "
                                 "`searcheval judgments label` first", field="judge")
            audited = {p for p in grades if humans.get(p)}
            sample = audit_sample(grades, categories, policy, audited)
            pool_id = f"audit-{judge.name}-{pooling.new_pool_id()[5:]}"
            store.save_pool(conn, {"pool_id": pool_id, "catalog": catalog,
                                   "run_id": f"audit:{judge.name}", "depth": 0,
                                   "configurations": [], "overlap": 0.0, "judges": []},
                            [{"position": n, "query_id": q, "doc_id": d, "best_rank": 0,
                              "configurations": 0, "judges_needed": 1, "assigned": []}
                             for n, (q, d) in enumerate(sample, start=1)])
            queued = {"pool_id": pool_id, "pairs": len(sample), "audited_already": len(audited)}
    audits = judge_audits(rows, categories, collection.grade_scale, {judge.name: policy},
                          bootstrap=args.bootstrap)
    state = audits.get(judge.name) or {"graded": 0, "agreement": {"items": 0}, "counts": False,
                                       "reason": "no grade of this judge yet",
                                       "policy": policy.to_dict()}
    spent = {"runs": len(recorded), "requests": sum(r["requests"] for r in recorded),
             "input_tokens": sum(r["input_tokens"] for r in recorded),
             "output_tokens": sum(r["output_tokens"] for r in recorded),
             "cost": sum(r["cost"] for r in recorded),
             "seconds": sum(r["seconds"] for r in recorded)}
    if args.format == "json":
        print_json({"judge": judge.name, "judge_hash": judge.sha256, **state, "queued": queued,
                    "labelling": spent})
        return EXIT_OK
    a = state["agreement"]

    def fmt(v):
        return "-" if v is None else f"{v:.3f}"

    def interval(v):
        return "" if not v else f" [{v[0]:.3f}, {v[1]:.3f}]"

    print(f"judge {judge.name} ({judge.sha256[:12]}): {state['graded']} grade(s), "
          f"{a.get('items', 0)} audited by humans")
    if a.get("items"):
        print(f"  Krippendorff's alpha (ordinal): {fmt(a['alpha'])}{interval(a['alpha_interval'])}")
        print(f"  weighted kappa (quadratic):     {fmt(a['kappa'])}{interval(a['kappa_interval'])}")
        for category, c in a["by_category"].items():
            print(f"  {category}: {c['items']} pair(s), alpha {fmt(c['alpha'])}, kappa "
                  f"{fmt(c['kappa'])}")
        print("  confusion (rows: human grade, columns: model grade " +
              " ".join(map(str, a["labels"])) + ")")
        for label_, row in zip(a["labels"], a["confusion"]):
            print(f"    {label_}: " + " ".join(f"{n:3d}" for n in row))
    print(f"  {'COUNTS' if state['counts'] else 'NOT COUNTED'}: {state['reason']}")
    print(f"  labelling so far: {spent['runs']} run(s), {spent['requests']} request(s), "
          f"{spent['input_tokens']} input + {spent['output_tokens']} output tokens, cost "
          f"{spent['cost']:.4f}, {spent['seconds']:.1f} s")
    if queued:
        print(f"queued {queued['pairs']} pair(s) for humans as pool {queued['pool_id']} "
              f"({queued['audited_already']} audited already): searcheval rate --pool "
              f"{queued['pool_id']}")
    return EXIT_OK


def cmd_calibrate(args: argparse.Namespace) -> int:
    """A cross-encoder's thresholds fitted to the humans' grades of the pairs they graded."""
    from searcheval.judging.audit import consensus, split_rows
    from searcheval.judging.grading import (calibrate_thresholds, cross_encoder_scores,
                                            grade_of_score)
    from searcheval.judging.labelling import pair_inputs
    from searcheval.judging.source import collection_rows
    from searcheval.store.database import open_database

    judge = _judge(args)
    if judge.kind != "cross-encoder":
        raise InputError(f"judge {judge.name} is of kind {judge.kind}: only a cross-encoder has "
                         "thresholds", field="judge")
    collection = _collection(args)
    with open_database(args.database_url) as conn:
        _, humans = split_rows(collection_rows(conn, collection))
    pairs = sorted(humans)
    if len(pairs) < 2:
        raise InputError("fewer than two pairs graded by humans: audit first (searcheval "
                         "judgments audit --queue, then searcheval rate)", field="judge")
    scale = tuple(int(g) for g in collection.grade_scale)
    scores = cross_encoder_scores(judge, pair_inputs(collection, pairs), scale)
    grades = [consensus(humans[p]) for p in pairs]
    thresholds = calibrate_thresholds(scores, grades, scale)
    exact = sum(grade_of_score(s, thresholds, scale) == g for s, g in zip(scores, grades))
    print(f"thresholds: [{', '.join(f'{t:.6g}' for t in thresholds)}]   # {judge.name}: fitted "
          f"to {len(pairs)} human-graded pair(s), {exact} graded alike")
    return EXIT_OK


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--judges-file", type=Path, default=Path(JUDGES_FILE),
                   help=f"the judges (default {JUDGES_FILE})")
    p.add_argument("--judge", help="which judge of the file (default: its only one)")
    add_collection(p)
    add_database_url(p)


def add_judge_commands(group) -> None:
    """`judgments label` and `judgments audit`, added to the `judgments` group."""
    lab = group.add_parser("label", help="grade a pool's pairs with a model judge")
    lab.add_argument("--pool", help="a saved pool id, or latest")
    lab.add_argument("--pool-file", type=Path, metavar="FILE",
                     help="a pool file: the pool.csv of `searcheval tune` or of `judgments pool "
                          "--file` (its query_id and doc_id columns; .jsonl for JSON lines)")
    lab.add_argument("--run", help="a run id, or latest: its unjudged top --depth")
    lab.add_argument("--depth", type=int, default=defaults.POOL_DEPTH,
                     help=f"with --run: top k of each configuration (default {defaults.POOL_DEPTH})")
    lab.add_argument("--run-output", type=Path, default=Path(defaults.OUTPUT),
                     help=f"with --run: the run's output folder (default {defaults.OUTPUT})")
    lab.add_argument("--limit", type=int, help="label at most this many pairs")
    lab.add_argument("--dry-run", action="store_true",
                     help="print the pairs, requests and estimated cost; send and write nothing")
    lab.add_argument("--configurations-file", default=defaults.CONFIGURATIONS_FILE,
                     help="the configurations the judge must not be the model of "
                          f"(default {defaults.CONFIGURATIONS_FILE})")
    lab.add_argument("--model-path", help="the embedding model the configurations use "
                                          "(default: the packaged all-MiniLM-L6-v2)")
    lab.add_argument("--format", choices=["table", "json"], default="table",
                     help="a summary line (default), or the run's figures as JSON")
    _common(lab)
    lab.set_defaults(handler=cmd_label)

    aud = group.add_parser("audit", help="a model judge's human audit: agreement, standing, "
                                         "and (--queue) a sample queued for the rating page")
    aud.add_argument("--queue", action="store_true",
                     help="queue a stratified sample of the judge's grades for humans (a pool)")
    aud.add_argument("--share", type=float, help="share of the judge's grades to audit")
    aud.add_argument("--minimum", type=int, help="fewest audited pairs before its grades count")
    aud.add_argument("--floor", type=float, help="alpha (ordinal) its grades need to count")
    aud.add_argument("--seed", type=int, help="seed of the sample")
    aud.add_argument("--bootstrap", type=int, default=1000,
                     help="bootstrap resamples of the intervals (default 1000; 0: none)")
    aud.add_argument("--format", choices=["table", "json"], default="table",
                     help="the audit's figures as text (default), or JSON")
    _common(aud)
    aud.set_defaults(handler=cmd_audit)

    cal = group.add_parser("calibrate", help="a cross-encoder judge's thresholds, fitted to the "
                                             "humans' grades (write them in the judges file)")
    _common(cal)
    cal.set_defaults(handler=cmd_calibrate)
