"""Judges as data, the independence rule, answers, the audit's sample and agreement, and the rule
that says which sources count (known answers)."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from searcheval.errors import InputError
from searcheval.judging.audit import audit_sample, judge_audits, model_agreement
from searcheval.judging.counting import source_standing
from searcheval.judging.grading import (calibrate_thresholds, grade_of_score, parse_answer)
from searcheval.judging.judges import (AuditPolicy, check_independent, check_prompt, fill,
                                       judge_hash, judges_from)
from searcheval.judging.judgments import JudgmentRow
from searcheval.types import Collection, Query, Resource

F = "team/judges.yaml"


def entry(**over):
    base = {"kind": "openai", "model": "gpt-4o-mini",
            "params": {"base_url": "http://127.0.0.1:1/v1", "api_key": {"env": "K"},
                       "prompt": "{query} / {title}: {text}"}}
    base.update(over)
    return {"judges": {"j": base}}


def refused(raw) -> InputError:
    with pytest.raises(InputError) as caught:
        judges_from(raw, F)
    assert caught.value.file == F
    return caught.value


def test_a_good_file_resolves_with_defaults_and_an_identity():
    j = judges_from(entry(), F)["j"]
    assert j.params["temperature"] == 0.0 and j.params["response"] == "json"
    assert j.audit == AuditPolicy(share=0.1, minimum=30, floor=0.667, seed=0)
    assert j.sha256 == judge_hash("openai", "gpt-4o-mini", j.params)
    # how a judge is reached is not what it is: another endpoint, same identity
    moved = entry()
    moved["judges"]["j"]["params"].update(base_url="http://other/v1", concurrency=16)
    assert judges_from(moved, F)["j"].sha256 == j.sha256
    # a change of prompt or temperature is another judge
    for change in ({"prompt": "{query}"}, {"temperature": 0.5}):
        other = entry()
        other["judges"]["j"]["params"].update(change)
        assert judges_from(other, F)["j"].sha256 != j.sha256


@pytest.mark.parametrize("over, field, words", [
    ({"kind": "llm"}, "j.kind", "unknown kind 'llm'"),
    ({"model": None}, "j.model", "missing"),
    ({"model": "  "}, "j.model", "missing"),
    ({"params": {"base_url": "u", "api_key": "sk-live-1234", "prompt": "{query}"}},
     "j.api_key", "never written"),
    ({"params": {"base_url": "u", "prompt": "{query}", "headers": {"X-Api-Key": "abc"}}},
     "j.headers.X-Api-Key", "never written"),
    ({"params": {"base_url": "u", "prompt": "{query}", "response": "pattern"}},
     "j.pattern", "grade"),
    ({"params": {"base_url": "u"}}, "j.prompt", "missing"),
    ({"audit": {"floor": 2}}, "j.audit.floor", "<= 1"),
])
def test_refusals_name_file_judge_and_field(over, field, words):
    raw = entry()
    raw["judges"]["j"].update(over)
    if over.get("model") is None and "model" in over:
        del raw["judges"]["j"]["model"]
    error = refused(raw)
    assert error.field == field and words in error.message


def test_a_prompt_naming_a_field_the_documents_lack_is_refused():
    c = Collection(name="c", resources=[Resource(id="d", name="D", description="x",
                                                  fields=(("brand", "acme"),))],
                   queries=[Query(id="q", text="t")], judgments=[])
    ok = judges_from(entry(params={"base_url": "u", "prompt": "{query} {brand} {guideline}"}),
                     F)["j"]
    check_prompt(ok, c)
    bad = judges_from(entry(params={"base_url": "u", "prompt": '{query} {color} {"grade": 1}'}),
                      F)["j"]
    with pytest.raises(InputError) as caught:
        check_prompt(bad, c)
    assert caught.value.field == "j.prompt" and "{color}" in caught.value.message


def test_fill_leaves_json_braces_alone():
    assert fill('Q: {query} -> {"grade": 2}', {"query": "maps"}) == 'Q: maps -> {"grade": 2}'


def test_a_judge_is_never_the_model_of_a_configuration_it_judges():
    j = judges_from(entry(model="sentence-transformers/all-MiniLM-L6-v2"), F)["j"]
    with pytest.raises(InputError) as caught:
        check_independent(j, [("dense", "all-MiniLM-L6-v2", None)])
    assert "'dense'" in caught.value.message and "all-MiniLM-L6-v2" in caught.value.message
    assert caught.value.field == "j.model"
    check_independent(j, [("rerank", "ms-marco-MiniLM-L-6-v2", None)])  # another model


def test_the_rule_against_the_shipped_configurations():
    from searcheval.judging.judges import check_against_configurations
    from searcheval.rankers.configs import load_configurations

    configurations = load_configurations("configurations.yaml")
    same = judges_from(entry(model="all-MiniLM-L6-v2"), F)["j"]
    with pytest.raises(InputError, match="'dense'"):
        check_against_configurations(same, configurations)
    check_against_configurations(judges_from(entry(), F)["j"], configurations)


@pytest.mark.parametrize("content, grade, rationale", [
    ('{"grade": 2, "rationale": "close"}', 2, "close"),
    ('Sure.\n```json\n{"grade": "3", "reason": "exact"}\n```', 3, "exact"),
    ('I would say {"grade": 0} here', 0, ""),
])
def test_answers_parse(content, grade, rationale):
    j = judges_from(entry(), F)["j"]
    assert parse_answer(content, j, (0, 3)) == (grade, rationale)


@pytest.mark.parametrize("content, words", [
    ('{"grade": 4}', "grade 4 outside the scale 0..3"),
    ('{"grade": 1.5}', "not a whole number"),
    ("relevant, I think", "malformed answer"),
    ("", "malformed answer: empty"),
])
def test_bad_answers_are_errors(content, words):
    j = judges_from(entry(), F)["j"]
    with pytest.raises(ValueError, match=words):
        parse_answer(content, j, (0, 3))


def test_pattern_answers():
    raw = entry()
    raw["judges"]["j"]["params"].update(response="pattern",
                                        pattern=r"Grade:\s*(?P<grade>\d+)\s*(?P<rationale>.*)")
    j = judges_from(raw, F)["j"]
    assert parse_answer("Grade: 1 same topic only", j, (0, 3)) == (1, "same topic only")


def test_scores_map_to_grades_by_thresholds_and_calibrate_to_human_shares():
    assert [grade_of_score(s, [0.0, 1.0, 2.0], (0, 3)) for s in (-1, 0, 1.5, 9)] == [0, 1, 2, 3]
    scores = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    human = [0, 0, 0, 0, 1, 1, 2, 3]  # half are 0, a quarter 1, an eighth 2 and 3
    t = calibrate_thresholds(scores, human, (0, 3))
    assert [grade_of_score(s, t, (0, 3)) for s in scores] == human


def test_the_sample_is_stratified_seeded_and_tops_up_what_is_audited():
    grades = {(f"q{i % 10}", f"d{i}"): i % 4 for i in range(200)}
    categories = {f"q{i}": ("a" if i < 5 else "b") for i in range(10)}
    policy = AuditPolicy(share=0.1, minimum=30, seed=7)
    sample = audit_sample(grades, categories, policy)
    assert len(sample) == max(30, math.ceil(0.1 * 200)) == 30
    assert sample == audit_sample(grades, categories, policy)  # one seed, one sample
    assert sample != audit_sample(grades, categories, AuditPolicy(share=0.1, minimum=30, seed=8))
    strata = Counter((grades[p], categories[p[0]]) for p in sample)
    assert len(strata) == 8  # every (grade, category) stratum is represented
    sizes = Counter((grades[p], categories[p[0]]) for p in grades)  # 30 or 20 pairs each
    # proportional: 30 * 30 / 200 = 4.5 and 30 * 20 / 200 = 3 per stratum, within one
    assert all(abs(strata[k] - 30 * sizes[k] / 200) <= 1 for k in sizes)
    done = set(sample[:10])
    rest = audit_sample(grades, categories, policy, done)
    assert not set(rest) & done and len(rest) + len(done) >= 30


def test_model_agreement_known_answers():
    model = {("q", f"d{i}"): g for i, g in enumerate([0, 1, 2, 3, 0, 1, 2, 3])}
    humans = {p: {"ann": g} for p, g in model.items()}
    a = model_agreement(model, humans, {"q": "c"}, (0, 3), bootstrap=50)
    assert a["items"] == 8 and a["kappa"] == pytest.approx(1.0) and a["alpha"] == pytest.approx(1.0)
    assert a["confusion"] == [[2, 0, 0, 0], [0, 2, 0, 0], [0, 0, 2, 0], [0, 0, 0, 2]]
    assert a["by_category"]["c"]["items"] == 8
    # humans disagreeing: a human 3 where the model says 0 lands in row 3, column 0
    humans[("q", "d0")] = {"ann": 3, "bob": 3}
    b = model_agreement(model, humans, {"q": "c"}, (0, 3), bootstrap=0)
    assert b["confusion"][3][0] == 1 and b["alpha"] < 1.0


def test_which_sources_count():
    assert source_standing("human", None).counts
    assert source_standing("import", None).counts
    small = source_standing("model", {"items": 3, "alpha": 0.9}, minimum=30)
    assert not small.counts and "3 of the 30" in small.reason
    low = source_standing("implicit", {"items": 40, "alpha": 0.5}, minimum=30, floor=0.667)
    assert not low.counts and "0.500 < 0.667" in low.reason
    assert source_standing("model", {"items": 40, "alpha": 0.7}, minimum=30).counts
    assert not source_standing("model", {"items": 40, "alpha": None}, minimum=30).counts


def test_judge_audits_from_rows():
    rows = [JudgmentRow("q", f"d{i}", g, "llm", source="model") for i, g in enumerate([0, 1, 2, 3])]
    rows += [JudgmentRow("q", f"d{i}", g, "ann", source="human") for i, g in enumerate([0, 1, 2, 3])]
    audits = judge_audits(rows, {"q": "c"}, (0, 3), {"llm": AuditPolicy(minimum=4)})
    assert audits["llm"]["counts"] and audits["llm"]["agreement"]["items"] == 4
    audits = judge_audits(rows, {"q": "c"}, (0, 3), {"llm": AuditPolicy(minimum=5)})
    assert not audits["llm"]["counts"]


def test_an_audit_below_its_floor_is_alerted_and_reported():
    from searcheval.evaluation.alerts import audit_reasons
    from searcheval.evaluation.report import model_grades_section

    policy = {"share": 0.1, "minimum": 30, "floor": 0.667, "seed": 0}
    low = {"graded": 120, "counts": False, "policy": policy,
           "reason": "agreement below the floor: alpha 0.400 < 0.667 over 40 audited pair(s)",
           "agreement": {"items": 40, "alpha": 0.4}}
    small = {**low, "agreement": {"items": 3, "alpha": 0.2}, "reason": "audit too small"}
    judging = {"judgments": {"model_judges": {"llm": low, "tiny": small}}, "configurations": {}}
    reasons = audit_reasons(judging)
    assert [r["judge"] for r in reasons] == ["llm"]  # a small audit is not yet a fall
    assert "alpha 0.400 over 40 pair(s), under the floor 0.667" in reasons[0]["summary"]
    text = model_grades_section(judging, {})
    assert "model judge llm: 120 grade(s), audit 40 pair(s), alpha 0.400; NOT counted" in text


def test_the_report_says_when_the_verdict_rests_on_model_grades():
    from types import SimpleNamespace

    from searcheval.evaluation.report import model_grades_section

    judging = {"judgments": {"model_judges": {}},
               "configurations": {"fused": {"k": 10, "sources": {
                   "judged": 40, "counts": {"human": 10, "model:llm": 30},
                   "shares": {"human": 0.25, "model:llm": 0.75}},
                   "means_without_model": {"ndcg@10": 0.5, "mrr": 0.6}}},
               "without_model": {"gate": {"passed": False, "differs": True,
                                          "tripped": ["ndcg@10 dropped 0.05"]}}}
    scores = {"fused": SimpleNamespace(means={"ndcg@10": 0.7, "mrr": 0.8})}
    text = model_grades_section(judging, scores)
    assert "fused: judged top 10 (40 pairs) by source: human 25%, model:llm 75%" in text
    assert "| fused | 0.700 / 0.500 | 0.800 / 0.600 |" in text
    assert "without them it would have tripped (ndcg@10 dropped 0.05)" in text


def test_judging_summary_reruns_the_gate_without_model_grades():
    """fused returns d1 first for q1 and q2. Humans graded q1/d1 = 3; a counted model judge
    graded q2/d1 = 3. With it, MRR = (1/1 + 1/1) / 2 = 1.0; without it q2 has no relevant
    document: MRR = (1 + 0) / 2 = 0.5. The baseline's MRR is 0.9 with tolerance 0.02: the gate
    passes with the model's grade and would trip without it."""
    from searcheval.evaluation.baseline import Baseline
    from searcheval.evaluation.pipeline import gate_scores, judging_summary, score_runs
    from searcheval.judging.judgments import Effective, Rule
    from searcheval.metrics.engine import Settings
    from searcheval.types import Judgment, RankedRun

    queries = [Query(id="q1", text="a"), Query(id="q2", text="b")]
    c = Collection(name="c", resources=[Resource(id=d, name=d, description=d)
                                        for d in ("d1", "d2")], queries=queries,
                   judgments=[Judgment("q1", "d1", 3), Judgment("q2", "d1", 3)])
    runs = {"fused": RankedRun("fused", {"q1": [("d1", 2.0), ("d2", 1.0)],
                                          "q2": [("d1", 2.0), ("d2", 1.0)]})}
    qrels = {"q1": {"d1": 3}, "q2": {"d1": 3}}
    effective = Effective(rule=Rule("median"), judgments=c.judgments, stale_pairs={},
                          stale_by_judge={}, judges={}, latest={("q1", "d1"): {"ann": 3},
                                                                ("q2", "d1"): {"llm": 3}},
                          rests_on={("q1", "d1"): "human", ("q2", "d1"): "model:llm"})
    settings = Settings()
    baseline = Baseline(configuration="fused", metrics={"mrr": 0.9}, tolerance=0.02)
    scores = score_runs(runs, c, qrels, ("mrr",), settings)
    verdict = gate_scores(scores, baseline)
    assert verdict.passed and scores["fused"].means["mrr"] == (1 / 1 + 1 / 1) / 2
    block = judging_summary(runs, c, qrels, ("mrr",), settings, "r1", {}, 10, effective, 0.667,
                            verdict=verdict, baseline=baseline)
    fused = block["configurations"]["fused"]
    assert fused["sources"]["counts"] == {"human": 1, "model:llm": 1}
    assert fused["means_without_model"]["mrr"] == (1 / 1 + 0) / 2
    assert block["without_model"]["gate"]["differs"] is True
    assert block["without_model"]["gate"]["passed"] is False


