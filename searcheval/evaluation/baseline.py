"""The reviewed baseline of the gate (`baseline.json`): what it holds, how it is read and written,
and what `searcheval baseline update` changes. Only `write_baseline` writes the file, and only
`searcheval baseline update` calls it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from searcheval.defaults import GATED_METRICS, TOLERANCE
from searcheval.errors import InputError
from searcheval.io.files import read_json, short_repr
from searcheval.metrics.engine import parse_metric
from searcheval.metrics.scoring import ConfigurationScores


@dataclass
class Baseline:
    configuration: str
    metrics: dict[str, float]
    tolerance: float = TOLERANCE
    floors: dict[str, float] = field(default_factory=dict)
    category_floors: dict[str, dict[str, float]] = field(default_factory=dict)
    per_query: dict[str, dict[str, float | None]] = field(default_factory=dict)
    created_at: str | None = None
    from_run: str | None = None
    model: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    # what the baseline is of (absent in baselines from before provenance: then not checked)
    dataset: str | None = None  # the collection's name
    dataset_fingerprint: dict[str, str] = field(default_factory=dict)  # sha256 of each input
    query_ids: list[str] | None = None  # the golden queries it was scored over
    configuration_hash: str | None = None
    conventions: dict[str, Any] = field(default_factory=dict)  # gain, no_relevant, relevance_level, metrics
    created_by: str | None = None  # who ran `baseline update`
    reason: str | None = None  # why
    accepted_regression: str | None = None  # the reason a tripped run was accepted
    # per-query rules next to the means: [{"metric", "category"?, "max_drop"?, "max_worse"?}]
    query_rules: list[dict[str, Any]] = field(default_factory=list)
    # the configuration's resolved parameters (its hash is `configuration_hash`), and the
    # judgment set the values were scored with (`Effective.record`: fingerprint, counts)
    configuration_params: dict[str, Any] = field(default_factory=dict)
    judgments: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    def to_json(self) -> dict:
        data = asdict(self)
        data.pop("path")
        return data


def _number(value: Any, path: Path, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"expected a number, got {short_repr(value)}", file=path,
                         field=field_name)
    if not _finite(value):
        raise InputError(f"expected a finite number, got {str(value)[:40]}", file=path,
                         field=field_name)
    return float(value)


def _finite(value: int | float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an int beyond a float's range
        return False


def _metric_map(raw: Any, path: Path, field_name: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise InputError("expected an object {metric: number}", file=path, field=field_name)
    out = {}
    for name, value in raw.items():
        try:
            canonical = parse_metric(name).name  # any spelling; kept under searcheval's name
        except InputError as exc:
            raise InputError(exc.message, file=path, field=f"{field_name}.{name}") from None
        if canonical in out:
            raise InputError(f"names the metric {canonical} twice", file=path,
                             field=f"{field_name}.{name}")
        out[canonical] = _number(value, path, f"{field_name}.{name}")
    return out


def _given(data: dict, key: str):
    """An optional section: absent or null is empty; anything else is checked as it is."""
    value = data.get(key)
    return {} if value is None else value


def _per_query(raw: Any, path: Path) -> dict[str, dict[str, float | None]]:
    """`per_query`: {query id: {metric: value or null}}, every value a finite number."""
    if not isinstance(raw, dict):
        raise InputError("expected an object {query: {metric: value}}", file=path, field="per_query")
    out: dict[str, dict[str, float | None]] = {}
    for qid, values in raw.items():
        where = f"per_query.{qid}"
        if not isinstance(values, dict):
            raise InputError(f"expected an object {{metric: value}}, got {values!r}"[:200],
                             file=path, field=where)
        entry: dict[str, float | None] = {}
        for metric, value in values.items():
            try:
                parse_metric(metric)
            except InputError as exc:
                raise InputError(exc.message, file=path, field=f"{where}.{metric}") from None
            entry[metric] = None if value is None else _number(value, path, f"{where}.{metric}")
        out[qid] = entry
    return out


def load_baseline(path: str | Path) -> Baseline:
    from searcheval.io.project import missing, project_path

    given, path = path, project_path(path)  # the project's, from any of its subfolders
    if not path.exists():
        raise InputError(missing("file not found", given), file=given)
    data, _ = read_json(path)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", file=path)
    for key in ("configuration", "metrics"):
        if key not in data:
            raise InputError("missing; expected the gated configuration and its metrics", file=path,
                             field=key)
    tolerance = _number(data.get("tolerance", TOLERANCE), path, "tolerance")
    if tolerance < 0:
        raise InputError(f"expected a tolerance >= 0, got {tolerance}", file=path, field="tolerance")
    category_floors = _given(data, "category_floors")
    if not isinstance(category_floors, dict):
        raise InputError("expected an object {category: {metric: floor}}", file=path,
                         field="category_floors")
    per_query = _per_query(_given(data, "per_query"), path)
    configuration = data["configuration"]
    if not isinstance(configuration, str) or not configuration.strip():
        raise InputError(f"expected the name of the gated configuration, got {configuration!r}",
                         file=path, field="configuration")
    settings = _given(data, "settings")
    if not isinstance(settings, dict):
        raise InputError("expected an object of the scoring settings", file=path, field="settings")
    return Baseline(
        configuration=configuration,
        metrics=_metric_map(data["metrics"], path, "metrics"),
        tolerance=tolerance,
        floors=_metric_map(_given(data, "floors"), path, "floors"),
        category_floors={c: _metric_map(f, path, f"category_floors.{c}")
                         for c, f in category_floors.items()},
        per_query=per_query,
        created_at=data.get("created_at"),
        from_run=data.get("from_run"),
        model=data.get("model"),
        settings=settings,
        dataset=_typed(data, "dataset", str, path),
        dataset_fingerprint=_typed(data, "dataset_fingerprint", dict, path) or {},
        query_ids=_query_ids(data.get("query_ids"), path),
        configuration_hash=_typed(data, "configuration_hash", str, path),
        conventions=_typed(data, "conventions", dict, path) or {},
        created_by=_typed(data, "created_by", str, path),
        reason=_typed(data, "reason", str, path),
        accepted_regression=data.get("accepted_regression"),
        query_rules=_query_rules(data.get("query_rules"), path),
        configuration_params=_typed(data, "configuration_params", dict, path) or {},
        judgments=_typed(data, "judgments", dict, path) or {},
        path=str(path),
    )


def _query_rules(raw: Any, path: Path) -> list[dict[str, Any]]:
    """`query_rules`: each {"metric", "category" (optional: all queries), "max_drop" (no query
    may fall by more than this), "max_worse" (at most this many queries worse)}."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError("expected a list of rules {metric, category, max_drop, max_worse}",
                         file=path, field="query_rules")
    rules = []
    for i, rule in enumerate(raw):
        where = f"query_rules[{i}]"
        if not isinstance(rule, dict) or "metric" not in rule:
            raise InputError("expected an object with a metric", file=path, field=where)
        unknown = sorted(set(rule) - {"metric", "category", "max_drop", "max_worse"})
        if unknown:
            raise InputError(f"unknown key(s) {unknown}; expected metric, category, max_drop, "
                             "max_worse", file=path, field=where)
        try:
            parse_metric(rule["metric"])
        except InputError as exc:
            raise InputError(exc.message, file=path, field=f"{where}.metric") from None
        if "max_drop" not in rule and "max_worse" not in rule:
            raise InputError("expected max_drop and/or max_worse", file=path, field=where)
        if "max_drop" in rule:
            drop = _number(rule["max_drop"], path, f"{where}.max_drop")
            if drop < 0:
                raise InputError(f"expected max_drop >= 0, got {drop}", file=path,
                                 field=f"{where}.max_drop")
        worse = rule.get("max_worse")
        if "max_worse" in rule and (isinstance(worse, bool) or not isinstance(worse, int)
                                    or worse < 0):
            raise InputError(f"expected a whole number >= 0, got {worse!r}", file=path,
                             field=f"{where}.max_worse")
        if rule.get("category") is not None and not isinstance(rule["category"], str):
            raise InputError("expected a category name", file=path, field=f"{where}.category")
        rules.append(dict(rule))
    return rules


