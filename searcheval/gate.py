"""The gate: the served configuration against the reviewed `baseline.json`.

A gated metric that drops by more than the tolerance (0.02 absolute unless set) trips the gate, and
so does a mean under a per-metric floor or a category's mean under a per-category floor. For every
drop the report gets a paired randomization test's p-value over the queries both runs scored, and
the queries that got worse most. An improvement beyond the tolerance passes, with a note that the
baseline is stale. `baseline.json` is written only by `write_baseline`, which only
`searcheval baseline update` calls.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from searcheval.catalog import read_json
from searcheval.errors import InputError
from searcheval.metrics import parse_metric
from searcheval.scoring import GATED_METRICS, ConfigurationScores
from searcheval.stats import paired_randomization_test

DEFAULT_TOLERANCE = 0.02
WORST_QUERIES = 5


@dataclass
class Baseline:
    configuration: str
    metrics: dict[str, float]
    tolerance: float = DEFAULT_TOLERANCE
    floors: dict[str, float] = field(default_factory=dict)
    category_floors: dict[str, dict[str, float]] = field(default_factory=dict)
    per_query: dict[str, dict[str, float | None]] = field(default_factory=dict)
    created_at: str | None = None
    from_run: str | None = None
    model: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    def to_json(self) -> dict:
        data = asdict(self)
        data.pop("path")
        return data


@dataclass
class Trip:
    metric: str
    baseline: float
    value: float | None
    delta: float | None
    kind: str = "drop"  # drop | floor | category-floor
    category: str | None = None
    p_value: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def describe(self) -> str:
        where = f" [{self.category}]" if self.category else ""
        now = "n/a" if self.value is None else f"{self.value:.3f}"
        what = {"drop": "baseline", "floor": "floor", "category-floor": "floor"}[self.kind]
        delta = "" if self.delta is None else f" ({self.delta:+.3f})"
        p = "" if self.p_value is None else f", paired randomization p = {self.p_value:.3f}"
        return f"{self.metric}{where}: {now} vs {what} {self.baseline:.3f}{delta}{p}"


@dataclass
class GateResult:
    passed: bool
    configuration: str
    tolerance: float
    baseline_path: str | None
    tripped: list[Trip]
    improved: list[Trip]
    worse_queries: list[dict]
    compared: dict[str, dict[str, float | None]]

    @property
    def stale_baseline(self) -> bool:
        return bool(self.improved)

    def to_dict(self) -> dict:
        return {
            "passed": self.passed,
            "configuration": self.configuration,
            "baseline": self.baseline_path,
            "tolerance": self.tolerance,
            "tripped": [t.to_dict() for t in self.tripped],
            "improved": [t.to_dict() for t in self.improved],
            "stale_baseline": self.stale_baseline,
            "worse_queries": self.worse_queries,
            "compared": self.compared,
        }

    def verdict(self) -> str:
        return "PASSED" if self.passed else "TRIPPED"


# --------------------------------------------------------------------------- baseline file


def _number(value: Any, path: Path, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"expected a number, got {value!r}", file=path, field=field_name)
    return float(value)


def _metric_map(raw: Any, path: Path, field_name: str) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise InputError("expected an object {metric: number}", file=path, field=field_name)
    out = {}
    for name, value in raw.items():
        try:
            parse_metric(name)
        except InputError as exc:
            raise InputError(exc.message, file=path, field=f"{field_name}.{name}") from None
        out[name] = _number(value, path, f"{field_name}.{name}")
    return out


def load_baseline(path: str | Path) -> Baseline:
    path = Path(path)
    data, _ = read_json(path)
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", file=path)
    for key in ("configuration", "metrics"):
        if key not in data:
            raise InputError("missing; expected the gated configuration and its metrics", file=path,
                             field=key)
    tolerance = _number(data.get("tolerance", DEFAULT_TOLERANCE), path, "tolerance")
    if tolerance < 0:
        raise InputError(f"expected a tolerance >= 0, got {tolerance}", file=path, field="tolerance")
    category_floors = data.get("category_floors") or {}
    if not isinstance(category_floors, dict):
        raise InputError("expected an object {category: {metric: floor}}", file=path,
                         field="category_floors")
    per_query = data.get("per_query") or {}
    if not isinstance(per_query, dict):
        raise InputError("expected an object {query: {metric: value}}", file=path, field="per_query")
    return Baseline(
        configuration=str(data["configuration"]),
        metrics=_metric_map(data["metrics"], path, "metrics"),
        tolerance=tolerance,
        floors=_metric_map(data.get("floors") or {}, path, "floors"),
        category_floors={c: _metric_map(f, path, f"category_floors.{c}")
                         for c, f in category_floors.items()},
        per_query=per_query,
        created_at=data.get("created_at"),
        from_run=data.get("from_run"),
        model=data.get("model"),
        settings=data.get("settings") or {},
        path=str(path),
    )


def baseline_from_scores(scores: ConfigurationScores, *, run_id: str, model: str | None,
                         previous: Baseline | None = None,
                         metrics: tuple[str, ...] = GATED_METRICS) -> Baseline:
    """A new baseline from a run's scores; tolerance and floors carry over from the previous one."""
    settings = {"gain": scores.settings.gain, "no_relevant": scores.settings.no_relevant,
                "relevance_level": scores.settings.relevance_level}
    return baseline_from_values(scores.configuration, scores.means, _per_query(scores, metrics),
                                run_id=run_id, model=model, previous=previous, settings=settings,
                                metrics=metrics)


