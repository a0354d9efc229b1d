"""The click models against simulated traffic with a known relevance and position bias.

The simulation (searcheval.production.simulate): 40 queries, each with 10 documents whose true
attractiveness is alpha_j = 0.3 + 0.3 j / 9 (j = 0 least relevant). The served ranking shows them
least relevant first (doc j at rank j + 1) in 80% of the traces, in a random order in 20%.
Examination at rank r is theta_r = 1 / r. So the expected raw CTR of doc j is
alpha_j * (0.8 * theta_{j+1} + 0.2 * mean(theta)), mean(theta) = H_10 / 10 = 0.29290:
j = 0: 0.3 * (0.8 + 0.05858) = 0.2576, j = 1: 0.3333 * (0.4 + 0.05858) = 0.1529, ...,
j = 9: 0.6 * (0.08 + 0.05858) = 0.0831: strictly decreasing in j while alpha increases, so the
expected raw CTR has Kendall's tau = -1 against the truth. PBM must recover it.
"""

import numpy as np
import pytest
from scipy.stats import kendalltau

from searcheval.errors import InputError
from searcheval.io.traces import TraceTable, parse_trace
from searcheval.production import clicks
from searcheval.production.simulate import default_alpha, default_theta, simulate

QUERIES, TRACES = 40, 60_000


@pytest.fixture(scope="module")
def table():
    return TraceTable.from_traces(parse_trace(r) for r in simulate(TRACES, queries=QUERIES,
                                                                    seed=7))


def per_query_tau(imp, estimate):
    """Mean over queries of Kendall's tau of the estimate against the true alpha_j."""
    truth = default_alpha(10)
    taus = []
    for q in range(imp.pair_query.max() + 1):
        rows = np.flatnonzero(imp.pair_query == q)
        j = np.array([int(imp.docs[imp.pair_doc[p]].split("-")[1]) for p in rows])
        taus.append(kendalltau(truth[j], estimate[rows]).statistic)
    return float(np.mean(taus))


def test_the_expected_raw_ctr_of_the_simulation_is_inverted():
    theta, alpha = default_theta(10), default_alpha(10)
    expected = alpha * (0.8 * theta + 0.2 * theta.mean())
    assert theta.mean() == pytest.approx(sum(1 / r for r in range(1, 11)) / 10)
    assert expected[0] == pytest.approx(0.3 * (0.8 + 0.2 * 0.2928968), rel=1e-6)
    assert kendalltau(alpha, expected).statistic == pytest.approx(-1.0)


def test_pbm_recovers_the_relevance_order_that_raw_ctr_inverts(table):
    imp = clicks.impressions(table)
    assert imp.pairs == QUERIES * 10 and imp.traces == TRACES
    pbm = clicks.fit_pbm(imp)
    raw_tau = per_query_tau(imp, clicks.raw_ctr(imp))
    pbm_tau = per_query_tau(imp, pbm.estimate)
    # expected -1 (module docstring); the tail CTRs differ by < 0.001 (0.0836 vs 0.0832), so
    # sampling noise flips some of those pairs: -0.79 with this seed
    assert raw_tau < -0.7, raw_tau
    assert pbm_tau > 0.8, pbm_tau
    print(f"raw CTR tau {raw_tau:.3f}, PBM tau {pbm_tau:.3f}, theta {pbm.per_rank.round(3)}")
    # EM's examination curve, relative to rank 1, within 0.03 of the simulated 1 / r
    assert pbm.converged
    np.testing.assert_allclose(pbm.per_rank, default_theta(10), atol=0.03)
    # and alpha itself within 0.05 of the truth on average
    j = np.array([int(imp.docs[d].split("-")[1]) for d in imp.pair_doc])
    assert np.abs(pbm.estimate - default_alpha(10)[j]).mean() < 0.05


def test_coec_is_clicks_over_expected_clicks_by_rank():
    # two traces of one query: a at rank 1 clicked then b at rank 1 not clicked, a at rank 2
    recs = [{"trace_id": "1", "ts": "2026-01-01T00:00:00Z", "query": "x", "segment": "s",
             "retrieved_ids": ["a", "b"], "clicks": [{"position": 1}]},
            {"trace_id": "2", "ts": "2026-01-01T00:00:01Z", "query": "x", "segment": "s",
             "retrieved_ids": ["b", "a"], "clicks": []}]
    imp = clicks.impressions(TraceTable.from_traces(parse_trace(r) for r in recs))
    model = clicks.fit_coec(imp)
    # CTR rank 1 = 1/2, rank 2 = 0/2; a: 1 click over 1 * 1/2 + 1 * 0 expected = 2
    assert model.per_rank.tolist() == [0.5, 0.0] + [0.0] * 8
    est = {imp.docs[d]: e for d, e in zip(imp.pair_doc, model.estimate)}
    assert est == {"a": 1 / 0.5, "b": 0 / 0.5}


def test_grades_from_thresholds_and_their_checks():
    assert clicks.grades(np.array([0.05, 0.1, 0.35, 0.9]), (0.1, 0.3, 0.6)).tolist() == \
        [0, 1, 2, 3]
    with pytest.raises(InputError, match="3 ascending thresholds"):
        clicks.check_thresholds((0.1, 0.3), (0, 3), "pbm")
    with pytest.raises(InputError, match="ascending"):
        clicks.check_thresholds((0.3, 0.1, 0.6), (0, 3), "pbm")


def test_traces_without_clicks_are_refused():
    t = TraceTable.from_traces([parse_trace({"trace_id": "1", "ts": "2026-01-01T00:00:00Z",
                                             "query": "x", "segment": "s",
                                             "retrieved_ids": ["a"]})], "f.jsonl")
    with pytest.raises(InputError, match="f.jsonl field 'clicks'"):
        clicks.impressions(t)
