"""A new project, as a user makes one (docs/project.md): `searcheval init` over a small slice of a
real BEIR collection (Cranfield, read in place from the shared datasets, three queries), then
run, baseline, history, diff, the pool command the report prints (run as printed), pool --save,
import of two judges' grades, agreement, and the rating page (started with `searcheval rate`,
driven by a real Chromium: the dataset's guideline and grade labels, the query visible while
scrolling). Every command is a real process.

None of it may read the shipped fixtures: the processes run with searcheval's code from a copy of
flows/ and tasks/ (no fixtures/ beside them), the working directory is the new project's folder,
and an audit hook (sitecustomize) records every file any of the processes opens under the
repository's fixtures/ folder: the test fails if one did.
"""

from __future__ import annotations

import csv
import json
import shlex
import socket
import subprocess
import time

import httpx
import pytest
import yaml

from tests.user_machine import CRANFIELD, SEARCHEVAL, user_machine

pytestmark = pytest.mark.slow


GUIDELINE = """# Cranfield grading guideline (team version 2)

Grade how completely the document answers the aeronautics question.
4: a complete answer. 3: a high degree of relevance. 2: useful as background.
1: of minimal interest. 0: not relevant at all.
"""


@pytest.fixture(scope="module")
def world(new_database, tmp_path_factory):
    """The user's machine: searcheval's code without fixtures/, a PYTHONPATH holding only the
    library and the audit hook, a private PREFECT_HOME, a database of this module's own."""
    base = tmp_path_factory.mktemp("project-e2e")
    env, watch_log = user_machine(base)
    env.update(SEARCHEVAL_DATABASE_URL=new_database("project_e2e"))
    project = base / "acme"
    project.mkdir()
    return {"env": env, "project": project, "watch_log": watch_log, "base": base}


def cli(world, *args: str, code: int | None = 0, timeout: float = 600) -> subprocess.CompletedProcess:
    done = subprocess.run([SEARCHEVAL, *args], cwd=world["project"], env=world["env"],
                          capture_output=True, text=True, timeout=timeout)
    if code is not None:
        assert done.returncode == code, (args, done.returncode, done.stdout[-3000:],
                                         done.stderr[-5000:])
    return done


def fixtures_reads(world) -> list[str]:
    log = world["watch_log"]
    return log.read_text().splitlines() if log.exists() else []


def test_init_writes_the_settings_and_refuses_to_overwrite_them(world):
    project = world["project"]
    done = cli(world, "init", "--dataset", str(CRANFIELD), "--coverage-floor", "0.05",
               "--schedule", "30 2 * * *")
    assert f"wrote {project / 'configurations.yaml'}" in done.stdout
    assert f"wrote {project / 'searcheval.yaml'}" in done.stdout
    settings = yaml.safe_load((project / "searcheval.yaml").read_text())
    assert settings["project"] == "acme" and settings["default_dataset"] == "cranfield"
    entry = settings["datasets"]["cranfield"]
    assert (entry["dataset"], entry["served"], entry["configurations_file"], entry["baseline"]) \
        == (str(CRANFIELD), "bm25", "configurations.yaml", "baselines/cranfield.json")
    assert entry["coverage_floor"] == 0.05
    # edited by hand, as a user would: a tiny slice, the team's guideline and grade labels
    (project / "guideline.md").write_text(GUIDELINE)
    text = (project / "searcheval.yaml").read_text()
    text = text.replace("    depth: 100\n", "    depth: 100\n    max_queries: 3\n")
    text = text.replace("    # guideline: guideline.md", "    guideline: guideline.md")
    text = text.replace("    # grade_labels: {0: not relevant, 1: relevant}",
                        "    grade_labels: {0: not relevant, 1: minimal interest, 2: background,"
                        " 3: highly relevant, 4: complete answer}")
    (project / "searcheval.yaml").write_text(text)
    again = cli(world, "init", "--dataset", str(CRANFIELD), code=2)
    assert again.stderr.strip().splitlines()[-1] == (
        f"searcheval: {project / 'searcheval.yaml'}: a settings file is already there: edit it "
        "by hand (init never overwrites)")
    assert (project / "searcheval.yaml").read_text() == text
    assert fixtures_reads(world) == []


