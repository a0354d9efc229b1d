"""The record of what ran: the code (git commit, dirty flag, hash of the uncommitted diff), the
versions, the model and its weights' hash, and the dataset's fingerprint.

`code_state(directory)` reads the working tree the flow runs from with `git`; outside a git
checkout (an installed package, a container without .git) commit and dirty are None. The diff's
hash covers `git diff HEAD` (staged and unstaged changes to tracked files) and the path and
content of every untracked file git does not ignore, so two different uncommitted edits never
share a hash.
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


def code_state(directory: str | Path) -> dict:
    """{"commit", "dirty", "diff_sha256", "directory"} of the git working tree at `directory`."""
    directory = Path(directory).resolve()
    head = _git(directory, "rev-parse", "HEAD")
    if head is None:
        return {"commit": None, "dirty": None, "diff_sha256": None, "directory": str(directory)}
    diff = _git(directory, "diff", "HEAD", "--binary") or b""
    untracked = (_git(directory, "ls-files", "--others", "--exclude-standard", "-z") or b"")
    root = Path((_git(directory, "rev-parse", "--show-toplevel") or b"").decode().strip()
                or directory)
    digest = hashlib.sha256(diff)
    names = sorted(n for n in untracked.decode("utf-8", "replace").split("\0") if n)
    for name in names:
        digest.update(b"\0untracked\0" + name.encode() + b"\0")
        try:
            digest.update(hashlib.sha256((root / name).read_bytes()).digest())
        except OSError:
            pass
    dirty = bool(diff.strip()) or bool(names)
    return {"commit": head.decode().strip(), "dirty": dirty,
            "diff_sha256": digest.hexdigest() if dirty else None, "directory": str(directory)}


def refuse_dirty(state: dict) -> None:
    """InputError when the tree has uncommitted changes (the scheduled deployment's rule)."""
    if state.get("dirty"):
        raise InputError(f"the working tree {state['directory']} has uncommitted changes (diff "
                         f"sha256 {state['diff_sha256'][:12]}): the scheduled evaluation measures "
                         "commits only; commit, or set allow_dirty", field="allow_dirty")


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
