"""Which label sources count in the metrics: the one rule every source that is not a person
follows (`model` grades from a judge, `implicit` grades from clicks).

`human` and `import` grades always count. A `model` or `implicit` source counts only while its
measured agreement with humans holds: at least `minimum` audited pairs, and Krippendorff's alpha
(ordinal) defined and at or above `floor`. Otherwise its grades are reported, not counted, and
`Standing.reason` says why, in words the report prints as they are.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from searcheval.defaults import AGREEMENT_FLOOR

ALWAYS_COUNTED = ("human", "import")
AUDITED = ("model", "implicit")


@dataclass(frozen=True)
class Standing:
    """Whether a source's grades count, and why (or why not)."""

    counts: bool
    reason: str

    def to_dict(self) -> dict:
        return {"counts": self.counts, "reason": self.reason}


def source_standing(source: str, agreement: Mapping | None, *, minimum: int = 30,
                    floor: float = AGREEMENT_FLOOR) -> Standing:
    """Whether grades of `source` count, given its measured agreement with humans
    (`{"items": audited pairs, "alpha": Krippendorff's alpha or None}`; None: never measured)."""
    if source in ALWAYS_COUNTED:
        return Standing(True, f"{source} grades always count")
    if source not in AUDITED:
        return Standing(False, f"unknown source {source!r}: not counted")
    items = int((agreement or {}).get("items") or 0)
    alpha = (agreement or {}).get("alpha")
    if items < minimum:
        return Standing(False, f"audit too small: {items} of the {minimum} audited pair(s) it "
                               "needs")
    if alpha is None:
        return Standing(False, f"agreement undefined over {items} audited pair(s) (every grade "
                               "the same)")
    if alpha < floor:
        return Standing(False, f"agreement below the floor: alpha {alpha:.3f} < {floor:.3f} over "
                               f"{items} audited pair(s)")
    return Standing(True, f"audit holds: alpha {alpha:.3f} >= {floor:.3f} over {items} audited "
                          "pair(s)")
