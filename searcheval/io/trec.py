"""TREC files: qrels (`qid 0 docid grade`) and runs (`qid Q0 docid rank score tag`), read and written.

Qrels load to `dict[query_id, dict[doc_id, grade]]`, runs to `dict[query_id, dict[doc_id, score]]`.
A grade outside the scale, a duplicate (query, doc), a bad score and an unreadable line are refused
with the file and line. `load_qrels` also reads BEIR qrels (told apart by their header line).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from searcheval.defaults import MAX_GRADE
from searcheval.errors import InputError

try:  # built with the package (setup.py); optional: without a C compiler, numpy hashes
    from searcheval import _native
except ImportError:  # pragma: no cover - an install without a C compiler
    _native = None


def powers_of_five() -> bytes:
    """5^q for q in [-342, 308] to 128 bits, as (high, low) uint64 pairs: the table Eisel and
    Lemire's conversion multiplies by (`_native.parse_run_lines`). A power of at least 0
    truncated; a negative one the reciprocal rounded up, 2^b // 5^-q + 1 (b: 127 bits past
    5^-q's own while 5^-q < 2^64, twice its bits plus 128 beyond, then truncated). Python's
    integers are exact, so the table is computed here rather than pasted into the C source."""
    words = []
    for q in range(-342, 309):
        if q >= 0:
            power = 5 ** q
            shift = 128 - power.bit_length()
            c = power << shift if shift >= 0 else power >> -shift
        else:
            power = 5 ** -q
            bits = power.bit_length()
            c = (1 << (bits + 127 if q >= -27 else 2 * bits + 128)) // power + 1
            c >>= max(0, c.bit_length() - 128)
        words += [c >> 64, c & 0xFFFF_FFFF_FFFF_FFFF]
    return np.array(words, dtype=np.uint64).tobytes()


if TYPE_CHECKING:
    from searcheval.types import Qrels, RankedRun, Run
# the exact loaders' helpers (io.files, io.beir) are imported where they are used: `searcheval
# score` reads plain files through the columnar readers below and never needs them


def load_trec_qrels(path: str | Path, *, max_grade: int = MAX_GRADE) -> Qrels:
    """TREC qrels: `qid iteration docid grade`, whitespace separated, grades 0..max_grade."""
    from searcheval.io.files import add_grade, parse_grade, read_text

    path = Path(path)
    text = read_text(path)
    qrels: Qrels = {}
    for line_no, line in enumerate(text.split("\n"), start=1):  # a line ends only at "\n"
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 4:
            raise InputError(f"expected 4 columns 'qid 0 docid grade', got {len(parts)}",
                             file=path, line=line_no)
        qid, _, doc, raw = parts
        add_grade(qrels, qid, doc, parse_grade(raw, 0, max_grade, file=path, line=line_no),
             path=path, line=line_no)
    return qrels


def load_qrels(path: str | Path, *, max_grade: int | None = None) -> Qrels:
    """Either format, told apart by the BEIR header line, or (BEIR without a header) by a first
    line of three tab-separated columns where TREC has four."""
    from searcheval.io.beir import load_beir_qrels
    from searcheval.io.files import read_text

    path = Path(path)
    first = read_text(path).split("\n")[0]
    if first.startswith("query-id") or len(first.rstrip("\r").split("\t")) == 3:
        return load_beir_qrels(path, max_grade=max_grade)[0]
    return load_trec_qrels(path, max_grade=MAX_GRADE if max_grade is None else max_grade)



def write_trec_run(run: RankedRun, path: str | Path, tag: str | None = None) -> Path:
    """TREC run format: `qid Q0 docid rank score tag`, rank from 1, best first.

    Scores are written at full precision (the shortest text that reads back as the same float),
    so trec_eval, which orders by score and breaks ties by document id, ranks the file exactly as
    the scores were ranked here: rounding would turn near-ties into ties and reorder them."""
    path = Path(path)
    tag = tag or run.configuration
    for value, what in [(tag, "tag")] + [(qid, "query id") for qid in run.results] + [
            (doc, "document id") for hits in run.results.values() for doc, _ in hits]:
        if not str(value) or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in str(value)):
            raise InputError(f"a {what} {str(value)[:60]!r} is empty or holds whitespace or a "
                             "control character: a TREC run file separates its columns by "
                             "whitespace, so it cannot be written (refused, not encoded)",
                             file=path, field=what)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        for qid in sorted(run.results):
            for rank, (doc, score) in enumerate(run.results[qid], start=1):
                fh.write(f"{qid} Q0 {doc} {rank} {float(score)!r} {tag}\n")
    return path


def load_trec_run(path: str | Path) -> Run:
    """A TREC run file (`qid Q0 docid rank score tag`, whitespace separated).

    Ranks in the file are ignored, as trec_eval ignores them: order comes from the scores.
    """
    from searcheval.io.files import read_text

    path = Path(path)
    text = read_text(path)
    run: Run = {}
    for line_no, line in enumerate(text.split("\n"), start=1):  # a line ends only at "\n"
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != 6:
            raise InputError(f"expected 6 columns 'qid Q0 docid rank score tag', got {len(parts)}",
                             file=path, line=line_no)
        qid, _, doc, _, raw_score, _ = parts
        try:
            score = float(raw_score)
        except ValueError:
            raise InputError(f"expected a numeric score, got {raw_score!r}", file=path,
                             line=line_no, field="score") from None
        if not math.isfinite(score):
            raise InputError(f"expected a finite score, got {raw_score!r}", file=path,
                             line=line_no, field="score")
        docs = run.setdefault(qid, {})
        if doc in docs:
            raise InputError(f"duplicate document {doc!r} in the ranking of query {qid!r}",
                             file=path, line=line_no, field="docid")
        docs[doc] = score
    return run


# --------------------------------------------------------------------------- columnar readers
# pyarrow's CSV reader on the plain shape nearly every tool writes (one space or one tab between
# fields, lines ending at "\n", UTF-8 with or without a BOM, finite scores, grades in the scale).
# Anything else -- a carriage return, two spaces, a bad field, a duplicate -- is not guessed at:
# `Fallback` is raised and the caller reads the file with the exact loaders above, which refuse
# bad input naming the file and line (io/files.py's rules).

RUN_COLUMNS = ("qid", "q0", "doc", "rank", "score", "tag")
QRELS_COLUMNS = ("qid", "iteration", "doc", "grade")
CHUNK_ROWS = 50_000  # run rows held at once by the streaming reader
FILE_CHUNK_ROWS = 12_500  # ... of a file: each chunk's temporaries stay small (25,000 rows put
# 6-9 MB more on `searcheval score`'s peak, 50,000 twice that, for no speed)


class Fallback(Exception):
    """The file is not in the plain shape the columnar reader takes: use the exact loader."""


def _plain_shape(path: Path) -> str:
    """The delimiter of a plain file (" " or "\t", from its first line), or Fallback."""
    try:
        with open(path, "rb", buffering=0) as fh:
            first = fh.read(1 << 16)
    except OSError:
        raise Fallback("unreadable") from None
    if not first:
        raise Fallback("empty")
    first = first.split(b"\n", 1)[0]
    if b"\t" in first and b" " not in first:
        return "\t"
    return " "


class _Checked:
    """The file for pyarrow to read natively, after one pass over it looking for a carriage return
    (a line ends only at "\n"; pyarrow would also end one at "\r"). A Python file object would
    be called back for every block from pyarrow's own reading thread, which must then wait for
    the interpreter's lock (up to its 5 ms switch interval) while this thread works."""

    SCAN = 1 << 20

    def __init__(self, path: Path):
        self.carriage_return = False
        buffer = bytearray(self.SCAN)
        with open(path, "rb", buffering=0) as fh:
            while n := fh.readinto(buffer):
                if buffer.find(b"\r", 0, n) >= 0:
                    self.carriage_return = True
                    break
        self.file = _arrow().OSFile(str(path))

    def close(self) -> None:
        self.file.close()

    def check(self) -> None:
        if self.carriage_return:
            raise Fallback("carriage return")


