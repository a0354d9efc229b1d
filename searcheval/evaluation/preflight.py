"""One validation step at the very start of a run: every input checked before any work.

`preflight(request)` reads the data files and the baseline, and checks the floors, the
configurations, every numeric option and the alert settings, before anything is embedded,
searched or written. Every problem is collected (an `InputError` naming the file, line, field or
option); the first is the run's one-line refusal, the rest go to the refusal's report and, with
`searcheval run --all-errors`, to stderr.

The checks are a list of functions, each `(request) -> list[InputError]` (`CHECKS`): adding a
check is one line. A check that needs what an earlier one could not read (the collection, the
baseline) returns nothing: the earlier problem is already reported.

The gate is never silently off: a run is gated against its baseline, or it is NOT GATED because
the request says so on purpose (`no_baseline`), or because its dataset has no baseline of its own
(`baselines/<dataset>.json`, issue 12). A baseline naming a configuration that does not
exist, or one this run does not run, is refused.
"""

from __future__ import annotations

import os
from pathlib import Path
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any
from urllib.parse import urlsplit

from searcheval import defaults
from searcheval.errors import InputError
from searcheval.io.files import finite
from searcheval.types import Collection

WEBHOOK_ENV = "SEARCHEVAL_ALERT_WEBHOOK"  # the same variable as evaluation.alerts reads


class Refused(InputError):
    """A run refused by its preflight: `problems` are every problem found, the first is this
    error's own message (the one line the CLI prints)."""

    def __init__(self, problems: list[InputError]) -> None:
        first = problems[0]
        super().__init__(first.message, file=first.file, line=first.line, field=first.field)
        self.problems = list(problems)

    def __reduce__(self):  # pickled with the flow run's result: rebuilt from its problems
        return (Refused, (self.problems,))

    def summary(self) -> str:
        more = len(self.problems) - 1
        return str(self) + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


def option(default: Any = None, *, help: str, whole: tuple[int, int | None] | None = None,
           factory: Callable[[], Any] | None = None):
    """One option of a run: its default, its help (the flow's docstring says the same: the
    Prefect Run form shows it) and, for a whole number, its range (checked by `check_numbers`)."""
    metadata = {"help": help, "whole": whole}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass
