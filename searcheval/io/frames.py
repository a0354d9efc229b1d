"""Runs and judgments as the public API takes them: dicts (`{query: {doc: score}}`, the shape ranx,
ir_measures and BEIR share), tables of named columns (pandas DataFrames, pyarrow Tables, or a dict
of numpy arrays), `RankedRun`s, or file paths.

Anything else is refused with a clear error, and so is a DataFrame with missing or misnamed
columns, non-numeric or non-finite scores, grades that are not whole numbers, or a (query,
document) pair given twice: nothing is ever silently read as empty. Query and document ids that
are integers become strings, on both sides alike. pandas is imported only when a DataFrame is given.
"""

from __future__ import annotations

import math
from itertools import chain
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from searcheval.errors import InputError
from searcheval.io.trec import load_qrels, load_trec_run, write_trec_run
from searcheval.types import Qrels, RankedRun, Run

RUN_COLUMNS = ("query_id", "doc_id", "score")
QRELS_COLUMNS = ("query_id", "doc_id", "grade")


def _is_dataframe(value: Any) -> bool:
    return type(value).__module__.startswith("pandas") and hasattr(value, "columns")


def is_table(value: Any) -> bool:
    """A table of named columns: a pandas DataFrame, a pyarrow Table, or a mapping of column
    names to numpy arrays (the "arrays" form; a run dict maps query ids to mappings instead)."""
    if _is_dataframe(value):
        return True
    if type(value).__module__.startswith("pyarrow") and hasattr(value, "column_names"):
        return True
    return isinstance(value, Mapping) and bool(value) and all(
        type(v).__module__ == "numpy" and getattr(v, "ndim", 0) == 1 for v in value.values())


def _as_frame(value: Any):
    """A table of named columns as a pandas DataFrame (for the exact path's checks)."""
    import pandas as pd

    if _is_dataframe(value):
        return value
    if hasattr(value, "to_pandas"):
        return value.to_pandas()
    try:
        return pd.DataFrame(dict(value))
    except ValueError as exc:  # columns of different lengths
        raise InputError(f"expected columns of one length: {exc}", field="columns") from None


def _identifier(value: Any, what: str, where: str) -> str:
    if isinstance(value, str) and value:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise InputError(f"expected a non-empty string (or integer) {what}, got {value!r}",
                     field=where)


def _expected(kind: str, columns: tuple[str, ...]) -> str:
    value = "score" if kind == "run" else "grade"
    return (f"expected a dict {{query_id: {{doc_id: {value}}}}}, a pandas DataFrame with columns "
            f"{', '.join(columns)}, or a path to a file")


def as_run(value: Any, *, query_column: str = "query_id", doc_column: str = "doc_id",
           score_column: str = "score", name: str = "run") -> Run:
    """A run as `{query_id: {doc_id: score}}`, from any of the accepted shapes."""
    if isinstance(value, RankedRun):
        return value.as_run()
    if isinstance(value, (str, Path)):
        return load_trec_run(value)
    if is_table(value):
        return _from_frame(_as_frame(value), (query_column, doc_column, score_column), name,
                           grades=False)
    if isinstance(value, Mapping):
        return _from_mapping(value, name, grades=False)
    raise InputError(f"{_expected('run', (query_column, doc_column, score_column))}; got "
                     f"{type(value).__name__}", field=name)


def as_qrels(value: Any, *, query_column: str = "query_id", doc_column: str = "doc_id",
             grade_column: str = "grade", name: str = "qrels") -> Qrels:
    """Judgments as `{query_id: {doc_id: grade}}`, from any of the accepted shapes (a path is TREC
    or BEIR qrels)."""
    if isinstance(value, (str, Path)):
        return load_qrels(value)
    if is_table(value):
        return _from_frame(_as_frame(value), (query_column, doc_column, grade_column), name,
                           grades=True)
    if isinstance(value, Mapping):
        return _from_mapping(value, name, grades=True)
    raise InputError(f"{_expected('qrels', (query_column, doc_column, grade_column))}; got "
                     f"{type(value).__name__}", field=name)


