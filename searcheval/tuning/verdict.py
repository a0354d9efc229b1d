"""The verdict of a study: the chosen configuration, once, on the held-out queries, against the
served configuration (never the best tuning score); the configurations entry to commit; the
report.

The comparison is `evaluation.candidates.compare_pair` on the held-out part: the mean difference
with its bootstrap interval, the paired randomization p-value, the queries better and worse, the
minimum detectable effect. The verdict reads:

- `better`: the difference is positive and p <= level;
- `worse`: negative and p <= level;
- `no detectable difference`: otherwise (with the minimum detectable effect: a real difference
  smaller than it is likely to be missed by this many held-out queries).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from searcheval.defaults import SIGNIFICANCE_LEVEL
from searcheval.evaluation.candidates import compare_pair
from searcheval.metrics.engine import Settings
from searcheval.metrics.scoring import score_run
from searcheval.types import Query


def held_out_verdict(runner, chosen, served, queries: Sequence[Query],
                     qrels: Mapping, metric: str, metrics: Sequence[str], settings: Settings,
                     level: float = SIGNIFICANCE_LEVEL, seed: int = 0) -> dict:
    """`runner` is a TrialRunner over the held-out queries (`queries`)."""
    names = tuple(dict.fromkeys([metric, *metrics]))
    tuned = score_run(runner.run(chosen), qrels, list(queries), names, settings, seed=seed)
    base = score_run(runner.run(served), qrels, list(queries), names, settings, seed=seed)
    pair = compare_pair(tuned, base, metric, level=level, seed=seed)
    p, delta = pair["p_value"], pair["delta"]
    if p is not None and delta is not None and p <= level and delta > 0:
        outcome = "better"
    elif p is not None and delta is not None and p <= level and delta < 0:
        outcome = "worse"
    else:
        outcome = "no detectable difference"
    means = {m: {"served": base.means.get(m), "chosen": tuned.means.get(m)} for m in names}
    return {**pair, "outcome": outcome, "metric": metric, "level": level,
            "served": served.name, "chosen_sha256": chosen.sha256,
            "served_sha256": served.sha256, "queries": len(queries), "means": means}


def top_family(runner, configurations: Sequence, served, queries: Sequence[Query],
               qrels: Mapping, metric: str, settings: Settings,
               level: float = SIGNIFICANCE_LEVEL, seed: int = 0) -> dict:
    """The tuning's top configurations (`[(trial number, configuration)]`), each against the
    served one on the held-out queries, Holm's correction over them (as `run --candidate
    a,b,c`): what else might have been chosen, and whether it holds up. Not the verdict."""
    from searcheval.evaluation.candidates import holm

    base = score_run(runner.run(served), qrels, list(queries), (metric,), settings, seed=seed)
    rows = []
    for number, c in configurations:
        scores = score_run(runner.run(c), qrels, list(queries), (metric,), settings, seed=seed)
        pair = compare_pair(scores, base, metric, level=level, seed=seed)
        rows.append({"trial": number, "sha256": c.sha256, "delta": pair["delta"],
                     "ci95": pair["ci95"], "p_value": pair["p_value"],
                     "better": pair["better"], "worse": pair["worse"]})
    tested = [r for r in rows if r["p_value"] is not None]
    for r, adjusted in zip(tested, holm([r["p_value"] for r in tested], level)):
        r["p_holm"] = adjusted
        r["survives"] = adjusted <= level and (r["delta"] or 0) > 0
    for r in rows:
        r.setdefault("p_holm", None)
        r.setdefault("survives", False)
    return {"metric": metric, "level": level, "correction": "holm", "family": len(rows),
            "trials": rows}


def verdict_line(verdict: dict) -> str:
    ci = verdict.get("ci95") or [None, None]

    def f(v, d=3):
        return "-" if v is None else f"{v:+.{d}f}" if d == 3 else f"{v:.{d}f}"

    mde = verdict.get("min_detectable_effect")
    return (f"held-out verdict: {verdict['outcome'].upper()}: {verdict['metric']} "
            f"{f(verdict['delta'])} [{f(ci[0])}, {f(ci[1])}] against served "
            f"{verdict['served']} on {verdict['queries']} held-out queries, paired "
            f"randomization p = {f(verdict['p_value'], 4)}, {verdict['better']} better, "
            f"{verdict['worse']} worse"
            + (f", minimum detectable effect {mde:.3f}" if mde is not None else ""))


def proposed_entries(resolved_base, resolved_chosen, target: str, name: str) -> dict:
    """The configurations entries to commit: the tuned target under `name`, and each
    configuration it runs whose parameters changed under `<its name>_tuned`, the references
    rewritten. Entries whose parameters did not change keep their names."""
    from searcheval.rankers.registry import get_kind

    renamed: dict[str, str] = {}
    order: list[str] = []

    def visit(c) -> None:
        for comp in c.components:
            visit(comp)
        if c.name in order:
            return
        changed = c.sha256 != resolved_base[c.name].sha256
        if c.name == target:
            renamed[c.name] = name
        elif changed:
            renamed[c.name] = f"{c.name}_tuned"
        order.append(c.name)

    visit(resolved_chosen[target])
    out = {}
    for original in order:
        if original not in renamed:
            continue
        c = resolved_chosen[original]
        kind = get_kind(c.kind)
        params = json.loads(json.dumps(c.params))
        for param in kind.references_params:
            value = params.get(param)
            if isinstance(value, list):
                params[param] = [renamed.get(v, v) for v in value]
                if param == "runs" and isinstance(params.get("weights"), dict):
                    params["weights"] = {renamed.get(k, k): v
                                         for k, v in params["weights"].items()}
            elif value is not None:
                params[param] = renamed.get(value, value)
        out[renamed[original]] = {"kind": c.kind,
                                  "description": f"{original} tuned by searcheval tune",
                                  "params": params}
    return out


def entries_yaml(entries: dict) -> str:
    import yaml

    return yaml.safe_dump({"configurations": entries}, sort_keys=False)


def _f(v, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def report_markdown(study: dict, trials: list, chosen, verdict: dict, entries_text: str,
                    warnings: Sequence[str], pool: str | None, shown: int = 15,
                    top: dict | None = None, pool_id: str | None = None,
                    pool_parts: tuple[int, int] = (0, 0)) -> str:
    """report.md of a study."""
    lines = [f"# searcheval tune: {study['target']}\n",
             f"Study `{study['study_id'][:12]}`: {len(trials)} trials, sampler "
             f"{study['definition']['sampler']}, seed {study['definition']['seed']}, objective "
             f"{study['metric']} (maximised) on the tuning part only.\n",
             f"Split before the first trial (stratified by category, seed "
             f"{study['split']['seed']}): {len(study['split']['tuning'])} tuning queries, "
             f"{len(study['split']['held_out'])} held-out queries.\n",
             "Search space:\n"]
    lines += [f"- `{d['path']}`: " + (f"{d['choices']}" if d["kind"] == "choice" else
                                      f"{d['low']:g}..{d['high']:g}"
                                      + (f" step {d['step']:g}" if d["step"] else "")
                                      + f" ({d['kind']})")
              for d in study["definition"]["space"]]
    for w in warnings:
        lines.append(f"\n**Warning**: {w}")
    lines += ["\n## Verdict (held-out, the only one that counts)\n", verdict_line(verdict) + "\n",
              f"| metric | served `{verdict['served']}` | chosen |", "|---|---|---|"]
    for m, v in verdict["means"].items():
        lines.append(f"| {m} | {_f(v['served'])} | {_f(v['chosen'])} |")
    for label in ("better", "worse"):
        qs = verdict.get(f"{label}_queries") or []
        lines.append(f"\n{verdict[label]} held-out queries {label}"
                     + (f": {', '.join(qs)}" if qs else "."))
    lines += grades_lines(verdict.get("grades") or {}, verdict.get("judge"))
    if top and top["trials"]:
        lines += [f"\nThe tuning's top {top['family']} on the held-out queries against the "
                  "served one, Holm's correction over them (context, not the verdict):\n",
                  "| trial | delta | 95% CI | p | Holm p | better | worse | survives |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in top["trials"]:
            ci = r["ci95"] or [None, None]
            lines.append(f"| {r['trial']} | {_f(r['delta'])} | [{_f(ci[0])}, {_f(ci[1])}] "
                         f"| {_f(r['p_value'])} | {_f(r['p_holm'])} | {r['better']} "
                         f"| {r['worse']} | {'yes' if r['survives'] else 'no'} |")
    lines += ["\n## Configurations entry to commit\n", "```yaml", entries_text.rstrip(), "```\n",
              f"Chosen trial: #{chosen.number} (sha256 `{chosen.sha256[:12]}`), tuning "
              f"{study['metric']} {_f(chosen.value)}; the tuning score is not the verdict.\n",
              "## Trials (best first, tuning part)\n",
              f"| trial | {study['metric']} | bounds (unjudged irrelevant / relevant) | judged@10 "
              "| flagged | sha256 | overrides |", "|---|---|---|---|---|---|---|"]
    ranked = sorted(trials, key=lambda t: (-(t.value if t.value is not None else -1e9),
                                           t.number))
    for t in ranked[:shown]:
        lo, hi = (t.bounds.get(study["metric"]) or [None, None])
        lines.append(f"| {t.number} | {_f(t.value)} | [{_f(lo)}, {_f(hi)}] | {_f(t.judged, 3)} "
                     f"| {'yes' if t.flagged else ''} | `{t.sha256[:12]}` "
                     f"| {json.dumps(t.overrides, sort_keys=True)} |")
    flagged = sum(1 for t in trials if t.flagged)
    lines.append(f"\n{flagged} of {len(trials)} trials flagged: more than "
                 f"{study['definition']['unjudged_threshold']:.0%} of their top 10 unjudged"
                 + (f"; the unjudged top 10 of the flagged ones among the top "
                    f"{(top or {}).get('family', 0)} ({pool_parts[0]} pair(s), tuning part) and "
                    f"of the chosen and served configurations ({pool_parts[1]} more, held-out "
                    f"part) is in `{pool}` and kept as pool `{pool_id}` for the judgment loop "
                    f"(`searcheval rate --pool {pool_id}`, `searcheval judgments label --pool "
                    f"{pool_id}`)." if pool else "."))
    return "\n".join(lines) + "\n"


