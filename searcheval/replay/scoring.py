"""Replay: score recorded production traces without re-running search.

Steps, each a plain function over a `TraceTable` (searcheval.traces):

1. `resolve_labels`: a trace's own labels (relevance_scores, else relevant_ids at grade 1); when it
   has none, the judgments of its query ({query_id: {doc: grade}}, matched by the trace's query_id,
   else by its query text through a golden-query index); then, with a catalog, labels of documents
   that no longer exist are dropped and counted. A trace left with no label is unlabelled.
2. `measure_coverage`: labelled traces / all traces, overall and per segment.
3. `score_traces`: per-trace metrics through the metric engine (`searcheval.metrics.evaluate`) on
   qrels and a run keyed by trace_id, with score = len(retrieved) - position so that the engine's
   ranking is exactly the retrieved order. Unlabelled traces get NaN: left out of every mean, and
   counted against coverage. Traces are evaluated in batches of similar depth, so memory stays flat.
4. `summarize_segments`: the mean of each metric per segment (and overall), labelled traces only.
5. `check_thresholds`: per-segment floors (`default`, overridden per segment) and `min_coverage`.
6. `compare_configurations`: A/B on the queries both configurations saw, per segment and metric:
   wins / losses / ties (from B's side: a win is B better than A) and the two-sided paired
   sign-flip randomization test of `searcheval.stats` (the gate's, one implementation) on the
   per-query differences.

`replay` runs them all. What the CLI and the flow share around it (option checks, reference files,
reading the traces, choosing the sides) is `searcheval.replay.compose`; publishing (files, history
rows, alert, renderings) is `searcheval.replay.report`.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Collection, Iterable, Mapping, Sequence

import numpy as np

from searcheval.defaults import GATED_METRICS, REPLAY_METRICS, SIGNIFICANCE_LEVEL
from searcheval.errors import InputError
from searcheval.io.files import read_json
from searcheval.io.traces import (
    FROM_IDS,
    FROM_SCORES,
    NO_LABELS,
    BadLines,
    TraceTable,
    normalize_query,
    ragged_index,
)
from searcheval.metrics.engine import Metric, Settings, evaluate, parse_metric, parse_metrics
from searcheval.metrics.stats import DEFAULT_PERMUTATIONS, sign_flip_pvalues

DEFAULT_REPLAY_METRICS = REPLAY_METRICS
ALL = "(all)"  # the segment name of overall numbers
FROM_JUDGMENTS = 3
CELL_BUDGET = 2_000_000  # (traces x (depth + labels)) cells per metric-engine batch
_EPS = 1e-12


# --------------------------------------------------------------------------- labels


@dataclass(frozen=True)
class StaleLabels:
    dropped: int  # labels of documents absent from the catalog
    traces: int  # traces that lost at least one label
    left_unlabelled: int  # traces that lost all of them

    def to_dict(self) -> dict:
        return {"dropped": self.dropped, "traces": self.traces,
                "left_unlabelled": self.left_unlabelled}


@dataclass
class Labels:
    """Resolved labels of every trace of a table: ragged doc codes and grades, and their source."""

    docs: np.ndarray
    grades: np.ndarray
    offsets: np.ndarray
    source: np.ndarray  # int8: NO_LABELS, FROM_SCORES, FROM_IDS, FROM_JUDGMENTS
    stale: StaleLabels | None = None

    @property
    def counts(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def labelled(self) -> np.ndarray:
        return self.counts > 0

    def sources(self) -> dict[str, int]:
        n = np.bincount(self.source, minlength=4)
        return {"relevance_scores": int(n[FROM_SCORES]), "relevant_ids": int(n[FROM_IDS]),
                "judgments": int(n[FROM_JUDGMENTS]), "none": int(n[NO_LABELS])}


def query_index(queries: Iterable) -> dict[str, str]:
    """Golden queries (objects with .id and .text) as {normalized text: query id}."""
    return {normalize_query(q.text): q.id for q in queries}


def resolve_query_ids(table: TraceTable,
                      index: Mapping[str, str] | None = None) -> tuple[np.ndarray, list[str]]:
    """Per trace, a code into the returned names: its query_id, else the id its normalized text
    has in `index`, else -1."""
    names = list(table.query_ids)
    code = {name: i for i, name in enumerate(names)}
    by_text = np.full(len(table.queries) + 1, -1, dtype=np.int64)  # last slot: never used
    if index:
        for t, text in enumerate(table.queries):
            qid = index.get(normalize_query(text))
            if qid is not None:
                if qid not in code:
                    code[qid] = len(names)
                    names.append(qid)
                by_text[t] = code[qid]
    ids = np.where(table.query_id >= 0, table.query_id, by_text[table.query])
    return ids, names


def resolve_labels(
    table: TraceTable,
    *,
    judgments: Mapping[str, Mapping[str, int]] | None = None,
    queries: Mapping[str, str] | None = None,
    catalog: Collection[str] | None = None,
) -> Labels:
    """The labels each trace is scored with (see the module docstring). `queries` is a
    `query_index` for traces without a query_id; `catalog` the ids of the resources that exist."""
    n = len(table)
    own = np.diff(table.label_offsets)
    source = table.label_source.copy()
    counts = own.copy()
    use_j = np.zeros(n, dtype=bool)
    if judgments:
        qids, names = resolve_query_ids(table, queries)
        jnames = [q for q in names if judgments.get(q)]
        jcode = {q: i for i, q in enumerate(jnames)}
        per_name = np.array([jcode.get(q, -1) for q in names] + [-1], dtype=np.int64)
        jtrace = per_name[qids]  # qids of -1 read the trailing -1
        intern = table.intern_doc
        jdocs = np.array([intern(d) for q in jnames for d in judgments[q]], dtype=np.int32)
        jgrades = np.array([g for q in jnames for g in judgments[q].values()], dtype=np.int32)
        jcount = np.array([len(judgments[q]) for q in jnames], dtype=np.int64)
        joffsets = np.concatenate([[0], np.cumsum(jcount)]).astype(np.int64)
        use_j = (own == 0) & (jtrace >= 0)
        counts[use_j] = jcount[jtrace[use_j]]
        source[use_j] = FROM_JUDGMENTS
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    if use_j.any():
        docs = np.empty(int(offsets[-1]), dtype=np.int32)
        grades = np.empty(int(offsets[-1]), dtype=np.int32)
        rows = np.flatnonzero(own > 0)
        src, _ = ragged_index(table.label_offsets, rows)
        dst, _ = ragged_index(offsets, rows)
        docs[dst], grades[dst] = table.label_docs[src], table.label_grades[src]
        rows = np.flatnonzero(use_j)
        src, _ = ragged_index(joffsets, jtrace[rows])
        dst, _ = ragged_index(offsets, rows)
        docs[dst], grades[dst] = jdocs[src], jgrades[src]
    else:
        docs, grades = table.label_docs, table.label_grades
    stale = None
    if catalog is not None:
        existing = catalog if isinstance(catalog, (set, frozenset, dict)) else set(catalog)
        exists = np.fromiter((d in existing for d in table.docs), dtype=bool,
                             count=len(table.docs))
        keep = exists[docs]
        row_of = np.repeat(np.arange(n), counts)
        dropped = np.bincount(row_of[~keep], minlength=n)
        kept = counts - dropped
        emptied = (counts > 0) & (kept == 0)
        stale = StaleLabels(dropped=int(dropped.sum()), traces=int((dropped > 0).sum()),
                            left_unlabelled=int(emptied.sum()))
        docs, grades = docs[keep], grades[keep]
        np.cumsum(kept, out=offsets[1:])
        source[emptied] = NO_LABELS
    return Labels(docs=docs, grades=grades, offsets=offsets, source=source, stale=stale)


# --------------------------------------------------------------------------- coverage


@dataclass
class Coverage:
    """Annotation coverage: labelled traces / all traces, overall and per segment."""

    traces: int
    labelled: int
    segments: dict[str, tuple[int, int]]  # segment -> (traces, labelled)
    min_coverage: float | None = None

    @property
    def share(self) -> float:
        return self.labelled / self.traces if self.traces else 0.0

    @property
    def passed(self) -> bool:
        return self.min_coverage is None or self.share >= self.min_coverage - _EPS

    def segment_share(self, segment: str) -> float:
        traces, labelled = self.segments[segment]
        return labelled / traces if traces else 0.0

    def to_dict(self) -> dict:
        return {
            "share": self.share, "labelled": self.labelled,
            "unlabelled": self.traces - self.labelled, "traces": self.traces,
            "min_coverage": self.min_coverage, "passed": self.passed,
            "segments": {s: {"share": self.segment_share(s), "labelled": lab,
                             "unlabelled": t - lab, "traces": t}
                         for s, (t, lab) in self.segments.items()},
        }


def measure_coverage(table: TraceTable, labels: Labels,
                     min_coverage: float | None = None) -> Coverage:
    nseg = len(table.segments)
    traces = np.bincount(table.segment, minlength=nseg)
    labelled = np.bincount(table.segment, weights=labels.labelled, minlength=nseg)
    segments = {table.segments[s]: (int(traces[s]), int(labelled[s]))
                for s in _segment_order(table) if traces[s]}
    return Coverage(traces=len(table), labelled=int(labels.labelled.sum()), segments=segments,
                    min_coverage=min_coverage)


def _segment_order(table: TraceTable) -> list[int]:
    return sorted(range(len(table.segments)), key=lambda s: table.segments[s])


# --------------------------------------------------------------------------- metrics


@dataclass
class TraceScores:
    """Per-trace metric values (NaN: unlabelled, or left out by the no-relevant policy)."""

    trace_ids: list[str]
    values: dict[str, np.ndarray]

    def per_trace(self) -> dict[str, dict[str, float | None]]:
        cols = {m: v.tolist() for m, v in self.values.items()}
        return {t: {m: (None if math.isnan(c[i]) else c[i]) for m, c in cols.items()}
                for i, t in enumerate(self.trace_ids)}


def score_traces(table: TraceTable, labels: Labels, metrics: Sequence[Metric | str],
                 settings: Settings = Settings(), *,
                 cell_budget: int = CELL_BUDGET) -> TraceScores:
    """Every labelled trace through `metrics.evaluate`, in batches of traces of similar depth.

    Per batch: qrels {trace_id: {doc: grade}} and run {trace_id: {doc: len - position}}, with
    documents as their integer codes (cheaper than strings; retrieved ids are distinct, so scores
    never tie and the id never breaks a tie). Unlabelled traces stay NaN."""
    specs = [m if isinstance(m, Metric) else parse_metric(m) for m in metrics]
    n = len(table)
    values = {m.name: np.full(n, np.nan) for m in specs}
    rows = np.flatnonzero(labels.labelled)
    if not rows.size:
        return TraceScores(table.trace_ids, values)
    depth = np.diff(table.retrieved_offsets)
    width = labels.counts
    order = rows[np.argsort(depth[rows], kind="stable")]
    wmax = int(width[rows].max())
    ids = table.trace_ids
    start = 0
    while start < len(order):
        # rows are sorted by depth, so a batch's deepest row is its last
        size = max(1, cell_budget // (int(depth[order[start]]) + wmax + 1))
        stop = min(start + size, len(order))
        while stop - start > 1 and \
                (stop - start) * (int(depth[order[stop - 1]]) + wmax + 1) > cell_budget:
            stop = start + (stop - start) // 2
        batch = order[start:stop]
        r_idx, r_off = ragged_index(table.retrieved_offsets, batch)
        l_idx, l_off = ragged_index(labels.offsets, batch)
        ret = table.retrieved[r_idx].tolist()
        ldocs = labels.docs[l_idx].tolist()
        lgrades = labels.grades[l_idx].tolist()
        r_off, l_off = r_off.tolist(), l_off.tolist()
        keys = [ids[i] for i in batch.tolist()]
        run, qrels = {}, {}
        for j, key in enumerate(keys):
            a, b = r_off[j], r_off[j + 1]
            run[key] = dict(zip(ret[a:b], range(b - a, 0, -1)))  # score = len - position
            c, d = l_off[j], l_off[j + 1]
            qrels[key] = dict(zip(ldocs[c:d], lgrades[c:d]))
        result = evaluate(qrels, run, specs, settings, query_ids=keys)
        for name, arr in result.values.items():
            values[name][batch] = arr
        start = stop
    return TraceScores(table.trace_ids, values)


def summarize_segments(table: TraceTable, scores: TraceScores
                       ) -> tuple[dict[str, dict[str, float | None]], dict[str, float | None]]:
    """Mean of each metric per segment and overall, over the traces that have a value."""
    nseg = len(table.segments)
    present = np.bincount(table.segment, minlength=nseg) > 0
    order = [s for s in _segment_order(table) if present[s]]
    segments: dict[str, dict[str, float | None]] = {table.segments[s]: {} for s in order}
    overall: dict[str, float | None] = {}
    for name, v in scores.values.items():
        valid = ~np.isnan(v)
        sums = np.bincount(table.segment[valid], weights=v[valid], minlength=nseg)
        cnt = np.bincount(table.segment[valid], minlength=nseg)
        for s in order:
            segments[table.segments[s]][name] = float(sums[s] / cnt[s]) if cnt[s] else None
        overall[name] = float(v[valid].mean()) if valid.any() else None
    return segments, overall


def count_values(table: TraceTable, scores: TraceScores) -> dict[str, dict[str, int]]:
    """How many traces each mean of `summarize_segments` averages: per segment and ALL, per
    metric (labelled traces, less those the no-relevant policy `skip` leaves out)."""
    nseg = len(table.segments)
    present = np.bincount(table.segment, minlength=nseg) > 0
    order = [s for s in _segment_order(table) if present[s]]
    out: dict[str, dict[str, int]] = {table.segments[s]: {} for s in order}
    out[ALL] = {}
    for name, v in scores.values.items():
        valid = ~np.isnan(v)
        cnt = np.bincount(table.segment[valid], minlength=nseg)
        for s in order:
            out[table.segments[s]][name] = int(cnt[s])
        out[ALL][name] = int(valid.sum())
    return out


# --------------------------------------------------------------------------- thresholds


@dataclass(frozen=True)
class Thresholds:
    """`{"default": {metric: floor}, "segments": {segment: {metric: floor, "min_coverage"?}},
    "min_coverage": share}`; a segment's floors override the default ones metric by metric."""

    default: dict[str, float] = field(default_factory=dict)
    segments: dict[str, dict[str, float]] = field(default_factory=dict)
    min_coverage: float | None = None
    segment_min_coverage: dict[str, float] = field(default_factory=dict)

    def for_segment(self, segment: str) -> dict[str, float]:
        return {**self.default, **self.segments.get(segment, {})}

    @property
    def metrics(self) -> list[str]:
        names = list(self.default)
        for floors in self.segments.values():
            names += [m for m in floors if m not in names]
        return names


