"""Golden queries sampled from production traces (`searcheval queries sample`).

1. The traces of the window (since <= ts < until) are grouped by query text, normalised
   (case-folded, single spaces: `normalize_query`): a query is counted once per trace, and
   written once.
2. Queries matching an exclusion pattern are dropped before anything is sampled: personal data
   must never become a golden query. Built-in patterns: `email`, `phone` (7+ digits with
   separators), `number` (any run of 4+ digits: card, order or account numbers), `url`; any
   other value is a regular expression (searched, case-insensitive).
3. Methods, with `numpy.random.default_rng(seed)`:
   - `random`: every distinct query equally likely;
   - `pps`: probability proportional to size (its traffic), without replacement, by
     Efraimidis and Spirakis' keys u^(1/traffic): the n largest keys;
   - `top`: the n most frequent (ties by text).
   With `stratify` (a trace field: segment, configuration, configuration_version) the n are
   shared among the strata in proportion to their traffic (largest remainders, ties by name), a
   query belonging to the stratum most of its traces have; each stratum is sampled alone.
4. Queries are sorted by text and given `query_id` = the traces' own id when every trace of the
   text has the same one, else `clicks.text_query_id(text)`.

The same traces, options and seed give the same file, byte for byte: the file holds no time of
its own (the window is the one asked for, or the traces' first and last timestamps).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

import numpy as np

from searcheval.errors import InputError
from searcheval.io.traces import TraceTable, normalize_query
from searcheval.production.clicks import text_query_id

METHODS = ("random", "pps", "top")
STRATA = ("segment", "configuration", "configuration_version")
PII_PATTERNS = {
    "email": r"[^\s@]+@[^\s@]+\.[a-z]{2,}",
    "phone": r"\+?\d(?:[\s().-]*\d){6,}",
    "number": r"\d{4,}",
    "url": r"https?://\S+",
}
DEFAULT_EXCLUDE = ("email", "phone", "number")
DEFAULT_CATEGORY = "paraphrase"  # users' own wording of what they want (a fixtures category)


def compile_exclusions(patterns) -> list[tuple[str, re.Pattern]]:
    out = []
    for value in patterns:
        source = PII_PATTERNS.get(value, value)
        try:
            out.append((value, re.compile(source, re.IGNORECASE)))
        except re.error as exc:
            raise InputError(f"not a pattern name ({', '.join(PII_PATTERNS)}) nor a regular "
                             f"expression: {value!r} ({exc})", field="exclude") from None
    return out


@dataclass
class Sample:
    queries: list[dict]
    provenance: dict

    def to_json(self) -> str:
        """The golden query file: `{"sample": provenance, "queries": [...]}`, keys sorted."""
        return json.dumps({"sample": self.provenance, "queries": self.queries}, indent=2,
                          sort_keys=True, ensure_ascii=False) + "\n"


def _stratum_of(table: TraceTable, name: str | None) -> tuple[np.ndarray, list[str]]:
    if name is None:
        return np.zeros(len(table), dtype=np.int64), ["(all)"]
    if name not in STRATA:
        raise InputError(f"expected a trace field to stratify by ({', '.join(STRATA)}), got "
                         f"{name!r}", field="stratify")
    if name == "segment":
        return table.segment.astype(np.int64), list(table.segments)
    if name == "configuration":
        codes, names = table.configuration.astype(np.int64), list(table.configurations)
    else:
        b = table.behaviour
        if b is None:
            return np.full(len(table), 0), ["(none)"]
        codes, names = b.version.astype(np.int64), list(b.versions)
    return np.where(codes >= 0, codes, len(names)), names + ["(none)"]


def _allocate(n: int, traffic: dict[str, int], sizes: dict[str, int]) -> dict[str, int]:
    """n shared in proportion to traffic by largest remainders, capped at each stratum's size."""
    total = sum(traffic.values())
    quota = {s: n * t / total for s, t in traffic.items()}
    share = {s: min(int(q), sizes[s]) for s, q in quota.items()}
    order = sorted(traffic, key=lambda s: (-(quota[s] - int(quota[s])), s))
    left = n - sum(share.values())
    while left > 0 and any(share[s] < sizes[s] for s in order):
        for s in order:
            if left and share[s] < sizes[s]:
                share[s] += 1
                left -= 1
    return share


