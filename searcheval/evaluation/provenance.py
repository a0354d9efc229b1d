"""The record of what ran: the code (git commit, dirty flag, hash of the uncommitted diff), the
versions, the model and its weights' hash, and the dataset's fingerprint.

`code_state(directory, inputs)` reads the working tree the flow runs from with `git`; outside a
git checkout (an installed package, a container without .git) commit and dirty are None.

Dirty means the run's inputs changed: with `inputs` (the files and folders a run reads,
`evaluation.compose.run_inputs`: its configurations, settings, dataset, baseline, expectations
and code), only an uncommitted change under one of them is dirt; a stray untracked `nohup.out`,
an edited README or an edited cron in deploy/prefect.yaml (a schedule, not something a run reads)
is not. Without `inputs` every change counts. `changed` lists the changes that made the tree
dirty, `other_changes` counts those that did not. The diff's hash covers `git diff HEAD` of those
inputs (staged and unstaged changes to tracked files) and the path and content of every untracked
input file git does not ignore, so two different uncommitted edits never share a hash.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from searcheval.errors import InputError

VERSIONED = ("searcheval", "prefect", "httpx", "psycopg", "sentence-transformers", "torch")


def _git(directory: Path, *args: str) -> bytes | None:
    try:
        done = subprocess.run(["git", "-C", str(directory), *args], capture_output=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def code_state(directory: str | Path, inputs: list[str | Path] | None = None) -> dict:
    """{"commit", "dirty", "diff_sha256", "directory", "changed", "other_changes"} of the git
    working tree at `directory`; with `inputs`, only changes under those paths are dirt."""
    directory = Path(directory).resolve()
    head = _git(directory, "rev-parse", "HEAD")
    if head is None:
        return {"commit": None, "dirty": None, "diff_sha256": None, "directory": str(directory),
                "changed": [], "other_changes": 0}
    root = Path((_git(directory, "rev-parse", "--show-toplevel") or b"").decode().strip()
                or directory)
    status = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all") or b""
    changes = _status_entries(status)  # [(code, path relative to root)]
    scope = None if inputs is None else _inside(root, inputs)
    counted = [(code, name) for code, name in changes
               if scope is None or any(_under(name, s) for s in scope)]
    changed = sorted({name for _, name in counted})
    digest = hashlib.sha256()
    if counted:
        specs = ["."] if scope is None else [f":(top,literal){s}" if s else ":(top)."
                                             for s in scope]
        digest.update(_git(root, "diff", "HEAD", "--binary", "--", *specs) or b"")
        for name in sorted(name for code, name in counted if code == "??"):
            digest.update(b"\0untracked\0" + name.encode() + b"\0")
            try:
                digest.update(hashlib.sha256((root / name).read_bytes()).digest())
            except OSError:
                pass
    dirty = bool(counted)
    return {"commit": head.decode().strip(), "dirty": dirty,
            "diff_sha256": digest.hexdigest() if dirty else None, "directory": str(directory),
            "changed": changed, "other_changes": len({n for _, n in changes}) - len(changed)}


def _status_entries(status: bytes) -> list[tuple[str, str]]:
    """`git status --porcelain=v1 -z` as (two-letter code, path); a rename counts its new and
    its old path (both changed)."""
    parts = status.decode("utf-8", "replace").split("\0")
    out, i = [], 0
    while i < len(parts):
        entry = parts[i]
        i += 1
        if len(entry) < 4:
            continue
        code, name = entry[:2], entry[3:]
        out.append((code, name))
        if code[0] in "RC" or code[1] in "RC":  # the old path follows
            if i < len(parts) and parts[i]:
                out.append((code, parts[i]))
            i += 1
    return out


def _inside(root: Path, inputs: list[str | Path]) -> list[str]:
    """The inputs inside the working tree, relative to its root ("" for the root itself);
    inputs elsewhere are not git's to judge."""
    out = set()
    for path in inputs:
        absolute = Path(path).expanduser().absolute()
        try:
            relative = absolute.resolve().relative_to(root.resolve())
        except ValueError:
            continue
        out.add(relative.as_posix() if str(relative) != "." else "")
    return sorted(out)


def _under(name: str, scope: str) -> bool:
    return not scope or name == scope or name.startswith(scope.rstrip("/") + "/")


LISTED = 5  # the refusal names this many changed files, then "and N more"


def refuse_dirty(state: dict) -> None:
    """InputError when the run's inputs have uncommitted changes (the scheduled deployment's
    rule), naming the files that made the tree dirty."""
    if state.get("dirty"):
        changed = state.get("changed") or []
        named = ", ".join(changed[:LISTED]) + (f" and {len(changed) - LISTED} more"
                                                if len(changed) > LISTED else "")
        raise InputError(f"the working tree {state['directory']} has uncommitted changes to what "
                         f"the run reads: {named or 'see git status'} (diff sha256 "
                         f"{state['diff_sha256'][:12]}): the scheduled evaluation measures "
                         "commits only; commit them, or set allow_dirty", field="allow_dirty")


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def dataset_fingerprint(input_hashes: dict[str, str]) -> dict:
    """One sha256 over every input's own hash (queries, judgments, documents), and each one."""
    digest = hashlib.sha256(json.dumps(input_hashes, sort_keys=True).encode()).hexdigest()
    return {"sha256": digest, "inputs": dict(input_hashes)}


def run_record(what_ran: dict, code: dict, model: str, model_sha256: str | None,
               input_hashes: dict[str, str], *, execution: dict | None = None,
               golden_queries: dict | None = None) -> dict:
    """metrics.json's `what_ran`: the configurations (pipeline.what_ran) with the code, the
    versions, the model and the dataset; `execution` (where the work ran: the task runner, the
    query shards, the embedding batch) and `golden_queries` (how a sampled golden query file
    was drawn from production traces: window, method, seed, counts) when known."""
    record = {**what_ran, "code": code, "versions": versions(),
              "model": {"name": model, "weights_sha256": model_sha256},
              "dataset": dataset_fingerprint(input_hashes)}
    if execution:
        record["execution"] = dict(execution)
    if golden_queries:
        record["golden_queries"] = dict(golden_queries)
    return record


def golden_queries_sample(provenance: dict) -> dict | None:
    """The sampling provenance a loader kept for a golden query file written by `searcheval
    queries sample` (Collection.provenance["queries_sample"], JSON), else None."""
    text = (provenance or {}).get("queries_sample")
    return json.loads(text) if text else None


def tags(record: dict) -> list[str]:
    """Short tags for the flow run: each configuration's name and hash, the commit, dirty."""
    out = [f"config:{name}@{c['sha256'][:8]}"
           for name, c in (record.get("configurations") or {}).items()]
    code = record.get("code") or {}
    if code.get("commit"):
        out.append(f"commit:{code['commit'][:10]}")
    if code.get("dirty"):
        out.append("dirty")
    return out
