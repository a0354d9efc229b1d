"""Input validation with Great Expectations: the second line of defence after the loaders.

The loaders in `searcheval.io` refuse malformed files line by line. This module checks a
`Collection` however it was built (loaded or in code) against the suites stored as JSON in
`expectations/`: schema and domains, duplicates, every golden query judged, every judged query
known (severity 'critical' in the suite -> an 'error' finding: the run is refused), and staleness
(severity 'warning' -> a 'warning' finding plus one `StaleJudgment` per stale label, which scoring
leaves out).

Each input becomes a pandas DataFrame validated through a GX 1.x ValidationDefinition on an
ephemeral context. GX takes seconds to import, so it is imported inside the functions that use it,
and the context, suites and validation definitions are built once per process.
"""

from __future__ import annotations

import math
import os
import sys
from collections import Counter
import threading
import warnings
from dataclasses import asdict, dataclass
from dataclasses import field as dataclass_field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from searcheval.defaults import MAX_AGE_DAYS, MIN_PER_CATEGORY
from searcheval.errors import InputError
from searcheval.io.files import read_json
from searcheval.io.fixtures import CATEGORIES
from searcheval.types import DATA_CATEGORIES, Collection, Judgment

#: the suites searcheval ships: the expectations/ folder beside the package (a checkout, or an
#: editable install)
EXPECTATIONS_DIR = Path(__file__).resolve().parents[2] / "expectations"


def expectations_dir() -> Path:
    """The suites: SEARCHEVAL_EXPECTATIONS_DIR, else the project's expectations/ folder
    (searcheval.io.project), else the ones searcheval ships."""
    from searcheval.io.project import project_path

    named = os.environ.get("SEARCHEVAL_EXPECTATIONS_DIR")
    if named:
        return Path(named)
    own = project_path("expectations")
    return own if own.is_dir() else EXPECTATIONS_DIR
SUITES = ("catalog", "queries", "query_categories", "judgments")
BEIR_CATEGORIES = ("all",)
STALE_REASONS = ("resource-removed", "changed-after-judged", "too-old")  # priority order
EXAMPLES = 5

# Which input each suite checks, by the keys of Collection.sources (fixtures, then BEIR).
_SOURCE_KEYS = {
    "catalog": ("catalog", "corpus", "products", "documents", "mapping"),
    "queries": ("queries", "mapping"),
    "query_categories": ("queries", "mapping"),
    "judgments": ("judgments", "qrels", "labels", "mapping"),
}
# Columns that identify a row in the examples of a finding.
_INDEX_COLUMNS = {
    "catalog": ["row", "id"],
    "queries": ["row", "id"],
    "query_categories": ["category"],
    "judgments": ["row", "line", "query_id", "doc_id"],
}


@dataclass
class Finding:
    """One failed expectation."""

    suite: str
    expectation: str  # the GX expectation type, e.g. expect_column_values_to_be_unique
    severity: str  # 'error' | 'warning'
    message: str
    count: int  # offending rows (or missing values, for set-containment checks)
    examples: list[str] = dataclass_field(default_factory=list)
    field: str | None = None  # the input field, as the loaders name it
    file: str | None = None  # the input file, or '<collection>:<suite>' for one built in code


@dataclass(frozen=True)
class StaleJudgment:
    query_id: str
    doc_id: str
    reason: str  # 'resource-removed' | 'changed-after-judged' | 'too-old'


@dataclass
class ValidationReport:
    findings: list[Finding]
    stale: list[StaleJudgment]
    judged_queries: int
    queries: int
    notes: list[str] = dataclass_field(default_factory=list)  # accepted, but worth knowing

    @property
    def ok(self) -> bool:
        """No error finding (warnings, i.e. stale judgments, do not stop a run)."""
        return not self.errors

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def raise_for_errors(self) -> None:
        """Raise InputError naming the file, the check and a few offending values of the first
        error finding (and how many other errors there are)."""
        errors = self.errors
        if not errors:
            return
        first = errors[0]
        message = f"check {first.expectation} failed: {first.message}"
        if len(errors) > 1:
            others = "; ".join(f"{e.file} field '{e.field}': {e.message}" if e.field
                               else f"{e.file}: {e.message}" for e in errors[1:3])
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            message += f"; {len(errors) - 1} other error(s): {others}{more}"
        raise InputError(message, file=first.file, field=first.field)

    def to_dict(self) -> dict[str, Any]:
        by_reason = {reason: 0 for reason in STALE_REASONS}
        for s in self.stale:
            by_reason[s.reason] = by_reason.get(s.reason, 0) + 1  # also the lookup's reasons
        return {
            "ok": self.ok,
            "queries": self.queries,
            "judged_queries": self.judged_queries,
            "errors": len(self.errors),
            "warnings": len(self.warnings),
            "findings": [asdict(f) for f in self.findings],
            "notes": list(self.notes),
            "stale": {
                "count": len(self.stale),
                "by_reason": by_reason,
                "judgments": [asdict(s) for s in self.stale],
            },
        }


