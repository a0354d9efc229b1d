"""glibc's malloc, told once per process how large a freed block it keeps (`keep_blocks`), so the
parts that allocate large arrays call after call do not hand their memory back to the kernel
after each call only to fault it in again at the next.

Two parts ask, and the larger figure wins whichever asks first (a threshold is only ever raised):
- the embedding model (`searcheval.rankers.embeddings`): blocks up to 8 MiB from the heap, so
  each batch's hidden states are reused rather than mapped and zeroed afresh;
- the compiled scoring path for tables (`searcheval.metrics.kernel`): blocks up to 32 MiB from
  the heap, and up to 64 MiB of free heap kept at its top. Scoring 2,000,000 rows of string ids
  allocates about 90 MB of temporaries (pyarrow's combined columns among them); glibc's own
  sliding threshold gave them back at the end of each call and the next call took ~10,500 page
  faults, 68 ms against 45 ms (`searcheval benchmark score`'s in-process table).

Setting either threshold turns off glibc's sliding thresholds for the process (the trim threshold
then stays where it was unless set too). Elsewhere than glibc (musl, macOS) nothing is changed and
`keep_blocks` returns False.
"""

from __future__ import annotations

import sys
import threading

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's malloc.h

_lock = threading.Lock()
_set: dict[int, int] = {}  # what this process has told mallopt


_libc: list = []  # glibc's library once loaded ([None] when the C library is another)


def _glibc():
    if not _libc:
        import ctypes
        import ctypes.util

        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _libc.append(libc if hasattr(libc, "mallopt") else None)
        except OSError:  # not glibc: its own allocator, untouched
            _libc.append(None)
    return _libc[0]


def keep_blocks(mmap_threshold: int, trim_threshold: int | None = None,
                arena_max: int | None = None) -> bool:
    """Blocks up to `mmap_threshold` bytes from the heap and (unless None) `trim_threshold` bytes
    of free heap kept at its top, each only raised above what the process has already set;
    `arena_max` heaps for its threads, only lowered. True when glibc took every setting."""
    wanted = {M_MMAP_THRESHOLD: mmap_threshold}
    if trim_threshold is not None:
        wanted[M_TRIM_THRESHOLD] = trim_threshold
    with _lock:
        libc = _glibc()
        if libc is None:
            return False
        ok = True
        for option, value in wanted.items():
            value = max(value, _set.get(option, 0))
            if _set.get(option) != value:
                ok &= bool(libc.mallopt(option, value))
                _set[option] = value
        if arena_max is not None:
            ok &= _lower_arenas(libc, arena_max)
        return ok


def _lower_arenas(libc, arenas: int) -> bool:
    """M_ARENA_MAX set to `arenas` unless the process already asked for fewer (under _lock)."""
    value = min(arenas, _set.get(M_ARENA_MAX, arenas))
    if _set.get(M_ARENA_MAX) == value:
        return True
    _set[M_ARENA_MAX] = value
    return bool(libc.mallopt(M_ARENA_MAX, value))


#: malloc heaps ("arenas") a searcheval process uses (its command line sets it before any thread
#: starts, `limit_arenas`): by default glibc gives threads up to 8 per core, each keeping its own
#: free pages; a cold WANDS nightly had nine, and its process grew by ~7 MiB a minute through the
#: embedding
ARENAS = 2


def limit_arenas(arenas: int = ARENAS) -> bool:
    """At most `arenas` malloc heaps for the process's threads (only ever lowered). glibc fixes
    its limit when a thread first needs a new heap: this must run before the process starts
    threads, or the heaps made by then stay. False where the C library is not glibc."""
    with _lock:
        libc = _glibc()
        return libc is not None and _lower_arenas(libc, arenas)


def settings() -> dict[str, int]:
    """What this process has set, by name (tests and benchmarks read it)."""
    names = {M_TRIM_THRESHOLD: "trim_threshold", M_MMAP_THRESHOLD: "mmap_threshold",
             M_ARENA_MAX: "arena_max"}
    with _lock:
        return {names[option]: value for option, value in _set.items()}


def release() -> None:
    """Free memory the allocators keep for reuse given back now: pyarrow's pool's (mimalloc or
    jemalloc keep freed pages; building a validation's frames left ~100 MiB there at WANDS' size),
    when pyarrow is loaded, and glibc's malloc_trim(0), where the C library is glibc."""
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    with _lock:
        libc = _glibc()
    if libc is not None and hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)
