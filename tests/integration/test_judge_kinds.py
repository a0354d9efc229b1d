"""The `python` and `cross-encoder` judge kinds through `label` on a real Postgres. No model that
can judge ships in a package this machine can install (searched: only all-MiniLM-L6-v2, a
bi-encoder and the dense configuration's own model, which the rule refuses as a judge), so the
cross-encoder is a tiny BERT made here with random weights: the real loading and scoring code
(sentence-transformers' CrossEncoder from a local folder), thresholds, calibration, and the
weights-hash side of the independence rule."""

from __future__ import annotations

import sys
import types

import pytest

from searcheval.errors import InputError
from searcheval.judging.grading import calibrate_thresholds, cross_encoder_scores, grade_of_score
from searcheval.judging.judges import check_independent, judges_from
from searcheval.judging.labelling import label, pair_inputs
from searcheval.store import judgments as rows_store
from searcheval.types import Collection, Query, Resource


def collection(name: str) -> Collection:
    return Collection(name=name, queries=[Query(id="q1", text="weather forecast")],
                      resources=[Resource(id=f"d{i}", name=f"Doc {i}",
                                          description="weather forecast " * i or "nothing")
                                 for i in range(4)], judgments=[])


def test_python_judge_grades_and_its_errors(conn):
    module = types.ModuleType("judge_fns_for_test")

    def by_length(query, document):
        if document["doc_id"] == "d3":
            raise RuntimeError("no opinion on d3")
        grade = min(3, document["text"].count("weather"))
        return grade, f"{grade} mentions"

    module.by_length = by_length
    sys.modules["judge_fns_for_test"] = module
    j = judges_from({"judges": {"py": {"kind": "python",
                                       "params": {"function": "judge_fns_for_test:by_length"}}}},
                    "judges.yaml")["py"]
    assert j.model == "judge_fns_for_test:by_length"  # its model is its function
    c = collection("judge_python")
    result = label(conn, j, c, [("q1", f"d{i}") for i in range(4)])
    assert result.graded == 3 and result.failed == 1
    assert result.errors[0]["cause"] == "RuntimeError: no opinion on d3"
    rows = {r.doc_id: (r.grade, r.rationale) for r in rows_store.load_judgment_rows(conn, "judge_python")}
    assert rows == {"d0": (0, "0 mentions"), "d1": (1, "1 mentions"), "d2": (2, "2 mentions")}


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    words = ["weather", "forecast", "doc", "nothing", "0", "1", "2", "3"]
    (folder / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
                                                + words) + "\n")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=5 + len(words), hidden_size=16, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=32, num_labels=1,
                        max_position_embeddings=64)
    BertForSequenceClassification(config).save_pretrained(folder)
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    return folder


def test_cross_encoder_scores_map_to_grades_and_calibrate(conn, tiny_cross_encoder):
    raw = {"judges": {"ce": {"kind": "cross-encoder", "model": str(tiny_cross_encoder),
                             "params": {"max_length": 64}}}}
    uncalibrated = judges_from(raw, "judges.yaml")["ce"]
    c = collection("judge_ce")
    with pytest.raises(InputError, match="no thresholds yet") as caught:
        label(conn, uncalibrated, c, [("q1", "d1")])
    assert caught.value.field == "ce.thresholds"
    scores = cross_encoder_scores(uncalibrated, pair_inputs(c, [("q1", f"d{i}") for i in range(4)]),
                                  (0, 3))
    assert len(set(scores)) == 4  # four different texts, four scores
    human = [0, 1, 2, 3]
    order = sorted(range(4), key=lambda i: scores[i])
    ranked_human = [human[order.index(i)] for i in range(4)]  # grades rising with the score
    thresholds = calibrate_thresholds(scores, ranked_human, (0, 3))
    assert [grade_of_score(s, thresholds, (0, 3)) for s in scores] == ranked_human
    raw["judges"]["ce"]["params"]["thresholds"] = thresholds
    judge = judges_from(raw, "judges.yaml")["ce"]
    assert judge.sha256 != uncalibrated.sha256  # new thresholds: another judge
    result = label(conn, judge, c, [("q1", f"d{i}") for i in range(4)])
    assert result.graded == 4 and result.requests == 0
    rows = {r.doc_id: r.grade for r in rows_store.load_judgment_rows(conn, "judge_ce")}
    assert rows == {f"d{i}": ranked_human[i] for i in range(4)}


def test_a_cross_encoder_with_a_configurations_weights_is_refused(tiny_cross_encoder, tmp_path):
    import shutil

    copy = tmp_path / "renamed-model"
    shutil.copytree(tiny_cross_encoder, copy)  # another name, the same weights
    judge = judges_from({"judges": {"ce": {"kind": "cross-encoder", "model": str(copy)}}},
                        "judges.yaml")["ce"]
    from searcheval.rankers.embeddings import model_fingerprint

    with pytest.raises(InputError, match="the same weights as configuration 'rerank'"):
        check_independent(judge, [("rerank", str(tiny_cross_encoder),
                                   model_fingerprint(tiny_cross_encoder))])
