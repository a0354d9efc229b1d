"""configurations.yaml: loaded, checked, overridden and hashed (searcheval/rankers/configs.py)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from searcheval.cli import main
from searcheval.errors import InputError
from searcheval.rankers import bm25
from searcheval.rankers.configs import (
    builtin_configurations,
    configurations_from,
    load_configurations,
    parse_assignment,
)
from searcheval.rankers.fusion import FusionParams
from searcheval.rankers.registry import get_kind

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "configurations.yaml"


def raw() -> dict:
    return yaml.safe_load(SHIPPED.read_text())


def refused(document: dict, overrides=None) -> InputError:
    with pytest.raises(InputError) as err:
        configurations_from(document, "c.yaml", overrides)
    assert err.value.file == "c.yaml"
    return err.value


def test_the_shipped_file_writes_out_every_constant_of_the_built_ins():
    shipped = load_configurations(SHIPPED)
    assert shipped.served == "fused"
    assert shipped.default_names == ("bm25", "dense", "fused")
    for name in ("bm25", "dense", "fused"):
        written = raw()["configurations"][name]["params"]
        # every parameter the kind has is written out in the file, none left to a default
        assert set(written) == set(get_kind(name).params), name
    # ... with the values the library's code defaults have
    fusion = FusionParams()
    fused = shipped["fused"].params
    for f in fields(FusionParams):
        if f.name != "depth":
            expected = getattr(fusion, f.name)
            assert fused[f.name] == (list(expected) if isinstance(expected, tuple) else expected)
    assert shipped["bm25"].params == {"k1": bm25.DEFAULT_K1, "b": bm25.DEFAULT_B,
                                      "field_weights": dict(bm25.DEFAULT_FIELD_WEIGHTS),
                                      "repetition_power": bm25.DEFAULT_REPETITION_POWER}
    # and so the same hashes as the built-ins resolved from the kinds' defaults
    builtin = builtin_configurations()
    assert {n: c.sha256 for n, c in shipped.entries.items()} \
        == {n: c.sha256 for n, c in builtin.entries.items()}
    assert [c.name for c in shipped["fused"].components] == ["bm25", "dense"]


def test_exactly_one_entry_is_served():
    none = raw()
    none["configurations"]["fused"]["served"] = False
    assert refused(none).field == "served"
    two = raw()
    two["configurations"]["bm25"]["served"] = True
    err = refused(two)
    assert (err.field, "got 2: bm25, fused" in err.message) == ("served", True)


@pytest.mark.parametrize("path, value, field, words", [
    ("fused.rrf_k", -1, "fused.rrf_k", "expected a number >= 0"),
    ("fused.rrf_k", "twenty", "fused.rrf_k", "expected a finite number"),
    ("bm25.b", 1.5, "bm25.b", "<= 1"),
    ("fused.prior_a", 0, "fused.prior_a", "> 0"),
    ("fused.weights", [1.0], "fused.weights", "a list of 2"),
    ("fused.nope", 1, "fused.nope", "unknown parameter 'nope'"),
    ("bm25.field_weights.title", 2, "bm25.field_weights.title", "unknown key 'title'"),
    ("dense.exact", "yes", "dense.exact", "true or false"),
    ("fused.candidate_floor", 0.5, "fused.candidate_floor", "candidate_floor <= abstain_floor"),
    ("fused.lexical", "dense", "fused.lexical", "expected one of kind bm25"),
    ("fused.semantic", "missing", "fused.semantic", "not a configuration of the file"),
    ("nope.k1", 1, "nope.k1", "unknown configuration 'nope'"),
    ("bm25.max_failed_share", 2, "bm25.max_failed_share", "<= 1"),
])
def test_a_bad_override_is_refused_naming_the_file_the_entry_and_the_parameter(path, value,
                                                                                field, words):
    err = refused(raw(), {path: value})
    assert err.field == field and words in err.message, err


def test_a_bad_entry_in_the_file_is_refused_the_same_way():
    document = raw()
    document["configurations"]["bm25"]["params"]["k1"] = -2
    assert refused(document).field == "bm25.k1"
    document = raw()
    document["configurations"]["odd"] = {"kind": "quantum"}
    err = refused(document)
    assert err.field == "odd.kind" and "unknown kind 'quantum'" in err.message
    document = raw()
    document["configurations"]["odd"] = {"params": {}}
    assert refused(document).field == "odd.kind"
    document = raw()
    document["run"] = ["bm25", "nope"]
    assert refused(document).field == "run"
    with pytest.raises(InputError) as err:
        load_configurations(SHIPPED).select(["bm25", "nope"])
    assert err.value.field == "configurations" and "'nope'" in err.value.message
    assert str(SHIPPED) in err.value.message


def test_an_overridden_configuration_is_a_different_configuration_with_its_own_hash():
    base = load_configurations(SHIPPED)
    changed = load_configurations(SHIPPED, {"fused.rrf_k": 20})
    assert changed["fused"].params["rrf_k"] == 20.0
    assert changed["fused"].overridden == {"rrf_k": 20}
    assert changed["fused"].sha256 != base["fused"].sha256
    assert changed["bm25"].sha256 == base["bm25"].sha256
    # a change to what fused fuses changes fused too
    lexical = load_configurations(SHIPPED, {"bm25": {"b": 0.5}})
    assert lexical["bm25"].sha256 != base["bm25"].sha256
    assert lexical["fused"].sha256 != base["fused"].sha256
    # the same values give the same hash, however they were given
    assert load_configurations(SHIPPED, {"fused": {"rrf_k": 20.0}})["fused"].sha256 \
        == changed["fused"].sha256
    # a nested parameter keeps the other keys of its mapping
    weights = load_configurations(SHIPPED, {"bm25.field_weights.name": 4})["bm25"]
    assert weights.params["field_weights"] == {"name": 4.0, "description": 1.0, "tags": 2.0}


def test_set_values_are_read_as_yaml():
    assert parse_assignment("fused.rrf_k=20") == ("fused.rrf_k", 20)
    assert parse_assignment("fused.abstain_margin=null") == ("fused.abstain_margin", None)
    assert parse_assignment("dense.exact=true") == ("dense.exact", True)
    assert parse_assignment("fused.weights=[2, 1]") == ("fused.weights", [2, 1])
    assert parse_assignment("web.url=http://x/?q=a") == ("web.url", "http://x/?q=a")
    for bad in ("fused", "fused=3", ".k=1", "fused.=1"):
        with pytest.raises(InputError):
            parse_assignment(bad)
    assert load_configurations(SHIPPED, {"fused.abstain_margin": None})["fused"] \
        .params["abstain_margin"] is None


def test_the_cli_refuses_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "out"
    for args, words in ((["--set", "fused.rrf_k=-3"], "configurations.yaml field 'fused.rrf_k'"),
                        (["--configurations", "bm25,nope"],
                         "--configurations: unknown configuration 'nope'"),
                        (["--set", "fused=3"], "--set: expected NAME.PARAM=VALUE")):
        code = main(["run", "--output", str(out), "--configurations-file", str(SHIPPED), *args])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and words in err[0], err
        assert err[0].startswith("searcheval: ")
    assert not out.exists()
