"""Known answers of `searcheval score`'s join (metrics/columnar.py): each run row matched to its
judgment by (judged query, id hash) and checked against the ids; a document listed twice for a
query found by the slot table (a chunk) or a sort (more keys than the table takes); collisions,
unjudged documents and queries, ties, and chunk boundaries."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from searcheval.io.trec import Fallback, iter_run_chunks, read_qrels_columns
from searcheval.io import trec
from searcheval.metrics import columnar
from searcheval.metrics.columnar import _refuse_twice, evaluate_columns, evaluate_files
from searcheval.metrics.engine import Settings

METRICS = ["precision@3", "mrr", "recall@3", "map"]


def files(tmp_path, qrels: str, run: str):
    (tmp_path / "qrels").write_text(qrels, encoding="utf-8")
    (tmp_path / "run").write_text(run, encoding="utf-8")
    return tmp_path / "qrels", tmp_path / "run"


def scored(tmp_path, qrels: str, run: str, *, rows: int | None = None, **kwargs):
    q, r = files(tmp_path, qrels, run)
    result = evaluate_files(q, r, METRICS, Settings(), chunk_rows=rows, **kwargs)
    return {m: dict(zip(result.query_ids, result.values[m].tolist())) for m in METRICS}, result


# --------------------------------------------------------------------------- the duplicate check

def keys_of(group, hashes):
    """(where each group starts, and the end; the hashes) for rows grouped by `group`."""
    group = np.asarray(group, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], group[1:] != group[:-1])))
    return np.append(starts, group.size), np.asarray(hashes, dtype=np.uint64)


@pytest.fixture(params=["C", "numpy"])
def duplicate_check(request, monkeypatch):
    """Every duplicate test twice: the C module's table a query, and numpy's slot table."""
    if request.param == "numpy":
        monkeypatch.setattr(trec, "_native", None)
    elif trec._native is None:
        pytest.fail("the C module is not built (make install builds it)")
    return request.param


@pytest.mark.usefixtures("duplicate_check")
def test_distinct_keys_pass_the_slot_table():
    rng = np.random.default_rng(1)
    hashes = rng.integers(0, 2**63, size=5_000, dtype=np.uint64)
    _refuse_twice(*keys_of(np.repeat(np.arange(50), 100), hashes))  # no Fallback


@pytest.mark.usefixtures("duplicate_check")
@pytest.mark.parametrize("at", [(0, 1), (0, 4_999), (2_500, 2_501), (17, 3_999)])
def test_a_document_twice_in_one_query_is_found_wherever_it_is(at):
    rng = np.random.default_rng(2)
    hashes = rng.integers(0, 2**63, size=5_000, dtype=np.uint64)
    group = np.zeros(5_000, dtype=np.int64)  # one query
    hashes[at[1]] = hashes[at[0]]
    with pytest.raises(Fallback, match="duplicate"):
        _refuse_twice(*keys_of(group, hashes))


@pytest.mark.usefixtures("duplicate_check")
def test_the_same_id_in_two_queries_is_no_duplicate():
    _refuse_twice(*keys_of([0, 0, 1, 1], [7, 8, 7, 8]))


@pytest.mark.usefixtures("duplicate_check")
def test_a_repeat_in_the_last_of_many_queries_is_found():
    """2,000 queries of 1 to 30 rows, the same 30 hashes in each (no repeat across queries
    counts), then the last query's first hash again at its end."""
    sizes = np.random.default_rng(3).integers(1, 31, size=2_000)
    hashes = np.concatenate([np.arange(1, n + 1, dtype=np.uint64) << np.uint64(58)
                             for n in sizes])
    group = np.repeat(np.arange(sizes.size), sizes)
    _refuse_twice(*keys_of(group, hashes))
    group = np.append(group, group[-1])
    hashes = np.append(hashes, hashes[-sizes[-1]])
    with pytest.raises(Fallback, match="duplicate"):
        _refuse_twice(*keys_of(group, hashes))