def write_run(run: Any, path: str | Path, tag: str = "searcheval") -> Path:
    """Write a run (a `RankedRun`, or `{query: {doc: score}}` in any shape `as_run` takes) as a
    TREC run file, ranked by score descending, ties by document id descending."""
    if not isinstance(run, RankedRun):
        scores = as_run(run)
        run = RankedRun(configuration=tag, results={
            q: sorted(docs.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
            for q, docs in scores.items()})
    return write_trec_run(run, path, tag)


def _number(value: Any, grades: bool, where: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        kind = "a whole grade" if grades else "a finite numeric score"
        raise InputError(f"expected {kind}, got {value!r}", field=where)
    if grades:
        if float(value) != int(value):
            raise InputError(f"expected a whole grade, got {value!r}", field=where)
        return int(value)
    return float(value)


def _from_mapping(value: Mapping, name: str, *, grades: bool) -> dict:
    checked = _checked_in_bulk(value, grades)
    if checked is not None:
        return checked
    out: dict = {}
    for qid, docs in value.items():
        query = _identifier(qid, "query id", name)
        if not isinstance(docs, Mapping):
            raise InputError(f"expected a dict {{doc_id: {'grade' if grades else 'score'}}} for "
                             f"query {query!r}, got {type(docs).__name__}", field=f"{name}[{query!r}]")
        if query in out:
            raise InputError(f"query {query!r} is given twice (as {qid!r} and as a string)",
                             field=name)
        row = {}
        for doc, v in docs.items():
            where = f"{name}[{query!r}][{doc!r}]"
            row[_identifier(doc, "document id", where)] = _number(v, grades, where)
        out[query] = row
    return out


def _checked_in_bulk(value: Mapping, grades: bool) -> dict | None:
    """The mapping itself when it is already in the shape the engine takes -- a dict of dicts
    (a defaultdict too, as pytrec_eval's parsers give),
    string ids (none empty), scores that are finite floats or ints (grades: ints >= 0) -- checked
    a column at a time (each check one pass in C over every id or value, not a Python call per
    item); None when anything is otherwise, for `_from_mapping`'s item-by-item conversion and
    its exact refusals."""
    if not isinstance(value, dict) or not value:
        return None
    rows = value.values()
    if set(map(type, value)) != {str} or "" in value or \
            not all(isinstance(docs, dict) for docs in rows):
        return None
    keys = chain.from_iterable(rows)
    if not set(map(type, keys)) <= {str} or any("" in docs for docs in rows):
        return None
    kinds = set(map(type, chain.from_iterable(docs.values() for docs in rows)))
    if not kinds <= ({int} if grades else {float, int}):
        return None
    # finite: their sum is (a NaN or an infinity makes it NaN or infinite; a sum that overflows
    # from finite scores sends them to the item-by-item path, which takes them)
    if not grades and not math.isfinite(sum(chain.from_iterable(docs.values() for docs in rows))):
        return None
    return value


def _from_frame(frame, columns: tuple[str, str, str], name: str, *, grades: bool) -> dict:
    import numpy as np
    import pandas as pd

    missing = [c for c in columns if c not in frame.columns]
    if missing:
        have = ", ".join(map(str, frame.columns)) or "none"
        value = "grade" if grades else "score"
        keyword = "qrels_columns" if grades else "run_columns"
        raise InputError(f"missing column(s) {', '.join(missing)} (the DataFrame has: {have}); "
                         f"name them with {keyword}={{'query_id': ..., 'doc_id': ..., "
                         f"'{value}': ...}}", field=name)
    qcol, dcol, vcol = columns
    values = frame[vcol]
    if not pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
        raise InputError(f"expected numeric values in column {vcol!r}, got dtype {values.dtype}",
                         field=f"{name}.{vcol}")
    numbers = values.to_numpy(dtype=np.float64)
    bad = ~np.isfinite(numbers)
    if grades:
        bad |= numbers != np.round(numbers)
    if bad.any():
        at = int(np.argmax(bad))
        kind = "whole, finite grades" if grades else "finite scores"
        raise InputError(f"expected {kind} in column {vcol!r}, got {numbers[at]!r} at row {at} "
                         "(counted from 0)", field=f"{name}.{vcol}")
    keys = frame[[qcol, dcol]]
    if keys.isna().any().any():
        raise InputError(f"expected no empty id in columns {qcol!r}, {dcol!r}", field=name)
    duplicated = keys.duplicated()
    if duplicated.any():
        at = int(np.argmax(duplicated.to_numpy()))
        query, doc = keys.iloc[at].tolist()
        raise InputError(f"the pair ({str(query)!r}, {str(doc)!r}) is given twice (row {at}, "
                         "counted from 0)", field=name)
    out: dict = {}
    cast = int if grades else float
    for q, d, v in zip(keys[qcol].astype(str), keys[dcol].astype(str), numbers.tolist()):
        out.setdefault(q, {})[d] = cast(v)
    return out
