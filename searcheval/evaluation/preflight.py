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
from collections.abc import Callable
from dataclasses import dataclass, field
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


@dataclass
class RunRequest:
    """What one nightly run was asked to do: the flow's parameters (and the CLI's flags)."""

    fixtures: str | None = None  # one of fixtures, dataset, mapping (searcheval.project)
    dataset: str | None = None
    mapping: str | None = None
    split: str = defaults.SPLIT
    max_queries: int | None = None
    grade_map: dict[str, int] | None = None
    grade_scale: list[int] | None = None
    baseline: str | None = defaults.BASELINE
    no_baseline: bool = False
    configurations: list[str] | None = None  # names of the configurations file (None: its `run`)
    configurations_file: str = defaults.CONFIGURATIONS_FILE
    overrides: dict[str, Any] | None = None  # {"fused.rrf_k": 20}
    candidate: str | None = None  # an entry gated beside the served one
    depth: int = defaults.DEPTH
    metrics: list[str] = field(default_factory=lambda: list(defaults.REPORT_METRICS))
    tolerance: float | None = None
    coverage_k: int = defaults.COVERAGE_K
    coverage_floor: float | None = None
    max_age_days: int | None = defaults.MAX_AGE_DAYS
    min_per_category: int = defaults.MIN_PER_CATEGORY
    shards: int = defaults.SHARDS
    embed_batch: int = defaults.EMBED_BATCH
    gain: str | None = None
    relevance_level: int | None = None
    no_relevant: str | None = None
    alert_block: str | None = None
    judgment_rule: str = defaults.JUDGMENT_RULE
    agreement_floor: float = defaults.AGREEMENT_FLOOR
    dataset_name: str | None = None  # the project's name of the dataset (its identity, unless
    # the dataset declares one: searcheval.project)
    sources: dict[str, str] | None = None  # option -> where its value came from, when not the
    # command line (a project setting: searcheval.project.resolve_options)
    # whether a Prefect block "type/name" exists: given by the flow (the library never imports
    # Prefect); None checks the block's name only
    block_exists: Callable[[str], bool] | None = None
    environ: dict[str, str] | None = None  # None: os.environ
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False)

    # -- what the checks read once, shared by the checks (None when it could not be read)

    def env(self, name: str) -> str | None:
        source = os.environ if self.environ is None else self.environ
        return source.get(name)

    def collection(self) -> Collection | None:
        if "collection" not in self._loaded:
            from searcheval.io.collection import load_collection

            chosen = self.dataset is not None or self.mapping is not None
            try:
                self._loaded["collection"] = load_collection(
                    fixtures=None if chosen else self.fixtures, dataset=self.dataset,
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
                if collection is None:
                    self._loaded["baseline"] = load_baseline(self.baseline)
                else:  # one baseline per dataset (evaluation.baseline.select_baseline)
                    baseline, reason = select_baseline(self.baseline, dataset_of(collection))
                    self._loaded["baseline"] = baseline
                    self._loaded["no_baseline_for_dataset"] = reason
            except InputError as exc:
                self._loaded["baseline"] = None
                self._loaded["baseline_error"] = exc
        return self._loaded["baseline"]

    @property
    def gated(self) -> bool:
        return not self.no_baseline


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
    """Every numeric option finite and in range; tolerance finite and >= 0."""
    problems: list[InputError] = []
    tol = request.tolerance
    if tol is not None and (isinstance(tol, bool) or not isinstance(tol, (int, float))
                            or not finite(tol) or not 0 <= tol <= defaults.MAX_TOLERANCE):
        problems.append(InputError(
            f"expected a finite tolerance between 0 and {defaults.MAX_TOLERANCE:g} (an absolute "
            f"drop of a metric in [0, 1]), got {tol!r}", field="tolerance"))
    problems += _share(request.coverage_floor, "coverage_floor")
    problems += _whole(request.max_queries, "max_queries", 1, optional=True)
    problems += _whole(request.depth, "depth", 1, defaults.MAX_DEPTH)
    problems += _whole(request.coverage_k, "coverage_k", 1, defaults.MAX_DEPTH)
    problems += _whole(request.max_age_days, "max_age_days", 0, defaults.MAX_AGE_LIMIT_DAYS,
                       optional=True)
    problems += _whole(request.min_per_category, "min_per_category", 0)
    problems += _whole(request.shards, "shards", 1, defaults.MAX_SHARDS)
    problems += _whole(request.embed_batch, "embed_batch", 1, defaults.MAX_EMBED_BATCH)
    problems += _whole(request.relevance_level, "relevance_level", 1, optional=True)
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
                         conventions=run_conventions(conventions.settings(), ()))
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
    """Every check of `CHECKS`, all problems collected. Nothing is written."""
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