def test_the_c_check_refuses_groups_that_do_not_cover_the_keys():
    if trec._native is None:
        pytest.fail("the C module is not built (make install builds it)")
    keys = np.arange(4, dtype=np.uint64)
    for starts in ([0, 3], [1, 4], [0, 3, 2, 4], []):
        with pytest.raises(ValueError):
            trec._native.repeats_within(keys, np.array(starts, dtype=np.int64))
    assert trec._native.repeats_within(keys[:0], np.zeros(1, dtype=np.int64)) is False


@pytest.mark.usefixtures("duplicate_check")
def test_three_rows_in_one_slot_two_of_them_equal_are_found():
    """Rows that land in one slot all go to the sort, whichever of them the table holds."""
    base = np.uint64(5) << np.uint64(60)  # (the group's mix moves keys; equal stays equal)
    hashes = [base, base + np.uint64(1), base]
    with pytest.raises(Fallback):
        _refuse_twice(*keys_of([0, 0, 0], hashes))


@pytest.mark.usefixtures("duplicate_check")
@pytest.mark.parametrize("n", [1 << trec._SLOT_BITS,  # a table of 2**19 slots, 4 a key
                               1 << trec._MAX_SLOT_BITS])  # past a quarter of the largest
def test_large_key_sets_are_checked_whole(n):  # table's slots: the sort alone
    hashes = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    _refuse_twice(*keys_of(np.zeros(n), hashes))
    hashes[-1] = hashes[0]
    with pytest.raises(Fallback):
        _refuse_twice(*keys_of(np.zeros(n), hashes))


# --------------------------------------------------------------------------- the join

QRELS = "q1 0 D7 2\nq1 0 D12 0\nq1 0 D3 1\nq2 0 D3 1\nq3 0 D1 1\n"


def test_known_answers_with_an_unjudged_document_and_an_unjudged_query(tmp_path):
    run = ("q1 Q0 D12 1 0.9 t\nq1 Q0 D99 2 0.8 t\nq1 Q0 D7 3 0.7 t\n"  # D99 unjudged
           "q2 Q0 D3 1 0.5 t\n"
           "q9 Q0 D1 1 0.5 t\n")  # q9 not judged
    values, result = scored(tmp_path, QRELS, run)
    assert result.query_ids == ["q1", "q2"] and result.unjudged == 1 and result.missed == 1
    assert values["mrr"] == {"q1": 1 / 3, "q2": 1.0}
    assert values["precision@3"] == {"q1": 1 / 3, "q2": 1 / 3}
    assert values["recall@3"] == {"q1": 1 / 2, "q2": 1.0}  # D3 of q1 not retrieved


def test_the_same_id_judged_for_another_query_is_not_matched(tmp_path):
    """q2 retrieves D7, judged relevant only for q1: not relevant for q2."""
    run = "q1 Q0 D3 1 0.9 t\nq2 Q0 D7 1 0.9 t\nq2 Q0 D3 2 0.5 t\n"
    values, _ = scored(tmp_path, QRELS, run)
    assert values["mrr"] == {"q1": 1.0, "q2": 1 / 2}


def test_ties_are_broken_by_document_id_descending(tmp_path):
    """trec_eval's order: equal scores, the larger id (as a string) first: D7 > D3 > D12."""
    run = "q1 Q0 D12 1 0.5 t\nq1 Q0 D3 2 0.5 t\nq1 Q0 D7 3 0.5 t\n"
    values, _ = scored(tmp_path, QRELS, run)
    assert values["mrr"]["q1"] == 1.0  # D7 first
    assert values["map"]["q1"] == pytest.approx((1 / 1 + 2 / 2) / 2)  # D7 then D3


def test_an_unsorted_file_is_ranked_by_score(tmp_path):
    run = "q1 Q0 D12 1 0.1 t\nq1 Q0 D3 2 0.2 t\nq1 Q0 D7 3 0.3 t\n"
    values, _ = scored(tmp_path, QRELS, run)
    assert values["mrr"]["q1"] == 1.0 and values["map"]["q1"] == pytest.approx(1.0)


def test_a_document_listed_twice_is_the_exact_loaders_refusal(tmp_path):
    from searcheval.errors import InputError

    run = "q1 Q0 D7 1 0.9 t\nq1 Q0 D7 2 0.8 t\n"
    with pytest.raises(InputError, match="duplicate document"):
        scored(tmp_path, QRELS, run)


