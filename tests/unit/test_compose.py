"""One composition of a nightly run (searcheval.evaluation.compose): the plan carries what the
preflight read and checked, each input read once; every option is checked before any work; the
flow stays task calls over the plan."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from searcheval.evaluation import compose
from searcheval.evaluation.preflight import Refused, RunRequest
from searcheval.rankers import configs

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def request_(tmp_path) -> RunRequest:
    shutil.copytree(ROOT / "fixtures", tmp_path / "fixtures",
                    ignore=shutil.ignore_patterns("traces*", "thresholds*", "*.md"))
    shutil.copy(ROOT / "baseline.json", tmp_path / "baseline.json")
    return RunRequest(fixtures=str(tmp_path / "fixtures"), baseline=str(tmp_path / "baseline.json"),
                      configurations_file=str(ROOT / "configurations.yaml"), environ={})


def test_the_plan_carries_what_the_preflight_read_the_configurations_parsed_once(request_,
                                                                                 monkeypatch):
    calls = []
    parse = configs.configurations_from
    monkeypatch.setattr(configs, "configurations_from",
                        lambda *a, **k: calls.append(a[1]) or parse(*a, **k))
    plan = compose.plan_run(request_, ROOT)
    assert len(calls) == 1  # the configurations file: parsed once per run
    assert [c.name for c in plan.selected] == ["bm25", "dense", "fused"]
    assert plan.served == "fused" and plan.baseline.configuration == "fused"
    from searcheval import defaults

    assert plan.metrics == tuple(defaults.REPORT_METRICS)
    assert len(plan.collection.queries) == 15
    assert plan.conventions.source("coverage_floor") in ("default", "dataset")
    assert plan.embeds and len(plan.texts()) == 18 + 15  # documents and queries
    assert plan.code["commit"]


@pytest.mark.parametrize("option, value", [("snapshot_depth", 0), ("snapshot_depth", -3),
                                           ("depth", 0), ("snapshot_retention", "soon")])
def test_every_option_is_checked_before_any_work(request_, option, value):
    setattr(request_, option, value)
    with pytest.raises(Refused) as refused:
        compose.plan_run(request_, ROOT)
    assert [p.field for p in refused.value.problems] == [option]


def test_the_nightly_flow_is_task_calls_over_the_plan():
    tree = ast.parse((ROOT / "flows" / "nightly.py").read_text())
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    nightly = functions["nightly"]  # the flow: its run id, then its steps (`evaluate`)
    assert any(isinstance(n, ast.Call) and getattr(n.func, "id", None) == "evaluate"
               for n in ast.walk(nightly))
    steps = functions["evaluate"]
    first = steps.body[1].lineno  # after the docstring
    assert steps.end_lineno - first + 1 <= 80
    called = {n.func.value.id + "." + n.func.attr for n in ast.walk(steps)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
              and isinstance(n.func.value, ast.Name)}
    # the network and the database are reached through tasks only: no library module is
    # called for them from the flow
    assert not any(name.startswith(("lookups.", "store.", "judging.")) for name in called)
    assert {"t.plan_run", "t.look_up_judged", "t.look_up_results", "t.judgments",
            "t.publish"} <= called