def _arrow():
    """pyarrow, on the system allocator: jemalloc's caches would double the reader's peak memory."""
    import pyarrow as pa

    global _ARROW_READY
    if not _ARROW_READY:
        pa.set_memory_pool(pa.system_memory_pool())
        _ARROW_READY = True
    return pa


_ARROW_READY = False


def compute(name: str, *args, options=None):
    """A pyarrow compute function by name, through pyarrow._compute: importing pyarrow.compute
    (which builds a Python wrapper for every function) costs a tenth of a second at each start."""
    from pyarrow import _compute

    _arrow()
    return _compute.call_function(name, list(args), options)


def index_in(values, value_set):
    from pyarrow import _compute

    return compute("index_in", values, options=_compute.SetLookupOptions(value_set=value_set))


def cast(values, to):
    from pyarrow import _compute

    return compute("cast", values, options=_compute.CastOptions.safe(to))


def from_numpy(values: np.ndarray):
    """An int64 numpy array as a pyarrow array, without pyarrow's pandas check."""
    pa = _arrow()
    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def to_numpy(array) -> np.ndarray:
    """A pyarrow array (or chunked array) of numbers without nulls as numpy, through its buffer:
    pyarrow's own to_numpy imports pandas (tens of MB) on first use."""
    pa = _arrow()
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
    if pa.types.is_boolean(array.type):
        bits = np.frombuffer(array.buffers()[1], dtype=np.uint8)
        return np.unpackbits(bits, bitorder="little")[array.offset:array.offset + len(array)]
    dtype = np.dtype({"double": "float64", "float": "float32"}.get(str(array.type),
                                                                    str(array.type)))
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array),
                         offset=array.offset * dtype.itemsize)