class RunRequest:
    """What one nightly run was asked to do: the one declaration of each option, its default,
    range and help. The nightly flow's signature and docstring, the `searcheval run` flags and
    deploy/prefect.yaml's parameters are tied to it by tests/unit/test_run_options.py."""

    fixtures: str | None = option(None, help=(
        "A folder in the fixtures' layout (catalog.json, golden_queries.json, "
        "judgments.csv); ignored when dataset or mapping is set."))
    dataset: str | None = option(None, help=(
        "A dataset of the project settings (its name), or a dataset folder: BEIR, WANDS "
        "or the fixtures' layout, told by its files. Empty (with fixtures and mapping "
        "empty): the project's default dataset. Every option below left empty takes the "
        "dataset's project setting, else the library's default (searcheval.project)."))
    mapping: str | None = option(None, help=(
        "A YAML mapping of columns over CSV, TSV, JSONL, Parquet files or SQL "
        "queries, instead of the fixtures."))
    split: str | None = option(None, help=(
        "The BEIR qrels split to judge with (qrels/SPLIT.tsv)."))
    max_queries: int | None = option(None, whole=(1, None), help=(
        "Evaluate only the first N judged queries (BEIR, WANDS, mappings); empty "
        "for all."))
    grade_map: dict[str, int] | None = option(None, help=(
        'Text labels to grades, e.g. {"Exact": 2, "Partial": 1, "Irrelevant": 0}; '
        "empty for the dataset's setting."))
    grade_scale: list[int] | None = option(None, help=(
        "The grades a judgment may have, as [lowest, highest]; empty for the "
        "dataset's setting."))
    baseline: str | None = option(None, help=(
        "The reviewed baseline.json the gate compares the served configuration "
        "with."))
    no_baseline: bool = option(False, help=(
        "Run without a gate on purpose (the run says NOT GATED and why)."))
    configurations: list[str] | None = option(None, help=(
        "Entries of configurations_file to run; empty for the file's `run` list."))
    configurations_file: str | None = option(None, help=(
        "The configurations file (YAML) naming each configuration's kind and "
        "parameters, and the one production serves."))
    overrides: dict[str, Any] | None = option(None, help=(
        'Parameters changed for this run, e.g. {"fused.rrf_k": 20} or {"bm25": '
        '{"b": 0.5}} (an overridden configuration has a hash of its own).'))
    candidate: str | None = option(None, help=(
        "An entry evaluated beside the served one on the same queries: it is the "
        "one gated, and the queries it made better and worse are listed. Several, comma "
        "separated: each compared with the served one (Holm's correction), which is gated."))
    depth: int | None = option(None, whole=(1, defaults.MAX_DEPTH), help=(
        "How many results each configuration returns per query."))
    metrics: list[str] = option(factory=lambda: list(defaults.REPORT_METRICS), help=(
        "The metrics to score and report."))
    tolerance: float | None = option(None, help=(
        "The largest drop of a gated metric that still passes; empty for the "
        "baseline's own tolerance."))
    coverage_k: int | None = option(None, whole=(1, defaults.MAX_DEPTH), help=(
        "Depth at which the judged share of each configuration's results is "
        "measured."))
    coverage_floor: float | None = option(None, help=(
        "Judged share of the top coverage_k below which the run alerts; empty for "
        "the dataset's setting, else the default."))
    max_age_days: int | None = option(defaults.MAX_AGE_DAYS, whole=(0, defaults.MAX_AGE_LIMIT_DAYS), help=(
        "Judgments older than this many days are stale and left out of scoring; "
        "empty for no limit."))
    min_per_category: int | None = option(None, whole=(0, None), help=(
        "Fewest golden queries a query category may have."))
    shards: int = option(defaults.SHARDS, whole=(1, defaults.MAX_SHARDS), help=(
        "Query shards per configuration, run concurrently."))
    embed_batch: int = option(defaults.EMBED_BATCH, whole=(1, defaults.MAX_EMBED_BATCH), help=(
        "Texts per embedding task."))
    gain: str | None = option(None, help=(
        "Gain of a grade g in nDCG: exponential (2^g - 1) or linear (g, "
        "trec_eval's); empty for the dataset's setting."))
    relevance_level: int | None = option(None, whole=(1, None), help=(
        "Lowest grade that counts as relevant for MRR, precision, recall and MAP; "
        "empty for the dataset's setting."))
    no_relevant: str | None = option(None, help=(
        "nDCG and recall of a query without a relevant judgment: one, zero, or skip "
        "it; empty for the dataset's setting."))
    alert_block: str | None = option(None, help=(
        "A Prefect notification block to alert through, as 'type/name'."))
    judgment_rule: str | None = option(None, help=(
        "How the grades of several judges of one result combine: median, majority, "
        "or judge:NAME (that judge's grade)."))
    agreement_floor: float | None = option(None, help=(
        "Judges' agreement (Krippendorff's alpha, ordinal) below which the run "
        "alerts."))
    output: str | None = option(defaults.OUTPUT, help=(
        "Folder for metrics.json, report.md, per_query.csv and runs/; empty to "
        "publish to the database and the artifacts only."))
    model_path: str | None = option(None, help=(
        "A sentence-transformers model folder instead of all-MiniLM-L6-v2."))
    label: str | None = option(None, help=(
        "A label for this run, e.g. the ranking version (shown in the report and "
        "the alerts)."))
    snapshot_depth: int = option(defaults.SNAPSHOT_DEPTH, whole=(1, None), help=(
        "Ranks of each configuration's list kept in Postgres for diffs."))
    snapshot_retention: str | None = option(defaults.SNAPSHOT_RETENTION, help=(
        "Snapshots older than this (e.g. 90d) are pruned; empty keeps them all."))
    output_retention: str | None = option(defaults.OUTPUT_RETENTION, help=(
        "Run folders in output older than this (e.g. 90d) are deleted (only those "
        "searcheval wrote); empty keeps them all."))
    kind: str | None = option(None, help=(
        "What started the run (nightly, manual, candidate); empty for nightly when "
        "its schedule created it, else manual. A nightly run is diffed against the "
        "previous nightly, any other against the run before it."))
    allow_dirty: bool = option(True, help=(
        "Run from a working tree with uncommitted changes (false for the scheduled "
        "deployment, so the nightly always measures a commit)."))
    judgment_sources: str | list[str] | None = option(None, help=(
        "Which judgments count: dataset (the dataset's own qrels only), all, or the "
        "sources counted beside them (human, import, model); empty for the dataset's "
        "setting, else dataset for a benchmark's qrels and all otherwise."))
    judge: str | None = option(None, help=(
        "A model judge (NAME of judges.yaml, or FILE:NAME) that grades this run's "
        "unjudged top coverage_k after it is published; its grades count from the next "
        "run on, while its human audit holds. Empty: no model judge."))
    dataset_name: str | None = option(None, help=(
        "The dataset's identity when its folder declares none (set from the project "
        "settings)."))
    sources: dict[str, str] | None = option(None, help=(
        "Where options came from when not from the caller (set by the command line from "
        "the project settings); the report prints them."))
    # whether a Prefect block "type/name" exists: given by the flow (the library never imports
    # Prefect); None checks the block's name only
    block_exists: Callable[[str], bool] | None = None
    environ: dict[str, str] | None = None  # None: os.environ
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_parameters(cls, parameters: dict[str, Any]) -> "RunRequest":
        """The request of a flow run's parameters (the flow's signature is this class's options,
        tests/unit/test_run_options.py): lists as lists, whatever sequence the caller passed."""
        options = {name: value for name, value in parameters.items() if name in OPTIONS}
        for name in ("configurations", "metrics", "grade_scale"):
            if options.get(name) is not None and not isinstance(options[name], str):
                options[name] = list(options[name])
        return cls(**options)

    # -- what the checks read once, shared by the checks (None when it could not be read)

    def env(self, name: str) -> str | None:
        source = os.environ if self.environ is None else self.environ
        return source.get(name)

    def collection(self) -> Collection | None:
        if "collection" not in self._loaded:
            from searcheval.evaluation.inputs import load_collection
            from searcheval.io.project import project_path

            chosen = self.dataset is not None or self.mapping is not None
            try:
                fixtures = None if chosen or self.fixtures is None \
                    else str(project_path(self.fixtures))  # the project's, from a subfolder
                self._loaded["collection"] = load_collection(
                    fixtures=fixtures, dataset=self.dataset,
                    mapping=self.mapping, split=self.split, max_queries=self.max_queries,
                    grade_map=self.grade_map, grade_scale=self.grade_scale,
                    name=self.dataset_name)
            except InputError as exc:
                self._loaded["collection"] = None
                self._loaded["collection_error"] = exc
        return self._loaded["collection"]

    def resolved(self):
        """The configurations file with the overrides, checked (rankers.configs); None when it
        is refused (the error is kept for check_configurations)."""
        if "configurations" not in self._loaded:
            from searcheval.rankers.configs import load_configurations

            try:
                self._loaded["configurations"] = load_configurations(self.configurations_file,
                                                                     self.overrides)
            except InputError as exc:
                self._loaded["configurations"] = None
                self._loaded["configurations_error"] = exc
        return self._loaded["configurations"]

    def selected(self):
        """The configurations this run runs (with a candidate: the candidate and the served one
        too); None when the file or the names are refused."""
        if "selected" not in self._loaded:
            from searcheval.evaluation.pipeline import with_candidate

            resolved, self._loaded["selected"] = self.resolved(), None
            if resolved is not None:
                try:
                    self._loaded["selected"] = with_candidate(resolved, self.configurations,
                                                              self.candidate)
                except InputError as exc:
                    self._loaded["configurations_error"] = exc
        return self._loaded["selected"]

    def baseline_file(self):
        """The baseline, read and checked; None when the run is not gated or it is unreadable."""
        if self.no_baseline or self.baseline is None:
            return None
        if "baseline" not in self._loaded:
            from searcheval.evaluation.baseline import dataset_of, load_baseline, select_baseline

            try:
                collection = self.collection()
                if self.first_baseline_pending():  # the project names it; not made yet
                    self._loaded["baseline"] = None
                    self._loaded["no_baseline_for_dataset"] = (
                        f"no baseline yet: {self.baseline}, which the project settings name, "
                        "does not exist; make the first with `searcheval baseline update`")
                elif collection is None:
                    self._loaded["baseline"] = load_baseline(self.baseline)
                else:  # one baseline per dataset (evaluation.baseline.select_baseline)
                    baseline, reason = select_baseline(self.baseline, dataset_of(collection))
                    self._loaded["baseline"] = baseline
                    self._loaded["no_baseline_for_dataset"] = reason
            except InputError as exc:
                self._loaded["baseline"] = None
                self._loaded["baseline_error"] = exc
        return self._loaded["baseline"]

    def first_baseline_pending(self) -> bool:
        """Whether the baseline is a project setting whose file does not exist yet: a dataset's
        first run, published NOT GATED until `searcheval baseline update` makes it (a baseline
        named on the command line or as a flow parameter must exist)."""
        source = (self.sources or {}).get("baseline", "")
        return source.startswith("project setting") and not Path(self.baseline).exists()

    @property
    def gated(self) -> bool:
        return not self.no_baseline


