"""deploy/: prefect.yaml (what `prefect deploy` and `searcheval serve` read), the automations
and the compose file, checked without a server. Docker is not available here: compose.yaml is
only parsed and its wiring checked, never run."""

from __future__ import annotations

import asyncio
import importlib.util
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import UUID

import pytest
import yaml

from flows.serve import (
    INPUT_PATHS,
    PREFECT_FILE,
    build_deployments,
    load_deployment_specs,
    load_flow,
    project_parameters,
    project_root,
    run_environment,
)
from searcheval.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def load_script(name: str):
    spec = importlib.util.spec_from_file_location(f"deploy_{name}", DEPLOY / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def next_fire_times(cron: str, tz: str, after: datetime, n: int) -> list[datetime]:
    from prefect.server.schemas.schedules import CronSchedule

    dates = asyncio.run(CronSchedule(cron=cron, timezone=tz).get_dates(n=n, start=after))
    return [datetime.fromtimestamp(d.timestamp(), timezone.utc) for d in dates]


# --------------------------------------------------------------------------- prefect.yaml


def test_the_file_names_four_deployments_from_the_project_root():
    specs = {s.name: s for s in load_deployment_specs()}
    assert PREFECT_FILE == DEPLOY / "prefect.yaml"
    assert project_root(PREFECT_FILE) == ROOT
    assert {n: s.entrypoint for n, s in specs.items()} == {
        "nightly": "flows/nightly.py:nightly",
        "ranking-change": "flows/nightly.py:nightly",
        "replay-nightly": "flows/replay.py:replay",
        "live": "flows/live.py:live",
    }
    for spec in specs.values():
        assert (ROOT / spec.path).is_file(), f"{spec.name}: {spec.path} does not exist"


def test_the_raw_yaml_uses_the_searcheval_process_pool_and_returns_to_the_root_before_a_run():
    document = yaml.safe_load(PREFECT_FILE.read_text())
    assert {d["work_pool"]["name"] for d in document["deployments"]} == {"searcheval"}
    assert document["pull"] == [{"prefect.deployments.steps.set_working_directory":
                                 {"directory": "{{ project-root.stdout }}"}}]
    build = document["build"][0]["prefect.deployments.steps.run_shell_script"]
    assert (build["id"], build["script"]) == ("project-root", "pwd")


def test_schedules_nightly_at_three_replay_at_half_past_ranking_change_never():
    specs = {s.name: s for s in load_deployment_specs()}
    after = datetime(2026, 12, 2, 19, 0, tzinfo=timezone.utc)
    [nightly] = specs["nightly"].schedules
    assert (nightly.cron, nightly.timezone, nightly.active) == ("0 3 * * *", "UTC", True)
    assert next_fire_times(nightly.cron, nightly.timezone, after, 2) == [
        datetime(2026, 12, 3, 3, 0, tzinfo=timezone.utc),
        datetime(2026, 12, 3, 3, 0, tzinfo=timezone.utc) + timedelta(days=1)]
    [replay] = specs["replay-nightly"].schedules
    assert next_fire_times(replay.cron, replay.timezone, after, 1) == [
        datetime(2026, 12, 3, 3, 30, tzinfo=timezone.utc)]
    assert specs["ranking-change"].schedules == ()


def test_ranking_change_names_the_example_projects_dataset_whose_settings_hold_the_rest():
    from searcheval.project import load_project

    spec = next(s for s in load_deployment_specs() if s.name == "ranking-change")
    assert {"label", "dataset", "candidate"} <= set(spec.parameters)
    entry = load_project(ROOT / "searcheval.yaml").entry(spec.parameters["dataset"])
    assert entry.get("configurations_file") == str(ROOT / "configurations.yaml")
    assert entry.get("baseline") == str(ROOT / "baseline.json")
    assert Path(entry.get("baseline")).is_file()


def test_the_example_projects_deployments_are_what_its_settings_generate():
    """A nightly of your own engine is a settings change: `searcheval deployments` (and serve,
    for a project folder) generate the deployments from searcheval.yaml; the example project's
    deploy/prefect.yaml holds exactly those (plus the replay)."""
    from searcheval.project import deployment_entries, load_project

    generated = {e["name"]: e for e in deployment_entries(load_project(ROOT / "searcheval.yaml"))}
    document = yaml.safe_load(PREFECT_FILE.read_text())
    written = {d["name"]: d for d in document["deployments"] if d["name"] in generated}
    assert set(written) == set(generated) == {"nightly", "ranking-change"}
    for name, entry in generated.items():
        for key in ("entrypoint", "tags", "schedules", "parameters"):
            assert written[name][key] == entry[key], (name, key)


#: parameters prefect.yaml sets on purpose to something else than the flow's default (the library's
#: `searcheval.defaults`): each deployment writes its own output folder, labels its runs and names
#: its dataset (a dataset of the project settings).
OWN_VALUES = {"output", "label", "traces", "thresholds", "catalog", "judgments", "queries", "dataset",
              "allow_dirty"}


@pytest.mark.slow
def test_prefect_yaml_agrees_with_the_defaults_of_the_library():
    """Defaults live once, in searcheval.defaults; the flows take theirs from there, and every value
    prefect.yaml restates must be that same default."""
    import inspect

    from searcheval import defaults
    from searcheval.evaluation.conventions import DEFAULTS as CONVENTION_DEFAULTS

    for spec in load_deployment_specs():
        signature = inspect.signature(load_flow(spec, ROOT).fn)
        for name, value in spec.parameters.items():
            if name in OWN_VALUES:
                continue
            assert value == signature.parameters[name].default, (spec.name, name)
    nightly = inspect.signature(load_flow(load_deployment_specs()[0], ROOT).fn).parameters
    assert nightly["configurations"].default is None  # the configurations file's `run` list
    # None: the project settings' dataset entry, else searcheval.project.RUN_DEFAULTS (the
    # library's defaults); no default names the fixtures
    from searcheval.project import RUN_DEFAULTS

    assert nightly["configurations_file"].default is None
    assert RUN_DEFAULTS["configurations_file"] == defaults.CONFIGURATIONS_FILE
    assert nightly["baseline"].default is None and RUN_DEFAULTS["baseline"] == defaults.BASELINE
    assert nightly["fixtures"].default is None and nightly["dataset"].default is None
    assert not hasattr(defaults, "FIXTURES")
    # None: the dataset's setting (searcheval.yaml), else defaults.COVERAGE_FLOOR (conventions.py)
    assert nightly["coverage_floor"].default is None
    assert CONVENTION_DEFAULTS["coverage_floor"] == defaults.COVERAGE_FLOOR


@pytest.mark.slow
def test_every_entrypoint_imports_and_its_parameters_validate_against_the_flow():
    from prefect.exceptions import ParameterTypeError, SignatureMismatchError

    flows = {}
    for spec in load_deployment_specs():
        flow = load_flow(spec, ROOT)
        flows[spec.name] = flow
        validated = flow.validate_parameters(spec.parameters)
        for name, value in spec.parameters.items():
            assert validated[name] == value, (spec.name, name)
        for path_param in ("fixtures", "baseline", "traces", "thresholds"):
            if spec.parameters.get(path_param):
                assert (ROOT / spec.parameters[path_param]).exists(), (spec.name, path_param)
    assert flows["nightly"].name == flows["ranking-change"].name == "searcheval-nightly"
    # what `prefect deployment run ... --param label=v2` sends validates too; nonsense does not
    ranking = flows["ranking-change"]
    manual = ranking.validate_parameters({"label": "v2", "configurations": ["fused"]})
    assert (manual["label"], manual["configurations"]) == ("v2", ["fused"])
    with pytest.raises(SignatureMismatchError):
        ranking.validate_parameters({"lable": "v2"})
    with pytest.raises(ParameterTypeError):
        ranking.validate_parameters({"depth": "deep"})
    replay = flows["replay-nightly"]
    assert {"traces", "thresholds"} <= set(replay.parameters.properties)


def test_served_runs_read_the_files_input_paths_from_the_project_and_write_output_where_they_run():
    specs = {s.name: s for s in load_deployment_specs()}
    assert specs["nightly"].module_entrypoint == "flows.nightly.nightly"
    assert specs["replay-nightly"].module_entrypoint == "flows.replay.replay"
    resolved = project_parameters(specs["nightly"].parameters, "/srv/project")
    assert resolved == {**specs["nightly"].parameters, "dataset": "/srv/project/fixtures"}
    # a project dataset's name stays a name (the flow finds its entry in the settings)
    assert project_parameters(specs["nightly"].parameters, "/srv/project",
                              frozenset({"fixtures"})) == specs["nightly"].parameters
    assert resolved["output"] == "out/nightly"  # relative: under the directory the run runs in
    assert project_parameters({"baseline": "/etc/b.json", "dataset": None}, "/srv/project") == \
        {"baseline": "/etc/b.json", "dataset": None}
    # every relative path of the file that names something of the project is an input path,
    # except the output folders
    for spec in specs.values():
        for name, value in spec.parameters.items():
            if isinstance(value, str) and name != "output" and (ROOT / value).exists():
                assert name in INPUT_PATHS, (spec.name, name)


def test_served_runs_import_the_project_first_and_use_its_database():
    env = {"PYTHONPATH": f"/opt/lib:{ROOT}", "SEARCHEVAL_DATABASE_URL": "postgresql://db/x"}
    assert run_environment(ROOT, env) == {"PYTHONPATH": f"{ROOT}:/opt/lib",
                                          "SEARCHEVAL_PROJECT": str(ROOT)}


@pytest.mark.slow
def test_serve_builds_the_same_deployments_as_the_file(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # anywhere: the code is imported from the project, by module
    specs = {s.name: s for s in load_deployment_specs()}
    built = {d.name: d for d in build_deployments()}
    assert set(built) == set(specs)
    for name, deployment in built.items():
        spec = specs[name]
        assert deployment.entrypoint == spec.module_entrypoint
        assert deployment.parameters == project_parameters(spec.parameters, ROOT)
        assert sorted(deployment.tags) == sorted(spec.tags)
        assert [(s.schedule.cron, s.schedule.timezone, s.active) for s in deployment.schedules] \
            == [(c.cron, c.timezone, c.active) for c in spec.schedules]
        assert deployment.work_pool_name is None  # served: no pool, no worker


@pytest.mark.slow
def test_serve_of_a_project_folder_builds_its_deployments_from_its_settings(monkeypatch, tmp_path):
    """A nightly of your own engine is a settings change: no prefect.yaml, the dataset's
    `schedule` is the nightly's, and its parameters name the dataset (kept a name: the flow reads
    the rest from the settings)."""
    from searcheval.project import load_project

    (tmp_path / "searcheval.yaml").write_text(
        "project: acme\ndatasets:\n  sci:\n    dataset: /data/scifact\n"
        "    schedule: {cron: '15 1 * * *', timezone: Europe/Paris}\n")
    monkeypatch.chdir(tmp_path)
    built = {d.name: d for d in build_deployments(None, ROOT,
                                                  load_project(tmp_path / "searcheval.yaml"))}
    assert set(built) == {"nightly", "ranking-change"}
    nightly = built["nightly"]
    assert nightly.entrypoint == "flows.nightly.nightly"
    assert nightly.parameters == {"dataset": "sci", "output": "out/nightly", "label": "nightly",
                                  "allow_dirty": False}
    assert [(s.schedule.cron, s.schedule.timezone) for s in nightly.schedules] == \
        [("15 1 * * *", "Europe/Paris")]
    assert sorted(nightly.tags) == ["acme", "nightly"] and built["ranking-change"].schedules == []


@pytest.mark.parametrize("text, field", [
    ("deployments: []\n", "deployments"),
    ("deployments:\n  - name: a\n    entrypoint: flows/nightly.py\n", "deployments[0].entrypoint"),
    ("deployments:\n  - name: a\n    entrypoint: f.py:f\n    schedules:\n      - interval: 60\n",
     "deployments[0].schedules[0]"),
    ("deployments:\n  - name: a\n    entrypoint: f.py:f\n    schedules:\n"
     "      - cron: '0 3 * * *'\n        active: 'yes'\n", "deployments[0].schedules[0].active"),
    ("deployments:\n  - {name: a, entrypoint: 'f.py:f'}\n  - {name: a, entrypoint: 'g.py:g'}\n",
     "deployments"),
])
def test_a_broken_deployments_file_is_refused_naming_file_and_field(tmp_path, text, field):
    path = tmp_path / "prefect.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as caught:
        load_deployment_specs(path)
    assert caught.value.file == str(path)
    assert caught.value.field == field


# --------------------------------------------------------------------------- automations


def test_the_three_automations_build_with_their_triggers():
    automations = load_script("automations")
    specs = automations.load_automation_specs()
    block = UUID(int=7)
    built = {a.name: a for a in automations.build_automations(specs, block)}
    assert set(built) == {"searcheval-nightly-failed", "searcheval-nightly-overdue",
                          "searcheval-gate-tripped", "searcheval-stuck-run"}
    built.pop("searcheval-stuck-run")  # acts on the run, notifies nobody: the next test

    failed = built["searcheval-nightly-failed"].trigger
    assert failed.posture == "Reactive"
    assert failed.expect == {"prefect.flow-run.Failed", "prefect.flow-run.Crashed"}
    flows = {"prefect.resource.role": "flow",
             "prefect.resource.name": ["searcheval-nightly", "searcheval-replay"]}
    assert failed.match_related.model_dump() == flows
    # a run the flow paged itself is renamed "... (searcheval: alerted)": never paged again
    assert failed.match.model_dump() == {"prefect.resource.id": "prefect.flow-run.*",
                                         "prefect.resource.name": "!*(searcheval: alerted)"}

    overdue = built["searcheval-nightly-overdue"].trigger
    assert overdue.posture == "Proactive"
    assert overdue.after == {"prefect.flow-run.Running"}
    assert overdue.expect == {f"prefect.flow-run.{s}"
                              for s in ("Completed", "Failed", "Crashed", "Cancelled")}
    assert overdue.for_each == {"prefect.resource.id"}
    assert overdue.within == timedelta(hours=2)
    assert overdue.match_related.model_dump() == flows

    gate = built["searcheval-gate-tripped"].trigger
    assert gate.expect == {"searcheval.gate.tripped"}
    assert gate.match.model_dump() == {"prefect.resource.id": "searcheval.run.*"}

    # the flow pages a trip itself: the gate automation is a record in the event feed only
    assert [a.type for a in built["searcheval-gate-tripped"].actions] == ["do-nothing"]
    for automation in built.values():
        if automation.name == "searcheval-gate-tripped":
            continue
        [action] = automation.actions
        assert (action.type, action.block_document_id) == ("send-notification", block)
        assert automation.name.split("-")[0] in action.subject
    # without any block the automations still exist, and do nothing but show in the UI
    bare = automations.build_automations(specs, None)
    assert {a.actions[0].type for a in bare if a.name != "searcheval-stuck-run"} == {"do-nothing"}


def test_the_stuck_run_automation_crashes_a_deployment_run_three_heartbeats_after_its_last():
    """Issue 29: a deployment's flow runs beat every 30 s (deploy/prefect.yaml's job variables,
    the generated deployments, `searcheval serve`); 90 s without a beat, and neither a beat nor a
    final state, and the run is marked Crashed, forced, whatever block notifies (it pages
    through the failed-run automation's Crashed event, not itself)."""
    import yaml

    from searcheval.project import HEARTBEAT_ENV, HEARTBEAT_SECONDS

    automations = load_script("automations")
    specs = automations.load_automation_specs()
    for block in (UUID(int=7), None):
        [stuck] = [a for a in automations.build_automations(specs, block)
                   if a.name == "searcheval-stuck-run"]
        [action] = stuck.actions
        assert (action.type, action.state.value, action.force) == (
            "change-flow-run-state", "CRASHED", True)
    trigger = stuck.trigger
    assert trigger.posture == "Proactive"
    assert trigger.after == {"prefect.flow-run.heartbeat"}
    assert trigger.expect == {"prefect.flow-run.heartbeat"} | {
        f"prefect.flow-run.{s}" for s in ("Completed", "Failed", "Crashed", "Cancelled")}
    assert trigger.for_each == {"prefect.resource.id"}
    assert trigger.within == timedelta(seconds=3 * HEARTBEAT_SECONDS) == timedelta(seconds=90)
    related = [m.model_dump() for m in trigger.match_related]
    assert {"prefect.resource.role": "deployment"} in related  # a local run is not watched
    pool = yaml.safe_load((ROOT / "deploy" / "prefect.yaml").read_text())["definitions"]
    assert pool["work_pool"]["job_variables"]["env"] == HEARTBEAT_ENV


@pytest.mark.parametrize("entry, field", [
    ("{name: x, trigger: {type: event}, notify: {subject: 's'}}", "automations[0].notify"),
    ("{name: x, trigger: {type: event}, notify: {subject: '{{ a', body: b}}",
     "automations[0].notify.subject"),
    ("{name: x, trigger: {type: event, posture: Proactive, within: 5}, "
     "notify: {subject: s, body: b}}", "automations[0].trigger"),
    ("{name: x, trigger: {}, notify: {subject: s, body: b}, action: y}", "automations[0]"),
    ("{name: x, trigger: {}, set_state: {state: GONE, message: m}}",
     "automations[0].set_state.state"),
    ("{name: x, trigger: {}, set_state: {state: CRASHED}}", "automations[0].set_state"),
])
def test_a_broken_automation_is_refused_naming_file_and_field(tmp_path, entry, field):
    automations = load_script("automations")
    path = tmp_path / "automations.yaml"
    path.write_text(f"automations:\n  - {entry}\n")
    with pytest.raises(InputError) as caught:
        automations.build_automations(automations.load_automation_specs(path), None, file=path)
    assert caught.value.file == str(path)
    assert caught.value.field.startswith(field)


def test_the_gate_event_names_the_run_and_what_tripped():
    from types import SimpleNamespace

    from searcheval.evaluation.gate import GateResult, Trip
    from tasks.events import GATE_TRIPPED, emit_gate_event, gate_event_payload, gate_event_resource

    trip = Trip(metric="mrr", baseline=0.9, value=0.8, delta=0.8 - 0.9)
    gate = GateResult(passed=False, configuration="fused", tolerance=0.02,
                      baseline_path="baseline.json", tripped=[trip], improved=[],
                      worse_queries=[], compared={})
    result = SimpleNamespace(run_id="20261202T030000Z-abc123", label="v2", flow_run_id=None,
                             gate=gate)
    assert GATE_TRIPPED == "searcheval.gate.tripped"
    assert gate_event_resource(result) == {
        "prefect.resource.id": "searcheval.run.20261202T030000Z-abc123",
        "prefect.resource.name": "searcheval run 20261202T030000Z-abc123",
        "searcheval.configuration": "fused", "searcheval.label": "v2"}
    payload = gate_event_payload(result)
    assert payload["tripped"] == [{"metric": "mrr", "baseline": 0.9, "value": 0.8,
                                   "delta": 0.8 - 0.9, "kind": "drop", "category": None,
                                   "p_value": None}]
    assert payload["summary"] == "mrr: 0.800 vs baseline 0.900 (-0.100)"
    assert (payload["configuration"], payload["baseline"], payload["tolerance"]) == \
        ("fused", "baseline.json", 0.02)
    # a passing gate, or none at all, emits nothing
    passed = SimpleNamespace(run_id="r", label=None, flow_run_id=None,
                             gate=GateResult(True, "fused", 0.02, None, [], [], [], {}))
    assert emit_gate_event(passed) is None
    assert emit_gate_event(SimpleNamespace(run_id="r", label=None, flow_run_id=None,
                                           gate=None)) is None


# --------------------------------------------------------------------------- compose


def test_the_compose_file_parses_and_wires_the_two_databases():
    """Parsed only: Docker is not available where the tests run."""
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert services["searcheval-db"]["image"] == "pgvector/pgvector:pg16"
    assert services["prefect-db"]["image"].startswith("postgres:16")
    server = services["prefect-server"]
    assert server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"].startswith(
        "postgresql+asyncpg://prefect:")
    assert server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"].endswith(
        "@prefect-db:5432/prefect")
    assert server["depends_on"]["prefect-db"]["condition"] == "service_healthy"
    env = services["searcheval-serve"]["environment"]  # the x-searcheval-env anchor
    assert env["SEARCHEVAL_DATABASE_URL"].endswith("@searcheval-db:5432/searcheval")
    assert env["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert services["searcheval-serve"]["command"][-1].rstrip().endswith("searcheval serve")
    # passwords only from the environment, ports only on loopback
    text = (DEPLOY / "compose.yaml").read_text()
    assert "${SEARCHEVAL_DB_PASSWORD:?" in text and "${PREFECT_DB_PASSWORD:?" in text
    for service in services.values():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), port


