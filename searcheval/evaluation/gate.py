"""The gate: the served configuration against the reviewed baseline (`evaluation.baseline`).

A gated metric that drops by more than the tolerance (0.02 absolute unless set) trips the gate, and
so does a mean under a per-metric floor or a category's mean under a per-category floor (a
"category" there may also be an automatic segment of the queries, e.g. `words:4+`). For every
drop the report gets a paired randomization test's p-value over the queries both runs scored, and
the queries that got worse most. An improvement beyond the tolerance passes, with a note that the
baseline is stale.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from searcheval.defaults import WORST_QUERIES
from searcheval.errors import InputError
from searcheval.evaluation.baseline import Baseline
from searcheval.metrics.scoring import ConfigurationScores
from searcheval.metrics.stats import paired_randomization_test


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
            value = scores.group_means(category).get(metric)  # a category, or a segment
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
