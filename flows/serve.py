"""`searcheval serve`: the deployments of deploy/prefect.yaml served from one long-running process.

Wiring only. The names, entrypoints, schedules and default parameters are read from
deploy/prefect.yaml, the file `prefect deploy` uses, so both ways of running the project stay the
same. `prefect.serve` needs no work pool and no worker: it polls for the deployments' scheduled
and manual runs and executes each in a subprocess of its own.

Each served run runs in the directory `serve` was started from (its working directory: relative
outputs land there), while its code is the project's: the entrypoints are registered as module
paths (`flows.nightly.nightly`) imported from the project folder, which is put first on the runs'
PYTHONPATH. The file's relative input paths (`INPUT_PATHS`: fixtures, baseline, configurations
file, traces, ...) are the project's files, so they are registered absolute, against the project
folder; `output` stays relative. The runs use the project's database: SEARCHEVAL_DATABASE_URL,
else the embedded Postgres under the project folder's `.searcheval/`, started by `serve`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searcheval.errors import InputError
from searcheval.io.files import read_yaml_list

PROJECT_ROOT = Path(__file__).resolve().parents[1]
PREFECT_FILE = PROJECT_ROOT / "deploy" / "prefect.yaml"
SCHEDULE_KEYS = {"cron", "timezone", "active", "day_or", "parameters", "slug"}

#: the flows' parameters that name files or folders a run reads (nightly, replay): relative in a
#: deployments file, they name the project's files. `output`, what a run writes, is not one.
INPUT_PATHS = frozenset({"fixtures", "dataset", "mapping", "baseline", "configurations_file",
                         "model_path", "traces", "traces_b", "thresholds", "catalog",
                         "judgments", "queries"})


@dataclass(frozen=True)
class CronSpec:
    cron: str
    timezone: str | None = None
    active: bool = True
    day_or: bool = True
    parameters: dict[str, Any] = field(default_factory=dict)
    slug: str | None = None


@dataclass(frozen=True)
class DeploymentSpec:
    """One entry of `deployments:` in prefect.yaml, as both `prefect deploy` and serve read it."""

    name: str
    entrypoint: str
    parameters: dict[str, Any]
    schedules: tuple[CronSpec, ...]
    description: str | None = None
    tags: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        return self.entrypoint.rsplit(":", 1)[0]

    @property
    def function(self) -> str:
        return self.entrypoint.rsplit(":", 1)[1]

    @property
    def module_entrypoint(self) -> str:
        """The entrypoint as a module path: `flows/nightly.py:nightly` -> `flows.nightly.nightly`."""
        return ".".join((*Path(self.path).with_suffix("").parts, self.function))


def _schedule(raw: Any, file: Path, where: str) -> CronSpec:
    if not isinstance(raw, dict) or not isinstance(raw.get("cron"), str):
        raise InputError("expected a mapping with a `cron` string (interval and rrule schedules "
                         "are not used by searcheval)", file=file, field=where)
    unknown = set(raw) - SCHEDULE_KEYS
    if unknown:
        raise InputError(f"unknown keys {sorted(unknown)}, expected some of "
                         f"{sorted(SCHEDULE_KEYS)}", file=file, field=where)
    for key in ("active", "day_or"):
        if key in raw and not isinstance(raw[key], bool):
            raise InputError(f"expected true or false, got {raw[key]!r}", file=file,
                             field=f"{where}.{key}")
    if not isinstance(raw.get("parameters", {}), dict):
        raise InputError("expected a mapping", file=file, field=f"{where}.parameters")
    return CronSpec(cron=raw["cron"], timezone=raw.get("timezone"), active=raw.get("active", True),
                    day_or=raw.get("day_or", True), parameters=dict(raw.get("parameters") or {}),
                    slug=raw.get("slug"))


def _deployment(raw: Any, file: Path, where: str) -> DeploymentSpec:
    if not isinstance(raw, dict):
        raise InputError("expected a mapping", file=file, field=where)
    name, entrypoint = raw.get("name"), raw.get("entrypoint")
    if not isinstance(name, str) or not name:
        raise InputError("expected a non-empty string", file=file, field=f"{where}.name")
    if not isinstance(entrypoint, str) or ":" not in entrypoint:
        raise InputError(f"expected 'path/to/file.py:flow_function', got {entrypoint!r}",
                         file=file, field=f"{where}.entrypoint")
    parameters = raw.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InputError("expected a mapping", file=file, field=f"{where}.parameters")
    schedules = raw.get("schedules") or []
    if not isinstance(schedules, list):
        raise InputError("expected a list", file=file, field=f"{where}.schedules")
    tags = raw.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise InputError("expected a list of strings", file=file, field=f"{where}.tags")
    return DeploymentSpec(
        name=name, entrypoint=entrypoint, parameters=dict(parameters),
        schedules=tuple(_schedule(s, file, f"{where}.schedules[{i}]")
                        for i, s in enumerate(schedules)),
        description=raw.get("description"), tags=tuple(tags))


def load_deployment_specs(prefect_file: str | Path = PREFECT_FILE) -> list[DeploymentSpec]:
    """The `deployments:` of a prefect.yaml, checked; InputError names the entry and field."""
    path = Path(prefect_file)
    entries = read_yaml_list(path, "deployments")
    specs = [_deployment(raw, path, f"deployments[{i}]") for i, raw in enumerate(entries)]
    names = [s.name for s in specs]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputError(f"duplicate names {duplicates}", file=path, field="deployments")
    return specs


def specs_from_settings(settings) -> list[DeploymentSpec]:
    """The deployments a project's settings describe (searcheval.project.deployment_entries),
    checked as a prefect.yaml's entries are."""
    from searcheval.project import deployment_entries

    return [_deployment(raw, settings.file, f"deployments[{i}]")
            for i, raw in enumerate(deployment_entries(settings))]