_TYPE_NAMES = {str: "a string", dict: "an object"}


def _typed(data: dict, key: str, kind: type, path: Path) -> Any:
    """A provenance field of the baseline: absent (None) or of its type, else refused by name."""
    value = data.get(key)
    if value is not None and not isinstance(value, kind):
        raise InputError(f"expected {_TYPE_NAMES[kind]}, got {type(value).__name__}", file=path,
                         field=key)
    return value


def _query_ids(raw: Any, path: Path) -> list[str] | None:
    if raw is None:
        return None
    if not isinstance(raw, list) or not all(isinstance(q, str) for q in raw):
        raise InputError("expected a list of query ids", file=path, field="query_ids")
    return list(raw)


#: the conventions a baseline records and a run must share with it to be gated against it
CONVENTION_KEYS = ("gain", "no_relevant", "relevance_level", "depth")


@dataclass
class Provenance:
    """What a new baseline is of, and who made it why (`baseline_from_values`)."""

    dataset: str | None = None
    dataset_fingerprint: dict[str, str] = field(default_factory=dict)
    query_ids: list[str] | None = None
    configuration_hash: str | None = None
    conventions: dict[str, Any] = field(default_factory=dict)
    created_by: str | None = None
    reason: str | None = None
    accepted_regression: str | None = None
    configuration_params: dict[str, Any] = field(default_factory=dict)
    judgments: dict[str, Any] = field(default_factory=dict)