def load_thresholds(path: str | Path) -> Thresholds:
    path = Path(path)
    data, _ = read_json(path)
    return parse_thresholds(data, file=path)


def parse_thresholds(data: object, *, file: str | Path | None = None) -> Thresholds:
    shape = ('expected {"default": {metric: floor}, "segments": {segment: {metric: floor}}, '
             '"min_coverage": share}')
    if not isinstance(data, dict):
        raise InputError(shape, file=file)
    unknown = set(data) - {"default", "segments", "min_coverage"}
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)}; {shape}", file=file)

    def share(value: object, where: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or not 0.0 <= value <= 1.0:
            raise InputError(f"expected a number in [0, 1], got {value!r}", file=file, field=where)
        return float(value)

    def floors(obj: object, where: str, allow_coverage: bool) -> tuple[dict[str, float],
                                                                        float | None]:
        if not isinstance(obj, dict):
            raise InputError("expected an object {metric: floor}", file=file, field=where)
        out: dict[str, float] = {}
        coverage = None
        for name, value in obj.items():
            if allow_coverage and name == "min_coverage":
                coverage = share(value, f"{where}.min_coverage")
                continue
            try:
                metric = parse_metric(str(name)).name
            except InputError as exc:
                raise InputError(exc.message, file=file, field=f"{where}.{name}") from None
            out[metric] = share(value, f"{where}.{name}")
        return out, coverage

    default, _ = floors(data.get("default", {}), "default", False)
    segments_raw = data.get("segments", {})
    if not isinstance(segments_raw, dict):
        raise InputError("expected an object {segment: {metric: floor}}", file=file,
                         field="segments")
    segments: dict[str, dict[str, float]] = {}
    seg_cov: dict[str, float] = {}
    for seg, obj in segments_raw.items():
        segments[seg], cov = floors(obj, f"segments.{seg}", True)
        if cov is not None:
            seg_cov[seg] = cov
    min_cov = data.get("min_coverage")
    return Thresholds(default=default, segments=segments,
                      min_coverage=None if min_cov is None else share(min_cov, "min_coverage"),
                      segment_min_coverage=seg_cov)


@dataclass(frozen=True)
class Failure:
    """A missed floor. `value` is None when the segment has no labelled trace to measure."""

    segment: str
    metric: str
    value: float | None
    threshold: float

    @property
    def delta(self) -> float | None:
        return None if self.value is None else self.value - self.threshold

    def describe(self) -> str:
        if self.value is None:
            return (f"segment={self.segment} {self.metric}=- < {self.threshold:.3f} "
                    "(no labelled trace)")
        return (f"segment={self.segment} {self.metric}={self.value:.3f} < {self.threshold:.3f} "
                f"({self.delta:+.3f})")

    def to_dict(self) -> dict:
        return {"segment": self.segment, "metric": self.metric, "value": self.value,
                "threshold": self.threshold, "delta": self.delta, "message": self.describe()}


def check_thresholds(segments: Mapping[str, Mapping[str, float | None]], coverage: Coverage,
                     thresholds: Thresholds | None) -> list[Failure]:
    """Every missed floor: overall coverage first, then segment by segment (sorted)."""
    if thresholds is None:
        return []
    failures: list[Failure] = []
    if thresholds.min_coverage is not None and coverage.share < thresholds.min_coverage - _EPS:
        failures.append(Failure(ALL, "coverage", coverage.share, thresholds.min_coverage))
    for seg in sorted(segments):
        floor = thresholds.segment_min_coverage.get(seg)
        if floor is not None and seg in coverage.segments:
            value = coverage.segment_share(seg)
            if value < floor - _EPS:
                failures.append(Failure(seg, "coverage", value, floor))
        for metric, limit in thresholds.for_segment(seg).items():
            value = segments[seg].get(metric)
            if value is None or value < limit - _EPS:
                failures.append(Failure(seg, metric, value, limit))
    return failures


# --------------------------------------------------------------------------- A/B


@dataclass(frozen=True)
class Comparison:
    """B against A on the queries both saw: a win is B better than A on a query."""

    pairs: int
    wins: int
    losses: int
    ties: int
    mean_a: float | None
    mean_b: float | None
    p_value: float | None

    @property
    def delta(self) -> float | None:
        return None if self.mean_a is None else self.mean_b - self.mean_a

    def to_dict(self) -> dict:
        return {"pairs": self.pairs, "wins": self.wins, "losses": self.losses, "ties": self.ties,
                "mean_a": self.mean_a, "mean_b": self.mean_b, "delta": self.delta,
                "p_value": self.p_value}


def query_means(table: TraceTable, scores: TraceScores,
                queries: Mapping[str, str] | None = None
                ) -> tuple[list[tuple[str, str]], np.ndarray]:
    """Per (segment, query key), the mean of each metric over that query's traces (NaN if none).

    The query key is the query_id (the trace's own, else its text's id in `queries`), else
    `text:` + the normalized query text. Returns the keys and a (keys x metrics) matrix.
    """
    qids, names = resolve_query_ids(table, queries)
    text_keys = [f"text:{normalize_query(t)}" for t in table.queries]
    key_names = names + text_keys
    key = np.where(qids >= 0, qids, len(names) + table.query.astype(np.int64))
    group = table.segment.astype(np.int64) * len(key_names) + key
    uniq, inv = np.unique(group, return_inverse=True)
    inv = inv.ravel()
    means = np.full((len(uniq), len(scores.values)), np.nan)
    for m, v in enumerate(scores.values.values()):
        valid = ~np.isnan(v)
        sums = np.bincount(inv[valid], weights=v[valid], minlength=len(uniq))
        cnt = np.bincount(inv[valid], minlength=len(uniq))
        np.divide(sums, cnt, out=means[:, m], where=cnt > 0)
    keys = [(table.segments[g // len(key_names)], key_names[g % len(key_names)])
            for g in uniq.tolist()]
    return keys, means


@dataclass
class ABResult:
    a: str
    b: str
    metrics: list[str]
    segments: dict[str, dict[str, Comparison]]  # includes ALL: the pooled pairs

    @property
    def pairs(self) -> int:
        first = self.segments.get(ALL, {})
        return max((c.pairs for c in first.values()), default=0)

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "wins_are": "b better than a", "pairs": self.pairs,
                "segments": {s: {m: c.to_dict() for m, c in per.items()}
                             for s, per in self.segments.items()}}


def compare_configurations(
    a: tuple[TraceTable, TraceScores],
    b: tuple[TraceTable, TraceScores],
    *,
    names: tuple[str, str] = ("A", "B"),
    queries: Mapping[str, str] | None = None,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
) -> ABResult:
    """Per segment (and pooled over all), per metric: B against A on the (segment, query) pairs
    both sides measured; a query seen several times counts once, with its mean."""
    metrics = list(a[1].values)
    if list(b[1].values) != metrics:
        raise InputError("both configurations must be scored on the same metrics", field="metrics")
    keys_a, means_a = query_means(*a, queries)
    keys_b, means_b = query_means(*b, queries)
    row_b = {k: i for i, k in enumerate(keys_b)}
    common = sorted((k, i, row_b[k]) for i, k in enumerate(keys_a) if k in row_b)
    ma = means_a[[i for _, i, _ in common]] if common else np.zeros((0, len(metrics)))
    mb = means_b[[j for _, _, j in common]] if common else np.zeros((0, len(metrics)))
    seg_of = np.array([k[0] for k, _, _ in common], dtype=object)
    out: dict[str, dict[str, Comparison]] = {}
    for seg in sorted(set(seg_of.tolist())) + [ALL]:
        rows = np.ones(len(common), dtype=bool) if seg == ALL else seg_of == seg
        xa, xb = ma[rows], mb[rows]
        valid = ~np.isnan(xa) & ~np.isnan(xb)
        diff = np.where(valid, xb - xa, 0.0)
        p = sign_flip_pvalues(diff, permutations=permutations, seed=seed) if len(diff) else \
            np.full(len(metrics), np.nan)
        per: dict[str, Comparison] = {}
        for m, name in enumerate(metrics):
            v = valid[:, m]
            d = diff[v, m]
            npairs = int(v.sum())
            per[name] = Comparison(
                pairs=npairs, wins=int((d > _EPS).sum()), losses=int((d < -_EPS).sum()),
                ties=int((np.abs(d) <= _EPS).sum()),
                mean_a=float(xa[v, m].mean()) if npairs else None,
                mean_b=float(xb[v, m].mean()) if npairs else None,
                p_value=float(p[m]) if npairs else None)
        out[seg] = per
    return ABResult(a=names[0], b=names[1], metrics=metrics, segments=out)


@dataclass(frozen=True)
class ABLoss:
    """Why B loses to A on a gated metric: more losing queries than allowed, or a significant
    drop of the mean (pooled over every segment)."""

    metric: str
    kind: str  # losses | significant-drop
    wins: int
    losses: int
    allowed: int | None
    delta: float | None
    p_value: float | None

    def describe(self) -> str:
        if self.kind == "losses":
            allowed = f"at most {self.allowed} allowed" if self.allowed is not None else ""
            return f"B loses on {self.metric}: {self.losses} queries worse, {self.wins} better" \
                + (f" ({allowed})" if allowed else "")
        return (f"B loses on {self.metric}: mean {self.delta:+.4f}, paired randomization "
                f"p = {self.p_value:.4f}")

    def to_dict(self) -> dict:
        return {"metric": self.metric, "kind": self.kind, "wins": self.wins,
                "losses": self.losses, "allowed": self.allowed, "delta": self.delta,
                "p_value": self.p_value, "summary": self.describe()}


def ab_verdict(ab: ABResult, metrics: Sequence[str] | None = None, *,
               max_losses: int | None = None, level: float = SIGNIFICANCE_LEVEL) -> list[ABLoss]:
    """Where B loses to A, over every segment pooled: on each gated metric (the gate's metrics
    that the A/B measured, else all of them), more losing queries than `max_losses` (default:
    more losing than winning queries), or a mean that drops with p <= `level`."""
    pooled = ab.segments.get(ALL, {})
    if metrics is None:
        metrics = [m for m in GATED_METRICS if m in pooled] or list(pooled)
    out = []
    for metric in metrics:
        c = pooled.get(metric)
        if c is None or not c.pairs:
            continue
        allowed = c.wins if max_losses is None else max_losses
        if c.losses > allowed:
            out.append(ABLoss(metric, "losses", c.wins, c.losses,
                              None if max_losses is None else max_losses, c.delta, c.p_value))
        if c.delta is not None and c.delta < -_EPS and c.p_value is not None \
                and c.p_value <= level:
            out.append(ABLoss(metric, "significant-drop", c.wins, c.losses, max_losses, c.delta,
                              c.p_value))
    return out


def split_configurations(table: TraceTable, names: Sequence[str] | None = None
                         ) -> tuple[list[tuple[str | None, TraceTable]], int]:
    """The table's configurations to evaluate, and how many traces were left out.

    `names` selects one (no A/B) or two (A, B) configurations by the `configuration` field.
    Without `names`: one group when every trace has the same configuration (or none); an A/B of
    the two, in sorted order, when every trace names one of exactly two; otherwise refused.
    """
    conf = table.configuration
    present = [table.configurations[c] for c in sorted(set(conf.tolist())) if c >= 0]
    missing = int((conf < 0).sum())
    if names:
        if len(names) > 2:
            raise InputError(f"expected one or two configurations, got {len(names)}",
                             field="configurations")
        groups = []
        for name in names:
            if name not in present:
                raise InputError(f"no trace of configuration {name!r} in {table.source} "
                                 f"(present: {', '.join(sorted(present)) or 'none'})",
                                 field="configurations")
            code = table.configurations.index(name)
            groups.append((name, table.select(conf == code)))
        return groups, len(table) - sum(len(t) for _, t in groups)
    if not present or (len(present) == 1 and not missing):
        return [(present[0] if present else None, table)], 0
    if len(present) == 2 and not missing:
        pair = sorted(present)
        return [(n, table.select(conf == table.configurations.index(n))) for n in pair], 0
    counts = ", ".join(f"{n}" for n in sorted(present)) + (f", none ({missing} traces)"
                                                            if missing else "")
    raise InputError(f"the traces hold several configurations ({counts}); name one, or two to "
                     "compare, with `configurations`", file=table.source, field="configuration")


# --------------------------------------------------------------------------- the whole replay


@dataclass
class SideReport:
    """One configuration's traces: coverage, labels, metrics per segment and overall."""

    name: str | None
    source: str
    traces: int
    coverage: Coverage
    labels: dict[str, int]
    stale: StaleLabels | None
    bad: BadLines
    segments: dict[str, dict[str, float | None]]
    overall: dict[str, float | None]
    scores: TraceScores
    counts: dict[str, dict[str, int]] = field(default_factory=dict)  # values per segment, ALL

    def to_dict(self) -> dict:
        return {"configuration": self.name, "source": self.source, "traces": self.traces,
                "coverage": self.coverage.to_dict(), "segments": self.segments,
                "overall": self.overall, "labels": self.labels,
                "stale_labels": self.stale.to_dict() if self.stale else None,
                "bad_lines": self.bad.to_dict()}


@dataclass
class ReplayReport:
    main: SideReport  # the gated side: the only configuration, or A
    failures: list[Failure]
    metrics: list[str]
    settings: Settings
    other: SideReport | None = None  # B
    ab: ABResult | None = None
    excluded: int = 0  # traces of configurations not selected
    segments_without_traces: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    ab_losses: list[ABLoss] = field(default_factory=list)  # the A/B verdict: B loses when any

    @property
    def passed(self) -> bool:
        return not self.failures and not self.ab_losses

    def to_dict(self, *, per_trace: bool = False) -> dict:
        m = self.main
        out = {
            "passed": self.passed, "traces": m.traces, "coverage": m.coverage.to_dict(),
            "segments": m.segments,
            "failures": [f.to_dict() for f in self.failures],
            "overall": m.overall, "configuration": m.name, "source": m.source,
            "metrics": self.metrics,
            "settings": {"gain": self.settings.effective_gain,
                         "relevance_level": self.settings.relevance_level,
                         "no_relevant": self.settings.effective_policy},
            "labels": m.labels, "stale_labels": m.stale.to_dict() if m.stale else None,
            "bad_lines": m.bad.to_dict(), "excluded_traces": self.excluded,
            "segments_without_traces": self.segments_without_traces,
            "ab": None, "timings_s": self.timings,
        }
        if self.ab is not None and self.other is not None:
            out["ab"] = {**self.ab.to_dict(), "b_report": self.other.to_dict(),
                         "verdict": "B loses" if self.ab_losses else "B holds",
                         "losing": [loss.to_dict() for loss in self.ab_losses]}
        if per_trace:
            out["per_trace"] = m.scores.per_trace()
        return out


def replay(
    sides: Sequence[tuple[str | None, TraceTable]],
    *,
    metrics: str | Iterable[str] | Sequence[Metric] = DEFAULT_REPLAY_METRICS,
    settings: Settings = Settings(),
    thresholds: Thresholds | None = None,
    judgments: Mapping[str, Mapping[str, int]] | None = None,
    queries: Mapping[str, str] | None = None,
    catalog: Collection[str] | None = None,
    permutations: int = DEFAULT_PERMUTATIONS,
    seed: int = 0,
    excluded: int = 0,
    ab_max_losses: int | None = None,
) -> ReplayReport:
    """Score one configuration (gated by `thresholds`) or two (A gated, B compared with A; B
    loses, and the replay fails, by `ab_verdict` with `ab_max_losses`)."""
    if not 1 <= len(sides) <= 2:
        raise InputError(f"expected one or two configurations, got {len(sides)}",
                         field="configurations")
    specs = parse_metrics(metrics) if isinstance(metrics, str) else \
        [m if isinstance(m, Metric) else parse_metric(m) for m in metrics]
    if thresholds is not None:
        specs += [parse_metric(n) for n in thresholds.metrics
                  if n not in {s.name for s in specs}]
    specs = list(dict.fromkeys(specs))
    timings: dict[str, float] = {}
    catalog_set = None if catalog is None else (
        catalog if isinstance(catalog, (set, frozenset, dict)) else set(catalog))
    min_cov = thresholds.min_coverage if thresholds is not None else None

    def side(name: str | None, table: TraceTable, tag: str) -> SideReport:
        t0 = time.perf_counter()
        labels = resolve_labels(table, judgments=judgments, queries=queries, catalog=catalog_set)
        t1 = time.perf_counter()
        scores = score_traces(table, labels, specs, settings)
        t2 = time.perf_counter()
        segments, overall = summarize_segments(table, scores)
        counts = count_values(table, scores)
        coverage = measure_coverage(table, labels, min_cov)
        t3 = time.perf_counter()
        timings[f"labels{tag}"] = t1 - t0
        timings[f"metrics{tag}"] = t2 - t1
        timings[f"segments{tag}"] = t3 - t2
        return SideReport(name=name, source=table.source, traces=len(table), coverage=coverage,
                          labels=labels.sources(), stale=labels.stale, bad=table.bad,
                          segments=segments, overall=overall, scores=scores, counts=counts)

    main = side(sides[0][0], sides[0][1], "")
    failures = check_thresholds(main.segments, main.coverage, thresholds)
    missing = sorted(set(thresholds.segments) - set(main.segments)) if thresholds else []
    other = ab = None
    if len(sides) == 2:
        other = side(sides[1][0], sides[1][1], "_b")
        t0 = time.perf_counter()
        names = (sides[0][0] or "A", sides[1][0] or "B")
        ab = compare_configurations((sides[0][1], main.scores), (sides[1][1], other.scores),
                                    names=names, queries=queries, permutations=permutations,
                                    seed=seed)
        timings["ab"] = time.perf_counter() - t0
    return ReplayReport(main=main, failures=failures, metrics=[s.name for s in specs],
                        settings=settings, other=other, ab=ab, excluded=excluded,
                        segments_without_traces=missing, timings=timings,
                        ab_losses=ab_verdict(ab, max_losses=ab_max_losses) if ab else [])
