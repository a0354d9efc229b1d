"""`searcheval run --deployment NAME`: start a run of a deployment on the Prefect server
(PREFECT_API_URL) and wait for it; served by `searcheval serve` or a worker of its pool."""

from __future__ import annotations

from dataclasses import dataclass

FLOW = "searcheval-nightly"


@dataclass(frozen=True)
class RemoteRun:
    id: str
    name: str
    state: str  # COMPLETED, FAILED, CRASHED, CANCELLED, ... (a Prefect state type)
    message: str  # the flow's final message: the verdict and where the report is
    url: str | None


def run_on_deployment(deployment: str, parameters: dict, poll_interval: float = 2) -> RemoteRun:
    """Run `searcheval-nightly/<deployment>` with `parameters` over its defaults; blocks."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL
    from prefect.utilities.urls import url_for

    from searcheval.errors import InputError

    if not PREFECT_API_URL.value():
        raise InputError("a deployment runs on a Prefect server: set PREFECT_API_URL (e.g. "
                         "http://127.0.0.1:4200/api, `searcheval ui` starts one)",
                         field="deployment")
    name = deployment if "/" in deployment else f"{FLOW}/{deployment}"
    try:
        flow_run = run_deployment(name, parameters=parameters, timeout=None,
                                  poll_interval=poll_interval, as_subflow=False)
    except Exception as exc:  # noqa: BLE001 - prefect raises ObjectNotFound wrapped variously
        if "not found" in str(exc).lower() or type(exc).__name__ == "ObjectNotFound":
            raise InputError(f"no deployment {name!r} on {PREFECT_API_URL.value()}: "
                             "`prefect deploy` or `searcheval serve` registers it",
                             field="deployment") from None
        raise
    state = flow_run.state
    return RemoteRun(id=str(flow_run.id), name=flow_run.name, state=state.type.value if state else "UNKNOWN",
                     message=(state.message or "") if state else "",
                     url=url_for(flow_run))