def run_conventions(settings, metrics: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The conventions block of a baseline from the metric engine's settings: what the numbers
    mean (gain, policy for queries without relevant judgments, relevance level, the metrics and
    their cutoffs)."""
    return {"gain": settings.effective_gain, "no_relevant": settings.effective_policy,
            "relevance_level": settings.relevance_level, "metrics": sorted(metrics)}


def check_comparable(baseline: Baseline, *, dataset: str | None, query_ids: list[str],
                     conventions: dict[str, Any], only_dataset: bool = False) -> None:
    """Refuse (InputError naming the one difference) a run that cannot be compared with the
    baseline: another dataset, another query set, other conventions. A baseline without a field
    (from before provenance) is not checked on it."""
    where = dict(file=baseline.path)
    if baseline.dataset is not None and dataset is not None and baseline.dataset != dataset:
        raise InputError(f"the baseline is of dataset {baseline.dataset!r}, this run of "
                         f"{dataset!r}: gate it against its own baseline "
                         f"(baselines/{dataset}.json) or run with --no-baseline", **where,
                         field="dataset")
    if only_dataset:
        return
    if baseline.query_ids is not None:
        ours, theirs = set(query_ids), set(baseline.query_ids)
        if ours != theirs:
            missing, extra = sorted(theirs - ours), sorted(ours - theirs)
            parts = []
            if missing:
                parts.append(f"{len(missing)} of its queries are not in this run (first: "
                             f"{missing[0]!r})")
            if extra:
                parts.append(f"this run has {len(extra)} queries it lacks (first: {extra[0]!r})")
            raise InputError(f"the baseline's query set ({len(theirs)} queries) differs from this "
                             f"run's ({len(ours)}): " + "; ".join(parts), **where,
                             field="query_ids")
    for key in CONVENTION_KEYS:
        if key in baseline.conventions and key in conventions \
                and baseline.conventions[key] != conventions[key]:
            raise InputError(f"the baseline was scored with {key} {baseline.conventions[key]!r}, "
                             f"this run with {conventions[key]!r}", **where,
                             field=f"conventions.{key}")


def baseline_from_scores(scores: ConfigurationScores, *, run_id: str, model: str | None,
                         previous: Baseline | None = None,
                         metrics: tuple[str, ...] = GATED_METRICS,
                         provenance: Provenance | None = None) -> Baseline:
    """A new baseline from a run's scores; tolerance and floors carry over from the previous one."""
    settings = {"gain": scores.settings.gain, "no_relevant": scores.settings.no_relevant,
                "relevance_level": scores.settings.relevance_level}
    provenance = provenance or Provenance()
    if provenance.query_ids is None:
        provenance.query_ids = list(scores.evaluation.query_ids)
    if not provenance.conventions:
        provenance.conventions = run_conventions(scores.settings, metrics)
    return baseline_from_values(scores.configuration, scores.means, per_query_values(scores, metrics),
                                run_id=run_id, model=model, previous=previous, settings=settings,
                                metrics=metrics, provenance=provenance)


def baseline_from_values(configuration: str, means: dict[str, float | None],
                         per_query: dict[str, dict[str, float | None]], *, run_id: str,
                         model: str | None, previous: Baseline | None = None,
                         settings: dict | None = None,
                         metrics: tuple[str, ...] = GATED_METRICS,
                         provenance: Provenance | None = None) -> Baseline:
    """A new baseline from means and per-query values (from scores, the history, or files).
    Values are kept unrounded (JSON keeps a float exactly), so a run of unchanged code passes
    against its own baseline at tolerance 0."""
    def clean(v):
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)

    p = provenance or Provenance()
    return Baseline(
        configuration=configuration,
        metrics={m: float(means[m]) for m in metrics if means.get(m) is not None},
        tolerance=previous.tolerance if previous else TOLERANCE,
        floors=dict(previous.floors) if previous else {},
        category_floors=dict(previous.category_floors) if previous else {},
        query_rules=[dict(r) for r in previous.query_rules] if previous else [],
        per_query={q: {m: clean(v) for m, v in vals.items() if m in metrics}
                   for q, vals in sorted(per_query.items())},
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        from_run=run_id,
        model=model,
        settings=settings or {},
        dataset=p.dataset,
        dataset_fingerprint=dict(p.dataset_fingerprint),
        query_ids=sorted(p.query_ids) if p.query_ids is not None else None,
        configuration_hash=p.configuration_hash,
        conventions=dict(p.conventions),
        created_by=p.created_by,
        reason=p.reason,
        accepted_regression=p.accepted_regression,
        configuration_params=dict(p.configuration_params),
        judgments=dict(p.judgments),
    )


