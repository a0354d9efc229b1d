"""`searcheval baseline update`: rewrite the reviewed baseline from a run, on purpose.

Any served configuration: the baseline is of the previous baseline's configuration when the run
scored it, else of the configuration the run served. The first baseline of a dataset needs no
file (`--baseline FILE` names where it goes). The new baseline pins the configuration's hash and
resolved parameters and the judgment set it was scored with; what changed in the configuration,
the judgments and the metrics is printed.

One baseline per dataset: the fixtures' is `baseline.json`, another dataset's
`baselines/<dataset>.json` beside it. A run of another dataset than the baseline's is refused, and
so is a run that tripped the gate (or falls below the baseline by more than its tolerance)
unless `--accept-regression "reason"` says why it should become the baseline anyway.
"""

from __future__ import annotations

import argparse
import getpass
import os
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
from searcheval.errors import InputError
from searcheval.io.project import project_path


def _who(args: argparse.Namespace) -> str:
    if args.who:
        return args.who
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return os.environ.get("USER") or "unknown"


def _regressions(previous, new) -> list[str]:
    """Gated metrics of `new` below `previous` by more than its tolerance."""
    if previous is None:
        return []
    out = []
    for metric, before in previous.metrics.items():
        after = new.metrics.get(metric)
        if after is not None and after < before - previous.tolerance - 1e-12:
            out.append(f"{metric} {before:.4f} -> {after:.4f} ({after - before:+.4f})")
    return out


def cmd_baseline_update(args: argparse.Namespace) -> int:
    from searcheval.evaluation.baseline import (
        Provenance,
        dataset_baseline_path,
        diff_baselines,
        load_baseline,
        write_baseline,
    )
    from searcheval.evaluation.history import baseline_from_output, baseline_from_run

    from searcheval.cli.common import current_project

    project = current_project()
    entry = project.entry(args.dataset) if project is not None else None
    if args.from_run is None and args.from_output is None:
        if entry is None or not entry.get("output"):
            raise InputError("expected --from-run RUN or --from-output FOLDER (no project "
                             "settings name the dataset's output folder)", field="from_output")
        args.from_output = Path(entry.get("output"))
    named = args.baseline is not None
    path = args.baseline if named else project_path(defaults.BASELINE)
    if not named and entry is not None and entry.get("baseline"):
        path = Path(entry.get("baseline"))  # the project's baseline of the dataset

    def made(previous):
        provenance = Provenance(created_by=_who(args), reason=args.reason,
                                accepted_regression=args.accept_regression)
        if args.from_output:
            return baseline_from_output(args.from_output, previous, provenance=provenance)
        return baseline_from_run(args.from_run, previous, args.database_url,
                                 provenance=provenance)

    previous = load_baseline(path) if path.exists() else None
    made_run = made(previous)
    new = made_run.baseline
    if not named and project is not None and new.dataset \
            and entry is not None and new.dataset != entry.name:
        other = next((e for e in project.datasets.values() if e.name == new.dataset), None)
        if other is not None and other.get("baseline"):  # the run's own dataset's baseline
            path = Path(other.get("baseline"))
            previous = load_baseline(path) if path.exists() else None
            made_run = made(previous)
            new = made_run.baseline
    if previous is not None and previous.dataset and new.dataset \
            and previous.dataset != new.dataset:
        own = dataset_baseline_path(path, new.dataset)
        if named:
            raise InputError(f"run {new.from_run} is of dataset {new.dataset!r}, this baseline of "
                             f"{previous.dataset!r}: a dataset's baseline is its own file "
                             f"({own})", file=path, field="dataset")
        path = own
        previous = load_baseline(path) if path.exists() else None
        made_run = made(previous)
        new = made_run.baseline
    for line in diff_baselines(previous, new):
        print(line)
    failed = (made_run.failures or {}).get("failed") or 0
    if failed:  # a baseline over fewer queries says so; the gate pairs the queries both answered
        total = (made_run.failures or {}).get("queries") or 0
        print(f"! {failed} quer{'y' if failed == 1 else 'ies'} of {new.configuration} failed in "
              f"run {new.from_run}: the baseline holds means over {total - failed} of {total}")
    regressions = _regressions(previous, new)
    if (made_run.gate_passed is False or regressions or made_run.incomplete) \
            and not args.accept_regression:
        why = ("it is incomplete: more queries failed than the configuration allows"
               if made_run.incomplete else "it tripped the gate"
               if made_run.gate_passed is False else
               "it is worse than the baseline beyond the tolerance: " + "; ".join(regressions))
        if args.dry_run:
            print(f"(dry run: {path} unchanged; without --accept-regression the update would be "
                  f"refused: {why})")
            return EXIT_OK
        raise InputError(f"run {new.from_run} is not made the baseline: {why}; review the diff "
                         "and pass --accept-regression \"reason\" to accept it",
                         field="accept_regression")
    if args.dry_run:
        print(f"(dry run: {path} unchanged)")
        return EXIT_OK
    path.parent.mkdir(parents=True, exist_ok=True)
    write_baseline(path, new)
    print(f"wrote {path}")
    if args.from_run or args.database_url or os.environ.get("SEARCHEVAL_DATABASE_URL"):
        from searcheval.store.database import open_database
        from searcheval.store.snapshots import record_baseline_update

        with open_database(args.database_url) as conn:
            record_baseline_update(conn, dataset=new.dataset, configuration=new.configuration,
                                   from_run=new.from_run, path=str(path), who=new.created_by,
                                   reason=args.accept_regression or args.reason,
                                   accepted_regression=bool(args.accept_regression))
    return EXIT_OK


def add_baseline(sub) -> None:
    p = sub.add_parser("baseline", help="the reviewed baseline of the gate")
    bsub = p.add_subparsers(dest="baseline_command", required=True, parser_class=Parser)
    u = bsub.add_parser("update", help="rewrite a dataset's baseline from a run, on purpose; prints the diff",
                        **epilog(["searcheval baseline update --from-output out --dry-run",
                                  "searcheval baseline update --from-run 20261203T030000Z-1a2b3c",
                                  "searcheval baseline update --from-output out "
                                  "--baseline baselines/scifact.json"],
                                 {EXIT_OK: "written (or, with --dry-run, only the diff printed)",
                                  EXIT_REFUSED: EXIT_MEANINGS[EXIT_REFUSED],
                                  EXIT_FAILED: "the database failed"}))
    src = u.add_mutually_exclusive_group()
    src.add_argument("--from-run", help="a run id of the history in Postgres")
    src.add_argument("--from-output", type=Path, help="an output folder of `searcheval run` "
                     "(its latest run) or a run's own folder OUTPUT/<run_id> (default: the "
                     "dataset's output folder in the project settings)")
    u.add_argument("--dataset", help="the project dataset whose baseline and output folder "
                   "are meant (default: the project's default dataset)")
    u.add_argument("--baseline", type=Path,
                   help="the baseline file to rewrite (default: the dataset's `baseline` in the "
                        f"project settings, else {defaults.BASELINE} for its dataset, "
                        f"{defaults.BASELINES_DIR}/<dataset>.json for another)")
    u.add_argument("--reason", help="why the baseline changes (recorded in it)")
    u.add_argument("--accept-regression", metavar="REASON",
                   help="make a run that tripped the gate the baseline anyway, and record why")
    u.add_argument("--who", help="who reviewed it (default: the user name)")
    u.add_argument("--dry-run", action="store_true", help="print the diff, write nothing")
    add_database_url(u)
    u.set_defaults(handler=cmd_baseline_update)