#: The run's options: every field of RunRequest a caller sets (the rest is the preflight's own).
OPTIONS: tuple[str, ...] = tuple(
    f.name for f in fields(RunRequest) if not f.name.startswith("_")
    and f.name not in ("block_exists", "environ"))


@dataclass
class Preflight:
    """What the preflight found: the inputs it read (for the run to use: nothing is read twice
    inside one run) and the gate it will apply."""

    collection: Collection | None
    baseline: Any  # evaluation.baseline.Baseline | None
    problems: list[InputError]
    not_gated_reason: str | None = None
    conventions: Any = None  # evaluation.conventions.Conventions, when the inputs could be read

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_for_problems(self) -> None:
        if self.problems:
            raise Refused(self.problems)


# --------------------------------------------------------------------------- numeric options


def _whole(value: Any, name: str, lo: int, hi: int | None = None, *,
           optional: bool = False) -> list[InputError]:
    if value is None and optional:
        return []
    if isinstance(value, bool) or not isinstance(value, int) or value < lo \
            or (hi is not None and value > hi):
        span = f">= {lo}" if hi is None else f"in {lo}..{hi}"
        return [InputError(f"expected a whole number {span}, got {value!r}", field=name)]
    return []


def _share(value: Any, name: str, *, optional: bool = True) -> list[InputError]:
    if value is None and optional:
        return []
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not finite(value) or not 0 <= value <= 1:
        return [InputError(f"expected a finite number between 0 and 1, got {value!r}",
                           field=name)]
    return []