def grades_lines(grades: dict, judge: dict | None) -> list[str]:
    """The report's account of the grades the trials and the verdict were scored with, and of
    the model judge that labelled the pool before the verdict."""
    if not grades:
        return []
    lines = [f"\nGrades: `{grades['rule']}` over {grades['pairs']} pair(s), counting "
             f"{grades['counted_text']} ({grades['counted_from']})."]
    for name, j in (grades.get("model_judges") or {}).items():
        lines.append(f"- model judge `{name}`: {'counts' if j['counts'] else 'NOT COUNTED'}: "
                     f"{j['reason']}; {j['pairs_counted']} of its pair(s) counted")
    if judge:
        state = "counted in this verdict" if judge["counts"] else "NOT COUNTED in this verdict"
        lines += [f"\n### Judge `{judge['judge']}` before the verdict\n",
                  f"It graded {judge['labelled']} pair(s) of the pool ({judge['failed']} failed"
                  + (f", at most {judge['limit']} asked" if judge.get("limit") is not None
                     else "") + f", cost {judge['cost']:.4f}); its grades are **{state}**: "
                  f"{judge['reason']}.\n",
                  "| part | pool | graded | from cache | failed | already graded |",
                  "|---|---|---|---|---|---|"]
        for r in judge["runs"]:
            lines.append(f"| {r['part']} | {r['pool']} | {r['graded']} | {r['from_cache']} | "
                         f"{r['failed']} | {r['done_before']} |")
        changed = [(n, b, judge["judged_after"].get(n)) for n, b in judge["judged_before"].items()
                   if int(n) in judge["flagged_before"]]
        if changed:
            lines.append("\njudged@10 of the trials flagged before the judge: "
                         + ", ".join(f"#{n} {_f(b, 3)} -> {_f(a, 3)}" for n, b, a in changed))
    return lines