# --------------------------------------------------------------------------- GX set-up (cached)

_lock = threading.Lock()
_state: dict[str, Any] = {}


def load_suite_file(path: str | Path):
    """An ExpectationSuite from its JSON file; refuses a file GX would silently trim."""
    import great_expectations as gx

    path = Path(path)
    data, _ = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("expectations"), list):
        raise InputError("expected an object {name, expectations: [...]}", file=path)
    try:
        suite = gx.ExpectationSuite(**data)
    except Exception as exc:  # pydantic / GX configuration errors
        raise InputError(f"not a valid GX expectation suite: {exc}", file=path) from None
    if len(suite.expectations) != len(data["expectations"]):
        # GX logs and drops an expectation it cannot build (e.g. an unknown type)
        raise InputError(f"only {len(suite.expectations)} of {len(data['expectations'])} "
                         "expectations are valid GX expectations", file=path)
    return suite


def _import_gx():
    from searcheval.importing import HEAVY_IMPORTS

    with HEAVY_IMPORTS, warnings.catch_warnings():  # not beside torch's (searcheval.importing)
        # great_expectations' file_path_data_connector imports sre_constants and sre_parse,
        # deprecated since Python 3.11
        warnings.filterwarnings("ignore", message=r"module 'sre_\w+' is deprecated",
                                category=DeprecationWarning)
        import great_expectations as gx
    return gx


def _validation_definitions(directory: str | Path | None = None) -> dict[str, Any]:
    """One ValidationDefinition per suite on one ephemeral context, built once per process from
    the suites in `directory` (default: `expectations_dir()`)."""
    if "definitions" in _state:
        return _state["definitions"]
    directory = Path(directory) if directory is not None else expectations_dir()
    gx = _import_gx()
    from great_expectations.data_context.types.base import ProgressBarsConfig
    from great_expectations.execution_engine import pandas_execution_engine

    # GX hashes every row of a batch's frame into a fingerprint among the batch's markers,
    # below a frame size of HASH_THRESHOLD bytes; nothing here reads it, and at WANDS' size
    # (233k judgments) it cost a third of a validation. 0: never computed.
    pandas_execution_engine.HASH_THRESHOLD = 0

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    source = context.data_sources.add_pandas(name="searcheval")
    definitions = {}
    for name in SUITES:
        suite = context.suites.add(load_suite_file(directory / f"{name}.json"))
        batch = source.add_dataframe_asset(name=name).add_batch_definition_whole_dataframe(name)
        definitions[name] = context.validation_definitions.add(
            gx.ValidationDefinition(name=f"searcheval-{name}", data=batch, suite=suite)
        )
    _state["context"] = context
    _state["definitions"] = definitions
    return definitions


def _run_suite(name: str, frame, parameters: dict[str, Any]):
    definition = _validation_definitions()[name]
    result = definition.run(
        batch_parameters={"dataframe": frame},
        expectation_parameters=parameters,
        result_format={"result_format": "COMPLETE",
                       "unexpected_index_column_names": _INDEX_COLUMNS[name]},
    )
    store = _state["context"].validation_results_store
    for key in store.list_keys():  # keep the in-memory store from growing run after run
        store.remove_key(key)
    return result


# --------------------------------------------------------------------------- frames


def _utc(ts: datetime | None) -> datetime | None:
    """Naive datetimes are taken as UTC (as the loaders do); anything else is left as is."""
    if not isinstance(ts, datetime) or ts.tzinfo is not None:
        return ts
    return ts.replace(tzinfo=timezone.utc)


