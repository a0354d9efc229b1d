"""The project's files are found one way (searcheval.io.project): from the project folder, from any
of its subfolders, or by SEARCHEVAL_PROJECT; a missing one names where it was looked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from searcheval.errors import InputError
from searcheval.evaluation.baseline import load_baseline
from searcheval.io.project import PROJECT_ENV, project_folder, project_path
from searcheval.rankers.configs import load_configurations

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project folder with its configurations and baseline, and a subfolder to work from."""
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    (tmp_path / "configurations.yaml").write_text((ROOT / "configurations.yaml").read_text())
    (tmp_path / "baseline.json").write_text((ROOT / "baseline.json").read_text())
    sub = tmp_path / "notebooks" / "deep"
    sub.mkdir(parents=True)
    return tmp_path


def test_a_subfolder_finds_the_project_folder_and_its_files(project, monkeypatch):
    monkeypatch.chdir(project / "notebooks" / "deep")
    assert project_folder() == project.resolve()
    assert project_path("configurations.yaml") == project.resolve() / "configurations.yaml"
    assert load_configurations("configurations.yaml").served == \
        load_configurations(ROOT / "configurations.yaml").served
    assert load_baseline("baseline.json").configuration == "fused"


def test_a_file_of_the_working_directory_wins(project, monkeypatch):
    here = project / "notebooks"
    (here / "baseline.json").write_text("{}")
    monkeypatch.chdir(here)
    assert project_path("baseline.json") == Path("baseline.json")  # as given: it is here


def test_searcheval_project_names_the_folder(project, tmp_path_factory, monkeypatch):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv(PROJECT_ENV, str(project))
    assert project_path("configurations.yaml") == project.resolve() / "configurations.yaml"


def test_a_missing_file_names_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.delenv(PROJECT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError) as refused:
        load_configurations("nothing.yaml")
    message = str(refused.value)
    assert message.startswith("nothing.yaml field 'configurations_file': no such configurations "
                              f"file (looked for {tmp_path.resolve() / 'nothing.yaml'}")
    with pytest.raises(InputError, match=r"baseline.json: file not found \(looked for "):
        load_baseline("baseline.json")


def test_run_check_from_a_subfolder_of_the_project_works():
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop(PROJECT_ENV, None)
    done = subprocess.run([str(Path(sys.executable).parent / "searcheval"), "run", "--check"],
                          cwd=ROOT / "tests" / "unit", env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("inputs OK: 18 resources, ")
    assert "gated: fused against " in done.stdout
