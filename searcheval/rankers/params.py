"""The parameters a configuration kind takes: their types, ranges and defaults (`Param`), and the
check of one entry's parameters against them (`check_params`).

Every check raises `InputError(file=, field="<entry>.<param>")`, so a refusal names the file, the
entry and the parameter. Plain data and checks only: no kind is imported here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from searcheval.errors import InputError

REQUIRED = object()  # a Param default: the parameter must be given


@dataclass(frozen=True)
class Param:
    """One parameter: `type` is number | integer | boolean | string | names (a list of strings) |
    numbers (a list of numbers) | mapping (of `keys`, each checked as `item`, when given) | any."""

    type: str
    default: Any = REQUIRED
    help: str = ""
    minimum: float | None = None
    maximum: float | None = None
    above: float | None = None  # exclusive minimum
    nullable: bool = False
    choices: tuple | None = None
    keys: tuple[str, ...] | None = None  # mapping: the keys it may have (None: any)
    item: "Param | None" = None  # mapping: the check of each value
    length: int | None = None  # names / numbers: exactly this many
    secret_values: bool = False  # mapping of header specs: values never stored in clear


def _is_number(value: object) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def _range(spec: Param) -> str:
    parts = []
    if spec.above is not None:
        parts.append(f"> {spec.above:g}")
    if spec.minimum is not None:
        parts.append(f">= {spec.minimum:g}")
    if spec.maximum is not None:
        parts.append(f"<= {spec.maximum:g}")
    return " and ".join(parts)


def check_value(spec: Param, value: Any, where: str, file: str | None) -> Any:
    """`value` checked against `spec` (numbers made floats, integers ints); InputError naming
    `where` (`entry.param`) otherwise."""

    def refuse(expected: str) -> InputError:
        return InputError(f"expected {expected}, got {value!r}", file=file, field=where)

    if value is None:
        if spec.nullable:
            return None
        raise refuse(f"a value ({spec.type})")
    kind = spec.type
    if kind in ("number", "integer"):
        if not _is_number(value) or (kind == "integer" and not float(value).is_integer()):
            raise refuse("a finite number" if kind == "number" else "a whole number")
        number = float(value) if kind == "number" else int(value)
        if ((spec.minimum is not None and number < spec.minimum)
                or (spec.maximum is not None and number > spec.maximum)
                or (spec.above is not None and number <= spec.above)):
            raise refuse(f"a {'number' if kind == 'number' else 'whole number'} {_range(spec)}")
        return number
    if kind == "boolean":
        if not isinstance(value, bool):
            raise refuse("true or false")
        return value
    if kind == "string":
        if not isinstance(value, str):
            raise refuse("a string")
        if spec.choices is not None and value not in spec.choices:
            raise refuse(f"one of {', '.join(map(str, spec.choices))}")
        return value
    if kind in ("names", "numbers"):
        if not isinstance(value, (list, tuple)):
            raise refuse("a list")
        if spec.length is not None and len(value) != spec.length:
            raise refuse(f"a list of {spec.length}")
        item = Param("string") if kind == "names" else Param("number", minimum=spec.minimum)
        if kind == "names" and spec.choices is not None:
            item = Param("string", choices=spec.choices)
        return [check_value(item, v, f"{where}[{i}]", file) for i, v in enumerate(value)]
    if kind == "mapping":
        if not isinstance(value, Mapping):
            raise refuse("a mapping")
        out = {}
        for key, v in value.items():
            if not isinstance(key, str):
                raise InputError(f"expected string keys, got {key!r}", file=file, field=where)
            if spec.keys is not None and key not in spec.keys:
                raise InputError(f"unknown key {key!r}; expected some of {', '.join(spec.keys)}",
                                 file=file, field=f"{where}.{key}")
            out[key] = check_value(spec.item, v, f"{where}.{key}", file) if spec.item else v
        return out
    if kind == "any":
        return value
    raise AssertionError(f"unknown parameter type {kind}")  # a kind's own definition is wrong


def check_params(schema: Mapping[str, Param], params: Mapping[str, Any], entry: str,
                 file: str | None) -> dict[str, Any]:
    """Every parameter of `schema`, from `params` or its default, checked; unknown names refused."""
    if not isinstance(params, Mapping):
        raise InputError(f"expected a mapping of parameters, got {params!r}", file=file,
                         field=f"{entry}.params")
    unknown = [name for name in params if name not in schema]
    if unknown:
        raise InputError(f"unknown parameter {unknown[0]!r} for this kind; expected some of "
                         f"{', '.join(schema)}", file=file, field=f"{entry}.{unknown[0]}")
    out: dict[str, Any] = {}
    for name, spec in schema.items():
        if name in params:
            value = params[name]
        elif spec.default is REQUIRED:
            raise InputError("missing: this kind needs it", file=file, field=f"{entry}.{name}")
        else:
            value = spec.default
        if spec.type == "mapping" and spec.keys is not None and isinstance(spec.default, Mapping) \
                and isinstance(value, Mapping):
            value = {**spec.default, **value}  # a mapping of known keys: the others keep defaults
        out[name] = check_value(spec, value, f"{entry}.{name}", file)
    return out
