"""Which conventions a run's numbers use, and where each came from.

A convention is set by a run parameter (a CLI flag or a flow parameter), else by the dataset
(`searcheval.yaml`, or a mapping's `settings:`), else it is the library's default
(`searcheval.defaults`). The grade scale and grade map are the loader's (`Collection.provenance`).
The report and metrics.json print them next to the numbers, and an alert on the judged-share floor
says what the floor was and where it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from searcheval import defaults
from searcheval.errors import InputError
from searcheval.io.settings import check_setting
from searcheval.metrics.engine import Settings
from searcheval.types import Collection

SCORING = ("gain", "relevance_level", "no_relevant", "coverage_floor")
DEFAULTS = {"gain": defaults.GAIN, "relevance_level": defaults.RELEVANCE_LEVEL,
            "no_relevant": defaults.NO_RELEVANT, "coverage_floor": defaults.COVERAGE_FLOOR}
PARAMETER = "run parameter"
DEFAULT = "default"


@dataclass(frozen=True)
class Conventions:
    gain: str = defaults.GAIN
    relevance_level: int = defaults.RELEVANCE_LEVEL
    no_relevant: str = defaults.NO_RELEVANT
    coverage_floor: float = defaults.COVERAGE_FLOOR
    grade_scale: tuple[int, int] = (0, defaults.MAX_GRADE)
    grade_map: tuple[tuple[str, int], ...] | None = None
    coverage_k: int = defaults.COVERAGE_K
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def settings(self) -> Settings:
        """The metric engine's settings."""
        return Settings(gain=self.gain, relevance_level=self.relevance_level,
                        no_relevant=self.no_relevant)

    def source(self, name: str) -> str:
        return self.sources.get(name, DEFAULT)

    def to_dict(self) -> dict:
        """The `conventions` block of metrics.json: each value, and `sources` saying where each
        came from (run parameter, dataset setting in FILE, default, inferred ...)."""
        return {
            "gain": self.gain,
            "gain_formula": "2^grade - 1" if self.gain == "exponential" else "grade",
            "relevance_level": self.relevance_level,
            "no_relevant": self.no_relevant,
            "grade_scale": list(self.grade_scale),
            "grade_map": dict(self.grade_map) if self.grade_map is not None else None,
            "coverage_floor": self.coverage_floor,
            "coverage_k": self.coverage_k,
            "sources": {name: self.source(name) if name != "grade_map" or self.grade_map
                        else "none: the grades are whole numbers"
                        for name in ("gain", "relevance_level", "no_relevant", "grade_scale",
                                     "grade_map", "coverage_floor")},
        }

    def lines(self) -> list[str]:
        """One line per convention, for report.md."""
        lo, hi = self.grade_scale
        gain = "2^g - 1 (exponential)" if self.gain == "exponential" else "g (linear, trec_eval's)"
        out = [f"gain of a grade g in nDCG: {gain} ({self.source('gain')})",
               f"relevant for MRR, Precision, Recall, MAP: grade >= {self.relevance_level} "
               f"({self.source('relevance_level')})",
               f"nDCG and Recall of a query with no relevant judgment: `{self.no_relevant}` "
               f"({self.source('no_relevant')})",
               f"grade scale: {lo}..{hi} ({self.source('grade_scale')})"]
        if self.grade_map is not None:
            pairs = ", ".join(f"{label}={grade}" for label, grade in self.grade_map)
            out.append(f"grade map: {pairs} ({self.source('grade_map')})")
        out.append(f"judged-share floor of the top {self.coverage_k}: {self.coverage_floor:g} "
                   f"({self.source('coverage_floor')})")
        return out


def resolve_conventions(collection: Collection, *, gain: str | None = None,
                        relevance_level: int | None = None, no_relevant: str | None = None,
                        coverage_floor: float | None = None,
                        coverage_k: int = defaults.COVERAGE_K,
                        sources: dict[str, str] | None = None) -> Conventions:
    """Each convention from the run parameters (None: not given), else the collection's declared
    settings, else the default; refused when a value is invalid, or when the relevance level lies
    above the grade scale (no judgment could ever be relevant). `sources` names where a given
    value came from when it is not the command line (a project's dataset entry)."""
    given = {"gain": gain, "relevance_level": relevance_level, "no_relevant": no_relevant,
             "coverage_floor": coverage_floor}
    sources_given = sources
    declared = collection.settings.declared()
    where = f"dataset setting in {collection.settings.source}"
    values: dict[str, object] = {}
    sources: dict[str, str] = {}
    for name in SCORING:
        if given[name] is not None:
            values[name] = check_setting(name, given[name])
            sources[name] = (sources_given or {}).get(name, f"{PARAMETER} {name}")
        elif name in declared:
            values[name] = declared[name]
            sources[name] = where
        else:
            values[name] = DEFAULTS[name]
            sources[name] = DEFAULT
    sources["grade_scale"] = (sources_given or {}).get("grade_scale") \
        or collection.provenance.get("grade_scale", DEFAULT)
    if collection.grade_map is not None:
        sources["grade_map"] = collection.provenance.get("grade_map", DEFAULT)
    lo, hi = collection.grade_scale
    if values["relevance_level"] > hi:
        raise InputError(f"the relevance level {values['relevance_level']} "
                         f"({sources['relevance_level']}) is above the top of the grade scale "
                         f"{lo}..{hi}: no judgment could be relevant", field="relevance_level")
    return Conventions(grade_scale=(lo, hi), grade_map=collection.grade_map, coverage_k=coverage_k,
                       sources=sources, **values)

