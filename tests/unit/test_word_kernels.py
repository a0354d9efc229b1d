"""The compiled string loops that read ids 8 bytes at a time (`searcheval.metrics.kernel`), and
the allocator settings the table path asks for (`searcheval.allocator`)."""

from __future__ import annotations

import platform

import numpy as np
import pyarrow as pa
import pytest

from searcheval import allocator
from searcheval.metrics import kernel


def _buffers(values):
    return kernel._strings(pa.array(values, type=pa.large_string()))


# lengths on both sides of the two-word fast path (16 bytes) and of a word (8), and ids within
# 16 bytes of the buffer's end (read a byte at a time)
IDS = ["", "a", "abcdefg", "abcdefgh", "abcdefghi", "abcdefghijklmnop", "abcdefghijklmnopq",
       "é" * 9, "doc-000001", "doc-000002", "x" * 40]


def test_equal_ids_hash_equal_wherever_they_lie_and_different_ones_differ():
    offsets, data = _buffers(IDS)
    hashes = kernel._hash_rows(offsets, data)
    assert len(set(hashes.tolist())) == len(IDS)  # 11 different ids, 11 different hashes
    # the same ids at the end of a buffer (the byte-at-a-time path) hash as in its middle
    tail_o, tail_d = _buffers(["pad"] * 3 + IDS[::-1])
    tail = kernel._hash_rows(tail_o, tail_d)[3:][::-1]
    assert tail.tolist() == hashes.tolist()
    # a byte past an id's end never counts: "abcdefg" then "h..." vs "abcdefgh" alone
    o2, d2 = _buffers(["abcdefg", "hzzzzzzzzzzzzzzzzzz"])
    assert kernel._hash_rows(o2, d2)[0] == hashes[2]


def test_groups_are_read_where_the_id_changes():
    values = ["q1", "q1", "q10", "q10", "", "", "abcdefghijklmnopq", "abcdefghijklmnopq",
              "abcdefghijklmnopr", "q1"]
    offsets, data = _buffers(values)
    new = np.empty(len(values), dtype=np.bool_)
    kernel._mark_new(offsets, data, new)
    # a new group at rows 0, 2 ("q10" is not "q1"), 4, 6, 8 (differs in its 17th byte), 9
    assert np.flatnonzero(new).tolist() == [0, 2, 4, 6, 8, 9]
    codes, starts = kernel._number_groups(new)
    assert codes.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 5]
    assert starts.tolist() == [0, 2, 4, 6, 8, 9, 10]


def test_all_equal_compares_the_whole_id():
    offsets, data = _buffers(["abcdefghij", "abcdefghik", "short"])
    o2, d2 = _buffers(["abcdefghij", "short"])
    assert kernel._all_equal(np.array([0, 2]), offsets, data, np.array([0, 1]), o2, d2)
    assert not kernel._all_equal(np.array([1]), offsets, data, np.array([0]), o2, d2)


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt only")
def test_allocator_thresholds_are_only_raised():
    assert allocator.keep_blocks(1 << 20, 2 << 20)
    before = allocator.settings()
    assert allocator.keep_blocks(1 << 10, 1 << 10)  # smaller: nothing lowered
    assert allocator.settings() == before
    assert allocator.keep_blocks(kernel.KEEP_BLOCKS, kernel.KEEP_FREE)
    after = allocator.settings()
    assert after["mmap_threshold"] >= kernel.KEEP_BLOCKS
    assert after["trim_threshold"] >= kernel.KEEP_FREE
