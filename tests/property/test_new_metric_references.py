"""R-precision, Success@k and bpref equal trec_eval's (pytrec_eval) per query; ERR@k equals
ir_measures' reference (gdeval) and RBP ir_measures' (cwl_eval); RBP's residual is what RBP gains
when every unjudged document and the ranking's whole tail are relevant. Randomized by Hypothesis:
tied scores, empty and short rankings, all-zero judgments, unjudged documents in the run."""

import ir_measures
import pytest
import pytrec_eval
from hypothesis import given, settings
from hypothesis import strategies as st

from searcheval.metrics.engine import Settings, evaluate

doc_ids = st.sampled_from([f"d{i:02d}" for i in range(25)])
scores = st.sampled_from([0.25, 0.5, 1.0, 2.0, 3.5, 7.0])
judgments = st.dictionaries(doc_ids, st.integers(0, 3), min_size=1, max_size=12)
rankings = st.dictionaries(doc_ids, scores, max_size=25)
qids = st.sampled_from([str(q) for q in range(1, 9)])
collections = st.dictionaries(qids, st.tuples(judgments, rankings), min_size=1, max_size=8)
# distinct scores: cwl_eval (through ir_measures) orders ties its own way, not trec_eval's
untied = st.lists(doc_ids, unique=True, max_size=25).map(
    lambda docs: {d: float(len(docs) - i) for i, d in enumerate(docs)})
untied_collections = st.dictionaries(qids, st.tuples(judgments, untied), min_size=1, max_size=8)


def split(qs):
    return {q: j for q, (j, _) in qs.items()}, {q: r for q, (_, r) in qs.items()}


@settings(max_examples=200, deadline=None)
@given(collections, st.integers(1, 3), st.sampled_from([1, 2, 5, 10]))
def test_rprec_success_bpref_equal_trec_eval(qs, level, k):
    qrels, run = split(qs)
    # one evaluator per measure: pytrec_eval 0.5 crashes on some inputs when asked for several
    # of these at once with a relevance level above 1
    ref: dict = {}
    for measure in ("Rprec", "bpref", f"success.{k}"):
        one = pytrec_eval.RelevanceEvaluator(qrels, {measure}, relevance_level=level).evaluate(run)
        for q, values in one.items():
            ref.setdefault(q, {}).update(values)
    ours = evaluate(qrels, run, ["Rprec", "bpref", f"success_{k}"],
                    Settings(trec_compat=True, relevance_level=level), complete=False).per_query()
    assert set(ours) == set(ref)
    for q, values in ref.items():
        assert ours[q]["rprec"] == pytest.approx(values["Rprec"], abs=1e-9)
        assert ours[q]["bpref"] == pytest.approx(values["bpref"], abs=1e-9)
        assert ours[q][f"success@{k}"] == values[f"success_{k}"]


@settings(max_examples=25, deadline=None)  # each example runs gdeval.pl in perl
@given(collections.map(lambda qs: {q: ({**j, "rel": 2}, r) for q, (j, r) in qs.items()}),
       st.sampled_from([1, 3, 10, 20]))
def test_err_equals_ir_measures_gdeval(qs, k):
    # gdeval divides by the ideal DCG: every query has a relevant document ("rel")
    qrels, run = split(qs)
    run = {q: r for q, r in run.items() if r}
    ref = {(m.query_id): m.value for m in ir_measures.gdeval.iter_calc([ir_measures.ERR @ k],
                                                                       qrels, run)}
    # ir_measures scores a judged query missing from the run 0: trec_eval -c, our `complete`
    ours = evaluate(qrels, run, [f"ERR@{k}"], complete=True).per_query()
    assert set(ref) == set(ours)
    for q, value in ref.items():
        # gdeval prints 5 decimals: off by at most half their last digit
        assert ours[q][f"err@{k}"] == pytest.approx(value, abs=5e-6 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(untied_collections, st.integers(1, 3), st.sampled_from([0.5, 0.8, 0.95]))
def test_rbp_equals_ir_measures_cwl_eval_and_the_residual_bounds_it(qs, level, p):
    qrels, run = split(qs)
    run = {q: r for q, r in run.items() if r}
    measure = ir_measures.RBP(rel=level, p=p)
    ref = {m.query_id: m.value for m in ir_measures.cwl_eval.iter_calc([measure], qrels, run)}
    names = [f"RBP(rel={level},p={p})", f"rbp_residual(p={p})"]
    ours = evaluate(qrels, run, names, Settings(relevance_level=level), complete=True)
    values = ours.per_query()
    rbp, residual = ours.values.keys()
    assert set(ref) == set(values)
    # every unjudged document of the ranking judged relevant: RBP's upper bound over the ranking
    optimistic = {q: {**{d: level for d in run[q]}, **qrels[q]} for q in run if q in qrels}
    upper = {m.query_id: m.value for m in
             ir_measures.cwl_eval.iter_calc([measure], optimistic, run)}
    for q, value in ref.items():
        assert values[q][rbp] == pytest.approx(value, abs=1e-9)
        if q not in run:
            continue
        unjudged_gain = upper[q] - value  # what RBP gains from the unjudged documents
        tail = p ** len(run[q])  # and from the documents after the ranking's end
        assert values[q][residual] == pytest.approx(unjudged_gain + tail, abs=1e-9)