def _strings(values: list):
    """A column of text: Arrow strings when every value is a str or None (GX's null, length, set
    and uniqueness checks read them without a Python object per row: isna of 233k objects was
    a fifth of a WANDS-size validation), objects otherwise (a wrong type fails a check rather
    than crashing here)."""
    import pandas as pd

    if set(map(type, values)) <= {str, type(None)}:
        return pd.Series(values, dtype="string[pyarrow]")
    return pd.Series(values, dtype=object)


def _frames(collection: Collection, *, now: datetime, categories: tuple[str, ...]):
    import pandas as pd

    resources = collection.resources
    catalog = pd.DataFrame({
        "row": pd.Series(range(len(resources)), dtype="int64"),
        "id": _strings([r.id for r in resources]),
        "name": _strings([r.name for r in resources]),
        "description": _strings([r.description for r in resources]),
        "price_usd": pd.Series([r.price_usd for r in resources], dtype=object),
        "success_rate": pd.Series([r.success_rate for r in resources], dtype=object),
        "settled_30d": pd.Series([r.settled_30d for r in resources], dtype=object),
    })
    for column in ("price_usd", "success_rate", "settled_30d"):
        catalog[column] = _numeric_if_possible(catalog[column])

    queries = collection.queries
    query_frame = pd.DataFrame({
        "row": pd.Series(range(len(queries)), dtype="int64"),
        "id": _strings([q.id for q in queries]),
        "text": _strings([q.text for q in queries]),
        "category": _strings([q.category for q in queries]),
    })
    counts = {c: 0 for c in categories}
    for q in queries:
        if q.category in counts:
            counts[q.category] += 1
    category_frame = pd.DataFrame({
        "category": pd.Series(list(counts), dtype=object),
        "queries": pd.Series(list(counts.values()), dtype="int64"),
    })

    updated = {r.id: r.updated_at for r in resources}
    judgments = collection.judgments
    doc_ids = [j.doc_id for j in judgments]
    # naive datetimes are UTC (`_utc`); converted a column at a time (`_naive_utc`)
    judged_at = _naive_utc([j.judged_at for j in judgments], "judged_at")
    # age in days as datetime.timedelta.total_seconds() / 86400 gives it: whole microseconds
    # over 10**6, then over 86400 (NaN where a judgment has no date)
    micros = (pd.Timestamp(now).tz_convert(None) - judged_at).to_numpy().astype(
        "timedelta64[us]").astype("int64")
    age_days = pd.Series(micros / 10**6 / 86400, dtype="float64")
    age_days[judged_at.isna().to_numpy()] = math.nan
    judgment_frame = pd.DataFrame({
        "row": pd.Series(range(len(judgments)), dtype="int64"),
        "line": pd.Series([j.line for j in judgments], dtype=object),
        "query_id": _strings([j.query_id for j in judgments]),
        "doc_id": _strings(doc_ids),
        "grade": _numeric_if_possible(pd.Series([j.grade for j in judgments], dtype=object)),
        "judged_at": judged_at,
        "resource_updated_at": _naive_utc([updated.get(d) for d in doc_ids], "updated_at"),
        # judged ids the catalog holds (a catalog-less collection holds every judged id)
        "resource_in_catalog": pd.Series([d in updated for d in doc_ids]
                                         if collection.has_catalog else [True] * len(doc_ids),
                                         dtype=bool),
        "age_days": age_days,
    })
    return catalog, query_frame, category_frame, judgment_frame


def _naive_utc(values: list[datetime | None], field_name: str):
    """datetime64 in UTC without a time zone: GX's column-pair checks read Series.values, which
    pandas 3 deprecates for tz-aware columns."""
    import pandas as pd

    bad = [v for v in values if v is not None and not isinstance(v, datetime)] \
        if not set(map(type, values)) <= {datetime, type(None)} else []
    if bad:
        raise InputError(f"expected datetimes, got {bad[0]!r}", field=field_name)
    return pd.to_datetime(pd.Series(values, dtype=object), utc=True).dt.tz_convert(None)


