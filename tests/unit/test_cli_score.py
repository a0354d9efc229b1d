"""`searcheval score`: the JSON contract, the table, and one clear line with exit 2 on bad input."""

import json
import subprocess
import sys
from math import log2
from pathlib import Path

import pytest

from searcheval.cli import main

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_score_json_contract(tmp_path, capsys):
    qrels = write(tmp_path, "qrels.trec", "1 0 a 3\n1 0 b 1\n1 0 c 0\n2 0 x 0\n")
    run = write(tmp_path, "run.trec", "1 Q0 b 1 2.0 t\n1 Q0 a 2 1.0 t\n2 Q0 y 1 1.0 t\n")
    code = main(["score", "--qrels", str(qrels), "--run", str(run), "--metrics",
                 "ndcg@10,mrr,recall@20", "--format", "json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    ndcg_1 = ((2**1 - 1) / log2(2) + (2**3 - 1) / log2(3)) / ((2**3 - 1) + (2**1 - 1) / log2(3))
    assert out["queries"] == 2
    assert out["per_query"]["1"] == {"ndcg@10": pytest.approx(ndcg_1), "mrr": 1.0, "recall@20": 1.0}
    assert out["per_query"]["2"] == {"ndcg@10": 1.0, "mrr": 0.0, "recall@20": 1.0}  # policy one
    assert out["means"]["ndcg@10"] == pytest.approx((ndcg_1 + 1.0) / 2)


PARTIAL_QRELS = "1 0 a 1\n1 0 b 0\n2 0 x 2\n3 0 y 1\n"  # three judged queries
PARTIAL_RUN = "1 Q0 a 1 2.0 t\n1 Q0 b 2 1.0 t\n2 Q0 z 1 1.0 t\n9 Q0 a 1 1.0 t\n"  # 3 missing, 9 unjudged


def test_score_averages_the_judged_queries_of_the_run_and_says_what_it_left_out(tmp_path, capsys):
    qrels = write(tmp_path, "qrels.trec", PARTIAL_QRELS)
    run = write(tmp_path, "run.trec", PARTIAL_RUN)
    assert main(["score", "--qrels", str(qrels), "--run", str(run), "--metrics", "mrr",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["queries"] == 2 and set(out["per_query"]) == {"1", "2"}
    assert out["counts"] == {"averaged": 2, "judged_missing_from_run": 1, "run_not_judged": 1}
    assert out["means"]["mrr"] == (1.0 + 0.0) / 2
    assert main(["score", "--qrels", str(qrels), "--run", str(run), "--metrics", "mrr"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == \
        "queries: 2 averaged, 1 judged but not in the run, 1 in the run but not judged"


@pytest.mark.parametrize("compat", [[], ["--trec-compat"]])
def test_complete_averages_every_judged_query_missing_ones_as_zero(tmp_path, capsys, compat):
    qrels = write(tmp_path, "qrels.trec", PARTIAL_QRELS)
    run = write(tmp_path, "run.trec", PARTIAL_RUN)
    assert main(["score", "--qrels", str(qrels), "--run", str(run), "--metrics",
                 "mrr,ndcg@10,judged@10", "--complete", "--format", "json", *compat]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["counts"] == {"averaged": 3, "judged_missing_from_run": 1, "run_not_judged": 1}
    assert out["per_query"]["3"] == {"mrr": 0.0, "ndcg@10": 0.0, "judged@10": 0.0}
    assert out["means"]["mrr"] == (1.0 + 0.0 + 0.0) / 3
    assert out["means"]["judged@10"] == (2 / 2 + 0 / 1 + 0.0) / 3


def test_several_runs_side_by_side_with_p_values_against_the_first(tmp_path, capsys):
    qrels = write(tmp_path, "qrels.trec", "".join(f"{q} 0 a 1\n{q} 0 b 0\n" for q in range(1, 5)))
    good = write(tmp_path, "good.trec", "".join(f"{q} Q0 a 1 2 t\n{q} Q0 b 2 1 t\n"
                                                for q in range(1, 5)))
    bad = write(tmp_path, "bad.trec", "".join(f"{q} Q0 b 1 2 t\n{q} Q0 a 2 1 t\n"
                                              for q in range(1, 5)))
    args = ["score", "--qrels", str(qrels), "--run", str(good), "--run", str(bad), "--metrics",
            "mrr,P@1"]
    assert main([*args, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["reference"] == "good" and list(out["runs"]) == ["good", "bad"]
    assert out["runs"]["bad"]["means"] == {"mrr": 1 / 2, "precision@1": 0.0}
    # 4 queries, each worse by the same amount: only the all-same-sign patterns are as extreme
    assert out["runs"]["bad"]["p_values"]["mrr"] == 2 / 2**4
    assert out["runs"]["good"]["p_values"]["mrr"] is None
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["metric", "good", "bad", "p"]
    assert lines[1].split() == ["mrr", "1.0000", "0.5000", f"{2 / 2**4:.4f}"]
    assert main([*args, "--format", "csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0] == "run,metric,value,p_value,queries,judged_missing_from_run,run_not_judged"
    assert rows[3] == f"bad,mrr,0.5,{2 / 2**4!r},4,0,0"


def test_per_query_csv_and_table(tmp_path, capsys):
    qrels = write(tmp_path, "qrels.trec", "1 0 a 1\n2 0 b 1\n")
    run = write(tmp_path, "run.trec", "1 Q0 a 1 2 t\n2 Q0 a 1 2 t\n2 Q0 b 2 1 t\n")
    assert main(["score", "--qrels", str(qrels), "--run", str(run), "--metrics", "RR",
                 "--names", "ir_measures", "--per-query", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines() == ["run,query_id,RR", "run,1,1.0", "run,2,0.5"]
    assert main(["score", "--qrels", str(qrels), "--run", str(run), "--metrics", "mrr",
                 "--per-query"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2].split() == ["1", "1.0000"] and lines[-1].split() == ["2", "0.5000"]


def test_score_trec_compat_flag(tmp_path, capsys):
    qrels = write(tmp_path, "qrels.trec", "1 0 a 3\n1 0 b 1\n2 0 x 0\n")
    run = write(tmp_path, "run.trec", "1 Q0 b 1 2.0 t\n1 Q0 a 2 1.0 t\n2 Q0 y 1 1.0 t\n")
    main(["score", "--qrels", str(qrels), "--run", str(run), "--metrics", "ndcg@10",
          "--trec-compat", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    linear = (1 / log2(2) + 3 / log2(3)) / (3 / log2(2) + 1 / log2(3))
    assert out["per_query"]["1"]["ndcg@10"] == pytest.approx(linear)
    assert out["per_query"]["2"]["ndcg@10"] == 0.0


def test_score_table_on_the_example_run(capsys):
    code = main(["score", "--qrels", str(FIXTURES / "example_qrels.trec"), "--run",
                 str(FIXTURES / "example_run.trec")])
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    assert lines[0].split() == ["metric", "value"]
    assert [line.split()[0] for line in lines[1:4]] == ["ndcg@10", "mrr", "recall@20"]
    assert lines[-1] == "queries: 15 averaged, 0 judged but not in the run, 0 in the run but not judged"


@pytest.mark.parametrize("qrels_text, run_text, args, message", [
    ("1 0 a 9\n", "1 Q0 a 1 1 t\n", [], "qrels.trec:1 field 'grade': expected a whole grade in 0..3, got '9'"),
    ("1 0 a 1\n", "1 Q0 a 1 x t\n", [], "run.trec:1 field 'score': expected a numeric score, got 'x'"),
    ("1 0 a 1\n", "1 Q0 a 1 1 t\n1 Q0 a 2 0.5 t\n", [], "run.trec:2 field 'docid': duplicate document 'a'"),
    ("1 0 a 1\n", "", [], "run.trec: the file is empty"),
    ("1 0 a 1\n", "1 Q0 a 1 1 t\n", ["--metrics", "ndcg@10,bogus"], "--metrics: unknown metric 'bogus'"),
    ("1 0 a 1\n", "7 Q0 a 1 1 t\n", [], "run.trec: no query of the run is judged"),
])
def test_bad_input_prints_one_line_and_exits_2(tmp_path, capsys, qrels_text, run_text, args, message):
    qrels = write(tmp_path, "qrels.trec", qrels_text)
    run = write(tmp_path, "run.trec", run_text)
    code = main(["score", "--qrels", str(qrels), "--run", str(run), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert message in err


def test_installed_console_script_exits_2_with_one_line(tmp_path):
    script = Path(sys.executable).with_name("searcheval")
    proc = subprocess.run([str(script), "score", "--qrels", str(tmp_path / "missing"), "--run",
                           str(tmp_path / "missing")], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"searcheval: {tmp_path / 'missing'}: file not found"]
    usage = subprocess.run([str(script), "score"], capture_output=True, text=True)
    assert usage.returncode == 2 and len(usage.stderr.strip().splitlines()) == 1


def test_a_line_ends_only_at_newline_in_either_reader(tmp_path, capsys):
    # "\r\n" endings are fine (the \r is whitespace at the end of a line); a lone \r inside a
    # line does not start a new one: that line has the fields of two (6 + 6), refused by number
    qrels = write(tmp_path, "qrels.trec", "1 0 a 1\r\n1 0 b 0\r\n")
    run = write(tmp_path, "run.trec", "1 Q0 a 1 2.0 t\r\n1 Q0 b 2 1.0 t\r\n")
    assert main(["score", "--qrels", str(qrels), "--run", str(run), "--metrics", "mrr",
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["means"] == {"mrr": 1.0}
    run.write_bytes(b"1 Q0 a 1 2.0 t\r1 Q0 b 2 1.0 t\n")
    assert main(["score", "--qrels", str(qrels), "--run", str(run)]) == 2
    assert f"run.trec:1: expected 6 columns 'qid Q0 docid rank score tag', got {6 + 6}" in \
        capsys.readouterr().err
