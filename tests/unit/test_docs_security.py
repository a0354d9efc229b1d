"""docs/security.md names only what exists: its configuration example loads, every limit its
table names is a parameter of the kind or the lookup with the default it states, and the rating
page's limits are the module's."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from searcheval.io.files import MAX_YAML_DEPTH, MAX_YAML_NODES
from searcheval.judging import app
from searcheval.rankers import documents, http
from searcheval.rankers.configs import configurations_from

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"
TEXT = DOC.read_text()


def test_the_configuration_example_loads_with_its_bounds(monkeypatch):
    (block,) = re.findall(r"```yaml\n(.*?)```", TEXT, re.S)
    configurations = configurations_from(yaml.safe_load(block), str(DOC))
    params = configurations["search"].params
    assert (params["timeout_s"], params["max_response_bytes"], params["max_hits"],
            params["max_json_depth"], params["max_id_chars"]) == (5, 4194304, 1000, 32, 256)
    assert params["query_params"]["api_key"] == {"env": "SEARCH_API_KEY"}


def test_the_limits_table_names_real_parameters_and_their_defaults():
    table = TEXT.split("| bound |")[1].split("\n\n")[0].splitlines()[2:]  # its data rows
    rows = [line.split("|")[1:-1] for line in table]
    named = {cell.strip().strip("`") for row in rows for cell in row[1:3]} - {"-"}
    assert named == {"timeout_s", "max_response_bytes", "max_json_depth", "max_hits",
                     "max_id_chars", "max_title_chars"}
    for name in named:
        assert name in http.PARAMS or name in documents.PARAMS, name
    assert http.PARAMS["max_response_bytes"].default == 16 * 1024 * 1024
    assert documents.PARAMS["max_response_bytes"].default == 4 * 1024 * 1024
    assert http.PARAMS["max_hits"].default == 10_000
    assert http.PARAMS["max_json_depth"].default == documents.PARAMS["max_json_depth"].default \
        == 64
    assert documents.PARAMS["max_title_chars"].default == 500
    assert http.PARAMS["timeout_s"].default == 10 and documents.PARAMS["timeout_s"].default == 5


def test_the_rating_page_and_yaml_limits_are_the_ones_stated():
    assert app.MAX_BODY == 64 * 1024 and "at most 64 KiB" in TEXT
    assert app.MIN_TOKEN_LENGTH == 16 and "at least 16 characters" in TEXT
    assert f"more than {MAX_YAML_NODES:,} values" in TEXT
    assert f"deeper than {MAX_YAML_DEPTH} levels" in TEXT
