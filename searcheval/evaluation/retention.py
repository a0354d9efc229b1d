"""Output-folder retention: the run folders searcheval wrote under `output`, pruned by age.

Each run writes `OUTPUT/<run_id>/` (report.write_outputs) with a marker file, `.searcheval-run.json`
(`{"written_by": "searcheval", "run_id", "started_at"}`). `prune_outputs` deletes the run folders
started more than `older_than` ago, judged by that marker, never by a file's time. It deletes only
what it can prove searcheval wrote -- a folder holding the marker of its own run id, or a folder of
a version before the marker whose name is a run id and whose metrics.json names that run -- and
never the folder `OUTPUT/latest` points at. Anything else in `output` (a user's notes, other
folders, the links) is left alone. Postgres keeps every run's metrics whatever is pruned here;
`snapshot_retention` prunes the snapshots there (store.snapshots.prune_snapshots).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import datetime, timedelta, timezone
from pathlib import Path

from searcheval.defaults import LATEST

MARKER = ".searcheval-run.json"
RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")  # pipeline.new_run_id


def marker_text(run_id: str, started_at: datetime) -> str:
    """The marker file of a run folder: what makes it searcheval's to prune."""
    return json.dumps({"written_by": "searcheval", "run_id": run_id,
                       "started_at": started_at.isoformat()}, indent=2) + "\n"


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_started(folder: Path) -> datetime | None:
    """When the run of a folder searcheval wrote started; None for any other folder (never
    pruned): no marker of its own run id, and not an older run folder (name a run id, its
    metrics.json naming that run)."""
    if folder.is_symlink() or not folder.is_dir():
        return None
    marker = _read_json(folder / MARKER)
    if marker is not None:
        if marker.get("written_by") != "searcheval" or marker.get("run_id") != folder.name:
            return None
        started = marker.get("started_at")
    elif RUN_ID.match(folder.name):  # written before the marker existed
        metrics = _read_json(folder / "metrics.json")
        if metrics is None or metrics.get("run_id") != folder.name:
            return None
        started = metrics.get("started_at")
    else:
        return None
    try:
        when = datetime.fromisoformat(str(started))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def prune_outputs(output: str | Path, older_than: timedelta,
                  now: datetime | None = None) -> dict:
    """Delete the run folders under `output` whose run started before now - `older_than` (see
    the module docstring for which folders count). Returns {"before", "removed": [run ids],
    "kept": run folders kept}."""
    root = Path(output)
    before = (now or datetime.now(timezone.utc)) - older_than
    latest = root / LATEST
    current = os.readlink(latest) if latest.is_symlink() else None
    removed, kept = [], 0
    if not root.is_dir():
        return {"before": before, "removed": removed, "kept": kept}
    for folder in sorted(root.iterdir()):
        started = run_started(folder)
        if started is None:
            continue
        if started >= before or folder.name == current:
            kept += 1
            continue
        shutil.rmtree(folder)
        removed.append(folder.name)
    return {"before": before, "removed": removed, "kept": kept}