def _numeric_if_possible(series):
    """int64 when every value is an int, float64 (None -> NaN) when every value is a number or
    None; objects otherwise, so that a wrong type shows up as a failed check, not a crash here."""
    import pandas as pd

    values = series.tolist()
    kinds = set(map(type, values))
    if kinds == {int}:  # (one pass over the types; bool is not int here)
        return pd.Series(values, dtype="int64", index=series.index)
    if all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
        return pd.Series([math.nan if v is None else float(v) for v in values], dtype="float64",
                         index=series.index)
    return series


# --------------------------------------------------------------------------- results -> findings


def _plain(value: Any) -> Any:
    """numpy / pandas scalars to plain Python, for messages and JSON."""
    if hasattr(value, "isoformat"):
        try:
            text = value.isoformat()
        except ValueError:  # NaT
            return None
        # the frames hold UTC datetimes without a time zone (see _naive_utc)
        return text + "Z" if getattr(value, "tzinfo", None) is None and "T" in text else text
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _label(suite: str, entry: dict[str, Any]) -> str:
    if suite == "judgments":
        pair = f"({_plain(entry.get('query_id'))}, {_plain(entry.get('doc_id'))})"
        line = _plain(entry.get("line"))
        return f"line {line} {pair}" if line is not None else pair
    if suite == "query_categories":
        return str(_plain(entry.get("category")))
    rid = _plain(entry.get("id"))
    return str(rid) if rid not in (None, "") else f"element {int(_plain(entry['row'])) + 1}"


def _checked_columns(kwargs: dict[str, Any]) -> list[str]:
    if "column_list" in kwargs:
        return list(kwargs["column_list"])
    if "column_A" in kwargs:
        return [kwargs["column_A"], kwargs["column_B"]]
    return [kwargs["column"]] if "column" in kwargs else []


def _examples(suite: str, entries: list[dict[str, Any]], shown: list[str]) -> list[str]:
    identity = set(_INDEX_COLUMNS[suite])  # already in the label
    out: list[str] = []
    for entry in entries:
        values = ", ".join(f"{c}={_plain(entry.get(c))!r}" for c in shown if c not in identity)
        text = f"{_label(suite, entry)} ({values})" if values else _label(suite, entry)
        if text not in out:
            out.append(text)
        if len(out) == EXAMPLES:
            break
    return out


def _exception_message(info: Any) -> str | None:
    if not isinstance(info, dict):
        return None
    if info.get("raised_exception"):
        return str(info.get("exception_message"))
    for nested in info.values():
        if isinstance(nested, dict) and nested.get("raised_exception"):
            return str(nested.get("exception_message"))
    return None


def _findings(suite: str, result, file: str, rows: int) -> tuple[list[Finding], dict[str, list]]:
    """Findings of one suite run, and the offending index rows of each stale-reason check."""
    findings: list[Finding] = []
    stale_rows: dict[str, list[dict[str, Any]]] = {}
    for r in result.results:
        config = r.expectation_config
        meta = config.meta or {}
        reason = meta.get("stale_reason")
        if r.success:
            continue
        gx_severity = getattr(config.severity, "value", config.severity)  # FailureSeverity
        severity = "error" if gx_severity == "critical" else "warning"
        expected = config.description or config.type
        where = meta.get("field")
        error = _exception_message(r.exception_info)
        if error is not None:
            findings.append(Finding(suite, config.type, "error",
                                    f"expected {expected}; the check could not be "
                                    f"evaluated ({error})", 0, [], where, file))
            continue
        res = r.result or {}
        if "unexpected_index_list" in res:
            entries = res.get("unexpected_index_list") or []
            count = int(res.get("unexpected_count") or 0)
            examples = _examples(suite, entries, _checked_columns(config.kwargs))
            unit = "categories" if suite == "query_categories" else "rows"
            message = f"expected {expected}; {count} of {rows} {unit} failed"
            if reason is not None:
                stale_rows[reason] = entries
        elif "missing_count" in res or "partial_missing_list" in res:  # set containment
            missing = [str(_plain(v)) for v in res.get("partial_missing_list") or []]
            count = int(res.get("missing_count") or len(missing))
            examples = missing[:EXAMPLES]
            message = f"expected {expected}; {count} missing"
        else:  # table-level
            count = 1
            examples = []
            message = f"expected {expected}; observed {_plain(res.get('observed_value'))!r}"
        if examples:
            message += f", e.g. {'; '.join(examples[:3])}"
        findings.append(Finding(suite, config.type, severity, message, count, examples, where,
                                file))
    return findings, stale_rows


