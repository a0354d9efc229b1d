"""Many candidates against one served configuration, as one family of tests.

`searcheval run --candidate a,b,c` runs each candidate beside the served configuration on the same
queries. For each candidate, on the queries both answered (a failed query is left out of that
pair only), the per-query differences `candidate - served` of one metric (nDCG@10 unless told)
give:

- the mean difference and its 95% percentile-bootstrap interval (seeded);
- the two-sided paired randomization (sign-flip) p-value, the gate's own test
  (`metrics.stats.paired_randomization_test`);
- Holm's step-down adjustment over the family of those p-values (statsmodels'
  `multipletests(method="holm")`): the family is every candidate of the run, one test each; a
  candidate *survives* when its adjusted p is at most the level (0.05);
- how many queries got better and worse, and the minimum detectable effect of a pair of this many
  queries with this spread (`metrics.stats.min_detectable_effect`).

One candidate is a family of one (Holm leaves its p unchanged). With one candidate the gate
guards the candidate (as before); with several, the gate guards the served configuration and the
candidates are compared, not gated: which of them to ship is the reader's choice among the
survivors.
"""

from __future__ import annotations

import numpy as np

from searcheval.defaults import POWER, SIGNIFICANCE_LEVEL
from searcheval.errors import InputError
from searcheval.metrics.scoring import ConfigurationScores
from searcheval.metrics.stats import (
    bootstrap_ci,
    min_detectable_effect,
    paired_randomization_test,
    pooled_sd,
)

EPSILON = 1e-12


def candidate_names(candidate: str | list[str] | tuple[str, ...] | None) -> list[str]:
    """`a,b,c` (or a list) as names, each once, in order; [] for none."""
    if candidate is None:
        return []
    parts = candidate.split(",") if isinstance(candidate, str) else list(candidate)
    names = [p.strip() for p in parts]
    if any(not n for n in names):
        raise InputError(f"expected comma-separated configuration names, got {candidate!r}",
                         field="candidate")
    return list(dict.fromkeys(names))


def gated_configuration(candidate: str | list[str] | None) -> str | None:
    """What the gate guards: the one candidate, else (none or several) the served one."""
    names = candidate_names(candidate)
    return names[0] if len(names) == 1 else None


def holm(p_values: list[float], level: float = SIGNIFICANCE_LEVEL) -> list[float]:
    """Holm-adjusted p-values (statsmodels), in the order given."""
    if not p_values:
        return []
    from statsmodels.stats.multitest import multipletests

    return [float(p) for p in multipletests(p_values, alpha=level, method="holm")[1]]


def paired_differences(candidate: ConfigurationScores, served: ConfigurationScores,
                       metric: str) -> tuple[list[str], np.ndarray, np.ndarray]:
    va, vb = candidate.values(metric), served.values(metric)
    qids = [q for q in vb if q in va and va[q] == va[q] and vb[q] == vb[q]]
    return (qids, np.array([vb[q] for q in qids], dtype=np.float64),
            np.array([va[q] for q in qids], dtype=np.float64))


def compare_pair(candidate: ConfigurationScores, served: ConfigurationScores, metric: str, *,
                 level: float = SIGNIFICANCE_LEVEL, power: float = POWER, seed: int = 0) -> dict:
    """One candidate against the served configuration on `metric` (the module docstring)."""
    qids, before, after = paired_differences(candidate, served, metric)
    d = after - before
    n = len(qids)
    sd, _ = pooled_sd([d])
    ci = bootstrap_ci(d, seed=seed) if n else None
    return {
        "queries": n,
        "served": float(before.mean()) if n else None,
        "candidate": float(after.mean()) if n else None,
        "delta": float(d.mean()) if n else None,
        "ci95": list(ci) if ci else None,
        "p_value": paired_randomization_test(before, after, seed=seed) if n else None,
        "better": int((d > EPSILON).sum()), "worse": int((d < -EPSILON).sum()),
        "better_queries": [qids[i] for i in np.argsort(-d, kind="stable") if d[i] > EPSILON],
        "worse_queries": [qids[i] for i in np.argsort(d, kind="stable") if d[i] < -EPSILON],
        "sd": sd,
        "min_detectable_effect": min_detectable_effect(sd, n, level=level, power=power)
        if sd else None,
    }


def compare_candidates(scores: dict[str, ConfigurationScores], candidates: list[str],
                       served: str, metric: str = "ndcg@10", *,
                       level: float = SIGNIFICANCE_LEVEL, seed: int = 0) -> dict:
    """metrics.json's `candidates` block: each candidate against `served`, Holm over the family."""
    out: dict = {"served": served, "metric": metric, "level": level, "correction": "holm",
                 "family": len(candidates), "candidates": {}, "survivors": []}
    for name in candidates:
        out["candidates"][name] = compare_pair(scores[name], scores[served], metric,
                                               level=level, seed=seed)
    tested = [n for n in candidates if out["candidates"][n]["p_value"] is not None]
    for name, adjusted in zip(tested, holm([out["candidates"][n]["p_value"] for n in tested],
                                           level)):
        out["candidates"][name]["p_holm"] = adjusted
        out["candidates"][name]["survives"] = adjusted <= level
    for name in candidates:
        row = out["candidates"][name]
        row.setdefault("p_holm", None)
        row.setdefault("survives", False)
        row["better_queries"] = row["better_queries"][:10]
        row["worse_queries"] = row["worse_queries"][:10]
        if row["survives"]:
            out["survivors"].append(name)
    return out


def _fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def candidates_lines(block: dict) -> list[str]:
    """The console's lines: one per candidate, then which survive."""
    lines = [f"candidates vs served {block['served']} on {block['metric']} "
             f"(Holm over {block['family']}, level {block['level']:g}):"]
    for name, c in block["candidates"].items():
        ci = c["ci95"] or [None, None]
        lines.append(f"  {name}: {_fmt(c['delta'])} [{_fmt(ci[0])}, {_fmt(ci[1])}] "
                     f"p {_fmt(c['p_value'], 4)} holm {_fmt(c['p_holm'], 4)} "
                     f"({c['better']} better, {c['worse']} worse)"
                     + (" survives" if c["survives"] else ""))
    survivors = block["survivors"]
    lines.append("  survive the correction: " + (", ".join(survivors) if survivors else "none"))
    return lines


def candidates_markdown(block: dict) -> str:
    """report.md's section."""
    lines = [f"## Candidates\n\nEach candidate against the served `{block['served']}` on the same "
             f"queries, {block['metric']}: mean difference with its 95% bootstrap interval, the "
             f"paired randomization p-value and Holm's adjustment over the family of "
             f"{block['family']} (level {block['level']:g}).\n",
             "| candidate | queries | served | candidate | delta | 95% CI | p | Holm p | better "
             "| worse | MDE | survives |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, c in block["candidates"].items():
        ci = c["ci95"] or [None, None]
        lines.append(f"| {name} | {c['queries']} | {_fmt(c['served'])} | {_fmt(c['candidate'])} "
                     f"| {_fmt(c['delta'])} | [{_fmt(ci[0])}, {_fmt(ci[1])}] "
                     f"| {_fmt(c['p_value'], 4)} | {_fmt(c['p_holm'], 4)} | {c['better']} "
                     f"| {c['worse']} | {_fmt(c['min_detectable_effect'])} "
                     f"| {'yes' if c['survives'] else 'no'} |")
    survivors = block["survivors"]
    lines.append("\nSurvive the correction: " + (", ".join(f"`{s}`" for s in survivors)
                                                 if survivors else "none") + ".\n")
    return "\n".join(lines) + "\n"