def _csv_options(path: Path, names: tuple[str, ...], types: dict, block_size: int | None = None,
                 check_utf8: bool = True):
    import pyarrow.csv as pa_csv

    _arrow()

    delimiter = _plain_shape(path)
    read = pa_csv.ReadOptions(column_names=list(names), use_threads=False,
                              **({"block_size": block_size} if block_size else {}))
    parse = pa_csv.ParseOptions(delimiter=delimiter, quote_char=False, double_quote=False,
                                escape_char=False, ignore_empty_lines=True)
    convert = pa_csv.ConvertOptions(include_columns=list(types), column_types=types,
                                    strings_can_be_null=False, quoted_strings_can_be_null=False,
                                    null_values=[], check_utf8=check_utf8)
    return read, parse, convert


def mix(x: np.ndarray) -> np.ndarray:
    """A 64-bit finalizer (MurmurHash3's), in place."""
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xFF51AFD7ED558CCD)
    x ^= x >> np.uint64(33)
    x *= np.uint64(0xC4CEB9FE1A85EC53)
    x ^= x >> np.uint64(33)
    return x


HASH_BLOCK = 1 << 16


def string_hashes(strings) -> np.ndarray:
    """A 64-bit hash of each string of a pyarrow string array, from its UTF-8 bytes read eight at
    a time (a word past a string's end masked), then mixed. Equal strings hash equal; two
    different ones collide with a chance of about 2**-64. Computed in one pass in C
    (`searcheval/_native.c`) where the package was built with it, else by `numpy_string_hashes`:
    the same numbers."""
    if _native is None or not len(strings):
        return numpy_string_hashes(strings)
    import pyarrow as pa

    width = 8 if pa.types.is_large_string(strings.type) else 4
    _, offsets, data = strings.buffers()
    return np.frombuffer(_native.string_hashes(offsets, b"" if data is None else data,
                                               strings.offset, len(strings), width),
                         dtype=np.uint64)


