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
class Rescored:
    """The baseline as the gate compares it (`pipeline.rescore_baseline`): its stored ranked lists
    re-scored under today's judgments, or as recorded with the reason why not; and what changed
    in the judgments since it was made."""

    baseline: Baseline  # what the gate compares with
    recorded: dict[str, float]  # the baseline's means as recorded
    rescored: dict[str, float] = field(default_factory=dict)  # under today's judgments
    status: str = "as recorded"  # re-scored | judgments unchanged | as recorded
    note: str = ""  # one sentence: what was done, or why not
    judgments: dict = field(default_factory=dict)  # judgment_changes(), or {} when unknown

    def to_dict(self) -> dict:
        return {"status": self.status, "note": self.note, "recorded": self.recorded,
                "rescored": self.rescored, "judgments": self.judgments}


def judgment_changes(then: dict[tuple[str, str], int], now: dict[tuple[str, str], int],
                     judges: dict[tuple[str, str], str] | None = None) -> dict:
    """What changed from the grades `then` to `now`: pairs added, changed, removed, with the
    judges of the added and changed pairs (`judges`: pair -> "ann" or "ann,bob")."""
    judges = judges or {}
    added = sorted(p for p in now if p not in then)
    changed = sorted(p for p in now if p in then and now[p] != then[p])
    removed = sorted(p for p in then if p not in now)
    by: dict[str, int] = {}
    for pair in added + changed:
        for judge in (judges.get(pair) or "-").split(","):
            by[judge] = by.get(judge, 0) + 1
    return {"added": len(added), "changed": len(changed), "removed": len(removed),
            "by_judge": dict(sorted(by.items(), key=lambda kv: (-kv[1], kv[0]))),
            "examples": [list(p) for p in (added + changed)[:5]]}


def judgment_changes_line(changes: dict) -> str | None:
    """"judgments changed since the baseline: 12 grades added, 1 changed (by ann 12, bob 1)"."""
    if not changes:
        return None
    if changes.get("unknown"):
        return f"judgments changed since the baseline: {changes['unknown']}"
    parts = [f"{changes[k]} grade{'s' if changes[k] != 1 else ''} {k}"
             for k in ("added", "changed", "removed") if changes.get(k)]
    if not parts:
        return None
    by = changes.get("by_judge") or {}
    who = ""
    if by:
        who = " (by " + ", ".join(j if len(by) == 1 else f"{j} {n}" for j, n in by.items()) + ")"
    return "judgments changed since the baseline: " + ", ".join(parts) + who


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
    # like with like: the queries compared, and what moved for another reason than the ranking
    # (the baseline re-scored under today's judgments, the judgments' changes)
    like_with_like: dict = field(default_factory=dict)

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
            "like_with_like": self.like_with_like,
        }

    def notes(self, console: bool = False) -> list[str]:
        """What moved for another reason than the ranking, said beside the verdict."""
        return like_with_like_lines(self.like_with_like, console)

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


def like_with_like_lines(like: dict, console: bool = False) -> list[str]:
    """The lines the report prints beside the verdict; on the `console`, why the baseline was
    not re-scored only when its judgments are known to have changed (a baseline made elsewhere
    says so in the report, not on every run's console)."""
    lines = []
    queries = like.get("queries") or {}
    if queries.get("failed"):
        lines.append(f"{queries['failed']} quer{'y' if queries['failed'] == 1 else 'ies'} "
                     f"failed: the gate compares means over the {queries['compared']} queries "
                     "both sides answered")
    elif queries.get("run_only"):
        lines.append(f"the baseline lacks {queries['run_only']} of this run's queries: "
                     f"compared over the {queries['compared']} both answered")
    elif queries.get("baseline_only"):
        lines.append(f"this run lacks {queries['baseline_only']} of the baseline's queries: "
                     f"compared over the {queries['compared']} both answered")
    rescored = like.get("baseline") or {}
    changed = judgment_changes_line(rescored.get("judgments") or {})
    if changed:
        lines.append(changed)
    if rescored.get("status") == "re-scored":
        for metric, value in (rescored.get("rescored") or {}).items():
            recorded = (rescored.get("recorded") or {}).get(metric)
            if recorded is not None and value != recorded:
                lines.append(f"baseline under today's judgments: {metric} {value:.3f}, as "
                             f"recorded: {recorded:.3f} ({value - recorded:+.3f}: the judgments' "
                             "effect, not the ranking's)")
    if rescored.get("note") and rescored.get("status") != "re-scored" \
            and (not console or rescored.get("judgments")):
        lines.append(rescored["note"])
    return lines


def _query_comparison(baseline: Baseline, scores: ConfigurationScores) -> dict:
    """Which queries the gate compares: those both sides answered (a failed query of either side
    is left out of both), when the baseline holds per-query values."""
    failed = len(scores.failed)
    if not baseline.per_query:
        return {"compared": None, "failed": failed, "paired": False}
    now = set(scores.evaluation.query_ids)
    then = set(baseline.per_query)
    both = now & then
    return {"compared": len(both), "failed": failed, "run_only": len(now - then),
            "baseline_only": len(then - now), "paired": both != now or both != then}


def check_gate(baseline: Baseline, scores: ConfigurationScores, *,
               tolerance: float | None = None,
               spread: dict[str, tuple[float | None, str]] | None = None,
               rescored: Rescored | None = None) -> GateResult:
    """The gate. `spread` (metric -> (sd of per-query differences, where it was estimated))
    feeds the minimum detectable effect; without one, this run against the baseline is used.
    `rescored`: the baseline re-scored under today's judgments (`pipeline.rescore_baseline`),
    compared in place of the recorded one. When the two sides did not answer the same queries
    (failed queries within the allowance), each gated metric is compared as the means over the
    queries both answered, never a mean over fewer queries against one over more."""
    if rescored is not None:
        baseline = rescored.baseline
    queries = _query_comparison(baseline, scores)
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
        if queries["paired"]:  # the same queries on both sides: means over those both answered
            _, before, after = _paired(baseline, scores, metric)
            if before.size:
                base, value = float(before.mean()), float(after.mean())
        delta = None if value is None else value - base
        compared[metric] = {"baseline": base, "value": value, "delta": delta}
        if queries["paired"]:
            compared[metric]["queries"] = queries["compared"]
            compared[metric]["headline"] = scores.means[metric]
        if rescored is not None and metric in rescored.recorded:
            compared[metric]["recorded_baseline"] = rescored.recorded[metric]
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
    like = {"queries": {k: v for k, v in queries.items() if k != "paired"}}
    if rescored is not None:
        like["baseline"] = rescored.to_dict()
    return GateResult(passed=not tripped, configuration=scores.configuration, tolerance=tol,
                      baseline_path=baseline.path, tripped=tripped, improved=improved,
                      worse_queries=worse[:WORST_QUERIES * max(1, len(tripped))],
                      compared=compared, statistics=statistics, like_with_like=like)


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