def baseline_from_values(configuration: str, means: dict[str, float | None],
                         per_query: dict[str, dict[str, float | None]], *, run_id: str,
                         model: str | None, previous: Baseline | None = None,
                         settings: dict | None = None,
                         metrics: tuple[str, ...] = GATED_METRICS) -> Baseline:
    """A new baseline from means and per-query values (from scores, the history, or files)."""
    def clean(v):
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else round(v, 6)

    return Baseline(
        configuration=configuration,
        metrics={m: round(means[m], 6) for m in metrics if means.get(m) is not None},
        tolerance=previous.tolerance if previous else DEFAULT_TOLERANCE,
        floors=dict(previous.floors) if previous else {},
        category_floors=dict(previous.category_floors) if previous else {},
        per_query={q: {m: clean(v) for m, v in vals.items() if m in metrics}
                   for q, vals in sorted(per_query.items())},
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        from_run=run_id,
        model=model,
        settings=settings or {},
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
    if old is None or old.model != new.model:
        lines.append(f"~ model: {old.model if old else None} -> {new.model}")
    return lines


# --------------------------------------------------------------------------- the check


def _per_query(scores: ConfigurationScores, metrics) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for metric in metrics:
        for qid, value in scores.values(metric).items():
            out.setdefault(qid, {})[metric] = value
    return out


def check_gate(baseline: Baseline, scores: ConfigurationScores, *,
               tolerance: float | None = None) -> GateResult:
    if scores.configuration != baseline.configuration:
        raise InputError(f"the baseline gates {baseline.configuration!r} but the scores are of "
                         f"{scores.configuration!r}", file=baseline.path, field="configuration")
    tol = baseline.tolerance if tolerance is None else tolerance
    tripped: list[Trip] = []
    improved: list[Trip] = []
    worse: list[dict] = []
    compared: dict[str, dict[str, float | None]] = {}
    for metric, base in baseline.metrics.items():
        if metric not in scores.means:
            raise InputError(f"the baseline gates {metric!r}, which this run does not compute",
                             file=baseline.path, field=f"metrics.{metric}")
        value = scores.means[metric]
        delta = None if value is None else value - base
        compared[metric] = {"baseline": base, "value": value, "delta": delta}
        if delta is None:
            continue
        p = _p_value(baseline, scores, metric)
        compared[metric]["p_value"] = p
        if delta < -tol - 1e-12:
            tripped.append(Trip(metric, base, value, delta, "drop", p_value=p))
            worse.extend(_worse_queries(baseline, scores, metric))
        elif delta > tol + 1e-12:
            improved.append(Trip(metric, base, value, delta, "drop", p_value=p))
    for metric, floor in baseline.floors.items():
        value = scores.means.get(metric)
        if value is not None and value < floor:
            tripped.append(Trip(metric, floor, value, value - floor, "floor"))
    for category, floors in baseline.category_floors.items():
        for metric, floor in floors.items():
            value = scores.by_category.get(category, {}).get(metric)
            if value is not None and value < floor:
                tripped.append(Trip(metric, floor, value, value - floor, "category-floor", category))
    worse.sort(key=lambda w: w["delta"])
    return GateResult(passed=not tripped, configuration=scores.configuration, tolerance=tol,
                      baseline_path=baseline.path, tripped=tripped, improved=improved,
                      worse_queries=worse[:WORST_QUERIES * max(1, len(tripped))],
                      compared=compared)


def _paired(baseline: Baseline, scores: ConfigurationScores, metric: str):
    now = scores.values(metric)
    qids = [q for q in now if q in baseline.per_query
            and baseline.per_query[q].get(metric) is not None]
    before = np.array([baseline.per_query[q][metric] for q in qids], dtype=np.float64)
    after = np.array([now[q] for q in qids], dtype=np.float64)
    return qids, before, after


def _p_value(baseline: Baseline, scores: ConfigurationScores, metric: str) -> float | None:
    _, before, after = _paired(baseline, scores, metric)
    return paired_randomization_test(before, after) if before.size else None


def _worse_queries(baseline: Baseline, scores: ConfigurationScores, metric: str) -> list[dict]:
    qids, before, after = _paired(baseline, scores, metric)
    delta = after - before
    order = np.argsort(delta, kind="stable")
    return [{"query_id": qids[i], "category": scores.categories.get(qids[i]), "metric": metric,
             "baseline": float(before[i]), "value": float(after[i]), "delta": float(delta[i])}
            for i in order[:WORST_QUERIES] if delta[i] < 0]