def project_root(prefect_file: str | Path = PREFECT_FILE) -> Path:
    """The directory entrypoints are relative to: the parent of the folder holding the file."""
    return Path(prefect_file).resolve().parent.parent


def load_flow(spec: DeploymentSpec, root: str | Path = PROJECT_ROOT):
    """The Prefect flow a deployment's entrypoint names, loaded from `root`."""
    from prefect.flows import load_flow_from_entrypoint

    return load_flow_from_entrypoint(f"{Path(root) / spec.path}:{spec.function}")


def to_schedule(cron: CronSpec):
    from prefect.schedules import Cron

    return Cron(cron.cron, timezone=cron.timezone, day_or=cron.day_or, active=cron.active,
                parameters=cron.parameters or None, slug=cron.slug)


def project_parameters(parameters: Mapping[str, Any], project: str | Path,
                       datasets: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The parameters with each relative input path (`INPUT_PATHS`) made absolute against the
    project folder; `output`, a `dataset` that names one of the project settings' `datasets`,
    and every other parameter as they are."""
    return {name: str(Path(project) / value)
            if name in INPUT_PATHS and isinstance(value, str) and not Path(value).is_absolute()
            and not (name == "dataset" and value in datasets)
            else value
            for name, value in parameters.items()}


def build_deployments(prefect_file: str | Path | None = PREFECT_FILE,
                      project: str | Path | None = None, settings=None) -> list:
    """`flow.to_deployment(...)` for each entry: same names, schedules, tags and parameters (the
    relative input paths made absolute against `project`, default the folder the file's
    entrypoints are relative to).

    The flows are imported as modules of the project (its folder must be on sys.path, as the CLI
    puts it) and registered by module path, so a run imports the same code from any working
    directory, given the project folder on its PYTHONPATH (`run_environment`).
    """
    from prefect.deployments.runner import EntrypointType
    from prefect.utilities.importtools import import_object

    project = Path(project) if project is not None else project_root(prefect_file or PREFECT_FILE)
    specs = load_deployment_specs(prefect_file) if prefect_file is not None \
        else specs_from_settings(settings)
    datasets = frozenset(settings.datasets) if settings is not None else frozenset()
    deployments = []
    for spec in specs:
        flow = import_object(spec.module_entrypoint)
        deployment = flow.to_deployment(
            name=spec.name, schedules=[to_schedule(c) for c in spec.schedules],
            parameters=project_parameters(spec.parameters, project, datasets),
            description=spec.description, tags=list(spec.tags),
            entrypoint_type=EntrypointType.MODULE_PATH)
        deployment.entrypoint = spec.module_entrypoint
        deployments.append(deployment)
    return deployments


def run_environment(project: str | Path, environ: Mapping[str, str] | None = None
                    ) -> dict[str, str]:
    """What the served runs (subprocesses that inherit this process's environment) need beside
    it: the project folder first on PYTHONPATH (they import flows/ and tasks/ from it, and so do
    the Dask workers they start) and as SEARCHEVAL_PROJECT, and the project's database:
    SEARCHEVAL_DATABASE_URL when set, else the embedded Postgres under the project folder's
    `.searcheval/` (started now), rather than one under each directory serve is started from."""
    from searcheval.store import database

    env = os.environ if environ is None else environ
    project = str(Path(project).resolve())
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != project]
    out = {"PYTHONPATH": os.pathsep.join([project, *paths]), "SEARCHEVAL_PROJECT": project}
    if not env.get(database.ENV_URL):
        out[database.ENV_URL] = database.start_embedded(
            Path(project) / database.EMBEDDED_PGDATA).get_uri()
    return out


def bound_to_a_pool(deployments) -> list:
    """The deployments the server already has under these names bound to a work pool (registered
    by `prefect deploy`): a worker of that pool would run them too, without their pull steps."""
    from prefect import get_client
    from prefect.exceptions import ObjectNotFound

    bound = []
    with get_client(sync_client=True) as client:
        for deployment in deployments:
            try:
                existing = client.read_deployment_by_name(
                    f"{deployment.flow_name}/{deployment.name}")
            except ObjectNotFound:
                continue
            if existing.work_pool_name:
                bound.append(existing)
    return bound


def take_over(bound) -> None:
    """Delete the pool-bound deployments, so serving registers them again without the pool (their
    flow runs stay, in the history)."""
    from prefect import get_client

    with get_client(sync_client=True) as client:
        for existing in bound:
            client.delete_deployment(existing.id)


def serve_deployments(prefect_file: str | Path | None = None, *,
                      project: str | Path = PROJECT_ROOT, limit: int | None = None,
                      take_over_pool: bool = False, settings=None) -> None:
    """Serve every deployment of `prefect_file` until interrupted (blocks). Without a file: a
    team project's settings (`settings`, searcheval.project) describe the deployments, each
    dataset's nightly on its schedule; the example project (settings beside the flows) serves
    its deploy/prefect.yaml. The runs start in this process's working directory and import their
    code from `project` (see the module docstring).

    A deployment of the same name that `prefect deploy` bound to a work pool is refused (one line
    saying what to do) unless `take_over_pool`: then it is re-registered without the pool, and
    only this process runs it."""
    from prefect import serve

    project = Path(project).resolve()
    if prefect_file is None and (settings is None or settings.folder == project):
        prefect_file = project / "deploy" / "prefect.yaml"  # the example project's file
    deployments = build_deployments(prefect_file, project, settings)
    bound = bound_to_a_pool(deployments)
    if bound and not take_over_pool:
        names = ", ".join(f"{d.name!r}" for d in bound)
        pools = ", ".join(sorted({d.work_pool_name for d in bound}))
        raise InputError(f"the deployments {names} are bound to the work pool {pools} (by "
                         "`prefect deploy`) and that pool's worker runs them: stop the worker "
                         "and run `searcheval serve --take-over` to serve them from here instead, "
                         "or keep the worker and do not serve", field="take_over")
    if bound:
        take_over(bound)
    os.environ.update(run_environment(project))  # inherited by every run's subprocess
    if settings is not None:  # the runs read the project's settings wherever they run
        from searcheval.project import SETTINGS_ENV

        os.environ[SETTINGS_ENV] = str(settings.file)
    from searcheval.project import HEARTBEAT_SECONDS

    # the served runs beat as the pool's do (deploy/prefect.yaml): the stuck-run automation
    # marks a run Crashed after three missed beats
    serve(*deployments, limit=limit, heartbeat_seconds=HEARTBEAT_SECONDS)
