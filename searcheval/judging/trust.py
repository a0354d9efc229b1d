"""Which label sources count: `human` and `import` always; a `model` judge or `implicit` (click)
grades only while their measured agreement with human grades, on the pairs both graded, is at or
above the floor (DESIGN: label sources). An unmeasured agreement (no shared pair, or too few to
measure) does not count.

The rule itself is `judging.counting.source_standing`, the one rule for model judges and clicks;
here it is applied to a click model's agreement, measured as Cohen's kappa (quadratic weights) on
the pairs it shares with people.
"""

from __future__ import annotations

from searcheval.defaults import AGREEMENT_FLOOR
from searcheval.judging.agreement import check_floor, weighted_kappa
from searcheval.judging.counting import ALWAYS_COUNTED, AUDITED, source_standing


def source_counts(source: str, agreement: float | None, floor: float = AGREEMENT_FLOOR) -> bool:
    """Whether grades of `source` count, given its measured agreement with humans (None: never
    measured): `counting.source_standing` with the agreement as measured here."""
    if source not in ALWAYS_COUNTED + AUDITED:
        raise ValueError(f"unknown label source {source!r}")
    measured = {"items": 0 if agreement is None else 1, "alpha": agreement}
    return source_standing(source, measured, minimum=1, floor=check_floor(floor)).counts


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
