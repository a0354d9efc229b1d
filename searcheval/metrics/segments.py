"""Automatic segments of a query, from the query itself: how many words it has (1, 2, 3, 4+),
whether it has digits, whether it holds a quoted phrase, and its class when the data gives one.

A segment is a label `kind:value` (`words:4+`, `digits:yes`, `quoted:no`, `class:Beds`); every
query is in exactly one segment of each kind it has. Scores are published per segment beside the
categories, the gate's per-category floors accept segment labels, and per-query outputs carry each
query's segments, so "dense search is bad for queries of more than three words" is one table away.
"""

from __future__ import annotations

import re

from searcheval.types import Query

KINDS = ("words", "digits", "quoted", "class")
WORD_BUCKETS = ("1", "2", "3", "4+")
# a phrase between straight or typographic double quotes, or guillemets
_QUOTED = re.compile(r'"[^"\s][^"]*"|“[^”]+”|„[^“”]+[“”]|«[^»]+»')


def word_count(text: str) -> int:
    return len(text.split())


def words_bucket(text: str) -> str:
    n = word_count(text)
    return str(n) if n < 4 else "4+"


def has_digits(text: str) -> bool:
    return any(ch.isdigit() for ch in text)


def has_quoted_phrase(text: str) -> bool:
    return _QUOTED.search(text) is not None


def query_segments(query: Query) -> list[str]:
    """The query's segment labels, in the order of `KINDS`."""
    labels = [f"words:{words_bucket(query.text)}",
              f"digits:{'yes' if has_digits(query.text) else 'no'}",
              f"quoted:{'yes' if has_quoted_phrase(query.text) else 'no'}"]
    if query.query_class:
        labels.append(f"class:{query.query_class}")
    return labels


def segment_order(label: str) -> tuple:
    """Sort key: by kind as in `KINDS`, words by size, then yes before no, then by name."""
    kind, _, value = label.partition(":")
    rank = KINDS.index(kind) if kind in KINDS else len(KINDS)
    if kind == "words" and value in WORD_BUCKETS:
        return (rank, WORD_BUCKETS.index(value), value)
    return (rank, {"yes": 0, "no": 1}.get(value, 2), value)


def is_segment(label: str) -> bool:
    """True for a label of an automatic segment (`words:2`), as a baseline's floors may name."""
    kind, sep, value = label.partition(":")
    return bool(sep) and kind in KINDS and bool(value)
