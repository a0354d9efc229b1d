"""The run history: recent runs' metrics as a table and a chart, and baselines made from a past
run (from Postgres or from an output folder)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from searcheval import store
from searcheval.defaults import GATED_CONFIGURATION, GATED_METRICS
from searcheval.errors import InputError
from searcheval.evaluation.baseline import Baseline, Provenance, baseline_from_values
from searcheval.io.files import read_json, read_text
from searcheval.store.database import open_database

HISTORY_METRICS = ("ndcg@10", "mrr", "recall@20")


def _git(summary: dict) -> tuple[str | None, bool | None]:
    """The git commit and dirty flag a run recorded (what_ran's `code`), if it did."""
    code = (summary.get("what_ran") or {}).get("code")
    if isinstance(code, dict) and ("commit" in code or "dirty" in code):
        return code.get("commit"), code.get("dirty")
    for block in (summary.get("ran"), summary.get("record"), summary):
        if isinstance(block, dict) and isinstance(block.get("git"), dict):
            git = block["git"]
            return git.get("commit"), git.get("dirty")
    return summary.get("git_commit"), summary.get("git_dirty")


def _served(summary: dict) -> str | None:
    """The configuration the run served (what_ran's `served`)."""
    served = (summary.get("what_ran") or {}).get("served")
    return served if isinstance(served, str) else None


def _marks(summary: dict, served: str | None, shown: str | None) -> list[str]:
    """What a history row must not hide: an incomplete run (failed queries beyond the
    allowance), a candidate gated beside the served configuration, another configuration than
    the served one shown."""
    marks = []
    failures = summary.get("failures") or {}
    if failures.get("incomplete"):
        marks.append("incomplete")
    gated = (summary.get("gate") or {}).get("configuration")
    if gated and served and gated != served:
        marks.append(f"candidate:{gated}")
    if shown and served and shown != served:
        marks.append(f"not served: {shown}")
    return marks


def recent_runs(n: int, configuration: str | None = None, url: str | None = None, *,
                dataset: str | None = None, label: str | None = None,
                source: str | None = None) -> list[dict]:
    """The last n runs, oldest first: {run_id, started_at, gate_passed, metrics: {name: value},
    dataset, label, source, commit, dirty, configuration, marks, baseline_updates: [...]},
    filtered by dataset, label and source (nightly, manual, candidate; replay reads the replay
    history). `configuration` None: each run's own served configuration."""
    from searcheval.store import snapshots

    with open_database(url) as conn:
        if source == "replay":
            rows = [r for r in store.last_replay_runs(conn, max(n, 1) * 10)
                    if label is None or (r.get("summary") or {}).get("label") == label][:n]
        else:
            rows = snapshots.find_runs(conn, n=n, dataset=dataset, configuration=configuration,
                                       label=label, kind=source)
        updates = snapshots.baseline_updates(conn)
        out = []
        for run in reversed(rows):
            summary = run.get("summary") or {}
            served = _served(summary)
            if source == "replay":
                shown = run["configuration"]
                metrics = {r["metric"]: r["value"] for r in store.replay_run_metrics(conn, run["run_id"])
                           if r["segment"] == "(all)" and r["configuration"] == run["configuration"]}
                gate, kind, run_label = run["passed"], "replay", summary.get("label")
                marks = []
            else:
                rows_of_run = store.run_metrics(conn, run["run_id"])
                if served is None:  # a run that recorded no served configuration: the gated
                    # one, else the only one it scored
                    scored = sorted({r["configuration"] for r in rows_of_run})
                    served = (summary.get("gate") or {}).get("configuration") \
                        or (scored[0] if len(scored) == 1 else None)
                shown = configuration or served
                metrics = {r["metric"]: r["value"] for r in rows_of_run
                           if r["configuration"] == shown and r["category"] == "all"}
                gate, kind, run_label = run["gate_passed"], run.get("kind"), run.get("label")
                marks = _marks(summary, served, shown)
            commit, dirty = _git(summary)
            failed = ((summary.get("failures") or {}).get("configurations") or {}).get(shown) or {}
            out.append({"run_id": run["run_id"], "started_at": run["started_at"],
                        "gate_passed": gate, "metrics": metrics, "dataset": run.get("dataset"),
                        "label": run_label, "source": kind, "commit": commit, "dirty": dirty,
                        "configuration": shown, "marks": marks,
                        "failed": failed.get("failed") or 0, "queries": failed.get("queries")})
    for i, run in enumerate(out):
        after = out[i - 1]["started_at"] if i else None
        run["baseline_updates"] = [
            u for u in updates if (dataset is None or u["dataset"] in (None, dataset))
            and u["updated_at"] <= run["started_at"] and (after is None or u["updated_at"] > after)]
    return out


def history_table(runs: list[dict], configuration: str | None = None) -> str:
    if not runs:
        return "no run recorded yet"
    lines = [f"{'run':<26}{'started (UTC)':<18}{'dataset':<14}{'configuration':<15}"
             + "".join(f"{m:<11}" for m in HISTORY_METRICS)
             + f"{'gate':<9}{'source':<10}{'commit':<10}{'dirty':<7}{'label':<12}marks"]
    partial = []  # what a starred mean is over
    for r in runs:
        gate = {True: "passed", False: "TRIPPED", None: "-"}[r["gate_passed"]]
        dirty = {True: "yes", False: "no", None: "-"}[r.get("dirty")]
        marks = list(r.get("marks") or [])
        if r.get("baseline_updates"):
            marks.append("baseline updated before")
        starred = "incomplete" in marks or bool(r.get("failed"))  # a mean over fewer queries
        if r.get("failed"):
            n = r.get("queries") or 0
            partial.append(f"* {r['run_id']}: all {n} queries failed: no mean"
                           if n and r["failed"] >= n else
                           f"* {r['run_id']}: {r['failed']} quer"
                           f"{'y' if r['failed'] == 1 else 'ies'} failed: means over "
                           f"{n - r['failed']} of {n}")
        cells = [_fmt(r["metrics"].get(m)) for m in HISTORY_METRICS]  # no mean: "-", unstarred
        values = "".join(f"{c + ('*' if starred and c != '-' else ''):<11}" for c in cells)
        lines.append((f"{r['run_id']:<26}{r['started_at']:%Y-%m-%d %H:%M}  "
                      + f"{(r.get('dataset') or '-')[:13]:<14}"
                      + f"{(r.get('configuration') or '-')[:14]:<15}" + values
                      + f"{gate:<9}{r.get('source') or '-':<10}{(r.get('commit') or '-')[:8]:<10}"
                      + f"{dirty:<7}{(r.get('label') or '-')[:11]:<12}"
                      + ", ".join(marks)).rstrip())
    lines.extend(partial)
    shown = configuration or "each run's served configuration"
    lines.append(f"({shown}, {len(runs)} runs, oldest first"
                 + ("; * a mean over the queries answered, not over all"
                    if any("incomplete" in (r.get("marks") or []) or r.get("failed")
                           for r in runs) else "") + ")")
    return "\n".join(lines)


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def history_chart(runs: list[dict], configuration: str | None, path: str | Path) -> Path:
    """A PNG line chart of the history metrics over the runs; tripped runs marked in red, baseline
    updates as dashed lines before the first run after them, labels written above their run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    x = list(range(len(runs)))
    for metric in HISTORY_METRICS:
        ax.plot(x, [r["metrics"].get(metric) for r in runs], marker="o", label=metric)
    for i, r in enumerate(runs):
        if r["gate_passed"] is False:
            ax.axvline(i, color="red", alpha=0.3)
        if r.get("baseline_updates"):
            ax.axvline(i - 0.5, color="black", linestyle="--", alpha=0.6)
            ax.text(i - 0.5, 1.02, "baseline", fontsize=6, ha="center")
        if r.get("label"):
            ax.annotate(r["label"], (i, 0.03), fontsize=6, rotation=90, ha="center")
    ax.set_xticks(x, [f"{r['started_at']:%m-%d %H:%M}" for r in runs], rotation=45, ha="right",
                  fontsize=7)
    ax.set_ylim(0, 1.08)
    ax.set_title(f"searcheval: {configuration or 'served configuration'}, last {len(runs)} runs (red: gate tripped; "
                 "dashed: baseline updated)", fontsize=9)
    ax.legend(loc="lower left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _configuration_hash(summary: dict, configuration: str) -> str | None:
    """The hash of the resolved configuration, when the run recorded one."""
    for block in (summary.get("what_ran"), summary.get("ran"), summary.get("record"), summary):
        if not isinstance(block, dict):
            continue
        confs = block.get("configurations")
        if isinstance(confs, dict) and isinstance(confs.get(configuration), dict):
            entry = confs[configuration]
            return entry.get("sha256") or entry.get("hash")
    return None


def _conventions(raw: dict | None) -> dict:
    raw = raw or {}
    return {k: raw[k] for k in ("gain", "no_relevant", "relevance_level", "depth") if k in raw}


def _what_ran(summary: dict) -> dict:
    for block in (summary.get("what_ran"), summary.get("ran"), summary.get("record")):
        if isinstance(block, dict) and isinstance(block.get("configurations"), dict):
            return block
    return {}


def gated_configuration(summary: dict, scored: set[str] | list[str],
                        previous: Baseline | None, source: str) -> str:
    """Which configuration of a run a new baseline is of: the previous baseline's when the run
    scored it, else the configuration the run served (its record of what ran), else the only
    one it scored. Refused, naming what the run has, when none of these is found."""
    scored = sorted(scored)
    if previous is not None and previous.configuration in scored:
        return previous.configuration
    ran = _what_ran(summary)
    served = ran.get("served") or next(
        (n for n, c in (ran.get("configurations") or {}).items()
         if isinstance(c, dict) and c.get("served")), None)
    if served in scored:
        return served
    if len(scored) == 1:
        return scored[0]
    if GATED_CONFIGURATION in scored and not ran:
        return GATED_CONFIGURATION  # a run from before the record of what ran
    raise InputError(f"{source} served {served or 'no recorded configuration'} and scored "
                     f"{', '.join(scored) or 'nothing'}: cannot tell which configuration the "
                     "baseline is of", field="configurations")


def _configuration_params(summary: dict, configuration: str) -> dict:
    entry = (_what_ran(summary).get("configurations") or {}).get(configuration) or {}
    return dict(entry.get("params") or {})


def _judgment_set(summary: dict) -> dict:
    return dict(((summary.get("judging") or {}).get("judgments") or {}).get("set") or {})


@dataclass
class RunForBaseline:
    """A new baseline made from a run, and what the run was: its gate verdict and dataset."""

    baseline: Baseline
    gate_passed: bool | None
    dataset: str | None
    failures: dict | None = None  # the run's failed queries of the baseline's configuration
    incomplete: bool = False  # it failed more queries than it allows


def baseline_from_run(run_id: str, previous: Baseline | None, url: str | None = None, *,
                      provenance: Provenance | None = None) -> RunForBaseline:
    with open_database(url) as conn:
        runs = [r for r in store.last_runs(conn, 10_000) if r["run_id"] == run_id]
        if not runs:
            raise InputError(f"no run {run_id!r} in the history", field="from_run")
        from searcheval.store import snapshots

        row = snapshots.load_run(conn, run_id) or runs[0]
        metric_rows = store.run_metrics(conn, run_id)
        configuration = gated_configuration(row.get("summary") or {},
                                            {r["configuration"] for r in metric_rows},
                                            previous, f"run {run_id}")
        means = {r["metric"]: r["value"] for r in metric_rows
                 if r["configuration"] == configuration and r["category"] == "all"}
        per_query: dict[str, dict] = {}
        for r in store.run_query_results(conn, run_id):
            if r["configuration"] == configuration:
                per_query.setdefault(r["query_id"], {})[r["metric"]] = r["value"]
    if not means:
        raise InputError(f"run {run_id!r} has no metrics for {configuration!r}", field="from_run")
    summary = row.get("summary") or {}
    p = provenance or Provenance()
    p.dataset = row.get("dataset") or summary.get("dataset")
    p.dataset_fingerprint = dict(row.get("input_hashes") or {})
    queries = summary.get("queries")
    p.query_ids = sorted(queries) if queries else (sorted(per_query) if p.dataset else None)
    p.configuration_hash = _configuration_hash(summary, configuration)
    p.configuration_params = _configuration_params(summary, configuration)
    p.judgments = _judgment_set(summary)
    p.conventions = {**_conventions(summary.get("conventions")),
                     "metrics": sorted(m for m in GATED_METRICS if m in means)}
    baseline = baseline_from_values(configuration, means, per_query, run_id=run_id,
                                    model=_model_used(runs[0]["model"],
                                                      summary.get("embeddings")),
                                    previous=previous, provenance=p)
    return RunForBaseline(baseline, row.get("gate_passed"), p.dataset,
                          *_failures(summary, configuration))


def baseline_from_output(directory: str | Path, previous: Baseline | None, *,
                         provenance: Provenance | None = None) -> RunForBaseline:
    directory = Path(directory)
    metrics_path = directory / "metrics.json"
    doc, _ = read_json(metrics_path)
    if not isinstance(doc, dict):
        raise InputError("expected the metrics.json of a run", file=metrics_path)
    configuration = gated_configuration(doc, list(doc.get("configurations") or {}), previous,
                                        str(metrics_path))
    conf = (doc.get("configurations") or {}).get(configuration)
    if not conf:
        raise InputError(f"no configuration {configuration!r}", file=metrics_path,
                         field="configurations")
    per_query: dict[str, dict] = {}
    csv_path = directory / "per_query.csv"
    for line_no, row in enumerate(csv.DictReader(read_text(csv_path).splitlines()), start=2):
        if row.get("configuration") != configuration:
            continue
        try:
            value = float(row["value"]) if row["value"] else None
        except (KeyError, ValueError):
            raise InputError("expected a number", file=csv_path, line=line_no,
                             field="value") from None
        per_query.setdefault(row["query_id"], {})[row["metric"]] = value
    p = provenance or Provenance()
    p.dataset = doc.get("dataset")
    p.dataset_fingerprint = dict(doc.get("input_hashes") or {})
    queries = doc.get("queries")
    p.query_ids = sorted(queries) if queries else None
    p.configuration_hash = _configuration_hash(doc, configuration)
    p.configuration_params = _configuration_params(doc, configuration)
    p.judgments = _judgment_set(doc)
    p.conventions = {**_conventions(doc.get("conventions")),
                     "metrics": sorted(m for m in GATED_METRICS if m in conf["means"])}
    baseline = baseline_from_values(configuration, conf["means"], per_query,
                                    run_id=doc["run_id"],
                                    model=_model_used((doc.get("embeddings") or {}).get("model"),
                                                      doc.get("embeddings")),
                                    previous=previous, provenance=p)
    return RunForBaseline(baseline, (doc.get("gate") or {}).get("passed"), p.dataset,
                          *_failures(doc, configuration))


def _model_used(model: str | None, embeddings: dict | None) -> str | None:
    """The run's embedding model when some configuration read vectors (embedded texts or cached
    ones), else None: a baseline of a run that used no model names none (as its report does)."""
    stats = embeddings or {}
    used = stats.get("embedded") or stats.get("from_cache") or stats.get("documents")
    return model if used else None


def _failures(summary: dict, configuration: str) -> tuple[dict | None, bool]:
    failures = summary.get("failures") or {}
    entry = (failures.get("configurations") or {}).get(configuration)
    return entry, configuration in (failures.get("incomplete") or [])
