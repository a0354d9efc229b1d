"""One list of the run's options: RunRequest declares each option with its default, range and help;
the nightly flow's signature and docstring (the Prefect Run form), the `searcheval run` flags and
deploy/prefect.yaml's parameters are held to it here, so a copy that disagrees fails this test."""

from __future__ import annotations

import argparse
import inspect
import re
from dataclasses import MISSING, fields
from pathlib import Path

import pytest
import yaml

from searcheval.cli import build_parser
from searcheval.cli.run import WITHOUT_FLAG, given_request, run_request
from searcheval.evaluation.preflight import OPTIONS, RunRequest

ROOT = Path(__file__).resolve().parents[2]
DECLARED = {f.name: f for f in fields(RunRequest) if f.name in OPTIONS}


def default_of(name: str):
    f = DECLARED[name]
    return f.default_factory() if f.default is MISSING else f.default


@pytest.fixture(scope="module")
def nightly():
    import sys

    sys.path.insert(0, str(ROOT))
    from flows.nightly import nightly

    return nightly


def docstring_args(doc: str) -> dict[str, str]:
    helps, current = {}, None
    for line in doc.split("Args:\n", 1)[1].splitlines():
        m = re.match(r"\s{8}(\w+): (.*)", line)
        if m:
            current, helps[m[1]] = m[1], m[2]
        elif current and line.strip():
            helps[current] += " " + line.strip()
    return helps


def test_every_option_is_declared_with_a_help():
    assert all(DECLARED[name].metadata.get("help") for name in OPTIONS)


def test_the_flow_signature_is_the_options_with_their_defaults(nightly):
    signature = inspect.signature(nightly.fn)
    assert set(signature.parameters) == set(OPTIONS)
    assert {n: p.default for n, p in signature.parameters.items()} == \
        {n: default_of(n) for n in OPTIONS}


def test_the_run_form_says_what_the_declaration_says(nightly):
    helps = docstring_args(nightly.fn.__doc__)
    assert helps == {n: DECLARED[n].metadata["help"] for n in OPTIONS}


def run_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["run"]


def test_every_option_is_a_flag_of_its_name_or_says_why_not():
    dests = {a.dest for a in run_parser()._actions}
    assert set(WITHOUT_FLAG) <= set(OPTIONS) and all(WITHOUT_FLAG.values())
    assert set(OPTIONS) - set(WITHOUT_FLAG) - {"overrides"} == {n for n in OPTIONS if n in dests}
    assert "set" in dests  # --set NAME.PARAM=VALUE: the overrides
    assert not set(WITHOUT_FLAG) & dests


#: options whose empty flag the command line settles itself over the project settings (a flow
#: run's empty `output` means "the database and the artifacts only")
SETTLED_BY_THE_COMMAND_LINE = {"output"}


def test_the_flags_defaults_are_the_declared_defaults():
    request = given_request(build_parser().parse_args(["run"]))
    expected = {n: default_of(n) for n in OPTIONS}
    expected.update({n: None for n in SETTLED_BY_THE_COMMAND_LINE})
    assert {n: getattr(request, n) for n in OPTIONS} == expected


def test_an_empty_option_is_settled_from_the_project_else_the_library_default():
    # the repository is the example project: its settings name the fixtures; nothing else is set
    request = run_request(build_parser().parse_args(["run"]))
    assert request.fixtures is not None and request.dataset_name == "fixtures"
    assert (request.depth, request.split, request.output) == (100, "test", "out")
    assert request.sources["depth"].startswith("project setting datasets.fixtures.depth")
    assert "split" not in request.sources  # a library default, said as such in the report


def test_the_deployments_parameters_are_options():
    config = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())
    nightly = [d for d in config["deployments"] if d["entrypoint"] == "flows/nightly.py:nightly"]
    assert nightly
    for deployment in nightly:
        unknown = set(deployment.get("parameters") or {}) - set(OPTIONS)
        assert not unknown, (deployment["name"], unknown)
        for name, value in (deployment.get("parameters") or {}).items():
            whole = DECLARED[name].metadata.get("whole")
            if whole and value is not None:
                lo, hi = whole
                assert lo <= value and (hi is None or value <= hi), (deployment["name"], name)