def write_baseline(path: str | Path, baseline: Baseline) -> None:
    Path(path).write_text(json.dumps(baseline.to_json(), indent=2) + "\n", encoding="utf-8")


def diff_baselines(old: Baseline | None, new: Baseline) -> list[str]:
    """Human-readable lines: what `baseline update` changes."""
    lines = []
    old_metrics = old.metrics if old else {}
    for metric in sorted(set(old_metrics) | set(new.metrics)):
        before, after = old_metrics.get(metric), new.metrics.get(metric)
        if before == after:
            lines.append(f"  {metric}: {after:.4f} (unchanged)")
        elif before is None:
            lines.append(f"+ {metric}: {after:.4f}")
        elif after is None:
            lines.append(f"- {metric}: {before:.4f}")
        else:
            lines.append(f"~ {metric}: {before:.4f} -> {after:.4f} ({after - before:+.4f})")
    if old is None or old.from_run != new.from_run:
        lines.append(f"~ from_run: {old.from_run if old else None} -> {new.from_run}")
    if (old.model if old else None) != new.model:  # a run that used no model names none
        lines.append(f"~ model: {old.model if old else None} -> {new.model}")
    if old is None or old.dataset != new.dataset:
        lines.append(f"~ dataset: {old.dataset if old else None} -> {new.dataset}")
    lines.extend(configuration_changes(old, new))
    lines.extend(judgment_set_changes(old, new))
    if old is not None and old.per_query and new.per_query:
        metric = next(iter(new.metrics), None)
        if metric is not None:
            worse = better = 0
            for qid, values in new.per_query.items():
                before, after = (old.per_query.get(qid) or {}).get(metric), values.get(metric)
                if before is not None and after is not None:
                    worse += after < before
                    better += after > before
            lines.append(f"  per query ({metric}): {worse} worse, {better} better of "
                         f"{len(new.per_query)}")
    if new.accepted_regression:
        lines.append(f"! accepted regression: {new.accepted_regression}")
    if new.reason:
        lines.append(f"  reason: {new.reason}")
    return lines


