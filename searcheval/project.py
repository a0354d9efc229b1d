"""A team's project: `searcheval.yaml` at the project's root, the one place a default comes from.

    project: acme-search            # the project's name: artifact keys and deployments carry it
    default_dataset: scifact        # the dataset a command means when it names none
    datasets:
      scifact:                      # the key is the dataset's identity unless its folder names one
        dataset: data/scifact       # exactly one of dataset | fixtures | mapping (relative: to
        split: test                 #   this file's folder)
        configurations_file: configurations.yaml
        served: lucene              # what production serves (must agree with the file's `served`)
        baseline: baselines/scifact.json
        output: out/scifact
        depth: 100                  # results per query
        coverage_floor: 0.05        # judged share of the top coverage_k below which a run alerts
        coverage_k: 10
        judgment_rule: judge:dataset   # its own qrels only; median | majority | judge:NAME
        judgment_sources: all       # which grades count: dataset (its own qrels only), all, or
                                    #   its own plus human, import, model (a list)
        guideline: guideline.md     # the judging guideline the rating page shows (versioned)
        grade_labels: {0: not relevant, 1: relevant}
        schedule: {cron: "0 3 * * *", timezone: UTC}   # a nightly deployment of this dataset
        alert_block: slack-webhook/on-call

Resolution order, for every option of every command: the command line (or the flow parameter),
then the dataset's entry here, then the dataset folder's own `searcheval.yaml`, then
`searcheval.defaults`. `sources` says where each value came from (the report prints it).

The project file is found in the working directory or its nearest parent holding a
`searcheval.yaml` with a `project:` key (a dataset folder's own `searcheval.yaml` has none), or
named by the environment variable SEARCHEVAL_SETTINGS. Nothing here names the shipped fixtures:
they are one example project, with its own settings file.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from searcheval import defaults
from searcheval.errors import InputError
from searcheval.io.files import read_yaml_mapping

PROJECT_FILE = "searcheval.yaml"
SETTINGS_ENV = "SEARCHEVAL_SETTINGS"
LOCATIONS = ("dataset", "fixtures", "mapping")
TOP_KEYS = ("project", "default_dataset", "datasets")
PATH_KEYS = frozenset({"dataset", "fixtures", "mapping", "configurations_file", "baseline",
                       "output", "guideline"})
SHARES = frozenset({"coverage_floor", "agreement_floor"})
WHOLES = {"max_queries": 1, "depth": 1, "coverage_k": 1, "min_per_category": 0,
          "max_age_days": 0}
CONVENTIONS = ("gain", "relevance_level", "no_relevant", "grade_scale", "grade_map")
#: the keys of a dataset entry that are run options (flow parameters of the same names)
RUN_KEYS = ("split", "max_queries", "configurations_file", "baseline", "output", "depth",
            "coverage_floor", "coverage_k", "tolerance", "min_per_category", "agreement_floor",
            "max_age_days", "judgment_rule", "judgment_sources", "alert_block", *CONVENTIONS)
ENTRY_KEYS = (*LOCATIONS, *RUN_KEYS, "served", "guideline", "grade_labels", "schedule")
SCHEDULE_KEYS = ("cron", "timezone", "active")
PARAMETER = "run parameter"


@dataclass(frozen=True)
class DatasetEntry:
    """One dataset of a project, its values checked (paths absolute)."""

    name: str
    location: str  # dataset | fixtures | mapping
    path: str
    values: dict[str, Any]  # every other key given, checked
    file: str  # the project settings file

    def where(self, key: str) -> str:
        """The source label of one of its values: `project setting datasets.NAME.KEY in FILE`."""
        return f"project setting datasets.{self.name}.{key} in {self.file}"

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def schedule(self) -> dict | None:
        return self.values.get("schedule")


@dataclass(frozen=True)
class Project:
    name: str
    file: Path
    datasets: dict[str, DatasetEntry]
    default_dataset: str | None = None

    @property
    def folder(self) -> Path:
        return self.file.parent

    def choices(self) -> str:
        return ", ".join(self.datasets)

    def entry(self, name: str | None = None, *, field_name: str = "dataset") -> DatasetEntry:
        """The entry `name` names, else the default dataset, else the only one; an InputError
        listing the choices when it cannot tell."""
        if name is not None:
            if name not in self.datasets:
                raise InputError(f"no dataset {name!r} in project {self.name!r}; its datasets: "
                                 f"{self.choices()}", file=self.file, field=field_name)
            return self.datasets[name]
        if self.default_dataset is not None:
            return self.datasets[self.default_dataset]
        if len(self.datasets) == 1:
            return next(iter(self.datasets.values()))
        raise InputError(f"which dataset? project {self.name!r} has {self.choices()} and no "
                         f"`default_dataset`: pass --dataset NAME", file=self.file,
                         field=field_name)

    def entry_at(self, location: str, path: str | Path) -> DatasetEntry | None:
        """The entry whose data is this folder or file, if any."""
        target = Path(path).resolve()
        for entry in self.datasets.values():
            if (entry.location == "mapping") == (location == "mapping") \
                    and Path(entry.path).resolve() == target:
                return entry
        return None


# --------------------------------------------------------------------------- reading


def find_project(start: str | Path | None = None,
                 environ: Mapping[str, str] | None = None) -> Project | None:
    """The project settings: SEARCHEVAL_SETTINGS, else the nearest `searcheval.yaml` with a
    `project:` key in `start` (default the working directory) or its parents; None if none."""
    env = os.environ if environ is None else environ
    named = env.get(SETTINGS_ENV)
    if named:
        path = Path(named)
        if path.is_dir():
            path = path / PROJECT_FILE
        if not path.is_file():
            raise InputError(f"{SETTINGS_ENV} names no settings file", file=path,
                             field="project")
        return load_project(path)
    folder = Path(start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / PROJECT_FILE
        try:
            if path.is_file() and _is_project(path):
                return load_project(path)
        except PermissionError:
            continue
    return None


def _is_project(path: Path) -> bool:
    try:
        raw = read_yaml_mapping(path)
    except InputError:
        return True  # a broken project file is reported by load_project, not skipped
    return isinstance(raw, dict) and "project" in raw


def load_project(path: str | Path) -> Project:
    path = Path(path).resolve()
    raw = read_yaml_mapping(path)
    if not isinstance(raw, dict):
        raise InputError("expected a mapping with `project` and `datasets`", file=path)
    unknown = [k for k in raw if k not in TOP_KEYS]
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r}; expected {', '.join(TOP_KEYS)}", file=path,
                         field=unknown[0])
    name = raw.get("project")
    if not isinstance(name, str) or not _printable_name(name):
        raise InputError(f"expected a project name of letters, digits, '-', '_' or '.', got "
                         f"{name!r}", file=path, field="project")
    datasets = raw.get("datasets")
    if not isinstance(datasets, dict) or not datasets:
        raise InputError("expected a mapping of dataset names to their settings", file=path,
                         field="datasets")
    entries = {str(k): _entry(str(k), v, path) for k, v in datasets.items()}
    default = raw.get("default_dataset")
    if default is not None and default not in entries:
        raise InputError(f"names no dataset of `datasets` ({', '.join(entries)}), got "
                         f"{default!r}", file=path, field="default_dataset")
    return Project(name=name, file=path, datasets=entries, default_dataset=default)


def _printable_name(text: str) -> bool:
    return 0 < len(text) <= 100 and all(c.isalnum() or c in "-_." for c in text)


def _entry(name: str, raw: Any, file: Path) -> DatasetEntry:
    at = f"datasets.{name}"
    if not _printable_name(name):
        raise InputError("expected a dataset name of letters, digits, '-', '_' or '.'",
                         file=file, field=at)
    if not isinstance(raw, dict):
        raise InputError("expected a mapping of settings", file=file, field=at)
    unknown = [k for k in raw if k not in ENTRY_KEYS]
    if unknown:
        raise InputError(f"unknown setting {unknown[0]!r}; expected some of "
                         f"{', '.join(ENTRY_KEYS)}", file=file, field=f"{at}.{unknown[0]}")
    located = [k for k in LOCATIONS if raw.get(k) is not None]
    if len(located) != 1:
        raise InputError("expected exactly one of dataset (a folder), fixtures (a folder) or "
                         "mapping (a file)" + (f"; got {', '.join(located)}" if located else ""),
                         file=file, field=at)
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if value is None or key in LOCATIONS:
            continue
        values[key] = check_entry_value(key, value, file=file, field=f"{at}.{key}")
    for key in PATH_KEYS & set(values):
        values[key] = _absolute(values[key], file)
    location = located[0]
    return DatasetEntry(name=name, location=location,
                        path=_absolute(_text(raw[location], file, f"{at}.{location}"), file),
                        values=values, file=str(file))


def _absolute(value: str, file: Path) -> str:
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else file.parent / path)


def _text(value: Any, file: Path, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"expected a non-empty string, got {value!r}", file=file, field=where)
    return value.strip()


def check_entry_value(key: str, value: Any, *, file: Path | None, field: str) -> Any:
    """One value of a dataset entry, checked where it is written (the file and the key)."""
    from searcheval.io.settings import check_setting

    if key in CONVENTIONS:
        return check_setting(key, value, file=file, field=field)
    if key in SHARES:
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or not 0 <= value <= 1:
            raise InputError(f"expected a share between 0 and 1, got {value!r}", file=file,
                             field=field)
        return float(value)
    if key == "tolerance":
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or not 0 <= value <= defaults.MAX_TOLERANCE:
            raise InputError(f"expected an absolute drop between 0 and "
                             f"{defaults.MAX_TOLERANCE:g}, got {value!r}", file=file, field=field)
        return float(value)
    if key in WHOLES:
        if isinstance(value, bool) or not isinstance(value, int) or value < WHOLES[key] \
                or value > defaults.MAX_DEPTH * 1000:
            raise InputError(f"expected a whole number >= {WHOLES[key]}, got {value!r}",
                             file=file, field=field)
        return value
    if key == "judgment_rule":
        from searcheval.judging.judgments import parse_rule

        try:
            parse_rule(value)
        except InputError as exc:
            raise InputError(exc.message, file=file, field=field) from None
        return value.strip()
    if key == "judgment_sources":
        from searcheval.io.settings import check_judgment_sources

        return check_judgment_sources(value, file=file, field=field)
    if key == "grade_labels":
        if not isinstance(value, dict) or not value or not all(
                isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in value):
            raise InputError("expected a mapping of whole grades to labels, e.g. "
                             "{0: not relevant, 1: relevant}", file=file, field=field)
        return {int(g): _text(label, file, f"{field}.{g}") for g, label in sorted(value.items())}
    if key == "schedule":
        if isinstance(value, str):
            value = {"cron": value}
        if not isinstance(value, dict) or not isinstance(value.get("cron"), str) \
                or set(value) - set(SCHEDULE_KEYS):
            raise InputError("expected a cron string, or a mapping of cron, timezone, active",
                             file=file, field=field)
        if len(value["cron"].split()) != 5:
            raise InputError(f"expected a cron line of five fields, got {value['cron']!r}",
                             file=file, field=f"{field}.cron")
        return {"cron": value["cron"], "timezone": value.get("timezone", "UTC"),
                "active": bool(value.get("active", True))}
    if key == "alert_block":
        text = _text(value, file, field)
        if "/" not in text:
            raise InputError(f"expected a notification block as 'type/name', got {text!r}",
                             file=file, field=field)
        return text
    return _text(value, file, field)  # split, served, paths


# --------------------------------------------------------------------------- resolution


class NoDataset(InputError):
    """A command that could not tell which dataset is meant."""


def which_dataset(project: Project | None, *, fixtures=None, dataset=None, mapping=None
                  ) -> tuple[str, str, DatasetEntry | None]:
    """(location kind, path, the project's entry or None) of what a command reads.

    `dataset` may be a project dataset's name or a folder; a folder or file given on the command
    line is used as is (its project entry applies if one names the same path). Nothing given:
    the project's default dataset; no project: refused, never the fixtures."""
    given = [(k, v) for k, v in (("fixtures", fixtures), ("dataset", dataset),
                                  ("mapping", mapping)) if v is not None]
    if len(given) > 1:
        raise InputError("expected one of --fixtures, --dataset or --mapping, got "
                         + " and ".join(k for k, _ in given), field=given[-1][0])
    if given:
        kind, value = given[0]
        value = str(value)
        if kind == "dataset" and project is not None and value in project.datasets:
            entry = project.datasets[value]
            return entry.location, shown_path(entry.path), entry
        entry = project.entry_at(kind, value) if project is not None else None
        return kind, value, entry
    if project is None:
        raise NoDataset("which dataset? no --dataset, --fixtures or --mapping, and no project "
                        f"settings ({PROJECT_FILE} with `project:`) here or above: pass one, or "
                        "create a project with `searcheval init`", field="dataset")
    entry = project.entry()
    return entry.location, shown_path(entry.path), entry


def shown_path(path: str) -> str:
    """A project path as commands use and print it: relative to the working directory when it
    lies under it (`configurations.yaml`, as a user types it), else absolute."""
    try:
        return str(Path(path).relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def default_dataset_name(project: Project | None, dataset: str | None) -> str | None:
    """The dataset name a history-like command filters on: the one given, else the project's
    (None without a project: every dataset)."""
    if dataset is not None:
        if project is not None and dataset in project.datasets:
            return project.datasets[dataset].name
        return dataset
    if project is None:
        return None
    return project.entry().name


def served_configuration(entry: DatasetEntry | None) -> str | None:
    """The served configuration of a dataset: its `served` setting, else its configurations
    file's `served: true` entry; None when neither says."""
    if entry is None:
        return None
    if entry.get("served"):
        return entry.get("served")
    path = entry.get("configurations_file")
    if path and Path(path).is_file():
        from searcheval.rankers.configs import load_configurations

        return load_configurations(path).served
    return None


@dataclass
class Resolved:
    """The options of one command after resolution, and where each came from."""

    values: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    entry: DatasetEntry | None = None
    project: Project | None = None

    def source(self, name: str) -> str:
        return self.sources.get(name, "default")


def resolve_options(given: Mapping[str, Any], library: Mapping[str, Any], *,
                    project: Project | None = None, dataset_key: str = "dataset",
                    given_sources: Mapping[str, str] | None = None) -> Resolved:
    """Every option of `library` (name -> library default): the value given (not None), else the
    dataset entry's, else the default. The dataset is `given`'s fixtures/dataset/mapping, or the
    project's default. Options the dataset folder's own searcheval.yaml declares (the
    conventions) stay None here when nothing above sets them: the loader reads those."""
    kind, path, entry = which_dataset(project, fixtures=given.get("fixtures"),
                                      dataset=given.get(dataset_key), mapping=given.get("mapping"))
    values: dict[str, Any] = {"fixtures": None, "dataset": None, "mapping": None, kind: path}
    sources: dict[str, str] = {}
    if any(given.get(k) is not None for k in LOCATIONS) and (entry is None or given.get(
            dataset_key) not in (project.datasets if project else {})):
        sources[kind] = (given_sources or {}).get(kind, f"{PARAMETER} {kind}")
    elif entry is not None:
        sources[kind] = entry.where(entry.location)
    values["dataset_name"] = entry.name if entry is not None else None
    for name, default in library.items():
        if name in LOCATIONS:
            continue
        if given.get(name) is not None:
            values[name] = given[name]
            sources[name] = (given_sources or {}).get(name, f"{PARAMETER} {name}")
        elif entry is not None and entry.get(name) is not None:
            values[name] = shown_path(entry.get(name)) if name in PATH_KEYS else entry.get(name)
            sources[name] = entry.where(name)
        else:
            values[name] = default
    return Resolved(values=values, sources=sources, entry=entry, project=project)


def check_served(entry: DatasetEntry | None, served: str | None, file: str) -> None:
    """The project's `served` agrees with the configurations file's `served: true`."""
    if entry is None or entry.get("served") is None or served is None:
        return
    if entry.get("served") != served:
        raise InputError(f"the project serves {entry.get('served')!r} for {entry.name}, but "
                         f"{file} marks {served!r} `served: true`: make them agree",
                         file=entry.file,
                         field=f"datasets.{entry.name}.served")


# --------------------------------------------------------------------------- init


def init_text(*, project: str, dataset_name: str, location: str, path: str,
              configurations_file: str, served: str, baseline: str, output: str,
              coverage_floor: float | None = None, judgment_rule: str | None = None,
              guideline: str | None = None, schedule: str | None = None,
              split: str | None = None) -> str:
    """The settings file `searcheval init` writes: the values given, commented, editable."""
    lines = [
        "# searcheval project settings: the one place a default comes from.",
        "# Resolution: command line > this file's dataset entry > the dataset folder's own",
        "# searcheval.yaml > searcheval's defaults. Relative paths are relative to this file.",
        f"project: {project}",
        f"default_dataset: {dataset_name}",
        "datasets:",
        f"  {dataset_name}:",
        f"    {location}: {path}",
    ]
    if split:
        lines.append(f"    split: {split}")
    lines += [
        f"    configurations_file: {configurations_file}",
        f"    served: {served}                 # must agree with `served: true` in the file",
        f"    baseline: {baseline}",
        f"    output: {output}",
        f"    depth: {defaults.DEPTH}",
        f"    coverage_k: {defaults.COVERAGE_K}",
    ]
    if coverage_floor is not None:
        lines.append(f"    coverage_floor: {coverage_floor:g}        # judged share of the top "
                     "coverage_k below which a run alerts")
    else:
        lines.append(f"    # coverage_floor: {defaults.COVERAGE_FLOOR}   # BEIR judges only "
                     "relevant documents: set it low (e.g. 0.05)")
    if judgment_rule:
        lines.append(f"    judgment_rule: {judgment_rule}")
    else:
        lines.append("    # judgment_rule: judge:dataset   # the dataset's own qrels only; "
                     "median | majority | judge:NAME")
    lines.append("    # judgment_sources: all   # which grades count: dataset (its own qrels only; "
                 "a BEIR default), all, or [human, import]")
    lines.append(f"    guideline: {guideline}" if guideline
                 else "    # guideline: guideline.md         # shown on the rating page")
    lines.append("    # grade_labels: {0: not relevant, 1: relevant}")
    lines.append(f"    schedule: {{cron: \"{schedule}\", timezone: UTC}}" if schedule
                 else "    # schedule: {cron: \"0 3 * * *\", timezone: UTC}   # a nightly")
    lines.append("    # alert_block: slack-webhook/on-call")
    return "\n".join(lines) + "\n"


STARTER_CONFIGURATIONS = """\
# The configurations this project can run: each a kind and its parameters; exactly one is
# `served: true` (what production serves, the one the gate guards). See searcheval's README.
configurations:
  bm25:
    kind: bm25
    served: true
run: [bm25]
"""


#: the run options a project's dataset entry may set, with the library's defaults (None: the
#: dataset folder's own searcheval.yaml, else searcheval.defaults, decides downstream)
RUN_DEFAULTS: dict[str, Any] = {
    "split": defaults.SPLIT, "max_queries": None,
    "configurations_file": defaults.CONFIGURATIONS_FILE, "baseline": defaults.BASELINE,
    "output": defaults.OUTPUT, "depth": defaults.DEPTH, "coverage_floor": None,
    "coverage_k": defaults.COVERAGE_K, "tolerance": None,
    "min_per_category": defaults.MIN_PER_CATEGORY, "agreement_floor": defaults.AGREEMENT_FLOOR,
    "max_age_days": defaults.MAX_AGE_DAYS, "judgment_rule": defaults.JUDGMENT_RULE,
    "judgment_sources": None, "alert_block": None, "gain": None, "relevance_level": None,
    "no_relevant": None,
    "grade_scale": None, "grade_map": None,
}


def resolve_run(given: Mapping[str, Any], *, project: Project | None = None,
                given_sources: Mapping[str, str] | None = None) -> Resolved:
    """A nightly run's options (RunRequest's fields and the flow's parameters of the same names)
    resolved over the project: `given` holds what the command line or the flow's caller set
    (None: not set). `values` is ready for RunRequest (grade_scale a list, grade_map a dict,
    `dataset_name` and `sources` filled in)."""
    resolved = resolve_options(given, RUN_DEFAULTS, project=project,
                               given_sources=given_sources)
    v = resolved.values
    if v.get("grade_scale") is not None:
        v["grade_scale"] = list(v["grade_scale"])
    if v.get("grade_map") is not None:
        v["grade_map"] = dict(v["grade_map"])
    v["sources"] = dict(resolved.sources)
    return resolved


def resolve_request(request, project: Project | None = None, *, output: bool = False) -> None:
    """Settle a RunRequest (evaluation.preflight) in place: each option left empty (None) takes
    the project's dataset entry, else the library's default (`resolve_run`); `sources` records
    where each came from and `dataset_name` the project's name of the dataset. The command line,
    the flow and the preflight all call it; a settled request is left as it is. `output` is
    settled only for the command line (`output=True`): a flow run's empty output means "publish to
    the database and the artifacts only"."""
    if getattr(request, "settled", False):
        return
    given = {name: getattr(request, name, None) for name in (*LOCATIONS, *RUN_DEFAULTS)}
    resolved = resolve_run(given, project=project, given_sources=request.sources)
    for name, value in resolved.values.items():
        if name == "output" and not output:
            continue
        if name == "dataset_name" and request.dataset_name is not None:
            continue  # named by the caller (the command line's project)
        if hasattr(request, name):
            setattr(request, name, value)
    request.resolved_entry = resolved.entry
    request.settled = True


def settings_lines(sources: Mapping[str, str], values: Mapping[str, Any],
                   names: tuple[str, ...] = ("dataset", "fixtures", "mapping", "split",
                                             "configurations_file", "baseline", "depth",
                                             "judgment_rule", "output")) -> list[str]:
    """`name: value (source)` for the report: where each run option came from."""
    out = []
    for name in names:
        value = values.get(name)
        if value is None:
            continue
        out.append(f"{name}: {value} ({sources.get(name, 'default')})")
    return out


def run_settings(values: Mapping[str, Any], sources: Mapping[str, str] | None, collection, *,
                 depth: int, project: Project | None = None) -> dict:
    """The `settings` block of a run's conventions (metrics.json, report.md): the project, the
    data read, the retrieval depth, the qrels split (BEIR), the judgment rule, the files, each
    with where its value came from."""
    sources = sources or {}
    out: dict[str, Any] = {"project": project.name if project is not None else None}
    kind = next((k for k in LOCATIONS if values.get(k) is not None), None)
    entries = {}
    if kind is not None:
        entries[kind] = values[kind]
    entries["depth"] = depth
    qrels = (getattr(collection, "sources", {}) or {}).get("qrels")
    if qrels is not None:  # a BEIR collection: its qrels split
        entries["split"] = values.get("split")
    for name in ("judgment_rule", "configurations_file", "baseline"):
        if values.get(name) is not None:
            entries[name] = values[name]
    for name, value in entries.items():
        out[name] = {"value": value, "source": sources.get(name, "default")}
    return out


def settings_report_lines(settings: Mapping[str, Any]) -> list[str]:
    """report.md's lines for a run's `settings` block."""
    labels = {"dataset": "dataset", "fixtures": "fixtures", "mapping": "mapping",
              "depth": "retrieval depth (results per query)", "split": "qrels split",
              "judgment_rule": "judgments that count (rule)",
              "configurations_file": "configurations file", "baseline": "baseline file"}
    out = []
    if settings.get("project"):
        out.append(f"project: {settings['project']}")
    for name, label in labels.items():
        entry = settings.get(name)
        if isinstance(entry, dict):
            value = entry["value"]
            if name == "judgment_rule" and value == "judge:dataset":
                value = "judge:dataset (the dataset's own qrels only)"
            out.append(f"{label}: {value} ({entry['source']})")
    return out


def pool_flags(values: Mapping[str, Any], output: str | None) -> str:
    """The flags of `searcheval judgments pool` that name a run's dataset and output folder:
    the project dataset's name when it came from the project settings (run the command in the
    project folder), else its folder or mapping, and the run's output folder."""
    import shlex

    sources = values.get("sources") or {}
    kind = next((k for k in LOCATIONS if values.get(k) is not None), None)
    flags = []
    if kind is not None:
        if values.get("dataset_name") and not str(sources.get(kind, "")).startswith(PARAMETER):
            flags += ["--dataset", str(values["dataset_name"])]
        else:
            flags += [f"--{kind}", str(Path(values[kind]).resolve())]
            if values.get("split") and values.get("split") != defaults.SPLIT:
                flags += ["--split", str(values["split"])]
    if output:
        flags += ["--run-output", str(Path(output).resolve())]
    return " ".join(shlex.quote(f) for f in flags)


def project_key(base: str, project: str | None) -> str:
    """An artifact key of `project`: `searcheval-metrics` -> `acme-metrics`. The example project
    is named `searcheval`, so its keys keep their shape; no project: the key as it is."""
    if not project or not base.startswith("searcheval"):
        return base
    return project.lower() + base[len("searcheval"):]


# --------------------------------------------------------------------------- deployments

NIGHTLY_ENTRYPOINT = "flows/nightly.py:nightly"
#: a deployment's flow runs beat every 30 s (Prefect's default is 180 s): the
#: searcheval-stuck-run automation (deploy/automations.yaml) marks a run Crashed after 90 s
#: without a beat. `searcheval serve` beats as often (flows/serve.py).
HEARTBEAT_SECONDS = 30
HEARTBEAT_ENV = {"PREFECT_FLOWS_HEARTBEAT_FREQUENCY": str(HEARTBEAT_SECONDS)}


def _under(path: str | None, folder: Path) -> str | None:
    if path is None:
        return None
    try:
        return str(Path(path).relative_to(folder))
    except ValueError:
        return str(path)


def deployment_entries(project: Project) -> list[dict]:
    """The nightly deployments of a project, as `deployments:` entries of a prefect.yaml (what
    `searcheval serve` serves for a project folder, and what the example project's
    deploy/prefect.yaml holds: tests tie them). Per dataset: `nightly` on its `schedule` (a
    dataset with none has no nightly), and `ranking-change` by hand. The default dataset's keep
    those names; another's are suffixed with its name. Parameters name the dataset only: the
    flow reads everything else from the settings when it runs, so a change of the settings is a
    change of the nightly."""
    out = []
    default = project.entry().name if (project.default_dataset or len(project.datasets) == 1) \
        else None
    for entry in project.datasets.values():
        suffix = "" if entry.name == default else f"-{entry.name}"
        output = _under(entry.get("output") or str(project.folder / defaults.OUTPUT),
                        project.folder)
        if entry.schedule is not None:
            out.append({
                "name": f"nightly{suffix}",
                "description": f"Every night ({entry.schedule['cron']} "
                               f"{entry.schedule['timezone']}): dataset {entry.name} of project "
                               f"{project.name}, gated against its baseline; the run ends "
                               "Failed when the gate trips.",
                "entrypoint": NIGHTLY_ENTRYPOINT,
                "tags": [project.name, "nightly"],
                "schedules": [dict(entry.schedule)],
                "parameters": {"dataset": entry.name, "output": f"{output}/nightly",
                               "label": "nightly", "allow_dirty": False},
            })
        out.append({
            "name": f"ranking-change{suffix}",
            "description": f"By hand or from CI after a ranking change: dataset {entry.name} of "
                           f"project {project.name}, labelled with the ranking version.",
            "entrypoint": NIGHTLY_ENTRYPOINT,
            "tags": [project.name, "ranking-change"],
            "schedules": None,
            "parameters": {"dataset": entry.name, "output": f"{output}/ranking-change",
                           "label": "manual", "candidate": None},
        })
    return out


def deployments_yaml(project: Project) -> str:
    """A prefect.yaml for `prefect deploy` of the project's deployments (run from the folder of
    searcheval's flows; SEARCHEVAL_SETTINGS names the project's settings to the worker)."""
    import yaml

    document = {"name": project.name, "deployments": [
        {**entry, "work_pool": {"name": "searcheval", "work_queue_name": "default",
                                "job_variables": {"env": {SETTINGS_ENV: str(project.file),
                                                          **HEARTBEAT_ENV}}}}
        for entry in deployment_entries(project)]}
    return ("# generated by `searcheval deployments` from " + str(project.file)
            + ": edit the settings, not this file\n" + yaml.safe_dump(document, sort_keys=False))
