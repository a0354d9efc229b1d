"""The C parser of run files (`_native.parse_run_lines`, through `io.trec.iter_run_chunks`) reads
every file it takes exactly as pyarrow's reader does (the same queries, rows, ids and scores to the
last bit), and hands any line it does not take, wherever in the file, to pyarrow's reader, which
goes on from there: the numbers are the dict engine's either way."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from searcheval.io import trec
from searcheval.io.trec import iter_run_chunks, load_qrels, load_trec_run
from searcheval.metrics.columnar import evaluate_files
from searcheval.metrics.engine import evaluate

METRICS = ["ndcg@10", "mrr", "recall@20", "map", "bpref"]


def rows_of(path, rows: int, native: bool, monkeypatch) -> list[tuple[str, str, float]]:
    """Every row of the file as (query, document, score), read in chunks of about `rows`."""
    with monkeypatch.context() as patched:
        if not native:
            patched.setattr(trec, "_native", None)
        out = []
        for chunk in iter_run_chunks(path, rows=rows):
            docs = chunk.docs.to_pylist()
            out += [(chunk.qids[q], docs[i], float(chunk.score[i]))
                    for i, q in enumerate(chunk.q.tolist())]
            if native and chunk.hashes is not None:  # the parser's hashes are string_hashes'
                assert np.array_equal(chunk.hashes, trec.string_hashes(chunk.docs))
        return out


def parse_one(score: str) -> float | None:
    """The score of a one-line file as the C parser reads it, or None: not taken."""
    parsed = trec.native_parser().parse_run_lines(f"q Q0 d 1 {score} t\n".encode(), True, ord(" "))
    return None if parsed is None else float(np.frombuffer(parsed[6], dtype=np.float64)[0])


def test_the_parser_is_built():
    assert trec._native is not None  # built by make install (setup.py); CI runs the C path


def test_known_answers():
    """Two queries; the last without "\\n"; an empty line skipped; the last query held back when
    the block may go on."""
    data = b"q1 Q0 a 1 2.5 t\n\nq1 Q0 bb 2 1e-3 t\nq2 Q0 a 1 -0.0 t"
    consumed, qids, q, offsets, docs, hashes, scores = \
        trec.native_parser().parse_run_lines(data, True, ord(" "))
    assert consumed == len(data) and qids == ["q1", "q2"]
    assert np.frombuffer(q, dtype=np.int32).tolist() == [0, 0, 1]
    assert np.frombuffer(offsets, dtype=np.int32).tolist() == [0, 1, 3, 4] and docs == b"abba"
    values = np.frombuffer(scores, dtype=np.float64)
    assert values.tolist() == [2.5, 0.001, 0.0] and math.copysign(1, values[2]) == -1
    assert np.frombuffer(hashes, dtype=np.uint64)[0] == np.frombuffer(hashes, dtype=np.uint64)[2]
    # not the file's end: q2 may go on in the next block, so only q1's two lines are taken
    consumed, qids, q, *_ = trec.native_parser().parse_run_lines(data + b"\n", False, ord(" "))
    assert consumed == data.index(b"q2") and qids == ["q1"] and len(q) == 2 * 4


@pytest.mark.parametrize("line", [
    "q Q0 d 1 2.5 t extra",  # seven fields
    "q Q0 d 1 2.5",  # five
    "q  Q0 d 1 2.5",  # an empty field between two spaces
    " q Q0 d 1 2.5 t",  # a leading space
    "q Q0 d 1 2.5 t ",  # a trailing one
    "q Q0 dé 1 2.5 t",  # past ASCII (pyarrow checks the UTF-8)
    "q Q0 d 1 2.5 t\r",  # a carriage return
    "q\tQ0 d 1 2.5 t",  # a tab in a space-delimited file
    "q Q0 d 1 inf t", "q Q0 d 1 nan t", "q Q0 d 1 +1 t", "q Q0 d 1 1e t", "q Q0 d 1 . t",
    "q Q0 d 1 1e999 t",  # not finite once read
    "q Q0 d 1 1_0 t", "q Q0 d 1 0x1p3 t", "q Q0 d 1 1.5.2 t", "q Q0 d 1 - t",
])
def test_a_line_not_in_the_plain_shape_is_not_taken(line):
    assert trec.native_parser().parse_run_lines((line + "\n").encode("utf-8"), True, ord(" ")) is None


finite = st.floats(allow_nan=False, allow_infinity=False)


@settings(max_examples=400, deadline=None)
@given(st.one_of(
    finite.map(repr),  # Python's shortest repr: up to 17 digits, exponents
    st.tuples(finite, st.integers(0, 20)).map(lambda t: f"{t[0]:.{t[1]}f}"),
    st.tuples(finite, st.integers(0, 20)).map(lambda t: f"{t[0]:.{t[1]}e}"),
    st.tuples(st.from_regex(r"-?[0-9]{1,25}", fullmatch=True),
              st.from_regex(r"(\.[0-9]{0,25})?", fullmatch=True),
              st.from_regex(r"([eE][+-]?[0-9]{1,3})?", fullmatch=True)).map("".join),
))
def test_every_decimal_score_is_read_as_python_reads_it(text):
    """Rounded correctly, as pyarrow and Python do: the same double to the last bit (or, past a
    double's range, not taken, as pyarrow's path then refuses a score that is not finite)."""
    expected = float(text)
    got = parse_one(text)
    if not math.isfinite(expected):
        assert got is None
    else:
        assert got is not None and got == expected
        assert math.copysign(1, got) == math.copysign(1, expected)


@pytest.mark.parametrize("text,value", [
    ("0.998075", 998075 / 10**6),  # the fast path: 998075 / 1e6, one rounding
    ("9007199254740993", 9007199254740992.0),  # 2^53 + 1: past the fast path, rounded to even
    ("1e22", 1e22), ("1e23", 1e23), ("123456789012345678901234", float(123456789012345678901234)),  # int -> float rounds too
    ("0.1", 0.1), ("-5e-324", -5e-324), ("2.4703282292062328e-324", 5e-324),
    ("9007199254740995", 9007199254740996.0),  # halfway, to even (Eisel and Lemire's tie rule)
    ("2.2250738585072011e-308", (2**52 - 1) * 2.0**-1074),  # the largest subnormal: slow way
    ("2.2250738585072012e-308", 2.0**-1022),  # the smallest normal
    ("1.7976931348623157e308", (2 - 2.0**-52) * 2.0**1023),  # the largest double
])
def test_known_scores(text, value):
    assert parse_one(text) == value


def test_a_hundred_thousand_scores_of_every_magnitude_are_python_floats():
    """Random doubles over all their bits (Python's shortest repr, 17 digits for most: past the
    fast path, Eisel and Lemire's product), and random significands of 15 to 19 digits with any
    exponent from 10^-345 to 10^310 (near every power of five of the table; subnormal and past
    a double's range included): every one the same double as float() reads, bit for bit, or
    not taken where float() gives infinity."""
    rng = np.random.default_rng(27)
    bits = rng.integers(0, 2**63 - 1, size=50_000, dtype=np.int64).view(np.float64)
    texts = [repr(float(v)) for v in bits if np.isfinite(v)]
    digits = rng.integers(15, 20, size=50_000)
    texts += [f"{'-' if i % 3 == 0 else ''}{rng.integers(1, 10)}"
              f"{''.join(map(str, rng.integers(0, 10, size=n - 1)))}e{rng.integers(-345 - n, 310)}"
              for i, n in enumerate(digits.tolist())]
    expected = np.array([float(t) for t in texts])
    finite = np.isfinite(expected)
    kept = [t for t, f in zip(texts, finite) if f]
    parsed = trec.native_parser().parse_run_lines(
        "".join(f"q Q0 d{i} 1 {t} t\n" for i, t in enumerate(kept)).encode(), True, ord(" "))
    got = np.frombuffer(parsed[6], dtype=np.float64)
    assert got.size == len(kept) > 90_000
    mismatch = np.flatnonzero(got.view(np.uint64) != expected[finite].view(np.uint64))
    assert mismatch.size == 0, [kept[i] for i in mismatch[:5]]
    for text in [t for t, f in zip(texts, finite) if not f][:50]:
        assert parse_one(text) is None


def test_the_table_of_powers_of_five():
    """Its known entries: 5^0 and 5^1 with their top bit set, 5^-342 rounded up (the first entry
    of Rust's and fast_float's tables), and every high word with its top bit set."""
    pairs = np.frombuffer(trec.powers_of_five(), dtype=np.uint64).reshape(-1, 2)
    assert pairs.shape == (651, 2)
    assert pairs[342].tolist() == [1 << 63, 0] and pairs[343].tolist() == [0xA << 60, 0]
    assert pairs[0].tolist() == [0xEEF453D6923BD65A, 0x113FAA2906A13B3F]
    assert (pairs[:, 0] >> np.uint64(63)).all()


queries = st.lists(st.tuples(st.sampled_from([f"q{i}" for i in range(40)]),
                             st.lists(st.sampled_from([f"D{i}" for i in range(300)]),
                                      min_size=1, max_size=60, unique=True)),
                   min_size=1, max_size=30, unique_by=lambda t: t[0])


@settings(max_examples=60, deadline=None)
@given(queries, st.sampled_from([" ", "\t"]), st.sampled_from([1, 3, 50, 10_000]),
       st.booleans(), st.data())
def test_the_c_parser_reads_what_pyarrow_reads(tmp_path_factory, run, sep, rows, newline, data):
    """Blocks from 40 bytes (a line or two: every query spans blocks, the buffer grows) to the
    whole file; space or tab delimited; with or without a last "\\n"; scores of every shape."""
    scores = data.draw(st.lists(st.one_of(finite.map(repr), st.integers(-10**6, 10**6).map(str),
                                          st.floats(0, 1).map(lambda f: f"{f:.6f}")),
                                min_size=sum(len(d) for _, d in run),
                                max_size=sum(len(d) for _, d in run)))
    path = tmp_path_factory.mktemp("run") / "run"
    it = iter(scores)
    text = "".join(sep.join([q, "Q0", d, str(r), next(it), "tag"]) + "\n"
                   for q, docs in run for r, d in enumerate(docs, 1))
    path.write_text(text if newline else text[:-1], encoding="utf-8")
    it = iter(scores)
    expected = [(q, d, float(next(it))) for q, docs in run for d in docs]
    mp = pytest.MonkeyPatch()
    try:
        assert rows_of(path, rows, True, mp) == rows_of(path, rows, False, mp) == expected
    finally:
        mp.undo()


def long_file(path, queries: int = 400, depth: int = 50) -> list[str]:
    rng = np.random.default_rng(7)
    lines = [f"q{q} Q0 D{rng.integers(10**7)}x{r} {r} {1 - r / depth:.6f} run\n"
             for q in range(queries) for r in range(depth)]
    (path / "qrels").write_text("".join(f"q{q} 0 {line.split()[2]} {g}\n"
                                        for q in range(queries)
                                        for line, g in zip(lines[q * depth:q * depth + 30:3],
                                                           [3, 0, 1, 2, 1, 0, 2, 1, 3, 1])))
    return lines


@pytest.mark.parametrize("odd", ["an id past ASCII", "a score in another form", "an id with a DEL"])
def test_a_line_the_c_parser_does_not_take_deep_in_the_file_hands_over_to_pyarrow(tmp_path, odd):
    """20,000 lines; at line 15,001 (a chunk of 100 rows asks 4,000 bytes at a time, so dozens of
    chunks were already scored in C) a line pyarrow takes and C does not: pyarrow's reader goes on
    from the block it is in, and the numbers are the dict engine's on the exact loaders."""
    lines = long_file(tmp_path)
    at = 15_000
    q, _, doc, rank, score, tag = lines[at].split()
    lines[at] = {"an id past ASCII": f"{q} Q0 {doc}é {rank} {score} {tag}\n",
                 "a score in another form": f"{q} Q0 {doc} {rank} +{score} {tag}\n",
                 "an id with a DEL": f"{q} Q0 {doc}\x7f {rank} {score} {tag}\n"}[odd]
    (tmp_path / "run").write_text("".join(lines), encoding="utf-8")
    seen = []
    chunks = iter_run_chunks(tmp_path / "run", rows=100)
    for chunk in chunks:
        seen.append(chunk.hashes is not None)  # C's chunks carry their hashes, pyarrow's not
    assert seen[0] and not seen[-1] and seen.count(True) > 30
    ours = evaluate_files(tmp_path / "qrels", tmp_path / "run", METRICS, chunk_rows=100)
    exact = evaluate(load_qrels(tmp_path / "qrels"), load_trec_run(tmp_path / "run"), METRICS)
    assert ours.query_ids == exact.query_ids and len(ours.query_ids) == 400
    for name in METRICS:
        np.testing.assert_array_equal(ours.values[name], exact.values[name], err_msg=name)


def test_a_query_that_comes_back_after_another_is_found_across_the_c_chunks(tmp_path):
    """q0's lines, then q1's, then q0's again far below: the exact loaders take any order, so the
    columnar reader gives way to them (Fallback) wherever the query comes back."""
    lines = long_file(tmp_path)
    lines.append("q0 Q0 Dagain 51 0.000001 run\n")
    (tmp_path / "run").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(trec.Fallback):
        list(iter_run_chunks(tmp_path / "run", rows=100))
    lines[1:1] = ["q1 Q0 Dearly 1 0.9 run\n"]  # within one block
    (tmp_path / "run").write_text("".join(lines[:-1]), encoding="utf-8")
    with pytest.raises(trec.Fallback):
        list(iter_run_chunks(tmp_path / "run", rows=100_000))


def test_one_query_longer_than_many_blocks(tmp_path):
    """A query of 30,000 lines (about 1 MB) read 400 bytes at a time: the buffer doubles until
    the query fits, and the rows are all there once."""
    lines = [f"big Q0 D{i} {i + 1} {1 / (i + 1)!r} run\n" for i in range(30_000)]
    lines += [f"small Q0 D{i} {i + 1} 0.5 run\n" for i in range(3)]
    (tmp_path / "run").write_text("".join(lines))
    chunks = list(iter_run_chunks(tmp_path / "run", rows=10))
    assert [c.qids for c in chunks] == [["big"], ["small"]]
    assert chunks[0].q.size == 30_000 and chunks[0].score[-1] == 1 / 30_000
