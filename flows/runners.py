"""Where the flows' submitted tasks run: Prefect's thread pool, or a Dask cluster (prefect-dask).

The choice is a setting, never a flow parameter, so it applies to `searcheval run` and to the
deployments alike (a deployment's flow run imports `flows/nightly.py` in the worker's environment):

  SEARCHEVAL_TASK_RUNNER   thread (default: Prefect's local ThreadPoolTaskRunner) | dask
  SEARCHEVAL_DASK_ADDRESS  scheduler of an existing cluster, e.g. tcp://10.0.0.5:8786;
                           unset with dask: a LocalCluster of worker processes on this machine
  SEARCHEVAL_DASK_WORKERS  processes of that LocalCluster (default 2, one thread each)

`searcheval run --task-runner dask --dask-address ADDR` overrides the first two.

Only submitted tasks go to the cluster (the embedding batches and the query shards); tasks called
directly (load, validate, seed, index, score, gate, publish) stay in the flow run's process.
A Dask worker is a process of its own: it imports searcheval, loads the model once, lazily, and
opens its own database connection from SEARCHEVAL_DATABASE_URL. A LocalCluster gets that URL (and
the Prefect API URL) from `local_cluster`; the workers of an existing cluster must have them in
their environment (docs/scale-out.md, "An existing Dask cluster").

An http configuration's `concurrency` and `rate_limit` hold across all its shards: in the thread
pool its shards share one limiter of the process; on a cluster they cannot, so each shard owns a
part of the limits (at most `concurrency` shards; `shards_share_process` tells the flow which).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from urllib.parse import urlsplit

from prefect.settings import PREFECT_API_URL, temporary_settings
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from searcheval.errors import InputError
from searcheval.store import database

ENV_RUNNER = "SEARCHEVAL_TASK_RUNNER"
ENV_DASK_ADDRESS = "SEARCHEVAL_DASK_ADDRESS"
ENV_DASK_WORKERS = "SEARCHEVAL_DASK_WORKERS"
RUNNERS = ("thread", "dask")
DEFAULT_DASK_WORKERS = 2
_LOOPBACK = {"localhost", "127.0.0.1", "::1"}


@dataclass(frozen=True)
class RunnerSettings:
    kind: str = "thread"
    address: str | None = None  # dask: an existing scheduler; None: a LocalCluster
    workers: int = DEFAULT_DASK_WORKERS  # LocalCluster processes


def runner_settings(kind: str | None = None, address: str | None = None,
                    workers: int | None = None,
                    environ: Mapping[str, str] | None = None) -> RunnerSettings:
    """The runner named by the arguments (the CLI flags), else by the environment.

    An address implies dask (a flag's address overrides the environment's runner); an address
    given together with `kind="thread"` is refused."""
    env = os.environ if environ is None else environ
    if kind is not None:
        chosen, where = kind, "--task-runner"
    elif address is not None:
        chosen, where = "dask", "--dask-address"
    else:
        chosen, where = env.get(ENV_RUNNER, "").strip() or None, ENV_RUNNER
    if chosen is not None and chosen not in RUNNERS:
        raise InputError(f"expected one of {', '.join(RUNNERS)}, got {chosen!r}", field=where)
    if address is not None and chosen == "thread":
        raise InputError("a Dask scheduler address needs the dask task runner",
                         field="--dask-address")
    if address is None:
        address = env.get(ENV_DASK_ADDRESS, "").strip() or None
        where = ENV_DASK_ADDRESS
    else:
        where = "--dask-address"
    chosen = chosen or ("dask" if address else "thread")
    if chosen == "thread":
        return RunnerSettings()
    if address is not None and (not address.strip() or any(c.isspace() for c in address)):
        raise InputError(f"expected a scheduler address like tcp://host:8786, got {address!r}",
                         field=where)
    if workers is None:
        raw = env.get(ENV_DASK_WORKERS, "").strip()
        try:
            workers = int(raw) if raw else DEFAULT_DASK_WORKERS
        except ValueError:
            raise InputError(f"expected a whole number of worker processes, got {raw!r}",
                             field=ENV_DASK_WORKERS) from None
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise InputError(f"expected at least 1 worker process, got {workers!r}",
                         field=ENV_DASK_WORKERS)
    return RunnerSettings("dask", address, workers)


def build_task_runner(settings: RunnerSettings) -> TaskRunner:
    if settings.kind == "thread":
        return ThreadPoolTaskRunner()
    from prefect_dask import DaskTaskRunner

    if settings.address:
        return DaskTaskRunner(address=settings.address)
    return DaskTaskRunner(cluster_class=local_cluster,
                          cluster_kwargs={"n_workers": settings.workers, "threads_per_worker": 1,
                                          "processes": True, "dashboard_address": ":0"})


def task_runner_from_settings(kind: str | None = None, address: str | None = None,
                              workers: int | None = None) -> TaskRunner:
    """The task runner the settings name (see the module docstring)."""
    return build_task_runner(runner_settings(kind, address, workers))


def shards_share_process(task_runner: TaskRunner | None = None) -> bool:
    """Whether the submitted tasks of this flow run (of the current one, by default) all run in
    this process: true for Prefect's thread pool, whose query shards can then share the limits of
    an http configuration in the process; false for a Dask cluster or any other runner (and
    outside a flow run), whose shards each get a part of those limits instead."""
    if task_runner is None:
        from prefect.context import FlowRunContext

        task_runner = getattr(FlowRunContext.get(), "task_runner", None)
    return isinstance(task_runner, ThreadPoolTaskRunner)


def execution_record(shards: int, embed_batch: int,
                     task_runner: TaskRunner | None = None) -> dict:
    """Where a run's submitted work ran, for what_ran's `execution` block: the task runner
    (thread, or dask with its scheduler address or its LocalCluster's process count), the query
    shards per configuration and the texts per embedding batch. The results never depend on
    them; the timings and the memory do."""
    if task_runner is None:
        from prefect.context import FlowRunContext

        task_runner = getattr(FlowRunContext.get(), "task_runner", None)
    record: dict = {"task_runner": "thread" if isinstance(task_runner, ThreadPoolTaskRunner)
                    else type(task_runner).__name__ if task_runner is not None else None,
                    "shards": shards, "embed_batch": embed_batch}
    if task_runner is None or isinstance(task_runner, ThreadPoolTaskRunner):
        return record  # prefect_dask is not imported for the thread runner (a second of a run)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:  # prefect-dask not installed: the thread runner is the only one
        DaskTaskRunner = None
    if DaskTaskRunner is not None and isinstance(task_runner, DaskTaskRunner):
        record["task_runner"] = "dask"
        if task_runner.address:
            record["dask_address"] = task_runner.address
        else:
            record["dask_workers"] = (task_runner.cluster_kwargs or {}).get("n_workers")
    return record


#: Prefect's flow-run heartbeat setting, by its environment variables (the legacy name too)
HEARTBEAT_ENV = ("PREFECT_FLOWS_HEARTBEAT_FREQUENCY", "PREFECT_RUNNER_HEARTBEAT_FREQUENCY")


@contextmanager
def no_heartbeats(environ: Mapping[str, str] | None = None) -> Iterator[bool]:
    """A local run's flow run without heartbeats, unless the environment sets their frequency.

    Prefect 3.9 beats every 180 s from a thread of its own, and at the flow run's end waits for
    that thread, which sleeps in steps of a second: up to a second of every run, and an event
    client started for beats nobody reads. Only the `searcheval-stuck-run` automation reads them
    (deploy/automations.yaml), and only for flow runs of a deployment, whose workers set
    PREFECT_FLOWS_HEARTBEAT_FREQUENCY themselves (deploy/prefect.yaml, `searcheval serve`): a run
    started by `searcheval run` is not watched. Yields whether heartbeats are off."""
    env = os.environ if environ is None else environ
    if any(env.get(name, "").strip() for name in HEARTBEAT_ENV):
        yield False  # asked for: kept
        return
    with temporary_settings(updates={"flows.heartbeat_frequency": None}):
        yield True


def whole(value):
    """A large input of a submitted task (the collection, a batch of texts, a shard), marked so
    that Prefect passes it without walking every element for futures (on SciFact that walk was a
    third of a warm run) -- on the thread runner. On Dask it is passed as is: prefect-dask 0.3.7
    hands an annotated input to the task as the annotation's tuple."""
    from prefect.utilities.annotations import opaque

    return opaque(value) if shards_share_process() else value


def worker_environment() -> dict[str, str]:
    """What the processes of a LocalCluster must see: the database (the embedded server is
    started now if no URL is set, and its URL handed on), the Prefect API, offline models, and
    distributed's own log at warning level."""
    env = {database.ENV_URL: database.resolve_url(), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "DASK_LOGGING__DISTRIBUTED": "warning"}
    api = PREFECT_API_URL.value()
    if api:
        env["PREFECT_API_URL"] = api
    secret = os.environ.get(database.PASSWORD_SECRET_ENV)
    if secret:  # the block's name: each worker reads the password itself (tasks/secrets.py)
        env[database.PASSWORD_SECRET_ENV] = secret
    return env


def local_cluster(**kwargs):
    """A distributed.LocalCluster whose worker processes get `worker_environment()`. Called by
    the DaskTaskRunner in the flow run's process when the first task is submitted."""
    import dask
    from distributed import LocalCluster

    logging.getLogger("distributed").setLevel(logging.WARNING)  # not every heartbeat in the log
    env = {**worker_environment(), **kwargs.pop("env", {})}
    # forkserver, not spawn: a spawned worker that imported torch outlives its close by more
    # than the nanny's 4 s and is killed (a warning and 4 s lost per run); forked from the
    # forkserver it exits at once. Neither is a fork of the flow's process (its threads, its
    # connections): both start from a fresh interpreter.
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        return LocalCluster(env=env, **kwargs)


def _loopback(address: str) -> bool:
    host = urlsplit(address if "://" in address else f"tcp://{address}").hostname
    return host in _LOOPBACK


@contextmanager
def api_for_workers(task_runner: TaskRunner) -> Iterator[None]:
    """Make the Prefect API of this process reachable from Dask workers in other processes.

    Task runs carry the settings of the flow run to the workers; with no PREFECT_API_URL (the
    kept local server names one: flows/prefect_api.py; SEARCHEVAL_PREFECT_SERVER=temporary does
    not) each worker would start an API server of its own. So the temporary server is started
    here and named in the settings for the duration. An existing cluster on another machine
    cannot reach this machine's loopback: it needs a Prefect server it can reach
    (PREFECT_API_URL)."""
    if isinstance(task_runner, ThreadPoolTaskRunner):
        yield  # (prefect_dask is not even imported: a second of a warm run)
        return
    from prefect_dask import DaskTaskRunner

    api = PREFECT_API_URL.value()
    if not isinstance(task_runner, DaskTaskRunner):
        yield
        return
    if task_runner.address and not _loopback(task_runner.address) \
            and (not api or _loopback(api)):
        raise InputError(f"the Dask cluster at {task_runner.address} needs a Prefect server its "
                         "workers can reach: set PREFECT_API_URL (e.g. `prefect server start`)",
                         field="PREFECT_API_URL")
    if api:
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # the process's ephemeral server, as get_client starts it
    server.start()
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield
