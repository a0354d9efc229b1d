"""Request templates and response paths of the `http` kind: pure functions, no I/O.

Templates. A string may hold placeholders `{text}`, `{k}`, `{id}`, `{category}`, `{network}`,
`{asset}`, `{max_price_usd}` (and `{intent}`, `{persona}` when the configuration opts in with
`notes`); `{{` and `}}` are literal braces. A query field the query does not have (no filter) is
*absent*:

- in the URL it becomes the empty string;
- a part of a string between `[[` and `]]` is dropped when a placeholder inside it is absent
  (`"where userQuery()[[ and price_usd <= {max_price_usd}]]"`);
- a query parameter, a JSON value, or a list item whose string holds an absent placeholder
  outside `[[ ]]` is dropped, and so is a mapping or list that dropping left empty (so an
  Elasticsearch `filter: [{range: {price_usd: {lte: "{max_price_usd}"}}}]` disappears for a query
  without a price limit);
- `{join: " && ", parts: [...]}` is the parts left after dropping, joined (Typesense's
  `filter_by`); nothing left drops it.

A JSON string that is exactly one placeholder takes the field's own type (`"{k}"` is the number
100, not the string "100").

Paths. `hits.hits[*]._id`: keys separated by dots, one `[*]` marking the list of hits; what
follows it is the path inside one hit. The id must be a string or a whole number; the score a
number.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FIELDS = ("text", "k", "id", "category", "network", "asset", "max_price_usd")
NOTE_FIELDS = ("intent", "persona")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_OPTIONAL = re.compile(r"\[\[(.*?)\]\]", re.S)


class Absent(Exception):
    """A placeholder names a field the query does not have."""


_DROP = object()


def placeholders(template: Any) -> set[str]:
    """Every placeholder name in a template (strings, lists, mappings)."""
    if isinstance(template, str):
        return {m[1] for m in _PLACEHOLDER.finditer(template) if m[1]}
    if isinstance(template, Mapping):
        return set().union(*(placeholders(v) for v in template.values())) if template else set()
    if isinstance(template, (list, tuple)):
        return set().union(*(placeholders(v) for v in template)) if template else set()
    return set()


def _fill(text: str, values: Mapping[str, Any], absent_as_empty: bool) -> str:
    def one(match: re.Match) -> str:
        if match[0] == "{{":
            return "{"
        if match[0] == "}}":
            return "}"
        value = values.get(match[1])
        if value is None:
            if absent_as_empty:
                return ""
            raise Absent(match[1])
        if isinstance(value, float) and value.is_integer() and match[1] != "max_price_usd":
            value = int(value)
        return str(value)

    return _PLACEHOLDER.sub(one, text)


def fill_string(text: str, values: Mapping[str, Any], absent_as_empty: bool = False) -> str:
    """`text` with its optional parts and placeholders filled; Absent when a placeholder outside
    `[[ ]]` is absent (unless `absent_as_empty`)."""

    def optional(match: re.Match) -> str:
        try:
            return _fill(match[1], values, absent_as_empty=False)
        except Absent:
            return ""

    return _fill(_OPTIONAL.sub(optional, text), values, absent_as_empty)


def fill(template: Any, values: Mapping[str, Any]) -> Any:
    """A JSON template filled; `_DROP` when the whole of it is dropped."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole and whole[1]:
            value = values.get(whole[1])
            return _DROP if value is None else value
        try:
            return fill_string(template, values)
        except Absent:
            return _DROP
    if isinstance(template, Mapping):
        if set(template) == {"join", "parts"}:
            parts = [p for p in (fill(x, values) for x in template["parts"]) if p is not _DROP]
            return str(template["join"]).join(map(str, parts)) if parts else _DROP
        out = {}
        for key, value in template.items():
            filled = fill(value, values)
            if filled is not _DROP:
                out[key] = filled
        return _DROP if template and not out else out
    if isinstance(template, (list, tuple)):
        out_list = [v for v in (fill(x, values) for x in template) if v is not _DROP]
        return _DROP if template and not out_list else out_list
    return template


def fill_body(template: Any, values: Mapping[str, Any]) -> Any:
    filled = fill(template, values)
    return {} if filled is _DROP else filled


def fill_params(template: Mapping[str, Any], values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Query parameters: a list value is a repeated parameter (Solr's `fq`)."""
    out: list[tuple[str, str]] = []
    for name, value in template.items():
        filled = fill(value, values)
        if filled is _DROP:
            continue
        for item in filled if isinstance(filled, list) else [filled]:
            out.append((name, _param_text(item)))
    return out


def _param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# -- response paths ----------------------------------------------------------------------------

class BadResponse(Exception):
    """The response does not have what the configuration's paths say (the message names it)."""


@dataclass(frozen=True)
class HitsPath:
    """`hits.hits[*]._id` cut into the keys to the list (`hits.hits`) and the keys in a hit."""

    text: str
    to_list: tuple[str, ...]
    in_hit: tuple[str, ...]

    @property
    def list_text(self) -> str:
        return ".".join(self.to_list)


def parse_path(text: str) -> HitsPath:
    """ValueError with what is wrong when `text` is not `a.b[*].c`."""
    if not isinstance(text, str) or text.count("[*]") != 1:
        raise ValueError("expected a path with one [*] marking the list of hits, e.g. "
                         "hits.hits[*]._id")
    before, _, after = text.partition("[*]")
    to_list = tuple(before.split(".")) if before else ()
    if after and not after.startswith("."):
        raise ValueError("expected a dot after [*], e.g. hits[*].id")
    in_hit = tuple(after[1:].split(".")) if after else ()
    if any(not key or "[" in key or "]" in key for key in (*to_list, *in_hit)):
        raise ValueError("expected keys separated by dots around one [*], e.g. hits.hits[*]._id")
    return HitsPath(text, to_list, in_hit)


def hit_list(document: Any, path: HitsPath, missing_is_empty: bool) -> list:
    """The list of hits at `path.to_list`; with `missing_is_empty` a missing *last* key is an
    empty result (Vespa leaves `root.children` out when nothing matched)."""
    node = document
    for i, key in enumerate(path.to_list):
        if not isinstance(node, Mapping) or key not in node:
            last = i == len(path.to_list) - 1
            if missing_is_empty and last and isinstance(node, Mapping):
                return []
            raise BadResponse(f"no {'.'.join(path.to_list[:i + 1])} in the response "
                              f"(path {path.text})")
        node = node[key]
    if not isinstance(node, list):
        raise BadResponse(f"{path.list_text or 'the response'} is {type(node).__name__}, "
                          f"expected a list (path {path.text})")
    return node


def value_in_hit(hit: Any, path: HitsPath, index: int) -> Any:
    node = hit
    for i, key in enumerate(path.in_hit):
        if not isinstance(node, Mapping) or key not in node:
            where = f"{path.list_text}[{index}]" + "".join(f".{k}" for k in path.in_hit[:i + 1])
            raise BadResponse(f"no {where} in the response (path {path.text})")
        node = node[key]
    return node


def extract_hits(document: Any, id_path: HitsPath, score_path: HitsPath | None,
                 missing_is_empty: bool = False, max_hits: int | None = None
                 ) -> list[tuple[str, float]]:
    """[(id, score)] in the order of the response, each id once (its first hit). Without a score
    path a hit's score is its reverse rank (n, n - 1, ...), so the order is kept. More than
    `max_hits` hits is a BadResponse."""
    hits = hit_list(document, id_path, missing_is_empty)
    if max_hits is not None and len(hits) > max_hits:
        raise BadResponse(f"{len(hits):,} hits at {id_path.list_text or 'the response'}, over "
                          f"max_hits ({max_hits:,})")
    out: list[tuple[str, float]] = []
    seen: set[str] = set()
    for i, hit in enumerate(hits):
        raw = value_in_hit(hit, id_path, i)
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float)) \
                or (isinstance(raw, float) and not raw.is_integer()):
            where = f"{id_path.list_text}[{i}]" + "".join(f".{k}" for k in id_path.in_hit)
            raise BadResponse(f"the id at {where} is {type(raw).__name__} {raw!r:.60}, expected "
                              f"a string or a whole number (path {id_path.text})")
        doc_id = str(int(raw)) if isinstance(raw, float) else str(raw)
        if score_path is None:
            score = float(len(hits) - i)
        else:
            value = value_in_hit(hit, score_path, i)
            if isinstance(value, str):
                try:
                    value = float(value)
                except ValueError:
                    pass
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or value != value or value in (float("inf"), float("-inf")):
                where = f"{score_path.list_text}[{i}]" + "".join(f".{k}" for k in score_path.in_hit)
                raise BadResponse(f"the score at {where} is {value!r:.60}, expected a finite "
                                  f"number (path {score_path.text})")
            score = float(value)
        if doc_id not in seen:
            seen.add(doc_id)
            out.append((doc_id, score))
    return out
