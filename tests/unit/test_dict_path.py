"""The dict path at scale (`searcheval.metrics.dicts`): large dict runs scored through
`searcheval.evaluate` and `searcheval.Evaluator` give the dict engine's numbers, query lists and
counts, and whatever it would refuse or convert still goes the dict engine."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import searcheval
from searcheval.errors import InputError
from searcheval.metrics import api
from searcheval.metrics.engine import Settings, parse_metrics
from searcheval.metrics.engine import evaluate as engine_evaluate

METRICS = ["ndcg@10", "ndcg@100", "mrr", "mrr@5", "recall@20", "precision@10", "map", "map@10",
           "judged@10", "rprec", "success@3", "bpref", "err@10", "rbp", "abstention"]


def _data(seed: int, queries: int = 300, depth: int = 40, docs: int = 120):
    """A run and judgments with the awkward cases: ties (scores on a coarse grid), documents
    retrieved but unjudged and judged but not retrieved, a judged query the run misses, a run
    query nobody judged, a run query with no results, a judged query with only grade 0, ids whose
    string order is not their numbers' (d9 > d10)."""
    rng = np.random.default_rng(seed)
    qrels: dict = {}
    run: dict = {}
    for i in range(queries):
        q = f"q{i}"
        picked = rng.choice(docs, size=depth + 10, replace=False)
        run[q] = {f"d{d}": float(s) for d, s in zip(picked[:depth],
                                                     np.round(rng.random(depth), 1))}
        judged = np.concatenate([picked[:5], picked[depth:depth + 5]])
        qrels[q] = {f"d{d}": int(g) for d, g in zip(judged, rng.integers(0, 4, judged.size))}
    qrels["q0"] = {doc: 0 for doc in qrels["q0"]}  # nothing relevant
    qrels["judged only"] = {"d1": 2, "d2": 0}
    run["unjudged"] = {"d1": 0.5, "d3": 0.2}
    run["q1"] = {}
    run["q2"] = {"d5": 3}  # an int score
    return qrels, run


@pytest.fixture
def compiled(monkeypatch):
    """Every dict run takes the dict path at scale, however small."""
    monkeypatch.setattr(api, "COMPILED_ROWS", 0)


@pytest.fixture(params=["C scan", "Python reader"])
def reader(request, monkeypatch):
    """Both readers of the dict path: the C scan, and the Python one an install without a C
    compiler gets."""
    from searcheval.metrics import dicts

    if request.param == "Python reader":
        monkeypatch.setattr(dicts, "_native", None)
    return request.param


@pytest.mark.parametrize("conventions", [{}, {"trec_compat": True}, {"complete": True},
                                         {"complete": False}, {"no_relevant": "skip"},
                                         {"gain": "linear", "relevance_level": 2}])
def test_large_dict_runs_give_the_dict_engines_numbers(compiled, reader, conventions):
    qrels, run = _data(seed=len(conventions))
    complete = conventions.pop("complete", None)
    expected = engine_evaluate(qrels, run, parse_metrics(METRICS), Settings(**conventions),
                               complete=complete)
    for result in (searcheval.evaluate(qrels, run, METRICS, complete=complete, **conventions),
                   searcheval.Evaluator(qrels, METRICS, **conventions).evaluate(
                       run, complete=complete)):
        assert result.query_ids == expected.query_ids
        assert result.counts == expected.counts
        for name in METRICS:  # the compiled loop adds in another order: within 1e-12
            np.testing.assert_allclose(result.values[name], expected.values[name], rtol=0,
                                       atol=1e-12, err_msg=name)


def test_the_dict_path_is_taken_and_ties_go_by_id_descending(compiled, monkeypatch):
    from searcheval.metrics import dicts

    taken = []
    original = dicts.evaluate
    monkeypatch.setattr(dicts, "evaluate", lambda *a, **k: taken.append(original(*a, **k))
                        or taken[-1])
    # q: a, b, c all score 0.5; by id descending c, b, a: the relevant "a" is third
    result = searcheval.evaluate({"q": {"a": 1, "z": 0}}, {"q": {"a": 0.5, "b": 0.5, "c": 0.5}},
                                 ["mrr", "precision@2"])
    assert taken and taken[0] is not None
    assert result.means == {"mrr": 1 / 3, "precision@2": 0.0}