def test_a_command_outside_any_project_names_the_choice_and_never_picks_the_fixtures(world):
    outside = world["base"] / "elsewhere"
    outside.mkdir(exist_ok=True)
    done = subprocess.run([SEARCHEVAL, "run", "--check"], cwd=outside, env=world["env"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith(
        "searcheval: --dataset: which dataset? no --dataset, --fixtures or --mapping")
    # a project of two datasets and no default: refused, the choices listed
    two = world["base"] / "two"
    two.mkdir(exist_ok=True)
    (two / "searcheval.yaml").write_text(
        f"project: two\ndatasets:\n  a: {{dataset: {CRANFIELD}}}\n  b: {{dataset: {CRANFIELD}}}\n")
    done = subprocess.run([SEARCHEVAL, "judgments", "agreement"], cwd=two, env=world["env"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"searcheval: {two / 'searcheval.yaml'} field 'dataset': which dataset? project 'two' "
        "has a, b and no `default_dataset`: pass --dataset NAME")


def test_the_loop_runs_on_the_new_project_and_never_reads_the_fixtures(world):
    project = world["project"]
    # the first run: the baseline the settings name does not exist yet, so it is NOT GATED and
    # says how to make one (no --no-baseline needed)
    first = cli(world, "run", "--quiet", "--label", "first")
    assert first.returncode == 0, first.stderr
    assert "NOT GATED (no baseline yet: baselines/cranfield.json" in first.stderr
    assert "searcheval baseline update" in first.stderr
    assert first.stdout.splitlines()[0].split()[0] == "configuration"
    assert first.stdout.splitlines()[1].split()[0] == "bm25"
    metrics = json.loads((project / "out" / "metrics.json").read_text())
    settings = metrics["conventions"]["settings"]
    where = f"in {project / 'searcheval.yaml'}"
    assert settings["project"] == "acme"
    assert settings["dataset"] == {"value": str(CRANFIELD), "source":
                                   f"project setting datasets.cranfield.dataset {where}"}
    assert settings["depth"]["value"] == 100 and settings["split"]["value"] == "test"
    assert metrics["conventions"]["coverage_floor"] == 0.05
    assert metrics["conventions"]["sources"]["coverage_floor"] == \
        f"project setting datasets.cranfield.coverage_floor {where}"
    assert len(metrics["queries"]) == 3
    report = (project / "out" / metrics["run_id"] / "report.md").read_text()
    assert "- retrieval depth (results per query): 100" in report
    assert "- qrels split: test" in report
    assert "- model: none (no configuration read vectors)" in report  # bm25 only
    assert "fixtures" not in report

    # the first baseline of the dataset, into the file the settings name
    update = cli(world, "baseline", "update", "--reason", "first baseline")
    assert f"wrote {project / 'baselines' / 'cranfield.json'}" in update.stdout
    baseline = json.loads((project / "baselines" / "cranfield.json").read_text())
    assert baseline["configuration"] == "bm25" and baseline["dataset"] == "cranfield"

    second = cli(world, "run", "--quiet", "--label", "second")
    assert "gate: PASSED" in second.stdout
    gated = json.loads((project / "out" / "metrics.json").read_text())
    assert gated["gate"]["passed"] is True
    assert "(bm25 against `baselines/cranfield.json`" in \
        (project / "out" / gated["run_id"] / "report.md").read_text()

    history = cli(world, "history")
    rows = history.stdout.splitlines()
    assert rows[0].split()[:5] == ["run", "started", "(UTC)", "dataset", "configuration"]
    assert [r.split()[3:5] for r in rows[1:3]] == [["cranfield", "bm25"], ["cranfield", "bm25"]]
    assert [r.split()[12] for r in rows[1:3]] == ["first", "second"]  # the labels
    assert [r.split()[8] for r in rows[1:3]] == ["-", "passed"]  # not gated, then gated
    assert rows[2].endswith("baseline updated before") and not rows[1].endswith("before")
    assert rows[-1] == "(each run's served configuration, 2 runs, oldest first)"
    assert not list(project.glob("*.png")) and "chart" not in history.stdout
    charted = cli(world, "history", "--output", str(world["base"] / "charts"))
    assert f"chart: {world['base'] / 'charts' / 'history.png'}" in charted.stdout

    diff = cli(world, "diff", "previous", "latest")
    assert "bm25" in diff.stdout and "cranfield" in diff.stdout

    # the pool command the report prints works exactly as printed (from the project folder)
    latest = json.loads((project / "out" / "metrics.json").read_text())
    printed = latest["judging"]["pool"]["command"]
    assert f"`{printed}`" in (project / "out" / latest["run_id"] / "report.md").read_text()
    assert printed.startswith(f"searcheval judgments pool --run {latest['run_id']} --depth 10 ")
    argv = shlex.split(printed)
    pooled = cli(world, *argv[1:])
    pool_rows = list(csv.DictReader(pooled.stdout.splitlines()))
    assert len(pool_rows) == latest["judging"]["pool"]["size"] > 0
    assert {r["query_id"] for r in pool_rows} <= set(latest["queries"])

    saved = cli(world, "judgments", "pool", "--save", "--overlap", "1", "--judges", "ann,bob")
    assert "kept as" in saved.stderr
    # two judges grade the same three pairs (one disagreement), imported as human grades
    pairs = [(r["query_id"], r["doc_id"]) for r in pool_rows[:3]]
    grades = {"ann": [2, 0, 4], "bob": [2, 1, 4]}
    for judge, values in grades.items():
        path = world["base"] / f"{judge}.csv"
        path.write_text("query_id,resource_id,grade,judge\n" + "".join(
            f"{q},{d},{g},{judge}\n" for (q, d), g in zip(pairs, values)))
        imported = cli(world, "judgments", "import", str(path), "--source", "human")
        assert imported.stdout.startswith(f"imported 3 judgment(s) of {path} into cranfield by "
                                          f"{judge}")
    exported = cli(world, "judgments", "export", "--all", "--format", "jsonl")
    imported_rows = [json.loads(line) for line in exported.stdout.splitlines()]
    versions = {r["guideline"] for r in imported_rows if r["judge"] in grades}
    assert len(versions) == 1 and versions.pop().startswith("guideline.md@")
    agreement = cli(world, "judgments", "agreement", "--format", "json")
    result = json.loads(agreement.stdout)
    assert result["items"] == 3 and result["judges"] == ["ann", "bob"]
    assert fixtures_reads(world) == []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_rating_page_shows_the_datasets_guideline_and_keeps_the_query_in_view(world, browser):
    port = free_port()
    process = subprocess.Popen([SEARCHEVAL, "rate", "--judge", "ann", "--port", str(port)],
                               cwd=world["project"], env=world["env"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:
            try:
                first = httpx.get(url + "/", follow_redirects=False, timeout=5)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("the rating page did not start") from None
                time.sleep(0.3)
        assert first.status_code == 303 and first.headers["location"].startswith("/q/")
        page = httpx.get(url + first.headers["location"], timeout=10).text
        assert "team version 2" in page and "complete answer" in page
        assert "would not serve this query" not in page  # not the fixtures' guideline

        context = browser.new_context(viewport={"width": 900, "height": 500})
        try:
            tab = context.new_page()
            tab.goto(url + first.headers["location"])
            assert tab.locator("#guideline").inner_text().startswith(
                "# Cranfield grading guideline (team version 2)")
            version = tab.locator("#guideline-version").inner_text()
            assert version.startswith("guideline.md@") and len(version) == len("guideline.md@") + 12
            labels = tab.locator("#grade-labels").inner_text()
            assert "4 complete answer" in labels and "0 not relevant" in labels
            query = tab.locator("#query-text")
            tab.mouse.wheel(0, 5000)
            # polled from here: the page's CSP forbids the eval wait_for_function needs
            for _ in range(100):
                if tab.evaluate("() => window.scrollY") > 100:
                    break
                tab.wait_for_timeout(50)
            assert tab.evaluate("() => window.scrollY") > 100
            box = query.bounding_box()
            assert box is not None and 0 <= box["y"] < 200  # still in view after scrolling
            assert query.is_visible()
            # a grade made on the page carries the guideline's version
            before = int(tab.locator("#progress").get_attribute("data-judged"))
            tab.keyboard.press("3")
            tab.wait_for_selector(f"#progress[data-judged='{before + 1}']")
        finally:
            context.close()
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=30)  # reads and closes the pipe
    assert "rating pool" in stderr and "as ann: http://127.0.0.1:" in stderr
    exported = cli(world, "judgments", "export", "--all", "--format", "jsonl")
    rows = [json.loads(line) for line in exported.stdout.splitlines()]
    # ann's three imported grades (2, 0, 4) and the one made on the page (3), each with the
    # version of the guideline it followed
    rated = [r for r in rows if r.get("judge") == "ann" and r.get("guideline") == version]
    assert sorted(r["grade"] for r in rated) == [0, 2, 3, 4]
    assert {r["source"] for r in rated} == {"human"}
    assert fixtures_reads(world) == []
