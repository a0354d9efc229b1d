"""A user's machine for the end-to-end project tests (test_project.py, test_loop_new_project.py):
searcheval's code without fixtures/, a PYTHONPATH holding only the library and an audit hook that
logs every read under the repository's fixtures/, so a test can fail if any command touched them."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
SEARCHEVAL = str(Path(sys.executable).parent / "searcheval")  # the CLI a user runs
CRANFIELD = ROOT.parent / "shared" / "datasets" / "cranfield"  # a team's own BEIR dataset

SITECUSTOMIZE = '''
import os, sys
_watched = os.environ.get("SEARCHEVAL_TEST_WATCH")
_log = os.environ.get("SEARCHEVAL_TEST_WATCH_LOG")
if _watched and _log:
    def _hook(event, args, _w=_watched, _l=_log):
        if event in ("open", "os.listdir", "os.scandir") and args and args[0] is not None:
            try:
                path = os.path.abspath(os.fsdecode(args[0])) if not isinstance(args[0], int) \\
                    else None
            except Exception:
                return
            if path and (path == _w or path.startswith(_w + os.sep)):
                with open(_l, "a") as f:  # opens the log, not a watched path: no recursion
                    f.write(f"{os.getpid()} {event} {path}\\n")
    sys.addaudithook(_hook)
'''


def user_machine(base: Path) -> tuple[dict[str, str], Path]:
    """(the environment of every process, the log of fixtures reads) under `base`, where a copy of
    flows/ and tasks/ is what `searcheval run` imports; the caller adds its Prefect and database."""
    code = base / "searcheval-code"
    for folder in ("flows", "tasks"):
        shutil.copytree(ROOT / folder, code / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    lib = base / "lib"
    lib.mkdir()
    (lib / "searcheval").symlink_to(ROOT / "searcheval")
    (lib / "sitecustomize.py").write_text(SITECUSTOMIZE)
    watch_log = base / "fixtures-reads.log"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PREFECT_") and not k.startswith("SEARCHEVAL_")}
    env.update(PYTHONPATH=str(lib), SEARCHEVAL_PROJECT=str(code),
               PREFECT_HOME=str(base / "prefect-home"), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", SEARCHEVAL_TEST_WATCH=str(FIXTURES),
               # no Prefect server kept in the project folder after the session (a test that
               # names its server in PREFECT_API_URL uses that one instead)
               SEARCHEVAL_PREFECT_SERVER="temporary",
               SEARCHEVAL_TEST_WATCH_LOG=str(watch_log))
    return env, watch_log