# --------------------------------------------------------------------------- the suites, here or apart


def _check_suites(frames: dict[str, Any], parameters: dict[str, Any], suites: list[str],
                  files: dict[str, str], directory: str | None = None
                  ) -> tuple[list[Finding], dict[str, list[dict[str, Any]]]]:
    """Each of `suites` run over its frame: the findings, and the offending rows of each
    stale-reason check."""
    findings: list[Finding] = []
    stale_rows: dict[str, list[dict[str, Any]]] = {}
    with _lock:
        _validation_definitions(directory)
        for suite in suites:
            result = _run_suite(suite, frames[suite], parameters)
            found, stale = _findings(suite, result, files[suite], len(frames[suite]))
            findings.extend(found)
            stale_rows.update(stale)
    return findings, stale_rows


def serve_apart(directory: str) -> None:
    """The process apart (`Apart`): GX imported and the suites built at once, while the caller
    builds its frames; then one request read from stdin (pickled frames, parameters, suites,
    files), its findings written to stdout (pickled ("ok", result) or ("error", exception)).
    Anything GX prints goes to stderr, so stdout carries only the answer."""
    import pickle

    answer_to = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        with _lock:
            _validation_definitions(directory)
        failed = None
    except Exception as exc:  # a suite file GX refuses: answered once the request comes
        failed = exc
    try:
        request = pickle.load(sys.stdin.buffer)
    except EOFError:  # closed without a request
        return
    if failed is None:
        try:
            answer = ("ok", _check_suites(*request, directory))
        except Exception as exc:
            answer = ("error", exc)
    else:
        answer = ("error", failed)
    pickle.dump(answer, answer_to, protocol=pickle.HIGHEST_PROTOCOL)
    answer_to.flush()


class Apart:
    """A process of its own for Great Expectations (`validate_collection(apart=True)`), started as
    this is built (a fresh interpreter running `serve_apart`: GX's import starts at once and
    overlaps the caller's frames); `check` sends it the frames and reads the findings back;
    `close` ends it. The suites' folder is resolved here and handed over, so the process reads
    the same suites whatever its working folder or settings."""

    def __init__(self) -> None:
        import subprocess

        self.directory = str(expectations_dir())
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH"))
                                            if p)
        code = "import sys; from searcheval.evaluation.validation import serve_apart; " \
               "serve_apart(sys.argv[1])"
        self._process = subprocess.Popen([sys.executable, "-c", code, self.directory],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)

    def check(self, frames: dict[str, Any], parameters: dict[str, Any], suites: list[str],
              files: dict[str, str]) -> tuple[list[Finding], dict[str, list[dict[str, Any]]]]:
        import pickle

        process = self._process
        try:
            pickle.dump((frames, parameters, suites, files), process.stdin,
                        protocol=pickle.HIGHEST_PROTOCOL)
            process.stdin.close()
            kind, value = pickle.load(process.stdout)
        except (BrokenPipeError, EOFError, pickle.UnpicklingError) as exc:
            code = process.wait()
            raise RuntimeError(f"the validation process ended (exit {code}) before it "
                               "answered: killed, or out of memory?") from exc
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        """The process ended: it exits once it has answered, or on its closed stdin."""
        import subprocess

        process = self._process
        if process.stdin is not None and not process.stdin.closed:
            process.stdin.close()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


# --------------------------------------------------------------------------- public API


def default_categories(collection: Collection) -> tuple[str, ...]:
    """The known category set: the one the collection's format fixes (the fixtures' five, BEIR's
    'all'), the data's own categories (WANDS, mapped tables); for a collection built in code,
    ('all',) when it looks like BEIR, the fixture categories otherwise."""
    if collection.categories == DATA_CATEGORIES:
        return tuple(sorted({q.category for q in collection.queries}))
    if isinstance(collection.categories, tuple):
        return collection.categories
    if "qrels" in collection.sources:
        return BEIR_CATEGORIES
    if "judgments" in collection.sources:
        return CATEGORIES
    if collection.queries and all(q.category == "all" for q in collection.queries):
        return BEIR_CATEGORIES
    return CATEGORIES


def _file_of(collection: Collection, suite: str) -> str:
    for key in _SOURCE_KEYS[suite]:
        if key in collection.sources:
            return str(collection.sources[key])
    return f"<{collection.name}>:{suite}"