def check_numbers(request: RunRequest) -> list[InputError]:
    """Every numeric option finite and in range (a whole number's range is its option's, in
    RunRequest); tolerance finite and >= 0."""
    problems: list[InputError] = []
    tol = request.tolerance
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float))
                            or not finite(tol) or not 0 <= tol <= defaults.MAX_TOLERANCE):
        problems.append(InputError(
            f"expected a finite tolerance between 0 and {defaults.MAX_TOLERANCE:g} (an absolute "
            f"drop of a metric in [0, 1]), got {tol!r}", field="tolerance"))
    problems += _share(request.coverage_floor, "coverage_floor")
    for option in fields(RunRequest):  # each whole number in the range its option declares
        if option.metadata.get("whole"):
            lo, hi = option.metadata["whole"]
            problems += _whole(getattr(request, option.name), option.name, lo, hi,
                               optional="None" in str(option.type))
    for key in ("snapshot_retention", "output_retention"):
        if getattr(request, key):
            from searcheval.store.snapshots import parse_age

            try:
                parse_age(getattr(request, key))
            except InputError as exc:
                problems.append(InputError(exc.message, field=key))
    for key in ("gain", "no_relevant", "grade_scale"):
        value = getattr(request, key)
        if value is not None:
            from searcheval.io.settings import check_setting

            try:
                check_setting(key, value)
            except InputError as exc:
                problems.append(exc)
    return problems


def check_metrics(request: RunRequest) -> list[InputError]:
    from searcheval.metrics.engine import parse_metrics

    try:
        parse_metrics(request.metrics)
    except InputError as exc:
        return [InputError(exc.message, field="metrics")]
    return []


def check_configurations(request: RunRequest) -> list[InputError]:
    """The configurations file, its overrides and the names asked for (rankers.configs): an
    unknown name, parameter, a wrong type or a value out of range names the file, the entry and
    the parameter."""
    names = request.configurations
    if names is not None and (not isinstance(names, (list, tuple))
                              or not all(isinstance(n, str) for n in names)):
        return [InputError(f"expected a list of configuration names, got {names!r}",
                           field="configurations")]
    if names is not None:
        duplicates = sorted({n for n in names if list(names).count(n) > 1})
        if duplicates:
            return [InputError(f"configuration(s) named twice: {', '.join(duplicates)}",
                               field="configurations")]
    if request.selected() is None:
        return [request._loaded["configurations_error"]]
    return []


