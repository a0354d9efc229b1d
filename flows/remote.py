"""`searcheval run --deployment NAME`: start a run of a deployment on the Prefect server
(PREFECT_API_URL) and wait for it, at most a timeout; served by `searcheval serve` or a worker of
its pool. `searcheval runs crash ID`: mark a flow run whose worker is gone Crashed."""

from __future__ import annotations

from dataclasses import dataclass

from flows import outcome

FLOW = "searcheval-nightly"
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


@dataclass(frozen=True)
class RemoteRun:
    id: str
    name: str
    state: str  # COMPLETED, FAILED, CRASHED, CANCELLED, ... (a Prefect state type)
    message: str  # the flow's final message: the verdict and where the report is
    url: str | None
    tags: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return self.state in FINAL

    @property
    def verdict(self) -> str:
        """passed | tripped | refused | failed (flows/outcome.py); an unfinished run: failed."""
        return outcome.verdict_of_run(self.state, self.message, self.tags)

    @property
    def exit_code(self) -> int:
        return outcome.EXIT_OF[self.verdict]


def _api_url(field: str | None = "deployment") -> str:
    from prefect.settings import PREFECT_API_URL

    from searcheval.errors import InputError

    if not PREFECT_API_URL.value():
        raise InputError("a deployment runs on a Prefect server: set PREFECT_API_URL (e.g. "
                         "http://127.0.0.1:4200/api, `searcheval ui` starts one)",
                         field=field)
    return PREFECT_API_URL.value()


def _remote(flow_run) -> RemoteRun:
    from prefect.utilities.urls import url_for

    state = flow_run.state
    return RemoteRun(id=str(flow_run.id), name=flow_run.name,
                     state=state.type.value if state else "UNKNOWN",
                     message=(state.message or "") if state else "", url=url_for(flow_run),
                     tags=tuple(flow_run.tags or ()))


def run_on_deployment(deployment: str, parameters: dict, timeout: float | None = None,
                      poll_interval: float = 2) -> RemoteRun:
    """Run `searcheval-nightly/<deployment>` with `parameters` over its defaults; blocks until
    the run is final or `timeout` seconds have passed (None: no limit), then returns it as the
    server has it (not `finished` after a timeout: it goes on on the server)."""
    from prefect.deployments import run_deployment

    from searcheval.errors import InputError

    api = _api_url()
    name = deployment if "/" in deployment else f"{FLOW}/{deployment}"
    try:
        flow_run = run_deployment(name, parameters=parameters, timeout=timeout,
                                  poll_interval=poll_interval, as_subflow=False)
    except Exception as exc:  # noqa: BLE001 - prefect raises ObjectNotFound wrapped variously
        if "not found" in str(exc).lower() or type(exc).__name__ == "ObjectNotFound":
            raise InputError(f"no deployment {name!r} on {api}: "
                             "`prefect deploy` or `searcheval serve` registers it",
                             field="deployment") from None
        raise
    return read_run(str(flow_run.id))  # with the tags the flow added at its end


def read_run(flow_run_id: str) -> RemoteRun:
    """The flow run as the server has it; an unknown or malformed id is refused input."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    from searcheval.errors import InputError

    try:
        run_id = UUID(flow_run_id)
    except ValueError:
        raise InputError(f"expected a flow run id (a UUID), got {flow_run_id!r}") from None
    api = _api_url(field=None)
    with get_client(sync_client=True) as client:
        try:
            return _remote(client.read_flow_run(run_id))
        except ObjectNotFound:
            raise InputError(f"no flow run {flow_run_id} on {api}") from None


CRASH_MESSAGE = ("marked Crashed by `searcheval runs crash`: its worker or process is gone "
                 "(no final state was reported)")


def crash_run(flow_run_id: str, message: str = CRASH_MESSAGE) -> tuple[RemoteRun, RemoteRun]:
    """Mark a flow run that is not final (Running, Pending, Cancelling, Scheduled...) Crashed, as
    Prefect's own crash detection would: forced, since its worker is not there to agree. The
    Crashed state's event is what the `searcheval-nightly-failed` automation pages on. Returns
    the run before and after. A final run is refused: its outcome stands."""
    from prefect.client.orchestration import get_client
    from prefect.states import Crashed

    from searcheval.errors import InputError

    before = read_run(flow_run_id)
    if before.finished:
        raise InputError(f"flow run {before.name} ({before.id}) already ended {before.state}: "
                         "nothing to crash")
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(before.id, Crashed(message=message), force=True)
    return before, read_run(flow_run_id)
