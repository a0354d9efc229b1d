"""`searcheval tune` refuses bad input before the first trial: one line naming the file and the
parameter, exit 2, nothing written, no Prefect started."""

from __future__ import annotations

from pathlib import Path

import pytest

from searcheval.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("args, words", [
    (["--param", "bm25.k9=0..1"], "field 'bm25.k9': the bm25 kind has no parameter 'k9'"),
    (["--param", "bm25.b=0..3"], "field 'bm25.b': 3.0 is outside the valid values of bm25.b"),
    ([], "the search space is empty"),
    (["--param", "bm25.k1=0.5..2", "--held-out", "0.1"], "held-out queries; a paired test "
                                                        "needs at least 6"),
    (["--param", "bm25.k1=0.5..2", "--sampler", "grid"], "a grid needs a step"),
    (["--param", "bm25.k1=0.5..2", "--judge-limit", "3"], "a judge limit without a judge"),
    (["--param", "bm25.k1=0.5..2", "--judgment-sources", "humans"],
     "--judgment-sources: expected dataset, all"),
    (["--param", "bm25.k1=0.5..2", "--judgment-rule", "mean"], "judgment rule"),
    (["--param", "bm25.k1=0.5..2", "--judge", "nowhere.yaml:small"], "nowhere.yaml"),
])
def test_refusals(args, words, tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["tune", "--fixtures", str(ROOT / "fixtures"), "--configurations-file",
                 str(ROOT / "configurations.yaml"), "--output", str(out), "--held-out", "0.5",
                 *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and words in err[-1] and len(err) == 1
    assert not out.exists()


def test_a_space_file_is_named_in_its_refusal(tmp_path, capsys):
    space = tmp_path / "space.yaml"
    space.write_text("space:\n  fused.abstain_floor: 0..2\n")
    code = main(["tune", "--fixtures", str(ROOT / "fixtures"), "--configurations-file",
                 str(ROOT / "configurations.yaml"), "--space", str(space), "--held-out", "0.5",
                 "--check"])
    line = capsys.readouterr().err.strip()
    assert code == 2 and str(space) in line and "fused.abstain_floor" in line


def test_check_says_ok(capsys):
    code = main(["tune", "--fixtures", str(ROOT / "fixtures"), "--configurations-file",
                 str(ROOT / "configurations.yaml"), "--param", "bm25.k1=0.5..2:0.5",
                 "--held-out", "0.5", "--check"])
    assert code == 0 and "inputs OK" in capsys.readouterr().out
