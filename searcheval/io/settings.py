"""A dataset's own conventions: `searcheval.yaml` beside its files (or the `settings:` block of a
table mapping), e.g. for TREC-DL

    gain: linear            # exponential (2^g - 1, the default) | linear (g, trec_eval's)
    relevance_level: 2      # lowest grade that counts as relevant for MRR, P, R, MAP
    no_relevant: zero       # nDCG and Recall of a query with no relevant judgment: one | zero | skip
    grade_scale: [0, 3]     # the grades a judgment may have
    coverage_floor: 0.5     # judged share of each configuration's top k below which a run alerts
    grade_map: {Exact: 3, Partial: 1, Irrelevant: 0}   # text labels -> grades (WANDS, mappings)
    name: trec-dl-2019      # the dataset's identity in Postgres (default: its content fingerprint)
    judgment_sources: dataset   # which judgments count: dataset (its own qrels only), all, or
                                # a list of sources counted beside them: [human, import, model]

Every key is optional; a run parameter (CLI flag) overrides it, and what neither sets comes from
`searcheval.defaults`. Unknown keys and wrong values are refused with the file and the key.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from searcheval.errors import InputError
from searcheval.io.files import read_yaml_mapping
from searcheval.types import DatasetSettings

SETTINGS_FILE = "searcheval.yaml"
KEYS = ("gain", "relevance_level", "no_relevant", "grade_scale", "coverage_floor", "grade_map",
        "name", "judgment_sources")
GAINS = ("exponential", "linear")
POLICIES = ("one", "zero", "skip")


def settings_from(raw: Any, *, file: str | Path | None, prefix: str = "") -> DatasetSettings:
    """DatasetSettings from a mapping of the keys above (`prefix` names where it sits in `file`)."""
    if raw is None:
        return DatasetSettings(source=str(file) if file is not None else None)
    if not isinstance(raw, dict):
        raise InputError(f"expected a mapping of {', '.join(KEYS)}", file=file,
                         field=prefix.rstrip(".") or None)
    unknown = [k for k in raw if k not in KEYS]
    if unknown:
        raise InputError(f"unknown setting {unknown[0]!r}; expected one of {', '.join(KEYS)}",
                         file=file, field=f"{prefix}{unknown[0]}")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if value is not None:
            values[key] = check_setting(key, value, file=file, field=f"{prefix}{key}")
    return DatasetSettings(**values, source=str(file) if file is not None else None)


def check_setting(key: str, value: Any, *, file: str | Path | None = None,
                  field: str | None = None) -> Any:
    """One setting's value, checked (and normalised: grade_scale a pair, grade_map a tuple of
    (label, grade) pairs); also used for the run parameters that override the settings."""
    field = field or key
    if key == "gain":
        if value not in GAINS:
            raise InputError(f"expected exponential or linear, got {value!r}", file=file,
                             field=field)
        return value
    if key == "no_relevant":
        if value not in POLICIES:
            raise InputError(f"expected one, zero or skip, got {value!r}", file=file, field=field)
        return value
    if key == "relevance_level":
        if not _whole(value) or value < 1:
            raise InputError(f"expected a whole number >= 1, got {value!r}", file=file,
                             field=field)
        return int(value)
    if key == "coverage_floor":
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or not 0 <= value <= 1:
            raise InputError(f"expected a share between 0 and 1, got {value!r}", file=file,
                             field=field)
        return float(value)
    if key == "grade_scale":
        if not isinstance(value, (list, tuple)) or len(value) != 2 \
                or not all(_whole(v) for v in value) or not 0 <= value[0] < value[1]:
            raise InputError(f"expected [lowest, highest] whole grades, 0 <= lowest < highest, "
                             f"got {value!r}", file=file, field=field)
        return (int(value[0]), int(value[1]))
    if key == "grade_map":
        if not isinstance(value, dict) or not value:
            raise InputError("expected a mapping of labels to whole grades, e.g. "
                             "{Exact: 3, Partial: 1, Irrelevant: 0}", file=file, field=field)
        pairs = []
        for label, grade in value.items():
            if not _whole(grade) or grade < 0:
                raise InputError(f"expected a whole grade >= 0 for label {label!r}, got "
                                 f"{grade!r}", file=file, field=f"{field}.{label}")
            pairs.append((str(label), int(grade)))
        return tuple(pairs)
    if key == "name":
        if not isinstance(value, str) or not value.strip() or len(value) > 200 \
                or any(ord(c) < 32 or c == "\x7f" for c in value):
            raise InputError(f"expected a dataset name of 1 to 200 printable characters, got "
                             f"{value!r}"[:300], file=file, field=field)
        return value.strip()
    if key == "judgment_sources":
        return check_judgment_sources(value, file=file, field=field)
    raise InputError(f"unknown setting {key!r}; expected one of {', '.join(KEYS)}", file=file,
                     field=field)


def check_judgment_sources(value: Any, *, file: str | Path | None = None,
                           field: str = "judgment_sources") -> str | tuple[str, ...]:
    """`dataset` (the dataset's own judgments only: reproduce a public benchmark exactly), `all`
    (its own and every stored grade, by the judgment rule), or the sources counted beside its
    own: a list, or a comma-separated string, of human, import, model."""
    from searcheval.defaults import JUDGMENT_SOURCES

    if isinstance(value, str) and value.strip() in ("dataset", "all"):
        return value.strip()
    items = value.split(",") if isinstance(value, str) else value
    if isinstance(items, (list, tuple)) and items \
            and all(isinstance(v, str) and v.strip() in JUDGMENT_SOURCES for v in items):
        return tuple(sorted({v.strip() for v in items}))
    raise InputError(f"expected dataset, all, or a list of sources of {', '.join(JUDGMENT_SOURCES)}"
                     f"; got {value!r}"[:300], file=file, field=field)


def _whole(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int)


def load_settings(directory: str | Path) -> DatasetSettings:
    """The settings of a dataset folder: its `searcheval.yaml`, or none declared."""
    path = Path(directory) / SETTINGS_FILE
    if not path.is_file():
        return DatasetSettings()
    return settings_from(read_yaml_mapping(path), file=path)


def parse_grade_map(text: str, *, field: str = "grade_map") -> tuple[tuple[str, int], ...]:
    """`Exact=3,Partial=1,Irrelevant=0` (a CLI flag) as (label, grade) pairs."""
    pairs: dict[str, Any] = {}
    for part in (p for p in text.split(",") if p.strip()):
        label, sep, grade = part.partition("=")
        if not sep or not label.strip():
            raise InputError(f"expected LABEL=GRADE pairs separated by commas, got {part!r}",
                             field=field)
        try:
            pairs[label.strip()] = int(grade)
        except ValueError:
            raise InputError(f"expected a whole grade for label {label.strip()!r}, got "
                             f"{grade.strip()!r}", field=field) from None
    return check_setting("grade_map", pairs, field=field)
