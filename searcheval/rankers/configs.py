"""Configurations as data: `configurations.yaml` loaded, overridden, checked and hashed.

    configurations:
      bm25:
        kind: bm25
        description: BM25F over name, description and tags
        params: {k1: 1.2, b: 0.75, ...}
      fused:
        kind: fused
        served: true            # exactly one entry: what production serves, the one the gate guards
        params: {lexical: bm25, semantic: dense, rrf_k: 60, ...}
    run: [bm25, dense, fused]   # optional: what runs when no names are given (default: every entry)

An entry has a `kind` (a name of `rankers.registry`), its `params` (each checked against the
kind's parameters: unknown names, wrong types and values out of range are refused, the defaults
filled in), an optional `description`, `served`, and what a run may tolerate of it:
`max_failed_queries` (a count) and `max_failed_share` (a share of the queries), both 0 by default,
`fail_fast_after` (a backend that failed this many queries in a row before answering one is
down: its other queries are not sent, and the run ends incomplete; default 3, 0 never stops),
`prices` (cost per 1,000 requests, per CPU-second, per embedded document) and `documents` (a
lookup of the engine's own documents: `rankers.documents`).

Overrides (`--set fused.rrf_k=20`, the flow's `overrides` mapping) change parameters before the
check, so they are refused the same way. Each configuration's `sha256` is taken over its kind and
its resolved parameters (and the hashes of the configurations it names), so an overridden
configuration is a different configuration with a hash of its own.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searcheval.errors import InputError
from searcheval.rankers.params import Param, check_value

DEFAULT_FILE = "configurations.yaml"
ENTRY_KEYS = ("kind", "description", "served", "params", "max_failed_queries",
              "max_failed_share", "prices", "documents", "fail_fast_after")
#: a backend that failed this many queries in a row and answered none is down: the rest of its
#: queries are not sent (`fail_fast_after`; 0 sends every query whatever happens)
FAIL_FAST_AFTER = 3
PRICE_KEYS = ("per_1000_requests", "per_cpu_second", "per_embedded_document")


@dataclass(frozen=True)
class Configuration:
    """One resolved configuration: every parameter after overrides and defaults."""

    name: str
    kind: str
    params: dict[str, Any]
    description: str = ""
    served: bool = False
    sha256: str = ""
    max_failed_queries: int = 0
    max_failed_share: float = 0.0
    prices: dict[str, float] = field(default_factory=dict)
    fail_fast_after: int = FAIL_FAST_AFTER  # operational, like max_failed_*: not in the hash
    overridden: dict[str, Any] = field(default_factory=dict)  # param path -> value, as given
    components: tuple["Configuration", ...] = ()  # the configurations it names (fused)
    documents: dict | None = None  # its document lookup (rankers.documents), if any

    def allowed_failures(self, queries: int) -> int:
        """How many failed queries of `queries` this configuration tolerates."""
        return max(self.max_failed_queries, int(self.max_failed_share * queries))

    def component(self, name: str) -> "Configuration":
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def resolved(self) -> dict:
        """What ran, for metrics.json, the report, artifacts and the database. Secrets are never
        here: a header's value is named by its source (`{env: NAME}`, `{secret: BLOCK}`)."""
        return {"kind": self.kind, "params": self.params, "description": self.description,
                "served": self.served, "sha256": self.sha256,
                "overridden": self.overridden,
                "max_failed_queries": self.max_failed_queries,
                "max_failed_share": self.max_failed_share, "prices": self.prices,
                "fail_fast_after": self.fail_fast_after,
                "components": {c.name: c.sha256 for c in self.components},
                "documents": self.documents}


@dataclass(frozen=True)
class Configurations:
    """Every configuration of one file, resolved."""

    file: str
    entries: dict[str, Configuration]
    served: str
    default_names: tuple[str, ...]

    def __contains__(self, name: str) -> bool:
        return name in self.entries

    def __getitem__(self, name: str) -> Configuration:
        return self.entries[name]

    def select(self, names: Iterable[str] | None = None) -> list[Configuration]:
        """The named configurations, each once, in the order given (None: the file's `run` list);
        an unknown name is refused naming the option and the file."""
        chosen = list(dict.fromkeys(self.default_names if names is None else names))
        if not chosen:
            raise InputError("expected at least one configuration name", field="configurations")
        for name in chosen:
            if name not in self.entries:  # an option's value: named by its flag / parameter
                raise InputError(f"unknown configuration {name!r}; {self.file} has "
                                 f"{', '.join(self.entries)}", field="configurations")
        return [self.entries[name] for name in chosen]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