def test_integer_ids_go_the_dict_engine_with_the_same_numbers(compiled):
    qrels, run = _data(seed=7)
    as_int = {int(q[1:]): {int(d[1:]): v for d, v in docs.items()}
              for q, docs in run.items() if q.startswith("q")}
    qrels_int = {int(q[1:]): {int(d[1:]): g for d, g in docs.items()}
                 for q, docs in qrels.items() if q.startswith("q")}
    by_str = {q: docs for q, docs in run.items() if q.startswith("q")}
    qrels_str = {q: docs for q, docs in qrels.items() if q.startswith("q")}
    a = searcheval.evaluate(qrels_int, as_int, METRICS)
    b = searcheval.evaluate(qrels_str, by_str, METRICS)
    assert a.query_ids == [q[1:] for q in b.query_ids]
    for name in METRICS:
        np.testing.assert_allclose(a.values[name], b.values[name], rtol=0, atol=1e-12)


@pytest.mark.parametrize("bad, message", [
    (True, "expected a finite numeric score, got True"),
    (np.float32(0.5), "expected a finite numeric score"),
    ("0.5", "expected a finite numeric score, got '0.5'"),
    (float("nan"), "expected a finite numeric score, got nan"),
    (None, "expected a finite numeric score, got None"),
])
def test_large_runs_are_refused_as_small_ones(compiled, reader, bad, message):
    qrels, run = _data(seed=3)
    run["q5"]["d1"] = bad
    with pytest.raises(InputError) as err:
        searcheval.evaluate(qrels, run, METRICS)
    assert message in str(err.value)
    with pytest.raises(InputError):
        searcheval.Evaluator(qrels, METRICS).evaluate(run)


def test_an_empty_document_id_is_refused(compiled):
    qrels, run = _data(seed=4)
    run["q5"][""] = 0.5
    with pytest.raises(InputError, match="expected a non-empty string"):
        searcheval.evaluate(qrels, run, METRICS)


def test_numpy_float64_scores_are_read_as_floats(compiled):
    qrels, run = _data(seed=5)
    numpy_run = {q: {d: np.float64(v) for d, v in docs.items()} for q, docs in run.items()}
    a = searcheval.evaluate(qrels, numpy_run, METRICS)
    b = searcheval.evaluate(qrels, run, METRICS)
    assert a.means == b.means


def test_the_c_scan_is_built_with_the_package():
    """`make install` compiles searcheval/_native.c (setup.py); without it the dict path
    falls back to `read_python`, right but a few times slower, so an install that lost the C
    compiler must fail here rather than slow down unseen."""
    from searcheval.metrics import dicts

    assert dicts._native is not None
    assert dicts.read is not dicts.read_python


def _same_read(prepared, run):
    """The C scan and the Python reader read `run` alike: both refuse it, or the same arrays."""
    from searcheval.metrics import dicts

    c, py = dicts.read(prepared, run), dicts.read_python(prepared, run)
    assert (c is None) == (py is None)
    if c is not None:
        for field in ("scores", "run_starts", "where", "judged_score"):
            np.testing.assert_array_equal(getattr(c, field), getattr(py, field), err_msg=field)
    return c


def test_the_c_scan_reads_what_python_reads():
    from searcheval.metrics import dicts

    qrels, run = _data(seed=11)
    prepared = dicts.prepare(qrels)
    found = _same_read(prepared, run)
    # q2's ranking is {"d5": 3}: one score, an int read as 3.0, at q2's place in the run
    c = prepared.index["q2"]
    assert found.where[c] == list(run).index("q2")
    p = found.where[c]
    assert found.scores[found.run_starts[p]:found.run_starts[p + 1]].tolist() == [3.0]
    # "judged only" is absent from the run: -1, and its two judgments NaN (not retrieved)
    c = prepared.index["judged only"]
    assert found.where[c] == -1
    assert np.isnan(found.judged_score[prepared.starts[c]:prepared.starts[c + 1]]).all()
    assert found.run_starts[-1] == sum(map(len, run.values()))


_ids = st.one_of(st.sampled_from(["a", "b", "c", "d", ""]), st.integers(0, 3))
_scores = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**70, 2**70),
                    st.booleans(), st.none(), st.just("0.5"),
                    st.builds(np.float64, st.floats(-1e6, 1e6)),
                    st.builds(np.int64, st.integers(-5, 5)))


@settings(max_examples=300, deadline=None)
@given(run=st.dictionaries(st.sampled_from(["q1", "q2", "q3", "", 7]),
                           st.one_of(st.dictionaries(_ids, _scores, max_size=5),
                                     st.lists(st.integers(), max_size=1)), max_size=4))
def test_the_c_scan_refuses_and_reads_as_python_does(run):
    """Every kind of id and score a user may pass (non-str and empty ids, bools, None, strings,
    NaN and infinities, ints past a double's range, numpy scalars): the C scan refuses what the
    Python reader refuses and reads the rest to the same arrays."""
    from searcheval.metrics import dicts

    prepared = dicts.prepare({"q1": {"a": 1, "b": 0}, "q3": {"c": 2}, "q9": {"a": 1}})
    _same_read(prepared, run)
