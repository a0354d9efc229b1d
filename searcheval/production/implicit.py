"""Implicit judgments: grades from clicks through a click model (`searcheval judgments implicit`).

The traces' impressions (`clicks.impressions`) are fitted with PBM or COEC; each (query,
document) pair shown at least `min_impressions` times gets a grade on the dataset's scale by the
thresholds (`grade = lo + how many thresholds the estimate reaches`). Every row is source
`implicit`, judge `implicit:<model>`, dated at the end of the traces' window, and carries its
provenance: the model, its parameters (thresholds, minimum impressions, maximum rank, EM's
iterations), the window, the pair's impressions, clicks and estimate. Queries without a query_id
get `clicks.text_query_id` of their text (the ids `searcheval queries sample` writes).

Implicit grades count only while their agreement with human grades holds (`judging.trust`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np

from searcheval.judging.judgments import JudgmentRow
from searcheval.production import clicks


@dataclass
class ImplicitResult:
    rows: list[JudgmentRow]
    model: clicks.ClickModel
    summary: dict


def _window(imp: clicks.Impressions, since: datetime | None, until: datetime | None) -> dict:
    return {"since": since.isoformat() if since else imp.window.get("first"),
            "until": until.isoformat() if until else imp.window.get("last")}


def implicit_judgments(table, *, model: str = "pbm",
                       min_impressions: int = clicks.DEFAULT_MIN_IMPRESSIONS,
                       thresholds=None, grade_scale: tuple[int, int] = (0, 3),
                       max_rank: int = clicks.DEFAULT_MAX_RANK, since: datetime | None = None,
                       until: datetime | None = None) -> ImplicitResult:
    """Fit `model` on the table's impressions and grade the pairs with enough of them."""
    from searcheval.errors import InputError

    if isinstance(min_impressions, bool) or not isinstance(min_impressions, int) \
            or min_impressions < 1:
        raise InputError(f"expected a whole number >= 1, got {min_impressions!r}",
                         field="min_impressions")
    cuts = clicks.check_thresholds(thresholds, grade_scale, model)
    imp = clicks.impressions(table, max_rank=max_rank)
    fitted = clicks.fit(imp, model)
    shown = imp.pair_impressions()
    clicked = imp.pair_clicks()
    graded = np.flatnonzero(shown >= min_impressions)
    grades = clicks.grades(fitted.estimate[graded], cuts, grade_scale[0])
    window = _window(imp, since, until)
    judged_at = datetime.fromisoformat(window["until"]) if window["until"] else \
        datetime.now(timezone.utc)
    parameters = {"thresholds": list(cuts), "min_impressions": min_impressions,
                  "max_rank": max_rank, "grade_scale": list(grade_scale), **fitted.parameters}
    judge = f"implicit:{model}"
    rows = []
    for p, grade in zip(graded.tolist(), grades.tolist()):
        rows.append(JudgmentRow(
            query_id=imp.queries[imp.pair_query[p]], doc_id=imp.docs[imp.pair_doc[p]],
            grade=int(grade), judge=judge, judged_at=judged_at, source="implicit",
            origin=table.source,
            provenance={"model": model, "parameters": parameters, "window": window,
                        "impressions": int(shown[p]), "clicks": int(clicked[p]),
                        "estimate": round(float(fitted.estimate[p]), 6)}))
    summary = {
        "model": model, "traces": imp.traces, "pairs": imp.pairs, "graded": len(rows),
        "below_min_impressions": imp.pairs - len(rows), "parameters": parameters,
        "window": window, "source": table.source, "curve": fitted.curve(),
        "grades": {str(g): int((grades == g).sum())
                   for g in range(grade_scale[0], grade_scale[1] + 1)},
    }
    return ImplicitResult(rows=rows, model=fitted, summary=summary)


def curve_text(summary: dict) -> str:
    """The position bias curve as one line per rank."""
    key = "examination" if summary["model"] == "pbm" else "ctr"
    head = "examination relative to rank 1" if key == "examination" else "click-through rate"
    lines = [f"position bias ({summary['model']}: {head})"]
    for point in summary["curve"]:
        bar = "#" * int(round(40 * min(point[key], 1.0)))
        lines.append(f"  rank {point['rank']:>2}  {point[key]:.3f}  {bar}")
    return "\n".join(lines)