def test_ids_with_one_hash_give_the_same_numbers(tmp_path, monkeypatch):
    """Every id hashed to one value: every row matches every judgment of its query by hash, the
    check against the ids sends the file to the exact path, and the numbers do not change."""
    run = "q1 Q0 D12 1 0.9 t\nq1 Q0 D7 2 0.8 t\nq2 Q0 D3 1 0.5 t\n"
    expected, _ = scored(tmp_path, QRELS, run)
    constant = lambda strings: np.full(len(strings), 42, dtype=np.uint64)  # noqa: E731
    import searcheval.io.trec as trec

    monkeypatch.setattr(columnar, "string_hashes", constant)
    monkeypatch.setattr(trec, "string_hashes", constant)
    with pytest.raises(Fallback):
        evaluate_columns(read_qrels_columns(tmp_path / "qrels"),
                         iter_run_chunks(tmp_path / "run"), METRICS)
    assert scored(tmp_path, QRELS, run)[0] == expected
    assert expected["mrr"] == {"q1": 1 / 2, "q2": 1.0}


@pytest.mark.parametrize("rows", [1, 2, 3, 1000])
def test_chunk_boundaries_do_not_move_a_number(tmp_path, rows):
    run = "".join(f"q{q} Q0 D{d} {d} {1 / (d + 1)!r} t\n" for q in (1, 2, 3) for d in (1, 3, 7, 12))
    values, result = scored(tmp_path, QRELS, run, rows=rows)
    assert result.query_ids == ["q1", "q2", "q3"]
    assert values["mrr"] == {"q1": 1 / 2, "q2": 1 / 2, "q3": 1.0}


def test_complete_scores_a_query_the_run_missed_as_zero(tmp_path):
    values, result = scored(tmp_path, QRELS, "q1 Q0 D7 1 0.9 t\n", complete=True)
    assert result.query_ids == ["q1", "q2", "q3"]
    assert values["mrr"] == {"q1": 1.0, "q2": 0.0, "q3": 0.0}


def test_two_threads_scoring_at_once_get_their_own_numbers(tmp_path):
    """The join's filter belongs to a thread: two threads scoring different files at once."""
    rng = np.random.default_rng(3)
    paths = []
    for k in range(2):
        folder = tmp_path / str(k)
        folder.mkdir()
        docs = rng.permutation(4_000)
        grades = rng.integers(0, 3, size=4_000)
        qrels = "".join(f"q{q} 0 D{docs[q * 40 + j]} {grades[q * 40 + j]}\n"
                        for q in range(100) for j in range(40))
        run = "".join(f"q{q} Q0 D{docs[q * 40 + j * 2]} {j} {100 - j} t\n" for q in range(100)
                      for j in range(20))
        paths.append(files(folder, qrels, run))
    alone = [evaluate_files(q, r, METRICS, chunk_rows=50).values for q, r in paths]
    together: dict[int, dict] = {}

    def score(k: int) -> None:
        for _ in range(5):
            together[k] = evaluate_files(*paths[k], METRICS, chunk_rows=50).values

    threads = [threading.Thread(target=score, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        for m in METRICS:
            assert together[k][m].tolist() == alone[k][m].tolist()
    assert alone[0]["map"].tolist() != alone[1]["map"].tolist()


def test_non_ascii_ids_are_matched_and_invalid_utf8_is_the_exact_loaders_refusal(tmp_path):
    """A block of ASCII skips pyarrow's UTF-8 check; any other block keeps it."""
    from searcheval.errors import InputError

    values, _ = scored(tmp_path, "q1 0 Dé7 2\nq1 0 D3 1\n",
                       "q1 Q0 D3 1 0.9 t\nq1 Q0 Dé7 2 0.8 t\n")
    assert values["map"]["q1"] == pytest.approx(1.0)
    assert values["mrr"]["q1"] == 1.0
    (tmp_path / "run").write_bytes(b"q1 Q0 D3 1 0.9 t\nq1 Q0 D\xff7 2 0.8 t\n")
    with pytest.raises(InputError):
        evaluate_files(tmp_path / "qrels", tmp_path / "run", METRICS)