def test_a_judges_older_identity_is_superseded():
    from searcheval.judging.source import counted_rows

    c = Collection(name="c", resources=[], queries=[Query(id="q", text="t", category="k")],
                   judgments=[])
    old = [JudgmentRow("q", f"d{i}", g, "llm", source="model", judge_hash="old")
           for i, g in enumerate([0, 1, 2, 3])]
    new = [JudgmentRow("q", f"e{i}", g, "llm", source="model", judge_hash="new")
           for i, g in enumerate([0, 1, 2, 3])]
    people = [JudgmentRow("q", f"d{i}", g, "ann", source="human") for i, g in
              enumerate([0, 1, 2, 3])]
    # the old identity agreed with people on d0..d3; the new one has no audit of its own yet
    kept, audits = counted_rows(old + new + people, c, {"llm": AuditPolicy(minimum=4)},
                                {"llm": "new"})
    assert audits["llm"]["counts"] is False and audits["llm"]["agreement"]["items"] == 0
    assert audits["llm"]["superseded_rows"] == 4
    assert [r.doc_id for r in kept if r.source == "model"] == []
    kept, audits = counted_rows(old + people, c, {"llm": AuditPolicy(minimum=4)}, {"llm": "old"})
    assert audits["llm"]["counts"] is True  # while it is the current identity, it counts
