"""String ids hashed where they lie, on all cores: the 64-bit hash the compiled join matches
(query, id) on (`kernel.evaluate_hashed`) and the judgments' duplicate check uses
(`columnar.qrels_from_arrays`), and the lock and thread count of every parallel loop of
`searcheval.metrics`. A leaf module (numpy and numba only), so that the columnar path and the
kernel share it without importing each other."""

from __future__ import annotations

import threading

import numpy as np
from numba import njit, prange

# numba's default threading layer (workqueue) must not be entered by two threads at once
_PARALLEL = threading.Lock()


def _threads() -> int:
    """Threads for the parallel loops: `SEARCHEVAL_THREADS` if set; else every core numba has,
    unless the machine is already busy (its load average over the last minute at least its
    cores): then one. The workqueue layer splits a loop in equal parts up front, so on a machine
    whose cores are taken a part whose thread waits for a core holds the whole call back (two
    threads ran the join 1.7x slower than one at a load of 8 on 2 cores)."""
    import os

    import numba

    most = numba.config.NUMBA_NUM_THREADS
    given = os.environ.get("SEARCHEVAL_THREADS")
    if given and given.isdigit() and int(given) >= 1:
        return min(int(given), most)
    try:
        busy = os.getloadavg()[0] >= (os.cpu_count() or 1)
    except OSError:  # no load average on this platform
        busy = False
    return 1 if busy else most


# Byte strings are read 8 bytes at a time: `_word` assembles a little-endian word from unsigned
# indices (a signed index makes numba test each for a negative value, and LLVM then does not merge
# the 8 loads into one); the masks keep a word's first 0..8 bytes. A string of at most 16 bytes
# (most ids) is read as two masked words without a branch on its length, unless it lies within
# 16 bytes of the buffer's end: those, and longer strings, are read a byte at a time.
_MASKS = np.array([0] + [(1 << (8 * j)) - 1 for j in range(1, 8)] + [2 ** 64 - 1],
                  dtype=np.uint64)
_M1, _M2 = np.uint64(0x87C37B91114253D5), np.uint64(0x4CF5AD432745937F)  # MurmurHash3's


@njit(inline="always")
def _word(data, k):
    """data[k:k + 8] as a little-endian uint64 (the caller keeps k + 8 within the buffer)."""
    k = np.uint64(k)
    w = np.uint64(0)
    for t in range(8):
        w |= np.uint64(data[k + np.uint64(t)]) << np.uint64(8 * t)
    return w


@njit(inline="always")
def _padded_word(data, k, length, j):
    """Word j of the string of `length` bytes at data[k:], zero past its end."""
    w = np.uint64(0)
    for t in range(8):
        at = j * 8 + t
        if at < length:
            w |= np.uint64(data[np.uint64(k + at)]) << np.uint64(8 * t)
    return w


@njit(inline="always")
def _mix(h, w):
    h ^= w * _M1
    return ((h << np.uint64(31)) | (h >> np.uint64(33))) * _M2


def _strings(array) -> tuple[np.ndarray, np.ndarray]:
    """A pyarrow string (or large_string) array's offsets (int32 or int64 as they lie, one more
    than its length: the compiled loops take either) and UTF-8 bytes."""
    import pyarrow as pa

    if not len(array):  # (its buffers may be absent)
        return np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    width = np.int64 if pa.types.is_large_string(array.type) else np.int32
    offsets = np.frombuffer(array.buffers()[1], dtype=width, count=len(array) + 1,
                            offset=array.offset * np.dtype(width).itemsize)
    data = array.buffers()[2]
    return offsets, np.zeros(0, dtype=np.uint8) if data is None else np.frombuffer(
        data, dtype=np.uint8)


@njit(cache=True, parallel=True)
def _hash_rows(offsets, data):
    """A 64-bit hash of each string, as int64: its length, then its bytes 8 at a time (at least
    two words, the last zero-padded) mixed as MurmurHash3 mixes a block, then MurmurHash3's
    finalizer. Equal strings hash equal; two different ones collide with a chance of about 2**-64
    (and the hashed join checks every match against the ids themselves)."""
    n = offsets.size - 1
    out = np.empty(n, dtype=np.int64)
    masks = _MASKS
    blocks = min(64, n // 16384 + 1)
    for b in prange(blocks):
        for i in range(b * n // blocks, (b + 1) * n // blocks):
            k = offsets[i]
            length = offsets[i + 1] - k
            h = np.uint64(length) * _M2
            if length <= 16 and k + 16 <= data.size:  # two masked words, no branch on length
                h = _mix(h, _word(data, k) & masks[min(length, 8)])
                h = _mix(h, _word(data, k + 8) & masks[max(length - 8, 0)])
            else:
                for j in range(max(2, (length + 7) // 8)):
                    h = _mix(h, _padded_word(data, k, length, j))
            h ^= h >> np.uint64(33)
            h *= np.uint64(0xFF51AFD7ED558CCD)
            h ^= h >> np.uint64(33)
            h *= np.uint64(0xC4CEB9FE1A85EC53)
            h ^= h >> np.uint64(33)
            out[i] = np.int64(h)
    return out


def string_row_hashes(strings) -> np.ndarray:
    """Each string of a pyarrow string array hashed as `evaluate_hashed` hashes ids (int64, on
    all cores): the judgments' documents hashed once, for their duplicate check and the join."""
    import numba

    with _PARALLEL:
        numba.set_num_threads(_threads())
        return _hash_rows(*_strings(strings))
