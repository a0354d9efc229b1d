"""The one name table: ir_measures' and trec_eval's names, case-insensitive, map to searcheval's;
outputs keep searcheval's names; `--names` prints the others."""

import json

import pytest

from searcheval.cli import main
from searcheval.metrics.engine import evaluate
from searcheval.metrics.names import parse_metric, parse_metrics

ISSUE_NAMES = {  # the names issue 14 lists, and what they are
    "nDCG@10": "ndcg@10", "RR": "mrr", "RR@10": "mrr@10", "R@20": "recall@20",
    "P@10": "precision@10", "AP": "map", "AP@100": "map@100", "Judged@10": "judged@10",
    "ndcg_cut_10": "ndcg@10", "recip_rank": "mrr", "P_10": "precision@10",
    "recall_20": "recall@20", "map": "map",
}


@pytest.mark.parametrize("given, ours", [
    *ISSUE_NAMES.items(),
    ("NDCG@10", "ndcg@10"), ("ndcg_cut.10", "ndcg@10"), ("P.5", "precision@5"),
    ("map_cut_100", "map@100"), ("Success@5", "success@5"), ("hits@3", "success@3"),
    ("success_10", "success@10"), ("Rprec", "rprec"), ("R-prec", "rprec"), ("Bpref", "bpref"),
    ("ERR@20", "err@20"), ("RBP", "rbp"), ("RBP(rel=1,p=0.5)", "rbp(p=0.5)"),
    ("rbp(p=0.8)", "rbp"), ("rbp_residual(p=0.95)", "rbp_residual(p=0.95)"),
])
def test_every_spelling_names_one_metric(given, ours):
    assert parse_metric(given).name == ours
    assert parse_metric(given.upper()).name == ours  # case-insensitive


def test_a_list_in_mixed_spellings_is_one_metric_each():
    names = parse_metrics("nDCG@10,ndcg_cut_10,RBP(rel=1,p=0.5),recip_rank,RR")
    assert [m.name for m in names] == ["ndcg@10", "rbp(p=0.5)", "mrr"]


@pytest.mark.parametrize("ours, ir, trec", [
    ("ndcg@10", "nDCG@10", "ndcg_cut_10"), ("mrr", "RR", "recip_rank"),
    ("recall@20", "R@20", "recall_20"), ("precision@10", "P@10", "P_10"), ("map", "AP", "map"),
    ("map@100", "AP@100", "map_cut_100"), ("judged@10", "Judged@10", "judged@10"),
    ("success@5", "Success@5", "success_5"), ("bpref", "Bpref", "bpref"),
    ("rprec", "Rprec", "Rprec"), ("err@10", "ERR@10", "err@10"),
    ("rbp(p=0.5)", "RBP(rel=1,p=0.5)", "rbp(p=0.5)"),
])
def test_names_in_the_other_schemes_round_trip(ours, ir, trec):
    metric = parse_metric(ours)
    assert metric.name_in("ir_measures") == ir and metric.name_in("trec") == trec
    assert parse_metric(ir) == metric and parse_metric(trec) == metric


def test_outputs_keep_searchevals_names_whatever_was_asked():
    qrels, run = {"q": {"a": 1, "b": 0}}, {"q": {"a": 2.0, "b": 1.0}}
    ev = evaluate(qrels, run, ["nDCG@10", "recip_rank", "P_10"])
    assert list(ev.means) == ["ndcg@10", "mrr", "precision@10"]
    assert ev.means["precision@10"] == 1 / 10


def test_score_names_flag_prints_the_other_names(tmp_path, capsys):
    (tmp_path / "q.trec").write_text("1 0 a 1\n1 0 b 0\n")
    (tmp_path / "r.trec").write_text("1 Q0 b 1 2.0 t\n1 Q0 a 2 1.0 t\n")
    args = ["score", "--qrels", str(tmp_path / "q.trec"), "--run", str(tmp_path / "r.trec"),
            "--metrics", "nDCG@10,RR,P_10"]
    assert main([*args, "--names", "trec"]) == 0
    rows = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:4]]
    assert rows == ["ndcg_cut_10", "recip_rank", "P_10"]
    assert main([*args, "--names", "ir_measures", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["means"]) == ["nDCG@10", "RR", "P@10"]
    assert out["means"]["RR"] == 1 / 2
    assert main([*args, "--format", "json"]) == 0  # default: searcheval's names
    assert list(json.loads(capsys.readouterr().out)["means"]) == ["ndcg@10", "mrr", "precision@10"]
