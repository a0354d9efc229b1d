"""Reading what a test's Prefect API recorded. Prefect 3 records task-run states from events,
which the server writes after the flow has returned, so a read right after a run can miss a task
run or see it unfinished: these read again (up to 30 s) until what the test expects is there."""
from __future__ import annotations

import time

WAIT_S = 30.0


def _read(flow_run_id: str | None, name_like: str | None):
    import anyio
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (FlowRunFilter, FlowRunFilterId, TaskRunFilter,
                                                TaskRunFilterName)

    async def read():
        async with get_client() as client:
            flow_run = await client.read_flow_run(flow_run_id) if flow_run_id else None
            runs = await client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id]))
                if flow_run_id else None,
                task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_=name_like))
                if name_like else None)
            return flow_run, runs

    return anyio.run(read)


def _ended(run) -> bool:
    return run.state is not None and run.state.is_final() and run.end_time is not None


def task_runs_of(flow_run_id: str, expect: tuple[str, ...] = (),
                 whole_names: bool = False) -> tuple:
    """The flow run and its task runs by task name (`gate-49f` -> `gate`), or by their whole
    names (`embed-1`), once every name in `expect` is recorded and ended."""
    deadline = time.monotonic() + WAIT_S
    while True:
        flow_run, runs = _read(flow_run_id, None)
        named = {run.name if whole_names else run.name.rsplit("-", 1)[0]: run for run in runs}
        if all(name in named and _ended(named[name]) for name in expect) \
                or time.monotonic() > deadline:
            return flow_run, named
        time.sleep(0.2)


def task_runs_named(like: str, expect: tuple[str, ...] = ()) -> list:
    """Task runs whose names contain `like`, once every whole name in `expect` is recorded
    and ended (with no `expect`: once at least one is, and all those found have ended)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        _, runs = _read(None, like)
        ended = {run.name for run in runs if _ended(run)}
        done = set(expect) <= ended if expect else bool(runs) and len(ended) == len(runs)
        if done or time.monotonic() > deadline:
            return runs
        time.sleep(0.2)