def validate_collection(
    collection: Collection,
    *,
    max_age_days: int | None = MAX_AGE_DAYS,
    now: datetime | None = None,
    min_per_category: int = MIN_PER_CATEGORY,
    categories: tuple[str, ...] | None = None,
    apart: bool = False,
) -> ValidationReport:
    """Check a collection against the suites in `expectations/`.

    Errors (the run must be refused: call `raise_for_errors`) and warnings (stale judgments:
    reported, and left out of scoring by `fresh_judgments`). `categories` is the known category
    set (default: `default_categories(collection)`); `max_age_days=None` disables the age check.
    A judgment without `judged_at` (BEIR) is never too old nor changed after it was judged.

    `apart=True`: Great Expectations is imported and run in a process of its own, which exits
    before this returns (`Apart`), so its ~250 MiB of modules do not stay in this process for the
    rest of a long run; its import overlaps building the frames here.
    """
    apart = Apart() if apart else None
    try:
        return _validate(collection, max_age_days=max_age_days, now=now,
                         min_per_category=min_per_category, categories=categories, apart=apart)
    finally:
        if apart is not None:
            apart.close()
            from searcheval import allocator

            allocator.release()  # the frames' memory, kept by pyarrow's pool and the heap


def _validate(collection: Collection, *, max_age_days: int | None, now: datetime | None,
              min_per_category: int, categories: tuple[str, ...] | None,
              apart: Apart | None) -> ValidationReport:
    now = _utc(now) if now is not None else datetime.now(timezone.utc)
    if categories is None:
        categories = default_categories(collection)
    notes = list(collection.notes)
    if collection.categories == DATA_CATEGORIES and categories == default_categories(collection):
        # the data's own categories (e.g. WANDS' 190 query classes, 99 of them with one query) are
        # what they are: a small one is noted, not refused; its per-category means are noisy
        small = sorted(c for c, n in Counter(q.category for q in collection.queries).items()
                       if n < min_per_category)
        if small:
            notes.append(f"{len(small)} of {len(categories)} categories have fewer than "
                         f"{min_per_category} queries (their means are noisy), e.g. "
                         + ", ".join(repr(c) for c in small[:EXAMPLES]))
        min_per_category = 1
    lo, hi = collection.grade_scale
    catalog, queries, category_counts, judgments = _frames(collection, now=now,
                                                           categories=tuple(categories))
    query_ids = [q.id for q in collection.queries]
    parameters = {
        "categories": list(categories),
        "min_per_category": min_per_category,
        "grades": list(range(int(lo), int(hi) + 1)),
        "query_ids": query_ids,
        "max_age_days": float(max_age_days) if max_age_days is not None else math.inf,
    }
    frames = {"catalog": catalog, "queries": queries, "query_categories": category_counts,
              "judgments": judgments}
    suites = [s for s in SUITES  # no catalog: the engine holds the documents, none to check
              if s != "catalog" or collection.has_catalog]
    files = {suite: _file_of(collection, suite) for suite in suites}
    if apart is not None:
        findings, stale_rows = apart.check(frames, parameters, suites, files)
    else:
        findings, stale_rows = _check_suites(frames, parameters, suites, files)
    findings.sort(key=lambda f: f.severity != "error")  # errors first, suite order kept

    stale: list[StaleJudgment] = []
    seen: set[tuple[str, str]] = set()
    for reason in STALE_REASONS:  # one entry per judgment, the most serious reason
        for entry in stale_rows.get(reason, []):
            key = (str(_plain(entry["query_id"])), str(_plain(entry["doc_id"])))
            if key not in seen:
                seen.add(key)
                stale.append(StaleJudgment(key[0], key[1], reason))
    known = set(query_ids)
    judged = {j.query_id for j in collection.judgments if j.query_id in known}
    return ValidationReport(findings=findings, stale=stale, judged_queries=len(judged),
                            queries=len(collection.queries), notes=notes)


def fresh_judgments(collection: Collection, report: ValidationReport) -> list[Judgment]:
    """The collection's judgments minus the stale ones."""
    stale = {(s.query_id, s.doc_id) for s in report.stale}
    return [j for j in collection.judgments if (j.query_id, j.doc_id) not in stale]
