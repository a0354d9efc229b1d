"""The record of what ran: the git state of a working tree (a real git repository in a temp
folder), versions, the dataset's fingerprint, the flow run's tags."""

from __future__ import annotations

import hashlib
import json
import subprocess

import pytest

from searcheval.errors import InputError
from searcheval.evaluation.provenance import (
    code_state,
    dataset_fingerprint,
    refuse_dirty,
    run_record,
    tags,
)


def git(folder, *args):
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    git(tmp_path, "init", "-q")
    git(tmp_path, "config", "user.email", "t@example.org")
    git(tmp_path, "config", "user.name", "t")
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-qm", "first")
    return tmp_path


def test_a_clean_tree_records_its_commit(repo):
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    state = code_state(repo)
    assert (state["commit"], state["dirty"], state["diff_sha256"]) == (head, False, None)
    refuse_dirty(state)  # nothing to refuse
    (repo / "ignored").mkdir()
    (repo / "ignored" / "x").write_text("not part of the code")
    assert code_state(repo)["dirty"] is False


def test_uncommitted_edits_make_the_tree_dirty_with_a_hash_of_the_diff(repo):
    (repo / "a.txt").write_text("two\n")
    first = code_state(repo)
    assert first["dirty"] is True and len(first["diff_sha256"]) == 64
    (repo / "a.txt").write_text("three\n")
    second = code_state(repo)
    assert second["diff_sha256"] != first["diff_sha256"]
    (repo / "a.txt").write_text("two\n")
    assert code_state(repo)["diff_sha256"] == first["diff_sha256"]  # the same edit, the same hash
    (repo / "new.py").write_text("x = 1\n")  # an untracked file counts too
    untracked = code_state(repo)
    assert untracked["diff_sha256"] != first["diff_sha256"]
    with pytest.raises(InputError) as err:
        refuse_dirty(untracked)
    assert err.value.field == "allow_dirty" and "uncommitted changes" in err.value.message


def test_outside_a_checkout_commit_and_dirty_are_unknown(tmp_path):
    state = code_state(tmp_path)
    assert (state["commit"], state["dirty"]) == (None, None)


def test_the_record_holds_versions_model_dataset_and_tags():
    inputs = {"catalog": "a" * 64, "queries": "b" * 64}
    record = run_record({"configurations": {"fused": {"sha256": "f" * 64}}},
                        {"commit": "c" * 40, "dirty": True, "diff_sha256": "d" * 64},
                        "all-MiniLM-L6-v2", "e" * 64, inputs)
    assert record["versions"]["searcheval"] == __import__("searcheval").__version__
    assert record["model"] == {"name": "all-MiniLM-L6-v2", "weights_sha256": "e" * 64}
    assert record["dataset"] == dataset_fingerprint(inputs)
    assert record["dataset"]["sha256"] == hashlib.sha256(
        json.dumps(inputs, sort_keys=True).encode()).hexdigest()
    assert tags(record) == ["config:fused@ffffffff", "commit:cccccccccc", "dirty"]


def test_only_changes_to_what_the_run_reads_are_dirt(repo):
    """A stray untracked file (nohup.out), an edited README or an edited cron in
    deploy/prefect.yaml leave a run's inputs as committed: the tree is not dirty for the run.
    An edit under an input is, and the refusal names it."""
    (repo / "fixtures").mkdir()
    (repo / "fixtures" / "judgments.csv").write_text("q,d,1\n")
    (repo / "deploy").mkdir()
    (repo / "deploy" / "prefect.yaml").write_text("cron: '0 3 * * *'\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "inputs")
    inputs = [repo / "fixtures", repo / "configurations.yaml"]  # one missing: still an input
    (repo / "nohup.out").write_text("a worker's output\n")
    (repo / "deploy" / "prefect.yaml").write_text("cron: '*/5 * * * *'\n")
    (repo / "a.txt").write_text("edited\n")
    state = code_state(repo, inputs)
    assert (state["dirty"], state["changed"], state["other_changes"]) == (False, [], 3)
    refuse_dirty(state)  # nothing to refuse
    assert code_state(repo)["dirty"] is True  # without inputs every change counts

    (repo / "fixtures" / "judgments.csv").write_text("q,d,2\n")
    (repo / "configurations.yaml").write_text("run: [bm25]\n")  # an untracked input counts
    state = code_state(repo, inputs)
    assert state["dirty"] is True
    assert state["changed"] == ["configurations.yaml", "fixtures/judgments.csv"]
    assert state["other_changes"] == 3
    with pytest.raises(InputError) as err:
        refuse_dirty(state)
    assert "configurations.yaml, fixtures/judgments.csv (diff sha256" in err.value.message


def test_the_refusal_lists_five_changed_files_then_how_many_more(repo):
    (repo / "data").mkdir()
    for i in range(8):
        (repo / "data" / f"f{i}.csv").write_text(f"{i}\n")
    state = code_state(repo, [repo / "data"])
    assert len(state["changed"]) == 8
    with pytest.raises(InputError) as err:
        refuse_dirty(state)
    named = ", ".join(f"data/f{i}.csv" for i in range(5))
    assert f"reads: {named} and {8 - 5} more (diff sha256" in err.value.message


def test_a_rename_counts_both_paths(repo):
    (repo / "data").mkdir()
    git(repo, "mv", "a.txt", "data/a.txt")
    state = code_state(repo, [repo / "a.txt"])
    assert state["changed"] == ["a.txt"] and state["other_changes"] == 1
