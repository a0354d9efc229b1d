"""The search space: which parameters of which configurations a study varies, and over what.

From the command line, `--param NAME.PARAM=SPEC` (repeatable), or from a YAML file:

    space:
      hybrid.weights.bm25: 0..2:0.1        # LOW..HIGH, STEP optional: a range
      hybrid.method: [rrf, combsum]        # a list: the choices
      bm25.k1: {low: 0.5, high: 2.0}       # a mapping works too (low, high, step / choices)

`NAME` is a configuration of the configurations file (any kind: built-ins, `http`, `python`,
`fuse`, a plug-in's), `PARAM` one of its kind's parameters, and a further `.KEY` a key of a
mapping parameter (`fuse` weights, bm25 field weights, an `http` body's knobs). A range of an
integer parameter gives whole numbers.

Everything is checked before the first trial, each refusal naming the file (or `--param`) and the
parameter: a configuration or parameter that does not exist, a range whose ends (or a choice)
the kind refuses (each end is resolved through the kind's own checks, cross-field rules
included), a step that does not fit, an empty space, and a parameter the tuned configuration does
not run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searcheval.errors import InputError

RANGE = re.compile(r"^\s*(?P<low>[-+]?[0-9.eE+-]+)\s*\.\.\s*(?P<high>[-+]?[0-9.eE+-]+)"
                   r"\s*(?::\s*(?P<step>[0-9.eE+-]+))?\s*$")
GRID_LIMIT = 10_000  # grid points a grid study may have


@dataclass(frozen=True)
class Dimension:
    """One parameter the study varies: `path` is NAME.PARAM[.KEY]; kind float | int | choice."""

    path: str
    kind: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    choices: tuple = ()

    @property
    def configuration(self) -> str:
        return self.path.split(".", 1)[0]

    def grid(self) -> list | None:
        """Every value of a discrete dimension; None for a continuous one."""
        if self.kind == "choice":
            return list(self.choices)
        if self.step is None:
            return None if self.kind == "float" else \
                list(range(int(self.low), int(self.high) + 1))
        count = int(math.floor((self.high - self.low) / self.step + 1e-9)) + 1
        values = [self.low + i * self.step for i in range(count)]
        return [int(round(v)) for v in values] if self.kind == "int" else \
            [round(v, 12) for v in values]

    def describe(self) -> str:
        if self.kind == "choice":
            return f"{self.path} in {list(self.choices)}"
        step = f" step {self.step:g}" if self.step is not None else ""
        return f"{self.path} in [{self.low:g}, {self.high:g}]{step} ({self.kind})"

    def to_dict(self) -> dict:
        return {"path": self.path, "kind": self.kind, "low": self.low, "high": self.high,
                "step": self.step, "choices": list(self.choices)}


@dataclass(frozen=True)
class SearchSpace:
    dimensions: tuple[Dimension, ...]
    source: str  # the file, or "--param"

    def grid_size(self) -> int | None:
        size = 1
        for d in self.dimensions:
            values = d.grid()
            if values is None:
                return None
            size *= len(values)
        return size

    def to_dict(self) -> list[dict]:
        return [d.to_dict() for d in self.dimensions]


def _number(text: str, path: str, source: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"expected a number, got {text!r}", file=source, field=path) from None
    if not math.isfinite(value):
        raise InputError(f"expected a finite number, got {text!r}", file=source, field=path)
    return value


def parse_spec(path: str, spec: Any, source: str) -> dict:
    """One dimension's spec (a `LOW..HIGH[:STEP]` string, a list, a mapping) as a mapping."""
    if isinstance(spec, str) and spec.strip().startswith("["):
        import yaml

        try:
            spec = yaml.safe_load(spec)
        except yaml.YAMLError:
            raise InputError(f"expected a YAML list, got {spec!r}", file=source,
                             field=path) from None
    if isinstance(spec, str):
        m = RANGE.match(spec)
        if not m:
            raise InputError(f"expected LOW..HIGH[:STEP] or [A, B, ...], got {spec!r}",
                             file=source, field=path)
        out = {"low": _number(m["low"], path, source), "high": _number(m["high"], path, source)}
        if m["step"] is not None:
            out["step"] = _number(m["step"], path, source)
        return out
    if isinstance(spec, (list, tuple)):
        return {"choices": list(spec)}
    if isinstance(spec, Mapping):
        unknown = [k for k in spec if k not in ("low", "high", "step", "choices")]
        if unknown:
            raise InputError(f"unknown key {unknown[0]!r}; expected low, high, step or choices",
                             file=source, field=f"{path}.{unknown[0]}")
        return dict(spec)
    raise InputError(f"expected LOW..HIGH[:STEP] or [A, B, ...], got {spec!r}", file=source,
                     field=path)


