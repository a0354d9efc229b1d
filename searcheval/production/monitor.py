"""The live monitor (deployment `searcheval-live`): the recent traces, scored window by window,
with a change detector that alerts on sustained drops, not on one noisy window.

**Windows.** Time is cut into fixed windows of `interval_minutes` (default 15) aligned on the
epoch: [k*interval, (k+1)*interval). A run scores every *complete* window after the last one it
stored (its history in `live_windows`), oldest first, so a run that was down for an hour catches
up with four windows and none is skipped; a window is stored once (the table's key), so none is
scored twice. Without history the monitor starts with the last complete window (or at `start`).
A window without traces is stored empty (traces 0, no metrics) rather than failing. Traces that
arrive after their window was scored are not scored (the window is closed).

**Labels**, per trace, first that applies: the trace's own labels (`relevance_scores`,
`relevant_ids`); its explicit feedback on documents (a grade, or thumbs up 1 / down 0); the
judgments given for its query (`judgments`, by query_id, else the id of its normalised text:
`clicks.text_query_id`), which the caller builds from the sources that count
(`judging.trust`). Traces without labels are counted, not scored.

**Metrics**: MRR and Precision@5 by default (any metric names of `searcheval score`), the mean
over a window's labelled traces, each trace's ranked list its `retrieved_ids`.

**Change detector**: a one-sided lower CUSUM on the first metric. The target is the mean of the
first `warmup` scored windows (or `target` when given); each window with at least `min_labelled`
labelled traces adds its shortfall: S = max(0, S + (target - value - k)); the monitor alerts when
S > h, then S restarts at 0. A single window that drops by D raises S to D - k: it alerts only
when D > h + k. A sustained drop of d per window alerts after about h / (d - k) windows. The
state after each window is stored with it, so a restarted monitor resumes where it stopped.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Mapping

from searcheval.errors import InputError

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class MonitorSettings:
    name: str = "live"
    interval_minutes: int = 15
    metrics: tuple[str, ...] = ("mrr", "precision@5")
    relevance_level: int = 1
    cusum_k: float = 0.02  # slack: a drop smaller than this per window is noise
    cusum_h: float = 0.15  # alert when the accumulated shortfall exceeds this
    warmup: int = 4  # scored windows whose mean is the target
    target: float | None = None  # or a fixed target
    min_labelled: int = 10  # a window with fewer labelled traces does not move the detector
    start: datetime | None = None  # first window's start when there is no history

    def __post_init__(self) -> None:
        checks = [
            ("interval_minutes", isinstance(self.interval_minutes, int)
             and not isinstance(self.interval_minutes, bool) and 1 <= self.interval_minutes
             <= 24 * 60, "a whole number of minutes in 1..1440"),
            ("cusum_k", _real(self.cusum_k) and self.cusum_k >= 0, "a number >= 0"),
            ("cusum_h", _real(self.cusum_h) and self.cusum_h > 0, "a number > 0"),
            ("warmup", isinstance(self.warmup, int) and self.warmup >= 1, "a whole number >= 1"),
            ("min_labelled", isinstance(self.min_labelled, int) and self.min_labelled >= 1,
             "a whole number >= 1"),
            ("metrics", bool(self.metrics), "at least one metric"),
            ("name", isinstance(self.name, str) and bool(self.name.strip()), "a name"),
        ]
        for name, ok, expected in checks:
            if not ok:
                raise InputError(f"expected {expected}, got {getattr(self, name)!r}", field=name)

    @property
    def interval(self) -> timedelta:
        return timedelta(minutes=self.interval_minutes)

    def detector_parameters(self) -> dict:
        return {"kind": "cusum-lower", "metric": self.metrics[0], "k": self.cusum_k,
                "h": self.cusum_h, "warmup": self.warmup, "target": self.target,
                "min_labelled": self.min_labelled}


def _real(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# --------------------------------------------------------------------------- windows


def floor_time(ts: datetime, interval: timedelta) -> datetime:
    seconds = interval.total_seconds()
    return EPOCH + timedelta(seconds=math.floor((ts - EPOCH).total_seconds() / seconds) * seconds)


def due_windows(last_end: datetime | None, now: datetime, settings: MonitorSettings
                ) -> list[tuple[datetime, datetime]]:
    """The complete windows after `last_end` (the last stored window's end) up to `now`."""
    interval = settings.interval
    end = floor_time(now, interval)
    if last_end is not None:
        start = last_end
    elif settings.start is not None:
        start = floor_time(settings.start, interval)
    else:
        start = end - interval
    out = []
    while start + interval <= end:
        out.append((start, start + interval))
        start += interval
    return out


# --------------------------------------------------------------------------- labels and scores


def trace_labels(trace, judgments: Mapping[str, Mapping[str, int]] | None) -> tuple[dict, str]:
    """(labels, where from): own | feedback | judgments | none (see the module docstring)."""
    own = trace.labels()
    if own:
        return own, "own"
    fb = {f.doc_id: f.label() for f in trace.feedback or () if f.doc_id is not None}
    if fb:
        return fb, "feedback"
    if judgments:
        from searcheval.production.clicks import text_query_id

        key = trace.query_id if trace.query_id is not None else text_query_id(trace.query)
        found = judgments.get(key)
        if found:
            return dict(found), "judgments"
    return {}, "none"


def score_window(table, settings: MonitorSettings,
                 judgments: Mapping[str, Mapping[str, int]] | None = None) -> dict:
    """{traces, labelled, labels: {own, feedback, judgments, none}, metrics: {name: mean}}; the
    metrics are None when no trace has labels."""
    from searcheval.metrics.api import evaluate

    sources = {"own": 0, "feedback": 0, "judgments": 0, "none": 0}
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    n = 0 if table is None else len(table)
    for i in range(n):
        trace = table.trace(i)
        labels, where = trace_labels(trace, judgments)
        sources[where] += 1
        if not labels:
            continue
        qrels[trace.trace_id] = labels
        depth = len(trace.retrieved_ids)
        run[trace.trace_id] = {d: float(depth - r) for r, d in enumerate(trace.retrieved_ids)}
    metrics: dict[str, float | None] = {m: None for m in settings.metrics}
    if qrels:
        result = evaluate(qrels, run, list(settings.metrics),
                          relevance_level=settings.relevance_level)
        metrics = {m: (None if v is None else float(v)) for m, v in result.means.items()}
    return {"traces": n, "labelled": len(qrels), "labels": sources, "metrics": metrics}


# --------------------------------------------------------------------------- the detector


@dataclass
class CusumState:
    target: float | None = None
    warm: list[float] = field(default_factory=list)
    s: float = 0.0
    windows: int = 0  # windows that moved the detector (or its warm-up)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping | None) -> "CusumState":
        if not raw:
            return cls()
        return cls(target=raw.get("target"), warm=list(raw.get("warm") or []),
                   s=float(raw.get("s") or 0.0), windows=int(raw.get("windows") or 0))


def cusum_step(state: CusumState, value: float | None, labelled: int,
               settings: MonitorSettings) -> tuple[CusumState, bool]:
    """The detector after one window, and whether it alerts in this window."""
    state = CusumState(state.target if settings.target is None else settings.target,
                       list(state.warm), state.s, state.windows)
    if value is None or labelled < settings.min_labelled:
        return state, False
    state.windows += 1
    if state.target is None:
        state.warm.append(value)
        if len(state.warm) >= settings.warmup:
            state.target = sum(state.warm) / len(state.warm)
        return state, False
    state.s = max(0.0, state.s + (state.target - value - settings.cusum_k))
    if state.s > settings.cusum_h:
        state.s = 0.0
        return state, True
    return state, False


def run_detector(values: list[tuple[float | None, int]], settings: MonitorSettings
                 ) -> list[bool]:
    """Whether each window of a series (value, labelled traces) alerts: the detector alone."""
    state, out = CusumState(), []
    for value, labelled in values:
        state, fired = cusum_step(state, value, labelled, settings)
        out.append(fired)
    return out


# --------------------------------------------------------------------------- one run


@dataclass
class WindowResult:
    start: datetime
    end: datetime
    traces: int
    labelled: int
    metrics: dict
    labels: dict
    detector: dict
    alerted: bool

    def to_row(self, monitor: str) -> dict:
        return {"monitor": monitor, "window_start": self.start, "window_end": self.end,
                "traces": self.traces, "labelled": self.labelled,
                "metrics": {**self.metrics, "_labels": self.labels}, "detector": self.detector,
                "alerted": self.alerted}


def run_monitor(conn, settings: MonitorSettings, *, now: datetime | None = None,
                judgments: Mapping[str, Mapping[str, int]] | None = None,
                grade_scale: tuple[int, int] = (0, 3)) -> list[WindowResult]:
    """Score every due window (see the module docstring), each stored in its own transaction
    with the detector's state; returns the windows scored by this run."""
    from searcheval.store import live as store

    now = now or datetime.now(timezone.utc)
    results = []
    with store.monitor_lock(conn, settings.name):
        last = store.last_window(conn, settings.name)
        state = CusumState.from_dict(last["detector"].get("state") if last else None)
        for start, end in due_windows(last["window_end"] if last else None, now, settings):
            table = store.window_traces(conn, start, end, grade_scale=grade_scale)
            scored = score_window(table, settings, judgments)
            value = scored["metrics"].get(settings.metrics[0])
            state, fired = cusum_step(state, value, scored["labelled"], settings)
            result = WindowResult(start, end, scored["traces"], scored["labelled"],
                                  scored["metrics"], scored["labels"],
                                  {"state": state.to_dict(),
                                   "parameters": settings.detector_parameters()}, fired)
            store.save_window(conn, result.to_row(settings.name))
            results.append(result)
    return results


def series_rows(rows: list[dict], metrics: tuple[str, ...]) -> list[dict]:
    """The stored windows as artifact rows: start, traces, labelled, each metric, S, alerted."""
    out = []
    for r in rows:
        m = r["metrics"] or {}
        state = (r["detector"] or {}).get("state") or {}
        out.append({"window_start": r["window_start"].isoformat(), "traces": r["traces"],
                    "labelled": r["labelled"],
                    **{name: None if m.get(name) is None else round(m[name], 4)
                       for name in metrics},
                    "cusum_s": round(state.get("s", 0.0), 4), "target": state.get("target"),
                    "alerted": r["alerted"]})
    return out


def counted_judgments(conn, judgment_set: str, *, grade_scale: tuple[int, int] = (0, 3),
                      floor: float | None = None) -> dict[str, dict[str, int]]:
    """{query_id: {doc_id: grade}} of a judgment set for labelling traces: the human and
    imported grades (each judge's latest, median across judges), and where none exists the
    implicit grades, only while their agreement with the human grades holds (`judging.trust`)."""
    from searcheval.defaults import AGREEMENT_FLOOR
    from searcheval.judging.judgments import Rule, latest_by_judge
    from searcheval.judging.trust import agreement_with_humans
    from searcheval.store import judgments as store

    rows = store.load_judgment_rows(conn, judgment_set)
    rule = Rule("median")

    def effective(selected) -> dict[tuple[str, str], int]:
        return {pair: rule.combine({j: r.grade for j, r in by.items()})
                for pair, by in latest_by_judge(selected).items()}

    counted = effective([r for r in rows if r.source in ("human", "import")])
    implicit = effective([r for r in rows if r.source == "implicit"])
    human = effective([r for r in rows if r.source == "human"])
    if implicit:
        verdict = agreement_with_humans(implicit, human,
                                        list(range(grade_scale[0], grade_scale[1] + 1)),
                                        floor=AGREEMENT_FLOOR if floor is None else floor)
        if verdict["counts"]:
            for pair, grade in implicit.items():
                counted.setdefault(pair, grade)
    out: dict[str, dict[str, int]] = {}
    for (qid, doc), grade in counted.items():
        out.setdefault(qid, {})[doc] = grade
    return out


def series_markdown(table: list[dict], settings: MonitorSettings) -> str:
    """The series as a markdown report: one line per window, the alerts marked."""
    metric = settings.metrics[0]
    p = settings.detector_parameters()
    lines = [f"# searcheval live monitor `{settings.name}`", "",
             f"Windows of {settings.interval_minutes} minutes; change detector: lower CUSUM on "
             f"{metric} (k = {p['k']}, h = {p['h']}, target = mean of the first {p['warmup']} "
             f"windows, unless fixed: {p['target']}).", "",
             "| window | traces | labelled | " + " | ".join(settings.metrics)
             + " | CUSUM S | alert |",
             "|---|---:|---:|" + "---:|" * len(settings.metrics) + "---:|---|"]
    for r in table:
        values = " | ".join("-" if r[m] is None else f"{r[m]:.4f}" for m in settings.metrics)
        lines.append(f"| {r['window_start']} | {r['traces']} | {r['labelled']} | {values} | "
                     f"{r['cusum_s']:.4f} | {'ALERT' if r['alerted'] else ''} |")
    return "\n".join(lines) + "\n"


def live_alert(scored: list[WindowResult], settings: MonitorSettings):
    """An Alert when the detector fired in a window of this run, else None."""
    fired = [w for w in scored if w.alerted]
    if not fired:
        return None
    from searcheval.evaluation.alerts import Alert

    metric = settings.metrics[0]
    reasons = [{"kind": "live-drop",
                "summary": f"sustained drop of {metric} on live traffic: window "
                           f"{w.start.isoformat()} at {w.metrics.get(metric)}, target "
                           f"{w.detector['state'].get('target')} (CUSUM > "
                           f"{settings.cusum_h})", "window": w.start.isoformat()}
               for w in fired]
    return Alert(run_id=f"live:{settings.name}:{fired[-1].start.isoformat()}", reasons=reasons,
                 where="artifact searcheval-live-report")