def _flat(params: Any, prefix: str = "") -> dict[str, Any]:
    """{"a.b": value} of nested parameters, for a readable diff."""
    if not isinstance(params, dict) or not params:
        return {prefix: params} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in params.items():
        out.update(_flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def configuration_changes(old: Baseline | None, new: Baseline) -> list[str]:
    """What changed in the gated configuration: its name, its hash, each resolved parameter."""
    lines = []
    if old is None or old.configuration != new.configuration:
        lines.append(f"~ configuration: {old.configuration if old else None} -> "
                     f"{new.configuration}")
    before_hash = old.configuration_hash if old else None
    if before_hash != new.configuration_hash:
        lines.append(f"~ configuration_hash: {(before_hash or '-')[:12]} -> "
                     f"{(new.configuration_hash or '-')[:12]}")
    if old is not None and old.configuration == new.configuration \
            and old.configuration_params and new.configuration_params:
        a, b = _flat(old.configuration_params), _flat(new.configuration_params)
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                lines.append(f"~ {new.configuration}.{key}: {a.get(key)!r} -> {b.get(key)!r}")
    elif old is None or old.configuration != new.configuration:
        for key, value in sorted(_flat(new.configuration_params).items()):
            lines.append(f"+ {new.configuration}.{key}: {value!r}")
    return lines


def judgment_set_changes(old: Baseline | None, new: Baseline) -> list[str]:
    """Whether the new baseline was scored with other judgments than the old one."""
    a, b = (old.judgments if old else {}) or {}, new.judgments or {}
    if not b or a.get("fingerprint") == b.get("fingerprint"):
        return []
    if not a:
        return [f"~ judgments: {b.get('pairs', 0)} graded pairs "
                f"({(b.get('fingerprint') or '')[:19]})"]
    return [f"~ judgments: {a.get('pairs', 0)} -> {b.get('pairs', 0)} graded pairs "
            f"({(a.get('fingerprint') or '')[:19]} -> {(b.get('fingerprint') or '')[:19]})"]


def per_query_values(scores: ConfigurationScores, metrics) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for metric in metrics:
        for qid, value in scores.values(metric).items():
            out.setdefault(qid, {})[metric] = value
    return out




def dataset_baseline_path(path: str | Path, dataset: str) -> Path:
    """Where the baseline of `dataset` lives beside `path`: `baselines/<dataset>.json`."""
    from searcheval.defaults import BASELINES_DIR

    return Path(path).parent / BASELINES_DIR / f"{dataset}.json"


def select_baseline(path: str | Path, dataset: str | None) -> tuple[Baseline | None, str | None]:
    """The baseline a run of `dataset` is gated against, or (None, why not): one baseline per
    dataset. `path` when it is of this dataset (or records none); when it is another dataset's,
    `baselines/<dataset>.json` beside it if `path` is the default (`baseline.json`), else None
    and "no baseline for dataset ..." (the run is published NOT GATED). A baseline named on
    purpose that is another dataset's is refused: a run is never gated against it. A missing
    `path` is refused by `load_baseline`."""
    from searcheval.defaults import BASELINE
    from searcheval.io.project import project_path

    named = str(path) != BASELINE  # the default is the project's baseline.json
    path = project_path(path)
    baseline = load_baseline(path)
    if baseline.dataset is None or dataset is None or baseline.dataset == dataset:
        return baseline, None
    if named:
        raise InputError(f"the baseline is of dataset {baseline.dataset!r}, this run of "
                         f"{dataset!r}: gate it against its own baseline "
                         f"({dataset_baseline_path(path, dataset)}) or run with --no-baseline",
                         file=baseline.path, field="dataset")
    own = dataset_baseline_path(path, dataset)
    if not own.exists():
        return None, (f"no baseline for dataset {dataset!r} (create {own} with "
                      "`searcheval baseline update`)")
    baseline = load_baseline(own)
    check_comparable(baseline, dataset=dataset, query_ids=[], conventions={}, only_dataset=True)
    return baseline, None


def resolve_baseline(path: str | Path | None, dataset: str, *, query_ids: list[str],
                     conventions: dict[str, Any]) -> tuple[Baseline | None, str | None]:
    """`select_baseline`, then `check_comparable`: (the baseline, None) or (None, why not)."""
    if path is None:
        return None, "no baseline (--no-baseline)"
    baseline, reason = select_baseline(path, dataset)
    if baseline is not None:
        check_comparable(baseline, dataset=dataset, query_ids=query_ids, conventions=conventions)
    return baseline, reason


def dataset_of(collection) -> str:
    """What baselines, snapshots and diffs call a dataset: the name it declares for itself
    (searcheval.yaml, a mapping's name), else its folder's name. Never the content fingerprint:
    a catalog that changes overnight is still the same dataset, and its query set and
    conventions are checked on their own (`check_comparable`)."""
    return collection.declared_name or getattr(collection.settings, "name", None) \
        or collection.name
