"""`allocator.limit_arenas`: glibc's malloc heaps a process's threads use, capped before they
start (the command line does it first thing), counted with glibc's own malloc_info."""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

if platform.libc_ver()[0] != "glibc":
    pytest.skip("glibc's malloc arenas only", allow_module_level=True)

# 8 threads, started together and held until all have allocated (so none reuses another's heap
# after it ended), each allocating 2,000 blocks of 4 KiB; then glibc's malloc_info, whose XML names
# one <heap nr="..."> per arena
COUNT_HEAPS = """
import ctypes, re, sys, tempfile, threading
from searcheval import allocator
if sys.argv[1] == "limit":
    assert allocator.limit_arenas()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
barrier = threading.Barrier(8)
kept = []
def work():
    blocks = [libc.malloc(4096) for _ in range(2000)]
    barrier.wait()
    kept.append(blocks)
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc.fopen.restype = ctypes.c_void_p
path = tempfile.mktemp()
fp = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, ctypes.c_void_p(fp))
libc.fclose(ctypes.c_void_p(fp))
print(len(re.findall(r'<heap nr="\\d+">', open(path).read())))
"""


def heaps(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", COUNT_HEAPS, mode], cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return int(out.stdout.strip())


def test_threads_share_at_most_the_limit_of_heaps():
    # without a limit glibc gives 8 threads heaps of their own (up to 8 per core: 16 on 2 cores),
    # so more than 2; with it, the main heap and one more
    assert heaps("none") > 2
    assert heaps("limit") == 2


def test_the_command_line_limits_the_heaps_first_thing(monkeypatch):
    from searcheval import allocator
    from searcheval.cli import main

    calls = []
    monkeypatch.setattr(allocator, "limit_arenas", lambda *a: calls.append(a) or True)
    with pytest.raises(SystemExit):  # argparse's --help: after the limit, before any command
        main(["--help"])
    assert calls == [()]
