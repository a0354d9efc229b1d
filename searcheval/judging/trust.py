"""Which label sources count: `human` and `import` always; a `model` judge or `implicit` (click)
grades only while their measured agreement with human grades, on the pairs both graded, is at or
above the floor (DESIGN: label sources). An unmeasured agreement (no shared pair, or too few to
measure) does not count.

This is the production issue's (25) copy of the rule for `implicit`; the judges issue (24)
writes the same rule for model judges, and the two are unified at merge.
"""

from __future__ import annotations

from searcheval.defaults import AGREEMENT_FLOOR
from searcheval.judging.agreement import check_floor, weighted_kappa

ALWAYS_COUNTED = ("human", "import")
MEASURED = ("model", "implicit")


def source_counts(source: str, agreement: float | None, floor: float = AGREEMENT_FLOOR) -> bool:
    """Whether grades of `source` count, given its measured agreement with humans."""
    if source in ALWAYS_COUNTED:
        return True
    if source not in MEASURED:
        raise ValueError(f"unknown label source {source!r}")
    return agreement is not None and agreement >= check_floor(floor)


def agreement_with_humans(grades: dict[tuple[str, str], int],
                          human: dict[tuple[str, str], int], labels: list[int],
                          floor: float = AGREEMENT_FLOOR, source: str = "implicit") -> dict:
    """Cohen's kappa (quadratic weights) of `grades` against the human grades on the pairs both
    have, and whether the source counts by `source_counts`."""
    shared = sorted(set(grades) & set(human))
    kappa = weighted_kappa([grades[p] for p in shared], [human[p] for p in shared], labels) \
        if shared else None
    return {"source": source, "pairs": len(shared), "kappa": kappa, "floor": floor,
            "counts": source_counts(source, kappa, floor)}
