"""A query the engine failed is not an abstention: the diff says it failed, and why."""

from __future__ import annotations

from searcheval.evaluation.diff import Side, diff_markdown, diff_sides, worst_lines


def side(run_id: str, lists: dict, failed: dict | None = None) -> Side:
    values = {q: {"ndcg@10": 1.0 if docs and docs[0][2] else 0.0} for q, docs in lists.items()}
    return Side(run_id=run_id, configuration="engine", dataset="cranfield", started_at=None,
                label=None, lists=lists, values=values,
                queries={q: {"text": f"text {q}", "category": None}
                         for q in ("q1", "q2", "q3")},
                failed=failed or {})


def test_a_failed_query_is_failed_not_abstained_and_an_empty_answer_is_abstained():
    a = side("r1", {"q1": [("d1", 2.0, 1)], "q2": [("d2", 1.0, 1)], "q3": [("d3", 1.0, 1)]})
    # today q2 failed (HTTP 500, no list) and q3 was answered with nothing (an abstention)
    b = side("r2", {"q1": [("d1", 2.0, 1)], "q3": []}, failed={"q2": "HTTP 500 after 2 attempts"})
    diff = diff_sides(a, b, metric="ndcg@10", k=10, metrics=("ndcg@10",))
    rows = {q["query_id"]: q for q in diff["queries"]}
    assert rows["q2"]["status"] == "failed"
    assert rows["q2"]["failed"] == {"a": None, "b": "HTTP 500 after 2 attempts"}
    assert rows["q2"]["abstained"] == {"a": False, "b": None}
    assert rows["q2"]["left"] == [] == rows["q2"]["entered"]  # B has no list: nothing left it
    assert rows["q3"]["abstained"] == {"a": False, "b": True} and rows["q3"]["status"] == "worse"
    assert diff["counts"]["failed"] == 1
    assert diff["headline"] == ("1 worse, 0 better, 1 unchanged of 3 (1 failed on a side: not "
                                "answered, not compared)")
    text = diff_markdown(diff)
    assert "- failed: B was not answered (HTTP 500 after 2 attempts)" in text
    assert "| no / failed | failed |" in text
    assert text.count("- abstained: B returned nothing") == 1  # q3's, not q2's
    assert not any("q2" in line for line in worst_lines(diff))
