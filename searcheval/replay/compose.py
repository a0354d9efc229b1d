"""One composition of a replay, used by `searcheval replay` and by the replay flow's tasks alike.

    plan = plan_replay(traces=..., thresholds=..., ...)   # checks every option, before any I/O
    references = load_references(plan)                    # thresholds, catalog, judgments, queries
    table = read_file_traces(plan, plan.traces)          # the JSONL file (or read_db_traces)
    report = score(plan, table, table_b, references)      # the sides, labels, metrics, thresholds, A/B

The flow wraps `load_references`, `read_file_traces`, `read_db_traces` and `score` in tasks; the
CLI calls them in order. Publishing (files, history rows, alert, renderings) is
`searcheval.replay.report`. Plain functions; no Prefect here.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from searcheval import defaults
from searcheval.errors import InputError
from searcheval.io.files import sha256_file
from searcheval.io.fixtures import load_catalog, load_judgments, load_queries
from searcheval.io.traces import TraceTable, parse_time_bound, read_traces, select_traces
from searcheval.io.trec import load_qrels
from searcheval.metrics.engine import Metric, Settings, parse_metrics
from searcheval.replay.scoring import (
    ReplayReport,
    Thresholds,
    load_thresholds,
    query_index,
    replay,
    split_configurations,
)

if TYPE_CHECKING:
    import psycopg


@dataclass(frozen=True)
class ReplayPlan:
    """Every option of one replay, checked: where the traces come from, the selection, the
    reference files, the metrics and their settings."""

    traces: str | None
    traces_b: str | None
    from_db: bool
    since: datetime | None
    until: datetime | None
    segment: str | None
    configurations: list[str] | None
    thresholds: str | None
    catalog: str | None
    judgments: str | None
    queries: str | None
    metrics: list[Metric]
    settings: Settings
    max_grade: int
    max_bad_share: float
    permutations: int
    seed: int
    source: str  # the history's source: `replay:<file>[,<file b>]` or `replay:db`
    ab_max_losses: int | None = None  # A/B: losing queries B may have (None: no more than wins)

    @property
    def grade_scale(self) -> tuple[int, int]:
        return (0, self.max_grade)


def plan_replay(*, traces: str | Path | None = None, traces_b: str | Path | None = None,
                from_db: bool = False, since: str | datetime | None = None,
                until: str | datetime | None = None, segment: str | None = None,
                configurations: Sequence[str] | str | None = None,
                thresholds: str | Path | None = None, catalog: str | Path | None = None,
                judgments: str | Path | None = None, queries: str | Path | None = None,
                metrics: Sequence[str] | str = defaults.REPLAY_METRICS,
                gain: str = defaults.GAIN, relevance_level: int = defaults.RELEVANCE_LEVEL,
                no_relevant: str = defaults.NO_RELEVANT, max_grade: int = defaults.MAX_GRADE,
                max_bad_share: float = defaults.MAX_BAD_SHARE,
                permutations: int = defaults.PERMUTATIONS, seed: int = 0,
                ab_max_losses: int | None = None) -> ReplayPlan:
    """Check every option (named by its field) before anything is read."""
    if ab_max_losses is not None and (isinstance(ab_max_losses, bool)
                                      or not isinstance(ab_max_losses, int) or ab_max_losses < 0):
        raise InputError(f"expected a whole number >= 0, got {ab_max_losses!r}",
                         field="ab_max_losses")
    settings = replay_settings(gain=gain, relevance_level=relevance_level, no_relevant=no_relevant,
                               max_grade=max_grade, max_bad_share=max_bad_share,
                               permutations=permutations)
    if isinstance(configurations, str):
        configurations = configurations.split(",")
    names = [n.strip() for n in configurations if n.strip()] if configurations else None
    source = replay_source(traces, traces_b, from_db, names)
    text = lambda v: None if v is None else str(v)  # noqa: E731
    return ReplayPlan(
        traces=text(traces), traces_b=text(traces_b), from_db=from_db,
        since=parse_time_bound(since, "since"), until=parse_time_bound(until, "until"),
        segment=segment, configurations=names or None, thresholds=text(thresholds),
        catalog=text(catalog), judgments=text(judgments), queries=text(queries),
        metrics=parse_metrics(metrics), settings=settings, max_grade=max_grade,
        max_bad_share=max_bad_share, permutations=permutations, seed=seed, source=source,
        ab_max_losses=ab_max_losses)


def new_replay_id(now: datetime | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return f"replay-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def replay_settings(*, gain: str = defaults.GAIN,
                    relevance_level: int = defaults.RELEVANCE_LEVEL,
                    no_relevant: str = defaults.NO_RELEVANT, max_grade: int = defaults.MAX_GRADE,
                    max_bad_share: float = defaults.MAX_BAD_SHARE,
                    permutations: int = defaults.PERMUTATIONS) -> Settings:
    """Check the options every front end takes and return the metric settings."""
    if isinstance(max_grade, bool) or not isinstance(max_grade, int) or max_grade < 1:
        raise InputError(f"expected a top grade >= 1, got {max_grade}", field="max_grade")
    if not 1 <= relevance_level <= max_grade:
        raise InputError(f"expected a relevance level in 1..{max_grade}, got "
                         f"{relevance_level}", field="relevance_level")
    if not 0.0 <= max_bad_share <= 1.0:
        raise InputError(f"expected a share in [0, 1], got {max_bad_share}",
                         field="max_bad_share")
    if permutations < 1:
        raise InputError("expected at least 1 permutation", field="permutations")
    return Settings(gain=gain, relevance_level=relevance_level, no_relevant=no_relevant)


def replay_source(traces: str | Path | None, traces_b: str | Path | None = None,
                  from_db: bool = False, configurations: Sequence[str] | None = None) -> str:
    """Check that exactly one source is named; returns the history's source,
    `replay:<file>[,<file b>]` or `replay:db`."""
    if from_db and traces is not None:
        raise InputError("expected `traces` (a file) or `from_db`, not both", field="traces")
    if not from_db and traces is None:
        raise InputError("expected `traces` (a file) or `from_db`", field="traces")
    if traces_b is not None and from_db:
        raise InputError("`traces_b` is a second file against `traces`; with `from_db` split "
                         "the table with `configurations`", field="traces_b")
    if traces_b is not None and configurations:
        raise InputError("`configurations` splits one `traces` file; with `traces_b` each file "
                         "is one side", field="configurations")
    if from_db:
        return "replay:db"
    return f"replay:{traces}" + (f",{traces_b}" if traces_b is not None else "")


@dataclass
class References:
    """What traces are checked and labelled against; each part optional."""

    thresholds: Thresholds | None = None
    catalog: frozenset[str] | None = None  # ids of the resources that exist
    queries: dict[str, str] | None = None  # query_index of the golden queries
    judgments: dict[str, dict[str, int]] | None = None
    input_hashes: dict[str, str] = field(default_factory=dict)  # sha256 per file, for history


def load_references(plan: ReplayPlan) -> References:
    """Thresholds JSON, catalog.json, judgments (judgments.csv, TREC or BEIR qrels) and
    golden_queries.json, each when the plan names it."""
    thresholds, catalog, judgments, queries = (plan.thresholds, plan.catalog, plan.judgments,
                                               plan.queries)
    max_grade = plan.max_grade
    files = {"thresholds": thresholds, "catalog": catalog, "judgments": judgments,
             "queries": queries}
    refs = References()
    refs.thresholds = load_thresholds(thresholds) if thresholds else None
    refs.catalog = frozenset(r.id for r in load_catalog(Path(catalog))) if catalog else None
    golden = load_queries(Path(queries)) if queries else None
    refs.queries = query_index(golden) if golden else None
    if judgments:
        refs.judgments = load_judgment_map(Path(judgments), max_grade,
                                           {q.id for q in golden} if golden else None)
    refs.input_hashes = {name: sha256_file(Path(path)) for name, path in files.items() if path}
    return refs


def load_judgment_map(path: Path, max_grade: int,
                      query_ids: set[str] | None) -> dict[str, dict[str, int]]:
    """judgments.csv (the fixtures' format) by its .csv suffix, else TREC or BEIR qrels."""
    if path.suffix.lower() == ".csv":
        out: dict[str, dict[str, int]] = {}
        for j in load_judgments(path, grade_scale=(0, max_grade), query_ids=query_ids):
            out.setdefault(j.query_id, {})[j.doc_id] = j.grade
        return out
    return load_qrels(path, max_grade=max_grade)


def read_file_traces(plan: ReplayPlan, path: str) -> TraceTable:
    """One JSONL file of traces, validated, with the plan's selection applied."""
    table = read_traces(path, grade_scale=plan.grade_scale, max_bad_share=plan.max_bad_share)
    return select_traces(table, since=plan.since, until=plan.until, segment=plan.segment)


def read_db_traces(plan: ReplayPlan, conn: "psycopg.Connection") -> TraceTable:
    """The plan's selection of the `search_traces` table."""
    from searcheval.store.traces import load_trace_table

    return load_trace_table(conn, since=plan.since, until=plan.until, segment=plan.segment,
                            grade_scale=plan.grade_scale, max_bad_share=plan.max_bad_share)


def score(plan: ReplayPlan, table: TraceTable, table_b: TraceTable | None,
          references: References) -> ReplayReport:
    """The sides of the plan (two files, or one table split by configuration), replayed."""
    sides, excluded = choose_sides(table, table_b, plan.configurations)
    return replay(sides, metrics=plan.metrics, settings=plan.settings,
                  thresholds=references.thresholds, judgments=references.judgments,
                  queries=references.queries, catalog=references.catalog,
                  permutations=plan.permutations, seed=plan.seed, excluded=excluded,
                  ab_max_losses=plan.ab_max_losses)


def side_name(table: TraceTable) -> str:
    """A file's configuration when all its traces name the same one, else the file."""
    codes = set(table.configuration.tolist())
    if len(codes) == 1 and -1 not in codes:
        return table.configurations[codes.pop()]
    return table.source


def choose_sides(table: TraceTable, table_b: TraceTable | None = None,
                 configurations: Sequence[str] | None = None
                 ) -> tuple[list[tuple[str | None, TraceTable]], int]:
    """The sides to replay and how many traces were left out: two files are A and B (named by
    their configuration, else by their file); one table is split by `split_configurations`."""
    if table_b is not None:
        sides = [(side_name(table), table), (side_name(table_b), table_b)]
        if sides[0][0] == sides[1][0]:
            sides = [(table.source, table), (table_b.source, table_b)]
        return sides, 0
    names = [n.strip() for n in configurations if n.strip()] if configurations else None
    return split_configurations(table, names or None)