def parse_param(text: str) -> tuple[str, Any]:
    """`NAME.PARAM=SPEC` of `--param`: the path and the spec (a list read as YAML)."""
    import yaml

    path, sep, raw = text.partition("=")
    path = path.strip()
    if not sep or "." not in path or not all(path.split(".")) or not raw.strip():
        raise InputError(f"expected NAME.PARAM=LOW..HIGH[:STEP] or NAME.PARAM=[A, B], got "
                         f"{text!r}", field="param")
    raw = raw.strip()
    if raw.startswith("["):
        try:
            return path, yaml.safe_load(raw)
        except yaml.YAMLError:
            raise InputError(f"expected a YAML list, got {raw!r}", file="--param",
                             field=path) from None
    return path, raw


def read_space_file(path) -> dict[str, Any]:
    from pathlib import Path

    from searcheval.io.files import read_yaml_mapping

    path = Path(path)
    if not path.is_file():
        raise InputError("no such search space file", file=path, field="space")
    raw = read_yaml_mapping(path)
    unknown = [k for k in raw if k != "space"]
    if unknown or not isinstance(raw.get("space"), Mapping):
        raise InputError("expected a mapping `space:` of NAME.PARAM: SPEC", file=path,
                         field=str(unknown[0]) if unknown else "space")
    return dict(raw["space"])


def build_space(specs: Mapping[str, Any], source: str, configurations_raw: Mapping,
                configurations_file: str, overrides: Mapping[str, Any] | None = None,
                target: str | None = None) -> SearchSpace:
    """The checked space (the module docstring); `configurations_raw` is the configurations
    file as read, `overrides` the `--set` ones every trial starts from."""
    from searcheval.rankers.configs import configurations_from, flatten_overrides
    from searcheval.rankers.registry import get_kind

    if not specs:
        raise InputError("the search space is empty: give --param NAME.PARAM=LOW..HIGH or a "
                         "space file", file=source, field="space")
    entries = configurations_raw.get("configurations") or {}
    base = flatten_overrides(overrides)
    dimensions = []
    for path, spec in specs.items():
        if not isinstance(path, str) or path.count(".") < 1 or not all(path.split(".")):
            raise InputError(f"expected NAME.PARAM[.KEY], got {path!r}", file=source,
                             field=str(path))
        name, param, *rest = path.split(".")
        if name not in entries:
            raise InputError(f"no configuration {name!r} in {configurations_file} (it has "
                             f"{', '.join(entries)})", file=source, field=path)
        kind = get_kind(entries[name].get("kind"), file=configurations_file,
                        field=f"{name}.kind")
        if param not in kind.params:
            raise InputError(f"the {kind.name} kind has no parameter {param!r}; it has "
                             f"{', '.join(kind.params)}", file=source, field=path)
        spec_param = kind.params[param]
        if rest:
            if spec_param.type not in ("mapping", "any") or len(rest) > 1:
                raise InputError(f"{name}.{param} is a {spec_param.type}, not a mapping of "
                                 "values", file=source, field=path)
            if spec_param.type == "mapping" and spec_param.keys is not None \
                    and rest[0] not in spec_param.keys:
                raise InputError(f"{name}.{param} has no key {rest[0]!r}; it has "
                                 f"{', '.join(spec_param.keys)}", file=source, field=path)
            # a key of a mapping checked as its `item`; of an unchecked mapping (python
            # options) or an `any` (an http body): whatever the kind's own checks accept
            from searcheval.rankers.params import Param

            spec_param = spec_param.item or Param("any")
        parsed = parse_spec(path, spec, source)
        if "choices" in parsed:
            choices = parsed["choices"]
            if not isinstance(choices, list) or not choices:
                raise InputError("expected at least one choice", file=source, field=path)
            if any(isinstance(c, (list, dict)) for c in choices):
                raise InputError("expected plain values as choices (numbers, strings, true / "
                                 "false)", file=source, field=path)
            dim = Dimension(path, "choice", choices=tuple(dict.fromkeys(choices)))
            tried = list(dim.choices)
        else:
            if "low" not in parsed or "high" not in parsed:
                raise InputError("expected low and high", file=source, field=path)
            low, high, step = parsed["low"], parsed["high"], parsed.get("step")
            for label, v in (("low", low), ("high", high), ("step", step)):
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                      or not math.isfinite(v)):
                    raise InputError(f"expected a finite number as {label}, got {v!r}",
                                     file=source, field=path)
            if spec_param.type not in ("number", "integer", "any"):
                raise InputError(f"{name}.{param} is not a number (its type: "
                                 f"{spec_param.type}): give its choices as a list, not a range", file=source, field=path)
            if not low < high:
                raise InputError(f"expected LOW < HIGH, got {low:g}..{high:g}", file=source,
                                 field=path)
            if step is not None and not 0 < step <= high - low:
                raise InputError(f"expected a step in (0, {high - low:g}], got {step:g}",
                                 file=source, field=path)
            integer = spec_param.type == "integer"
            if integer and not all(float(v).is_integer() for v in (low, high, step or 1)):
                raise InputError(f"{name}.{param} is a whole number: expected whole LOW, HIGH "
                                 "and STEP", file=source, field=path)
            dim = Dimension(path, "int" if integer else "float", float(low), float(high),
                            None if step is None else float(step))
            tried = [int(low), int(high)] if integer else [float(low), float(high)]
        for value in tried:  # each end and choice through the kind's own checks
            try:
                configurations_from(configurations_raw, configurations_file,
                                    {**base, path: value})
            except InputError as exc:
                raise InputError(f"{value!r} is outside the valid values of {path}: "
                                 f"{exc.message}", file=source, field=path) from None
        dimensions.append(dim)
    space = SearchSpace(tuple(dimensions), source)
    if target is not None:
        check_target(space, configurations_from(configurations_raw, configurations_file, base),
                     target)
    return space