# --------------------------------------------------------------------------- files


def check_collection(request: RunRequest) -> list[InputError]:
    """The data files (or the mapping), read in full."""
    request.collection()
    error = request._loaded.get("collection_error")
    return [error] if error is not None else []


def check_baseline(request: RunRequest) -> list[InputError]:
    """The baseline file (missing, not JSON, wrong shape, NaN, unknown metric, per-query entries)
    and what it gates: a configuration that exists and that this run runs."""
    if request.no_baseline:
        return []
    if request.baseline is None:
        return [InputError("no baseline given: name the baseline the gate compares with, or "
                           "say `no_baseline` to run without a gate on purpose",
                           field="baseline")]
    baseline = request.baseline_file()
    if baseline is None and request._loaded.get("no_baseline_for_dataset"):
        return []  # a dataset without a baseline of its own: NOT GATED, with its reason
    if baseline is None:
        return [request._loaded["baseline_error"]]
    resolved, selected = request.resolved(), request.selected()
    if resolved is None or selected is None:
        return []  # the configurations' own problem is reported
    if baseline.configuration not in resolved:
        return [InputError(f"gates configuration {baseline.configuration!r}, which does not "
                           f"exist; {resolved.file} has {', '.join(resolved.entries)}",
                           file=baseline.path, field="configuration")]
    if baseline.configuration != resolved.served:
        return [InputError(f"gates configuration {baseline.configuration!r}, but "
                           f"{resolved.file} serves {resolved.served!r}: the baseline is the "
                           "served configuration's", file=baseline.path, field="configuration")]
    names = [c.name for c in selected]
    if baseline.configuration not in names:
        return [InputError(
            f"the baseline gates {baseline.configuration!r}, which this run does not run "
            f"(it runs {', '.join(map(str, names)) or 'nothing'}): add it to `configurations`, "
            f"or say `no_baseline` to run without a gate on purpose", field="configurations")]
    return []


def check_floors(request: RunRequest) -> list[InputError]:
    """Gated metrics and floors on metrics this run computes; per-category floors on a category
    (or automatic segment) this collection has."""
    baseline = request.baseline_file()
    if baseline is None:
        return []
    from searcheval.metrics.engine import parse_metric

    problems: list[InputError] = []
    try:
        computed = {parse_metric(m).name for m in request.metrics}
    except (InputError, AttributeError, TypeError):
        return []  # check_metrics reports it
    computed_list = ", ".join(request.metrics)
    for section, names in (("metrics", baseline.metrics), ("floors", baseline.floors)):
        for metric in names:
            if parse_metric(metric).name not in computed:
                problems.append(InputError(
                    f"{'gates' if section == 'metrics' else 'sets a floor on'} {metric!r}, which "
                    f"this run does not compute (it computes {computed_list})",
                    file=baseline.path, field=f"{section}.{metric}"))
    collection = request.collection()
    for category, floors in baseline.category_floors.items():
        for metric in floors:
            if parse_metric(metric).name not in computed:
                problems.append(InputError(
                    f"sets a floor on {metric!r}, which this run does not compute (it computes "
                    f"{computed_list})", file=baseline.path,
                    field=f"category_floors.{category}.{metric}"))
        if collection is not None:
            known = known_groups(collection)
            if category not in known:
                problems.append(InputError(
                    f"unknown category {category!r}: this collection's categories and segments "
                    f"are {', '.join(sorted(known))}", file=baseline.path,
                    field=f"category_floors.{category}"))
    return problems


def known_groups(collection: Collection) -> set[str]:
    """The categories and automatic segments a per-category floor may name."""
    from searcheval.metrics.segments import query_segments

    groups = {q.category for q in collection.queries if q.category}
    if isinstance(collection.categories, tuple):
        groups |= set(collection.categories)
    for q in collection.queries:
        groups.update(query_segments(q))
    return groups


# --------------------------------------------------------------------------- alerts