def numpy_string_hashes(strings) -> np.ndarray:
    """`string_hashes` in numpy (aligned loads of every string's next word at once, shifted into
    place): for an install without the C module."""
    n = len(strings)
    if not n:
        return np.zeros(0, dtype=np.uint64)
    if n > HASH_BLOCK:  # a block at a time: its temporaries are a few arrays of a block each
        out = np.empty(n, dtype=np.uint64)
        for lo in range(0, n, HASH_BLOCK):
            out[lo:lo + HASH_BLOCK] = numpy_string_hashes(strings.slice(lo, HASH_BLOCK))
        return out
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32, count=n + 1,
                            offset=strings.offset * 4).astype(np.int64)
    begin = int(offsets[0])
    offsets -= begin
    size = int(offsets[-1])
    words = np.zeros(size // 8 + 2, dtype=np.uint64)  # two spare words: a load may run past
    if size:
        words.view(np.uint8)[:size] = np.frombuffer(strings.buffers()[2], dtype=np.uint8,
                                                   count=size, offset=begin)
    lengths = np.diff(offsets)
    one, full = np.uint64(1), np.uint64(0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        hashes = lengths.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        rows = None  # every row
        for at in range(0, int(lengths.max()), 8):
            if at:  # only the strings longer than `at` bytes go on
                rows = np.flatnonzero(lengths > at)
            start = (offsets[:-1] if rows is None else offsets[rows]) + at
            word, shift = start >> 3, ((start & 7) << 3).astype(np.uint64)
            value = (words[word] >> shift) | ((words[word + 1] << one) << (np.uint64(63) - shift))
            left = (lengths if rows is None else lengths[rows]) - at
            if left.min() < 8:
                value &= np.where(left >= 8, full, (one << (np.minimum(left, 7).astype(
                    np.uint64) << np.uint64(3))) - one)
            h = hashes if rows is None else hashes[rows]
            h ^= value
            h *= np.uint64(0xFF51AFD7ED558CCD)
            h ^= h >> np.uint64(29)
            if rows is not None:
                hashes[rows] = h
        return mix(hashes)


@dataclass
class QrelsColumns:
    """Judgments as arrays, grouped by query: query `qids[q[i]]`, document `docs[d[i]]`."""

    qids: list[str]
    docs: "object"  # pyarrow StringArray of the judged document ids (an id may be there twice)
    q: np.ndarray  # int32, non-decreasing
    d: np.ndarray  # int32
    grade: np.ndarray  # int64
    starts: np.ndarray  # int64 (Q + 1,): rows of query j are starts[j]:starts[j + 1]
    _code: dict | None = field(default=None, repr=False, compare=False)
    _keys: np.ndarray | None = field(default=None, repr=False, compare=False)
    _hashes: np.ndarray | None = field(default=None, repr=False, compare=False)  # kernel's
    _qid_array: "object" = field(default=None, repr=False, compare=False)

    def qid_array(self):
        """`qids` as a pyarrow string array (the one they were read from, else built once)."""
        import pyarrow as pa

        if self._qid_array is None:
            self._qid_array = pa.array(self.qids, type=pa.string())
        elif not pa.types.is_string(self._qid_array.type):
            self._qid_array = cast(self._qid_array, pa.string())
        return self._qid_array

    def codes_of(self, qids: list[str]) -> np.ndarray:
        """Each of `qids`' index in `qids` of the judgments, -1 where not judged: a dict built
        once (the judgments may be a million queries; a chunk of a run holds a few hundred)."""
        if self._code is None:
            self._code = {qid: i for i, qid in enumerate(self.qids)}
        get = self._code.get
        return np.fromiter((get(x, -1) for x in qids), dtype=np.int64, count=len(qids))

    def keys(self) -> np.ndarray:
        """Each judgment's (query, document id) as one 64-bit hash (`string_hashes`, mixed with
        the query's code), in the rows' order; built once."""
        if self._keys is None:
            with np.errstate(over="ignore"):
                self._keys = string_hashes(self.docs)[self.d] + \
                    mix(self.q.astype(np.uint64) + np.uint64(1))
        return self._keys


def read_qrels_columns(path: str | Path, *, max_grade: int = MAX_GRADE) -> QrelsColumns:
    """TREC qrels read by pyarrow, or Fallback (BEIR qrels, odd shapes, bad or duplicate rows)."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    path = Path(path)
    types = {"qid": pa.string(), "doc": pa.string(), "grade": pa.int64()}
    options = _csv_options(path, QRELS_COLUMNS, types, block_size=1 << 18)
    source = _Checked(path)
    try:
        source.check()
        table = pa_csv.read_csv(source.file, *options)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise Fallback("not plain TREC qrels") from None
    finally:
        source.close()
    if table.num_rows == 0:
        raise Fallback("no rows")
    grade = to_numpy(table.column("grade"))
    if grade.min() < 0 or grade.max() > max_grade:
        raise Fallback("grade outside the scale")
    # no hash table of the ids: the queries read off where the id changes when each query's
    # lines are together (as in nearly every file), each row's document kept as it is
    qcol = table.column("qid").combine_chunks()
    found = query_runs(qcol)
    if found is None:
        qe = compute("dictionary_encode", qcol)
        q, qids = to_numpy(qe.indices).astype(np.int32), qe.dictionary
    else:
        q, qids = found
    docs = table.column("doc").combine_chunks()
    del table
    order = np.argsort(q, kind="stable")
    if found is None:
        q, grade = q[order], grade[order]
    d = order.astype(np.int32)
    columns = QrelsColumns(qids=qids.to_pylist(), docs=docs, q=q, d=d, grade=grade,
                           starts=np.searchsorted(q, np.arange(len(qids) + 1)).astype(np.int64),
                           _qid_array=qids)
    if repeats_within(columns.keys(), columns.starts):  # (a true duplicate, or two ids with one
        raise Fallback("duplicate judgment")  # hash: the exact loader refuses the one, scores
        # the other)
    return columns


@dataclass
class RunChunk:
    """Complete queries of a run, in file order: query `qids[q[i]]`, document `docs[d[i]]`, or,
    when `d` is None (a file's chunk, not dictionary-encoded), document `docs[i]`.
    Chunks cut from one array share its `qids` list and `docs` dictionary (`shared_docs`)."""

    qids: list[str]
    docs: "object"  # pyarrow StringArray: the distinct ids, or (d None) every row's id
    q: np.ndarray  # int32
    d: np.ndarray | None  # int32, or None: docs holds each row's id
    score: np.ndarray  # float64
    shared_docs: bool = False  # `docs` is the whole run's dictionary, shared by all its chunks
    hashes: np.ndarray | None = None  # uint64, string_hashes of `docs` (d None), when known


RUN_BLOCK = 1 << 20  # bytes of a run file parsed at once


def iter_run_chunks(path: str | Path, *, rows: int = FILE_CHUNK_ROWS) -> Iterator[RunChunk]:
    """A TREC run streamed in chunks of whole queries (about `rows` rows each), so memory stays
    bounded whatever the file's size: parsed in C (`_native.parse_run_lines`) where the package
    was built with it, else (or from the first line the C parser does not take) by pyarrow's CSV
    reader. Fallback when the file is not plain, or a query's lines are not together (the exact
    loader takes any order)."""
    path = Path(path)
    delimiter = _plain_shape(path)
    seen: set[str] = set()
    with open(path, "rb", buffering=0) as fh:
        rest = b""
        if _native is not None:
            rest = yield from _native_chunks(fh, delimiter, rows * ROW_BYTES, seen)
            if rest is None:
                return
        yield from _chunks(_run_batches(fh, path, rest=rest), rows, seen)


_POWERS_SET = False  # the C parser holds the table of `powers_of_five`


def native_parser():
    """`_native`, its table of powers of five handed over once a process, on the first file
    parsed rather than at import (None without the C module)."""
    global _POWERS_SET
    if _native is not None and not _POWERS_SET:
        _native.set_powers_of_five(powers_of_five())
        _POWERS_SET = True
    return _native


ROW_BYTES = 40  # a run line's bytes, about (`D18875150 1 0.998075`-shaped ids and scores: 35):
# the C parser reads rows * ROW_BYTES at a time


def _native_chunks(fh, delimiter: str, block: int, seen: set[str]):
    """Chunks of whole queries parsed in C, a block of lines at a time, read into one buffer
    (the unparsed tail of a block, its last query, moved to the front for the next). Returns
    None at the end of the file, or the bytes from the first line the C parser did not take
    (not in its plain shape) for pyarrow's reader to go on with."""
    parser = native_parser()
    pa = _arrow()
    buffer = bytearray(block)
    view = memoryview(buffer)
    held = 0  # bytes of buffer[:held] read and not parsed yet
    final = False
    while True:
        if held == len(buffer):  # one query, or one line, fills the buffer: twice as large
            view.release()
            buffer.extend(bytes(len(buffer)))
            view = memoryview(buffer)
        if not final:
            got = fh.readinto(view[held:])
            final = not got
            held += got
        stop = held if final else buffer.rfind(b"\n", 0, held) + 1
        if not stop and not final:
            continue  # a line longer than the buffer: read on
        parsed = parser.parse_run_lines(view[:stop], final, ord(delimiter))
        if parsed is None:
            rest = bytes(view[:held])
            view.release()
            return rest
        consumed, qids, q, offsets, docs, hashes, scores = parsed
        if qids:
            if len(set(qids)) != len(qids) or not seen.isdisjoint(qids):
                raise Fallback("the lines of a query are not together")
            seen.update(qids)
            yield RunChunk(qids=qids, q=np.frombuffer(q, dtype=np.int32),
                           docs=pa.Array.from_buffers(pa.string(), len(q) // 4,
                                                      [None, pa.py_buffer(offsets),
                                                       pa.py_buffer(docs)]),
                           d=None, score=np.frombuffer(scores, dtype=np.float64),
                           hashes=np.frombuffer(hashes, dtype=np.uint64))
        if final:
            view.release()
            return None
        view[:held - consumed] = view[consumed:held]
        held -= consumed


def _run_batches(fh, path: Path, block: int = RUN_BLOCK, rest: bytes = b"") -> Iterator:
    """The run's rows as pyarrow batches, in this thread: the file read a block of whole lines at
    a time and each block parsed by pyarrow's CSV reader, serially. (A streaming reader hands
    every block from a thread to another; on a busy machine each hand-over waits for a core, and
    those waits cost more wall time than parsing beside scoring ever saved.)"""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    types = {"qid": pa.string(), "doc": pa.string(), "score": pa.float64()}
    options = _csv_options(path, RUN_COLUMNS, types, block_size=1 << 18)  # batches of 256 KiB
    # a block of ASCII (nearly every run; `bytes.isascii` is a fraction of a millisecond a MiB)
    # is valid UTF-8 as it is: pyarrow's own check of the strings is skipped there
    ascii_options = _csv_options(path, RUN_COLUMNS, types, block_size=1 << 18, check_utf8=False)
    while True:
        data = fh.read(block)
        if data:
            data = rest + data if rest else data
            cut = data.rfind(b"\n") + 1
            if not cut:  # a line longer than a block: read on
                rest = data
                continue
            data, rest = data[:cut], data[cut:]
        else:  # the end: a last line without "\n", if any
            data, rest = rest, b""
            if not data:
                return
        if b"\r" in data:  # a line ends only at "\n"; pyarrow would also end one at "\r"
            raise Fallback("carriage return")
        try:
            table = pa_csv.read_csv(pa.py_buffer(data),
                                    *(ascii_options if data.isascii() else options))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            raise Fallback("not a plain TREC run") from None
        yield from table.to_batches()


def _chunks(batches: Iterator, rows: int, seen: set[str]) -> Iterator[RunChunk]:
    pa = _arrow()
    pending: list = []
    held = 0
    done = False
    while not done:
        try:
            batch = next(batches)
            pending.append(batch)
            held += batch.num_rows
        except StopIteration:
            done = True
        if held < rows and not done:
            continue
        if not held:
            break
        table = pa.Table.from_batches(pending)
        qcol = table.column("qid")
        if done:
            cut = table.num_rows
        else:  # keep the last query's rows for the next chunk: it may go on there
            last = qcol[-1]
            tail_rows = pending[-1].num_rows  # the last query's rows are, mostly, in the last batch
            same = to_numpy(compute("equal", qcol.slice(table.num_rows - tail_rows),
                                    last)).astype(bool)
            if same.all():
                same = to_numpy(compute("equal", qcol, last)).astype(bool)
                tail_rows = table.num_rows
            cut = int(np.flatnonzero(~same)[-1]) + 1 + (table.num_rows - tail_rows) \
                if (~same).any() else 0
        if cut == 0:  # one query fills the chunk: read on
            continue
        head, tail = table.slice(0, cut), table.slice(cut)
        pending, held = tail.to_batches(), tail.num_rows
        yield _run_chunk(head, seen)
    if held:
        yield _run_chunk(pa.Table.from_batches(pending), seen)


def _run_chunk(table, seen: set[str]) -> RunChunk:

    score = to_numpy(table.column("score"))
    if not np.isfinite(score).all():
        raise Fallback("a score is not finite")
    found = query_runs(table.column("qid").combine_chunks())
    if found is None:
        raise Fallback("the lines of a query are not together")
    q, ids = found
    qids = ids.to_pylist()
    if not seen.isdisjoint(qids):  # a query in two chunks
        raise Fallback("the lines of a query are not together")
    seen.update(qids)
    # each row's document id as it is: no dictionary of the chunk's ids (with an id per row, a
    # hash table of all of them is most of the work); a document listed twice for a query is
    # found where the chunk is scored (columnar.py)
    docs = table.column("doc").combine_chunks()
    return RunChunk(qids=qids, docs=docs, q=q, d=None, score=score)


def query_runs(ids) -> tuple[np.ndarray, object] | None:
    """Rows grouped by query, read off where the id changes from one row to the next (no hash of
    every row's id): (int32 code of each row, the pyarrow array of the queries' ids in order), or
    None when an id comes back after another (the rows of a query are not together)."""
    n = len(ids)
    if not n:
        return np.zeros(0, dtype=np.int32), ids
    change = to_numpy(compute("not_equal", ids.slice(1), ids.slice(0, n - 1))).astype(bool)
    starts = np.flatnonzero(np.concatenate(([True], change)))
    first = compute("take", ids, from_numpy(starts))
    if len(compute("unique", first)) != len(first):
        return None
    return np.repeat(np.arange(len(first), dtype=np.int32), np.diff(np.append(starts, n))), first


def _has_duplicates(keys: np.ndarray) -> bool:
    """Two equal keys among any integers: sorted, side by side (`equal_hashes` is faster for
    hashes)."""
    keys = np.sort(keys)
    return bool(np.any(keys[1:] == keys[:-1]))


_SLOT_BITS = 17  # equal_hashes' smallest table of slots (512 KiB, allocated per call; a chunk of
# a file, 12,500 rows and the rest of its last batch, is at most a quarter of its slots)
_MAX_SLOT_BITS = 22  # its largest: at least 4 slots a key up to 1M keys (16 MiB; 300,000
# judgments: 8 MiB, their check 4 ms instead of 13 ms of sorting every key)


def repeats_within(keys: np.ndarray, starts: np.ndarray) -> bool:
    """Two equal uint64 hashes within one group, the groups being keys[starts[g]:starts[g + 1]]
    (`starts` from 0 to len(keys), never decreasing): in one pass in C (`searcheval/_native.c`,
    a small table a group) where the package was built with it, else `equal_hashes` of the keys
    mixed with their group."""
    keys = np.ascontiguousarray(keys, dtype=np.uint64)
    starts = np.ascontiguousarray(starts, dtype=np.int64)
    if _native is not None:
        return _native.repeats_within(keys, starts)
    group = np.repeat(np.arange(starts.size - 1, dtype=np.uint64), np.diff(starts))
    with np.errstate(over="ignore"):
        return equal_hashes(keys + mix(group + np.uint64(1)))


def equal_hashes(keys: np.ndarray) -> bool:
    """Two equal keys among uint64 hashes (spread over all 64 bits): only the keys that share a
    slot of a table with another are sorted. Two equal keys share one, and a slot holds one row,
    so at least one of the two finds another row there; past a quarter of the largest table's
    slots every key is sorted."""
    bits = min(max(_SLOT_BITS, (4 * keys.size - 1).bit_length()), _MAX_SLOT_BITS)
    if 1 < keys.size <= (1 << bits) // 4:
        slots = (keys >> np.uint64(64 - bits)).astype(np.intp)
        rows = np.arange(keys.size, dtype=np.int32)
        table = np.empty(1 << bits, dtype=np.int32)
        table[slots] = rows
        holder = table[slots]
        lost = holder != rows
        shared = lost.copy()
        shared[holder[lost]] = True  # (a mask, not np.unique: a tenth of the work)
        keys = keys[shared]
    return _has_duplicates(keys)