# --------------------------------------------------------------------------- the Run form


def test_every_flow_parameter_has_a_description_and_closed_choices_are_enums(monkeypatch):
    """What the Prefect UI's Run form shows: the deployment's parameter_openapi_schema, as serve
    registers it (prefect deploy builds it with the same parameter_schema(flow))."""
    from flows.parameters import CONFIGURATION_CHOICES, GAINS, METRIC_CHOICES, NO_RELEVANT
    from searcheval import defaults

    monkeypatch.chdir(ROOT)
    built = {d.name: d for d in build_deployments()}
    for name, deployment in built.items():
        schema = deployment._parameter_openapi_schema.model_dump()  # what is sent to the API
        undescribed = [p for p, field in schema["properties"].items()
                       if len((field.get("description") or "").split()) < 3]
        assert undescribed == [], name
    nightly = built["nightly"]._parameter_openapi_schema.model_dump()["properties"]
    from searcheval.rankers.configs import load_configurations

    listed = [b.get("items", {}).get("enum") for b in nightly["configurations"]["anyOf"]]
    assert listed == [list(CONFIGURATION_CHOICES), None]
    assert list(CONFIGURATION_CHOICES) == list(load_configurations(ROOT / "configurations.yaml")
                                               .entries)
    assert set(defaults.CONFIGURATIONS) <= set(CONFIGURATION_CHOICES)
    assert nightly["metrics"]["items"]["enum"] == list(METRIC_CHOICES)
    assert set(defaults.REPORT_METRICS) <= set(METRIC_CHOICES)
    assert [b.get("enum") for b in nightly["gain"]["anyOf"]] == [list(GAINS), None]
    assert [b.get("enum") for b in nightly["no_relevant"]["anyOf"]] == [list(NO_RELEVANT), None]
    assert "gate" in nightly["baseline"]["description"]
    replay = built["replay-nightly"]._parameter_openapi_schema.model_dump()["properties"]
    assert replay["metrics"]["items"]["enum"] == list(METRIC_CHOICES)
    assert replay["gain"]["enum"] == list(GAINS)


def test_a_name_outside_the_choices_is_refused_by_the_library_not_by_the_schema():
    """The choices are the form's; a name from the CLI or the API still reaches the flow's own
    check, which refuses it naming the field (InputError, exit 2), not a pydantic error."""
    from flows.nightly import nightly

    validated = nightly.validate_parameters({"configurations": ["bm42"], "metrics": ["ndcg@7"]})
    assert validated["configurations"] == ["bm42"] and validated["metrics"] == ["ndcg@7"]
