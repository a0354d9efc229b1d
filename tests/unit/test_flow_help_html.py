"""What the Prefect UI shows of a flow (its description, the Run form's parameter help, the
deployments' descriptions) is rendered as markdown with HTML allowed: a `<word>` there is taken
for a tag and vanishes (the Run form's `split` help read "qrels/.tsv", issue 29 item 10). So
none of it may hold one; placeholders are written in capitals (qrels/SPLIT.tsv)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from prefect.utilities.callables import parameter_schema

from flows.live import live
from flows.nightly import nightly
from flows.replay import replay
from flows.tune import tune

ROOT = Path(__file__).resolve().parents[2]
TAG = re.compile(r"</?[A-Za-z_][\w-]*>")  # what a markdown renderer with HTML takes for a tag
FLOWS = [nightly, replay, tune, live]


def texts_of_schema(schema: dict) -> list[tuple[str, str]]:
    """(where, text) of every title and description in a parameter schema, nested too."""
    out = []

    def walk(node, where):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("title", "description") and isinstance(value, str):
                    out.append((f"{where}.{key}", value))
                else:
                    walk(value, f"{where}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{where}[{i}]")

    walk(schema, "schema")
    return out


def test_the_pattern_finds_what_the_ui_would_eat():
    assert TAG.search("qrels/<split>.tsv") and TAG.search("output/<run_id>/")
    assert not TAG.search("qrels/SPLIT.tsv") and not TAG.search("a < b and c > d")


@pytest.mark.parametrize("flow", FLOWS, ids=lambda f: f.name)
def test_no_flow_description_or_parameter_help_holds_a_tag(flow):
    texts = [("description", flow.description or "")]
    texts += texts_of_schema(parameter_schema(flow.fn).model_dump())
    assert len(texts) > 3  # the schema was read: each flow documents several parameters
    found = [(where, m.group()) for where, text in texts for m in TAG.finditer(text)]
    assert found == []


def test_the_split_help_names_the_file_literally():
    schema = parameter_schema(nightly.fn).model_dump()
    assert "qrels/SPLIT.tsv" in schema["properties"]["split"]["description"]


def test_no_deployment_description_holds_a_tag():
    config = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())
    found = [(d["name"], m.group()) for d in config["deployments"]
             for m in TAG.finditer(d.get("description") or "")]
    assert config["deployments"] and found == []