def configuration_hash(kind: str, params: Mapping[str, Any],
                       components: Iterable[Configuration] = ()) -> str:
    payload = {"kind": kind, "params": params,
               "components": {c.name: c.sha256 for c in components}}
    return hashlib.sha256(_canonical(payload).encode()).hexdigest()


def parse_assignment(text: str) -> tuple[str, Any]:
    """`NAME.PARAM=VALUE` (`--set`): the path and the value read as YAML (20 is a number, true a
    boolean, null nothing, [1, 2] a list, anything else a string)."""
    import yaml

    path, sep, raw = text.partition("=")
    path = path.strip()
    if not sep or "." not in path or not all(path.split(".")):
        raise InputError(f"expected NAME.PARAM=VALUE, got {text!r}", field="set")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return path, value


def flatten_overrides(overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """`{"fused.rrf_k": 20}` or `{"fused": {"rrf_k": 20}}` as `{"fused.rrf_k": 20}`."""
    out: dict[str, Any] = {}
    for key, value in (overrides or {}).items():
        if not isinstance(key, str) or not key:
            raise InputError(f"expected NAME.PARAM keys, got {key!r}", field="overrides")
        if "." not in key:
            if not isinstance(value, Mapping):
                raise InputError(f"expected NAME.PARAM (or NAME: {{PARAM: VALUE}}), got {key!r}",
                                 field="overrides")
            for param, v in value.items():
                out[f"{key}.{param}"] = v
        else:
            out[key] = value
    return out


def _apply(raw: dict, path: str, value: Any, file: str) -> None:
    name, *rest = path.split(".")
    entries = raw.get("configurations") or {}
    if name not in entries:
        raise InputError(f"override {path}: unknown configuration {name!r}; the file has "
                         f"{', '.join(entries)}", file=file, field=path)
    entry = entries[name]
    if not isinstance(entry, dict):
        return  # refused by the entry check
    if rest[0] in ENTRY_KEYS and rest[0] not in ("kind", "params"):
        target, keys = entry, rest
    else:
        target, keys = entry.setdefault("params", {}), rest
        if target is None:
            target = entry["params"] = {}
    for key in keys[:-1]:
        nxt = target.get(key) if isinstance(target, dict) else None
        if nxt is None:
            nxt = target[key] = {}
        if not isinstance(nxt, dict):
            raise InputError(f"override {path}: {key} is not a mapping", file=file, field=path)
        target = nxt
    target[keys[-1]] = value


def load_configurations(path: str | Path = DEFAULT_FILE,
                        overrides: Mapping[str, Any] | None = None) -> Configurations:
    """The configurations file, overridden, every entry checked against its kind; InputError
    naming the file and `<entry>.<param>` for anything wrong."""
    from searcheval.io.files import read_yaml_mapping

    from searcheval.io.project import missing, project_path

    given, path = path, project_path(path)  # the project's, from any of its subfolders
    if not path.is_file():
        raise InputError(missing("no such configurations file", given), file=given,
                         field="configurations_file")
    raw = read_yaml_mapping(path)
    return configurations_from(raw, str(path), overrides)


def configurations_from(raw: Mapping[str, Any], file: str,
                        overrides: Mapping[str, Any] | None = None) -> Configurations:
    from searcheval.rankers.registry import get_kind

    raw = copy.deepcopy(dict(raw))
    unknown = [k for k in raw if k not in ("configurations", "run")]
    if unknown:
        raise InputError(f"unknown top-level key {unknown[0]!r}; expected configurations, run",
                         file=file, field=unknown[0])
    entries = raw.get("configurations")
    if not isinstance(entries, dict) or not entries:
        raise InputError("expected a mapping `configurations:` of at least one named entry",
                         file=file, field="configurations")
    flat = flatten_overrides(overrides)
    for key, value in flat.items():
        _apply(raw, key, value, file)
    by_path: dict[str, dict[str, Any]] = {}
    for key, value in flat.items():
        name, _, param = key.partition(".")
        by_path.setdefault(name, {})[param] = value

    checked: dict[str, tuple] = {}
    fail_fast: dict[str, int] = {}
    for name, entry in entries.items():
        if not isinstance(name, str) or not name.strip() or any(c in name for c in " .,=/"):
            raise InputError(f"expected a configuration name without spaces, dots, commas, '=' "
                             f"or '/', got {name!r}", file=file, field=str(name))
        if not isinstance(entry, dict):
            raise InputError(f"expected a mapping with kind and params, got {entry!r}",
                             file=file, field=name)
        bad = [k for k in entry if k not in ENTRY_KEYS]
        if bad:
            raise InputError(f"unknown key {bad[0]!r}; expected some of {', '.join(ENTRY_KEYS)}",
                             file=file, field=f"{name}.{bad[0]}")
        if "kind" not in entry:
            raise InputError("missing: every configuration names its kind", file=file,
                             field=f"{name}.kind")
        kind = get_kind(entry["kind"], file=file, field=f"{name}.kind")
        params = kind.check(entry.get("params") or {}, name, file)
        description = check_value(Param("string"), entry.get("description", ""),
                                  f"{name}.description", file)
        served = check_value(Param("boolean"), entry.get("served", False), f"{name}.served", file)
        max_failed = check_value(Param("integer", minimum=0), entry.get("max_failed_queries", 0),
                                 f"{name}.max_failed_queries", file)
        max_share = check_value(Param("number", minimum=0, maximum=1),
                                entry.get("max_failed_share", 0.0), f"{name}.max_failed_share",
                                file)
        prices = check_value(Param("mapping", keys=PRICE_KEYS, item=Param("number", minimum=0)),
                             entry.get("prices") or {}, f"{name}.prices", file)
        fail_fast[name] = check_value(Param("integer", minimum=0, maximum=1_000_000),
                                      entry.get("fail_fast_after", FAIL_FAST_AFTER),
                                      f"{name}.fail_fast_after", file)
        documents = None
        if entry.get("documents") is not None:
            from searcheval.rankers.documents import check_lookup

            documents = check_lookup(entry["documents"], name, file)
        checked[name] = (kind, params, description, served, max_failed, max_share, prices,
                         documents)

    resolved: dict[str, Configuration] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> Configuration:
        if name in resolved:
            return resolved[name]
        kind, params, description, served, max_failed, max_share, prices, documents = \
            checked[name]
        components = []
        for param, other in kind.references(params).items():
            if other not in checked:
                raise InputError(f"names {other!r}, which is not a configuration of the file "
                                 f"(it has {', '.join(checked)})", file=file,
                                 field=f"{name}.{param}")
            if other in chain or other == name:
                raise InputError(f"names {other!r}, which names it back", file=file,
                                 field=f"{name}.{param}")
            wanted = kind.references_kinds.get(param)
            if wanted and checked[other][0].name not in wanted:
                raise InputError(f"names {other!r}, a {checked[other][0].name} configuration; "
                                 f"expected one of kind {', '.join(wanted)}", file=file,
                                 field=f"{name}.{param}")
            components.append(resolve(other, chain + (name,)))
        sha = configuration_hash(kind.name, params, components)
        resolved[name] = Configuration(
            name=name, kind=kind.name, params=params, description=description, served=served,
            sha256=sha, max_failed_queries=max_failed, max_failed_share=max_share, prices=prices,
            overridden=by_path.get(name, {}), components=tuple(components),
            documents=documents, fail_fast_after=fail_fast[name])
        return resolved[name]

    for name in checked:
        resolve(name, ())
    served_names = [n for n, c in resolved.items() if c.served]
    if len(served_names) != 1:
        raise InputError(f"expected exactly one entry with `served: true` (what production "
                         f"serves, the one the gate guards), got {len(served_names)}"
                         + (f": {', '.join(served_names)}" if served_names else ""),
                         file=file, field="served")
    run = raw.get("run")
    if run is None:
        default_names = tuple(resolved)
    else:
        run = check_value(Param("names"), run, "run", file)
        for n in run:
            if n not in resolved:
                raise InputError(f"unknown configuration {n!r}; the file has "
                                 f"{', '.join(resolved)}", file=file, field="run")
        default_names = tuple(dict.fromkeys(run))
    return Configurations(file=file, entries={n: resolved[n] for n in entries},
                          served=served_names[0], default_names=default_names)


def builtin_configurations() -> Configurations:
    """The three built-ins with every parameter at its kind's default (`fused` served): what the
    shipped configurations.yaml writes out, for code that runs without a file (benchmarks)."""
    raw = {"configurations": {"bm25": {"kind": "bm25"}, "dense": {"kind": "dense"},
                              "fused": {"kind": "fused", "served": True}}}
    return configurations_from(raw, "<built-in>")
