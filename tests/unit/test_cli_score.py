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
    assert lines[-1] == "queries: 15"


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