def runs_of(configuration) -> set[str]:
    """The configuration and every one it names, transitively."""
    names = {configuration.name}
    for c in configuration.components:
        names |= runs_of(c)
    return names


def check_target(space: SearchSpace, resolved, target: str) -> None:
    if target not in resolved.entries:
        raise InputError(f"no configuration {target!r} in {resolved.file} (it has "
                         f"{', '.join(resolved.entries)})", field="target")
    ran = runs_of(resolved[target])
    for d in space.dimensions:
        if d.configuration not in ran:
            raise InputError(f"the search changes {d.configuration!r}, which {target!r} does "
                             f"not run (it runs {', '.join(sorted(ran))})", file=space.source,
                             field=d.path)


def default_target(space: SearchSpace, resolved) -> str:
    """With no target named: the one configuration that runs every dimension's configuration
    and is named by none of the others that do (the outermost)."""
    wanted = {d.configuration for d in space.dimensions}
    holders = [n for n, c in resolved.entries.items() if wanted <= runs_of(c)]
    outer = [n for n in holders if not any(n in runs_of(resolved[o]) - {o} for o in holders)]
    if len(outer) != 1:
        raise InputError(f"name the configuration to tune with --target (candidates: "
                         f"{', '.join(outer or holders) or 'none runs every parameter'})",
                         field="target")
    return outer[0]


def suggest(trial, dimension: Dimension):
    """Optuna's suggestion for one dimension."""
    if dimension.kind == "choice":
        return trial.suggest_categorical(dimension.path, list(dimension.choices))
    if dimension.kind == "int":
        return trial.suggest_int(dimension.path, int(dimension.low), int(dimension.high),
                                 step=int(dimension.step or 1))
    return trial.suggest_float(dimension.path, dimension.low, dimension.high,
                               step=dimension.step)


def distributions(space: SearchSpace) -> dict:
    import optuna

    out = {}
    for d in space.dimensions:
        if d.kind == "choice":
            out[d.path] = optuna.distributions.CategoricalDistribution(list(d.choices))
        elif d.kind == "int":
            out[d.path] = optuna.distributions.IntDistribution(int(d.low), int(d.high),
                                                               step=int(d.step or 1))
        else:
            out[d.path] = optuna.distributions.FloatDistribution(d.low, d.high, step=d.step)
    return out


def grid_space(space: SearchSpace) -> dict[str, Sequence]:
    """Optuna GridSampler's search space; refused for a continuous dimension or too many
    points."""
    out = {}
    for d in space.dimensions:
        values = d.grid()
        if values is None:
            raise InputError(f"a grid needs a step or choices for every parameter; {d.path} is "
                             "continuous (give LOW..HIGH:STEP)", file=space.source, field=d.path)
        out[d.path] = values
    size = space.grid_size()
    if size > GRID_LIMIT:
        raise InputError(f"the grid has {size} points, more than {GRID_LIMIT}: use the TPE "
                         "sampler or coarser steps", file=space.source, field="sampler")
    return out
