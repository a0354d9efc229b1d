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
    path = Path(path)
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
        path=str(path),
    )


def baseline_from_scores(scores: ConfigurationScores, *, run_id: str, model: str | None,
                         previous: Baseline | None = None,
                         metrics: tuple[str, ...] = GATED_METRICS) -> Baseline:
    """A new baseline from a run's scores; tolerance and floors carry over from the previous one."""
    settings = {"gain": scores.settings.gain, "no_relevant": scores.settings.no_relevant,
                "relevance_level": scores.settings.relevance_level}
    return baseline_from_values(scores.configuration, scores.means, per_query_values(scores, metrics),
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
        tolerance=previous.tolerance if previous else TOLERANCE,
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


def per_query_values(scores: ConfigurationScores, metrics) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for metric in metrics:
        for qid, value in scores.values(metric).items():
            out.setdefault(qid, {})[metric] = value
    return out


