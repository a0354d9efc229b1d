"""The gate: the served configuration against the reviewed baseline (`evaluation.baseline`).

A gated metric that drops by more than the tolerance (0.02 absolute unless set) trips the gate, and
so does a mean under a per-metric floor or a category's mean under a per-category floor (a
"category" there may also be an automatic segment of the queries, e.g. `words:4+`). For every
drop the report gets a paired randomization test's p-value over the queries both runs scored, and
the queries that got worse most. An improvement beyond the tolerance passes, with a note that the
baseline is stale.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from searcheval.defaults import POWER, SIGNIFICANCE_LEVEL, WORST_QUERIES
from searcheval.errors import InputError
from searcheval.evaluation.baseline import Baseline
from searcheval.metrics.scoring import ConfigurationScores
from searcheval.metrics.stats import (
    min_detectable_effect,
    paired_randomization_test,
    pooled_sd,
    queries_needed,
    smallest_p,
)

#: a per-query difference this small is no change (floating-point noise)
EPSILON = 1e-12


@dataclass
class Trip:
    metric: str
    baseline: float
    value: float | None
    delta: float | None
    kind: str = "drop"  # drop | floor | category-floor | query-drop | worse-queries
    category: str | None = None
    p_value: float | None = None
    queries: list[str] = field(default_factory=list)  # the queries a per-query rule names

    def to_dict(self) -> dict:
        data = asdict(self)
        if not data["queries"]:
            data.pop("queries")  # only per-query rules name queries
        return data

    def describe(self) -> str:
        where = f" [{self.category}]" if self.category else ""
        if self.kind == "query-drop":
            return (f"{self.metric}{where}: {len(self.queries)} quer{'y' if len(self.queries) == 1 else 'ies'} "
                    f"fell by more than {self.baseline:g} (worst {self.delta:+.3f}: "
                    f"{', '.join(self.queries[:WORST_QUERIES])})")
        if self.kind == "worse-queries":
            return (f"{self.metric}{where}: {int(self.value)} queries worse, at most "
                    f"{int(self.baseline)} allowed ({', '.join(self.queries[:WORST_QUERIES])})")
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
    statistics: dict[str, dict] = field(default_factory=dict)  # per gated metric: honest_statistics

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
            "statistics": self.statistics,
        }

    def verdict(self) -> str:
        return PASSED if self.passed else TRIPPED

    def reason(self) -> str:
        if self.passed:
            return (f"no gated metric of {self.configuration} dropped by more than the tolerance "
                    f"{self.tolerance:g}, and no floor was missed")
        return "; ".join(trip.describe() for trip in self.tripped)


PASSED, TRIPPED, NOT_GATED = "PASSED", "TRIPPED", "NOT GATED"


def gate_status(gate: GateResult | None, not_gated_reason: str | None = None) -> dict:
    """The gate's status as every output states it: `{"status": PASSED | TRIPPED | NOT GATED,
    "reason": ...}`. A run without a gate always says why."""
    if gate is None:
        return {"status": NOT_GATED, "reason": not_gated_reason or "no baseline"}
    return {"status": gate.verdict(), "reason": gate.reason()}


def status_line(gate: GateResult | None, not_gated_reason: str | None = None) -> str:
    """`gate: PASSED (...)`, `gate: TRIPPED (...)` or `gate: NOT GATED (reason)`: one line."""
    status = gate_status(gate, not_gated_reason)
    return f"gate: {status['status']} ({status['reason']})"


def check_gate(baseline: Baseline, scores: ConfigurationScores, *,
               tolerance: float | None = None,
               spread: dict[str, tuple[float | None, str]] | None = None) -> GateResult:
    """The gate. `spread` (metric -> (sd of per-query differences, where it was estimated))
    feeds the minimum detectable effect; without one, this run against the baseline is used."""
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
            value = scores.group_means(category).get(metric)  # a category, or a segment
            if value is not None and value < floor:
                tripped.append(Trip(metric, floor, value, value - floor, "category-floor", category))
    for rule in baseline.query_rules:
        tripped.extend(_query_rule_trips(baseline, scores, rule))
    statistics = {metric: honest_statistics(baseline, scores, metric, tol,
                                            (spread or {}).get(metric))
                  for metric in baseline.metrics if metric in scores.means}
    worse.sort(key=lambda w: w["delta"])
    return GateResult(passed=not tripped, configuration=scores.configuration, tolerance=tol,
                      baseline_path=baseline.path, tripped=tripped, improved=improved,
                      worse_queries=worse[:WORST_QUERIES * max(1, len(tripped))],
                      compared=compared, statistics=statistics)


def _query_rule_trips(baseline: Baseline, scores: ConfigurationScores, rule: dict) -> list[Trip]:
    """A per-query rule: no query (of the category) may fall by more than `max_drop`, and at
    most `max_worse` queries may be worse at all."""
    metric, category = rule["metric"], rule.get("category")
    if metric not in scores.evaluation.values:
        raise InputError(f"a query rule reads {metric!r}, which this run does not compute",
                         file=baseline.path, field="query_rules")
    qids, before, after = _paired(baseline, scores, metric)
    keep = [i for i, q in enumerate(qids) if category is None
            or scores.categories.get(q) == category or category in scores.segments.get(q, ())]
    delta = (after - before)[keep] if keep else np.array([])
    names = [qids[i] for i in keep]
    order = np.argsort(delta, kind="stable")
    out = []
    if "max_drop" in rule:
        limit = float(rule["max_drop"])
        fell = [int(i) for i in order if delta[i] < -limit - EPSILON]
        if fell:
            out.append(Trip(metric, limit, None, float(delta[fell[0]]), "query-drop", category,
                            queries=[names[i] for i in fell]))
    if "max_worse" in rule:
        worse = [int(i) for i in order if delta[i] < -EPSILON]
        if len(worse) > int(rule["max_worse"]):
            out.append(Trip(metric, float(rule["max_worse"]), float(len(worse)), None,
                            "worse-queries", category, queries=[names[i] for i in worse]))
    return out


def honest_statistics(baseline: Baseline, scores: ConfigurationScores, metric: str,
                      tolerance: float, spread: tuple[float | None, str] | None = None, *,
                      level: float = SIGNIFICANCE_LEVEL, power: float = POWER) -> dict:
    """Counts first, then what a paired test can say with this many queries: the smallest p it
    can reach (2 / 2^changed), the p-value, the minimum detectable effect at `power`, and the
    queries needed to detect a drop the size of the tolerance, with the spread estimate used."""
    qids, before, after = _paired(baseline, scores, metric)
    d = after - before
    n = int(d.size)
    worse, better = int((d < -EPSILON).sum()), int((d > EPSILON).sum())
    changed = worse + better
    floor_p = smallest_p(changed)
    p = paired_randomization_test(before, after) if n else None
    sd, source = spread if spread and spread[0] else (None, "")
    if sd is None:
        sd, sets = pooled_sd([d])
        source = "this run against the baseline" if sets else "none: no query changed yet"
    mde = min_detectable_effect(sd, n, level=level, power=power) if sd else None
    needed = queries_needed(sd, tolerance, level=level, power=power) if sd and tolerance > 0         else None
    lines = [f"{worse} of {n} queries worse, {better} better ({metric})"]
    if changed == 0:
        lines.append("no query changed")
    elif floor_p > level:
        lines.append(f"with {changed} changed quer{'y' if changed == 1 else 'ies'} the smallest "
                     f"p a paired randomization test can reach is 2/2^{changed} = {floor_p:.3g}, "
                     f"above the level {level:g}: the query set is too small to test this "
                     "change; it says nothing either way about whether the change is real")
    else:
        verdict = "significant" if p is not None and p <= level else "not significant"
        lines.append(f"paired randomization p = {p:.3g}: {verdict} at {level:g}")
    if mde is not None:
        lines.append(f"with {n} queries, a drop below {mde:.3f} {metric} is detected less than "
                     f"{power:.0%} of the time at level {level:g} (spread of per-query "
                     f"differences: sd {sd:.3f}, estimated from {source})")
    if needed is not None:
        lines.append(f"{needed} queries would be needed to detect a drop of {tolerance:g} "
                     "(the tolerance)")
    elif sd is None:
        lines.append("no estimate of the spread of per-query differences yet, so no minimum "
                     "detectable effect")
    return {"queries": n, "worse": worse, "better": better, "unchanged": n - changed,
            "changed": changed, "smallest_p": floor_p, "testable": floor_p <= level,
            "p_value": p, "level": level, "power": power, "sd": sd, "sd_source": source,
            "min_detectable_effect": mde, "queries_needed": needed, "lines": lines}


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