def webhook_problem(url: str | None, where: str = WEBHOOK_ENV) -> InputError | None:
    """A webhook URL that does not parse as http(s)://host/...; the URL itself is never put in
    the message (it usually carries a token)."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
        port = parts.port  # raises ValueError on a port that is not a number
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname \
            or any(c.isspace() or ord(c) < 32 for c in url.strip()):
        return InputError("expected an http:// or https:// URL with a host (the value is not "
                          "shown: it may carry a token)", field=where)
    del port
    return None


def check_alerts(request: RunRequest) -> list[InputError]:
    """The webhook URL parses; the notification block is named 'type/name' and exists."""
    problems: list[InputError] = []
    bad = webhook_problem(request.env(WEBHOOK_ENV))
    if bad is not None:
        problems.append(bad)
    block = request.alert_block
    if block is not None:
        type_, sep, name = block.partition("/") if isinstance(block, str) else ("", "", "")
        if not sep or not type_.strip() or not name.strip():
            problems.append(InputError(f"expected a notification block as 'type/name', e.g. "
                                       f"'slack-webhook/on-call', got {block!r}",
                                       field="alert_block"))
        elif request.block_exists is not None and not request.block_exists(block):
            problems.append(InputError(f"no Prefect block {block!r}: create it (prefect block "
                                       "create) or name another", field="alert_block"))
    return problems


def check_conventions(request: RunRequest) -> list[InputError]:
    """The metric conventions resolved over the dataset's settings (e.g. a relevance level above
    the grade scale is refused)."""
    collection = request.collection()
    if collection is None:
        return []
    from searcheval.evaluation.conventions import resolve_conventions

    try:
        request._loaded["conventions"] = resolve_conventions(
            collection, gain=request.gain, relevance_level=request.relevance_level,
            no_relevant=request.no_relevant, coverage_floor=request.coverage_floor,
            coverage_k=request.coverage_k, sources=request.sources)
    except InputError as exc:
        return [exc]
    except (TypeError, ValueError) as exc:  # an option of the wrong type (check_numbers names it)
        del exc
    return []


def check_comparable_baseline(request: RunRequest) -> list[InputError]:
    """The baseline is of this run's dataset, query set and conventions (a comparison of other
    queries or other conventions means nothing)."""
    baseline, collection = request.baseline_file(), request.collection()
    conventions = request._loaded.get("conventions")
    if baseline is None or collection is None or conventions is None:
        return []
    from searcheval.evaluation.baseline import check_comparable, dataset_of, run_conventions

    try:
        check_comparable(baseline, dataset=dataset_of(collection),
                         query_ids=[q.id for q in collection.queries],
                         conventions={**run_conventions(conventions.settings(), ()),
                                      "depth": request.depth})
    except InputError as exc:
        return [exc]
    return []


def check_judging(request: RunRequest) -> list[InputError]:
    """The effective-grade rule and the agreement floor (searcheval.judging)."""
    from searcheval.judging.agreement import check_floor
    from searcheval.judging.judgments import parse_rule

    problems: list[InputError] = []
    for check, value in ((parse_rule, request.judgment_rule),
                         (check_floor, request.agreement_floor)):
        try:
            check(value)
        except InputError as exc:
            problems.append(exc)
    return problems


CHECKS: list[Callable[[RunRequest], list[InputError]]] = [
    check_numbers,
    check_metrics,
    check_configurations,
    check_alerts,
    check_collection,
    check_conventions,
    check_baseline,
    check_comparable_baseline,
    check_floors,
    check_judging,
]


def preflight(request: RunRequest) -> Preflight:
    """Every check of `CHECKS`, all problems collected. Nothing is written. An unsettled request
    is first settled over the working directory's project (searcheval.project.resolve_request)."""
    from searcheval.project import find_project, resolve_request

    resolve_request(request, find_project())  # nothing to do when the caller settled it
    problems: list[InputError] = []
    seen: set[str] = set()
    for check in CHECKS:
        for problem in check(request):
            # an option two checks read is named once
            key = f"option {problem.field}" if problem.file is None and problem.field \
                else str(problem)
            if key not in seen:
                seen.add(key)
                problems.append(problem)
    reason = None
    if request.no_baseline:
        reason = "no baseline on purpose (no_baseline)"
    elif request._loaded.get("no_baseline_for_dataset"):
        reason = request._loaded["no_baseline_for_dataset"]
    return Preflight(collection=request._loaded.get("collection"),
                     baseline=request.baseline_file(), problems=problems, not_gated_reason=reason,
                     conventions=request._loaded.get("conventions"))
