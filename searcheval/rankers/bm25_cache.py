"""The BM25F index of a catalog kept on disk between runs, so a warm run loads it, not builds it.

A file per index under `.searcheval/cache` in the working directory (beside the embedded Postgres
and the kept Prefect server), or SEARCHEVAL_CACHE_DIR (`off`: no disk cache, the index is built
in every process as before). Its name is the sha256 of everything the index depends on:

- the catalog's content: every resource's id and content hash, in the catalog's order (the
  index's rows follow it);
- the index's parameters (k1, b, field weights, repetition power);
- the code: the bytes of `rankers/bm25.py` (analysis, scoring and the index's layout) and the
  versions of Python, numpy and scipy the file was written with.

So a changed listing, parameter or scorer is a new key, never a stale index. A file that cannot
be read (cut short, another version's) is rebuilt and rewritten; one that cannot be written (a
read-only folder) leaves the run as it was, with the index built in memory. Writes go through a
temporary file and a rename: two runs writing the same key at once both leave a whole file. The
newest `KEEP` files are kept, older ones removed.

The files are pickles, read back only from this folder of the user's own working directory (as
`.searcheval/pg` holds the database): never point SEARCHEVAL_CACHE_DIR at a folder others write.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import sys
import tempfile
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from searcheval.types import Resource

ENV_DIR = "SEARCHEVAL_CACHE_DIR"
DEFAULT_DIR = Path(".searcheval") / "cache"
OFF = "off"
KEEP = 8  # index files kept: a few catalogs and parameter sets
PREFIX = "bm25-"
SUFFIX = ".pickle"

logger = logging.getLogger(__name__)


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder of the index files, absolute; None when SEARCHEVAL_CACHE_DIR is `off`."""
    env = os.environ if environ is None else environ
    value = env.get(ENV_DIR, "").strip()
    if value.lower() == OFF:
        return None
    return Path(value).expanduser().resolve() if value else DEFAULT_DIR.resolve()


@lru_cache(maxsize=1)
def code_version() -> str:
    """sha256 of the scorer's source and the versions its arrays are pickled with."""
    import numpy
    import scipy

    from searcheval.rankers import bm25

    digest = hashlib.sha256(Path(bm25.__file__).read_bytes())
    digest.update(f"{sys.version_info[:2]} numpy {numpy.__version__} scipy "
                  f"{scipy.__version__}".encode())
    return digest.hexdigest()


def index_key(resources: Sequence[Resource], params: Mapping[str, Any]) -> str:
    """The sha256 naming the index of `resources` (in order) with `params`."""
    digest = hashlib.sha256(code_version().encode())
    digest.update(json.dumps(params, sort_keys=True, default=str).encode())
    for r in resources:
        digest.update(f"\n{r.id}\t{r.content_hash}".encode())
    return digest.hexdigest()


def _path(folder: Path, key: str) -> Path:
    return folder / f"{PREFIX}{key}{SUFFIX}"


def load(key: str, folder: Path | None):
    """The index stored under `key`, or None (no folder, no file, or a file that does not load)."""
    if folder is None:
        return None
    path = _path(folder, key)
    try:
        with path.open("rb") as f:
            index = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - a damaged or foreign file is rebuilt, not fatal
        logger.debug("BM25 index cache %s does not load (%s): rebuilt", path, exc)
        return None
    try:
        os.utime(path)  # recently used: kept by prune
    except OSError:
        pass
    return index


def save(key: str, index, folder: Path | None) -> Path | None:
    """Write `index` under `key` (atomically) and prune old files; the path, or None when the
    folder is off or cannot be written."""
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=SUFFIX)
        try:
            with os.fdopen(handle, "wb") as f:
                pickle.dump(index, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, _path(folder, key))
        finally:
            if os.path.exists(temporary):
                os.unlink(temporary)
        prune(folder)
    except OSError as exc:
        logger.debug("BM25 index cache %s not written (%s)", folder, exc)
        return None
    return _path(folder, key)


def prune(folder: Path, keep: int | None = None) -> None:
    """Remove all but the `keep` (default `KEEP`) most recently used index files."""
    keep = KEEP if keep is None else keep
    files = sorted(folder.glob(f"{PREFIX}*{SUFFIX}"), key=lambda p: p.stat().st_mtime,
                   reverse=True)
    for old in files[keep:]:
        try:
            old.unlink()
        except OSError:
            pass
