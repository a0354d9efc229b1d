"""`searcheval init`: a project folder's settings file (searcheval.yaml), for hand editing."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

from searcheval import defaults
from searcheval.cli.common import EXIT_MEANINGS, EXIT_OK, EXIT_REFUSED, epilog
from searcheval.errors import InputError

#: the judged-share floor `init` writes for a BEIR collection: BEIR judges only (a few) relevant
#: documents per query, so a share of 0.9 of the top 10 would alert on every run
BEIR_COVERAGE_FLOOR = 0.05


def _relative(path: Path, folder: Path) -> str:
    """A path as the settings file writes it: relative to the project folder when inside it."""
    path = path.expanduser().resolve()
    try:
        return str(path.relative_to(folder))
    except ValueError:
        return str(path)


def cmd_init(args: argparse.Namespace) -> int:
    from searcheval.io.collection import dataset_layout
    from searcheval.project import (PROJECT_FILE, STARTER_CONFIGURATIONS, init_text,
                                    load_project)
    from searcheval.rankers.configs import load_configurations

    folder = args.folder.expanduser().resolve()
    target = folder / PROJECT_FILE
    if target.exists():
        raise InputError("a settings file is already there: edit it by hand (init never "
                         "overwrites)", file=target)
    given = [(k, v) for k, v in (("dataset", args.dataset), ("fixtures", args.fixtures),
                                  ("mapping", args.mapping)) if v is not None]
    if len(given) != 1:
        raise InputError("expected the project's dataset: --dataset FOLDER, --fixtures FOLDER "
                         "or --mapping FILE", field="dataset")
    location, data = given[0]
    data = Path(data)
    layout = None
    if location == "mapping":
        if not data.is_file():
            raise InputError("expected a mapping file", file=data, field="mapping")
    else:
        layout = dataset_layout(data)  # refuses what is no dataset, naming the folder
        if location == "fixtures" and layout != "fixtures":
            location = "dataset"
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]+", "-", data.resolve().stem).strip("-") \
        or "dataset"
    project = args.project or re.sub(r"[^A-Za-z0-9_.-]+", "-", folder.name).strip("-") \
        or "project"
    configurations = args.configurations_file or Path("configurations.yaml")
    configurations = configurations if configurations.is_absolute() \
        else (folder / configurations)
    wrote = []
    if not configurations.exists():
        if args.configurations_file is not None:
            raise InputError("no configurations file there: name an existing one, or leave "
                             "--configurations-file out for a starter (bm25)",
                             file=configurations, field="configurations_file")
        if args.served not in (None, "bm25"):
            raise InputError(f"no configurations file yet, and the starter serves 'bm25', not "
                             f"{args.served!r}: write {configurations} first, or leave "
                             "--served out", file=configurations, field="served")
        folder.mkdir(parents=True, exist_ok=True)
        configurations.write_text(STARTER_CONFIGURATIONS, encoding="utf-8")
        wrote.append(configurations)
    resolved = load_configurations(configurations)
    served = args.served or resolved.served
    if served != resolved.served:
        raise InputError(f"{configurations} marks {resolved.served!r} `served: true`, not "
                         f"{served!r}: mark the served configuration there", file=configurations,
                         field="served")
    floor = args.coverage_floor
    if floor is None and layout == "beir":
        floor = BEIR_COVERAGE_FLOOR  # BEIR judges only relevant documents: judged@10 is low
    text = init_text(project=project, dataset_name=name, location=location,
                     path=_relative(data, folder),
                     configurations_file=_relative(configurations, folder), served=served,
                     baseline=f"baselines/{name}.json", output=args.output or "out",
                     coverage_floor=floor, judgment_rule=args.judgment_rule,
                     schedule=args.schedule,
                     split=args.split if location == "dataset" and args.split else None)
    folder.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    try:
        load_project(target)  # what init writes, the loader reads
    except InputError:
        target.unlink()
        raise
    wrote.append(target)
    for path in wrote:
        print(f"wrote {path}")
    # the first run of a project is NOT GATED by itself (no baseline yet) and says how to make
    # the first one: no flag is needed
    go = "" if folder == Path.cwd().resolve() else f"cd {shlex.quote(str(folder))} && "
    print(f"project {project}: dataset {name} ({location} {data}), served {served}; "
          f"next: {go}searcheval run")
    return EXIT_OK


def add_init(sub) -> None:
    p = sub.add_parser(
        "init", help="create a project's settings file (searcheval.yaml) for a dataset",
        description="Write searcheval.yaml in a project folder: the project's name, its dataset, "
                    "the configurations file (a starter with bm25 when there is none) and the "
                    "served configuration. Every command run in the folder (or below it) takes "
                    "its defaults from it. Never overwrites.",
        **epilog(["searcheval init --dataset ../datasets/scifact --coverage-floor 0.05 "
                  "--judgment-rule judge:dataset",
                  "searcheval init --folder acme --dataset data/products --configurations-file "
                  "acme/configurations.yaml"],
                 {EXIT_OK: "written", EXIT_REFUSED: EXIT_MEANINGS[EXIT_REFUSED]}))
    source = p.add_mutually_exclusive_group()
    source.add_argument("--dataset", type=Path, help="the dataset folder (BEIR, WANDS, fixtures)")
    source.add_argument("--fixtures", type=Path, help="a folder in the fixtures' layout")
    source.add_argument("--mapping", type=Path, help="a table mapping file")
    p.add_argument("--folder", type=Path, default=Path("."),
                   help="the project folder (default: the working directory)")
    p.add_argument("--project", help="the project's name (default: the folder's name)")
    p.add_argument("--name", help="the dataset's name in the project (default: its folder's)")
    p.add_argument("--split", help=f"BEIR qrels split (default {defaults.SPLIT})")
    p.add_argument("--configurations-file", type=Path,
                   help="the configurations file (default: configurations.yaml in the folder, "
                        "written with a bm25 starter when missing)")
    p.add_argument("--served", help="the served configuration (must be the file's `served`)")
    p.add_argument("--coverage-floor", type=float,
                   help="judged share of the top 10 below which a run alerts (default for a "
                        f"BEIR collection {BEIR_COVERAGE_FLOOR}: BEIR judges only relevant "
                        "documents; else the dataset's setting or the library's default)")
    p.add_argument("--judgment-rule", help="judgments that count, e.g. judge:dataset (the "
                                           "dataset's own qrels only)")
    p.add_argument("--schedule", metavar="CRON", help="a nightly deployment, e.g. '0 3 * * *'")
    p.add_argument("--output", help="the runs' output folder (default out)")
    p.set_defaults(handler=cmd_init)