def _pick(method: str, texts: list[str], counts: np.ndarray, n: int,
          rng: np.random.Generator) -> list[int]:
    if n >= len(texts):
        return list(range(len(texts)))
    if method == "top":
        return sorted(range(len(texts)), key=lambda i: (-counts[i], texts[i]))[:n]
    if method == "random":
        return rng.permutation(len(texts))[:n].tolist()
    keys = rng.random(len(texts)) ** (1.0 / counts)
    return np.argsort(-keys, kind="stable")[:n].tolist()


def sample_queries(table: TraceTable, *, n: int, method: str = "pps", seed: int = 0,
                   stratify: str | None = None, exclude=DEFAULT_EXCLUDE,
                   window: dict | None = None, category: str = DEFAULT_CATEGORY) -> Sample:
    """Sample n distinct normalised queries of `table` (see the module docstring)."""
    if method not in METHODS:
        raise InputError(f"expected a method {', '.join(METHODS)}, got {method!r}",
                         field="method")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"expected a whole number >= 1, got {n!r}", field="n")
    patterns = compile_exclusions(exclude)
    normal = [normalize_query(q) for q in table.queries]
    excluded_by: Counter = Counter()
    keep_code = np.ones(len(normal), dtype=bool)
    for code, text in enumerate(normal):
        for name, pattern in patterns:
            if pattern.search(text):
                keep_code[code] = False
                excluded_by[name] += 1
                break
    strata_codes, strata_names = _stratum_of(table, stratify)
    per_text: dict[str, Counter] = defaultdict(Counter)
    ids_of: dict[str, set] = defaultdict(set)
    rows = np.flatnonzero(keep_code[table.query])
    q_codes = table.query[rows].tolist()
    s_codes = strata_codes[rows].tolist()
    id_codes = table.query_id[rows].tolist()
    for q, s, i in zip(q_codes, s_codes, id_codes):
        text = normal[q]
        per_text[text][s] += 1
        ids_of[text].add(table.query_ids[i] if i >= 0 else None)
    texts = sorted(per_text)
    traffic = {t: sum(per_text[t].values()) for t in texts}
    stratum = {t: strata_names[min(per_text[t].items(), key=lambda kv: (-kv[1], kv[0]))[0]]
               for t in texts}
    rng = np.random.default_rng(seed)
    chosen: list[str] = []
    by_stratum: dict[str, list[str]] = defaultdict(list)
    for t in texts:
        by_stratum[stratum[t]].append(t)
    if stratify is None:
        shares = {"(all)": n}
    else:
        shares = _allocate(n, {s: sum(traffic[t] for t in ts) for s, ts in by_stratum.items()},
                           {s: len(ts) for s, ts in by_stratum.items()})
    for s in sorted(by_stratum):
        ts = by_stratum[s]
        counts = np.array([traffic[t] for t in ts], dtype=np.float64)
        chosen += [ts[i] for i in _pick(method, ts, counts, shares.get(s, 0), rng)]
    queries = []
    for t in sorted(chosen):
        ids = ids_of[t]
        qid = next(iter(ids)) if len(ids) == 1 and None not in ids else text_query_id(t)
        entry = {"id": qid, "text": t, "category": category, "filters": {},
                 "traffic": traffic[t]}
        if stratify is not None:
            entry["stratum"] = stratum[t]
        queries.append(entry)
    if not queries:
        raise InputError("no query left to sample (every query excluded, or no trace in the "
                         "window)", file=table.source)
    first = float(table.ts.min()) if len(table) else None
    last = float(table.ts.max()) if len(table) else None
    from datetime import datetime, timezone

    observed = {"first": datetime.fromtimestamp(first, timezone.utc).isoformat()
                if first is not None else None,
                "last": datetime.fromtimestamp(last, timezone.utc).isoformat()
                if last is not None else None}
    provenance = {
        "method": method, "n": n, "seed": seed, "stratify": stratify,
        "window": {**(window or {}), "traces": observed},
        "source": table.source, "exclude": list(exclude),
        "counts": {"traces": len(table), "distinct_queries": len(set(normal)),
                   "excluded_queries": len({t for t, k in zip(normal, keep_code) if not k}),
                   "excluded_by": dict(sorted(excluded_by.items())),
                   "candidates": len(texts), "sampled": len(queries),
                   "strata": {s: len(ts) for s, ts in sorted(by_stratum.items())},
                   "shares": dict(sorted(shares.items()))},
    }
    return Sample(queries=queries, provenance=provenance)
