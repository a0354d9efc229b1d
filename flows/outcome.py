"""The outcome of a nightly flow run, said the same way on every path (issue 29).

A local `searcheval run` exits with the one table of exit codes (searcheval.errors.EXIT_CODES):
0 passed, 1 gate tripped, 2 refused, 3 failed. A flow run started on a deployment (`searcheval
run --deployment`, `prefect deployment run --watch`, the UI, a schedule) says the same thing in
two places the Prefect server keeps:

- the final state's message starts with `REFUSED: `, `GATE TRIPPED: ` or `FAILED: ` (a passed
  run keeps its verdict line, `gate: PASSED ...` or `... NOT GATED ...`), so `--watch` users
  and the UI's run page can tell a trip from a refusal from an outage;
- the flow run's tags: `searcheval:verdict=passed|tripped|refused|failed`, and
  `searcheval:run=RUN_ID` (the id of the run's report and database rows), so the flow-run list
  can be filtered by either.

A crashed flow run (its process or worker gone: marked Crashed by the `searcheval-stuck-run`
automation or `searcheval runs crash`) carries no verdict tag: it never reached one; the client
maps it to 3 like a failure.

`final_state` wraps the flow's function: an expected outcome (an exception of the exit-code
table) becomes a Failed state with its prefixed message and the exception as its data (a local
run's `state.result(raise_on_failure=False)` returns it, as before); any other exception (a bug,
the flow's timeout) is logged with its traceback and ends Failed with `FAILED: ` too.
"""

from __future__ import annotations

import functools
import logging
import os

from searcheval.errors import EXIT_FAILED, EXIT_OK, EXIT_REFUSED, EXIT_TRIPPED, exit_code

VERDICT_TAG = "searcheval:verdict="

#: verdict -> the exit code of a local run with that outcome
EXIT_OF = {"passed": EXIT_OK, "tripped": EXIT_TRIPPED, "refused": EXIT_REFUSED,
           "failed": EXIT_FAILED}
VERDICT_OF = {code: verdict for verdict, code in EXIT_OF.items()}
#: verdict -> how the final state's message starts
PREFIX = {"tripped": "GATE TRIPPED: ", "refused": "REFUSED: ", "failed": "FAILED: "}


def verdict_of(exc: BaseException | None) -> str:
    """`passed` for no exception, else the verdict of its exit code (`failed` for a bug)."""
    if exc is None:
        return "passed"
    return VERDICT_OF.get(exit_code(exc) or EXIT_FAILED, "failed")


def describe(exc: BaseException) -> str:
    """One line: searcheval's own messages as they are, anything else with its type."""
    summary = getattr(exc, "summary", None)  # a refusal with several problems says how many
    text = summary() if callable(summary) else str(exc)
    if isinstance(exc, TimeoutError):
        text = f"{text} (SEARCHEVAL_RUN_TIMEOUT)"
    if not type(exc).__module__.startswith("searcheval"):
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())


def final_message(exc: BaseException) -> str:
    return PREFIX[verdict_of(exc)] + describe(exc)


def verdict_of_run(state_type: str, message: str, tags: list[str] | tuple[str, ...]) -> str:
    """The verdict of a finished flow run as the server has it: its verdict tag, else its
    message's prefix (a run of an older flow: `failed`), else `passed` for Completed; a
    Crashed, Cancelled or unfinished run is `failed`."""
    for tag in tags or ():
        if tag.startswith(VERDICT_TAG) and tag[len(VERDICT_TAG):] in EXIT_OF:
            return tag[len(VERDICT_TAG):]
    if state_type == "COMPLETED":
        return "passed"
    if state_type == "FAILED":
        for verdict, prefix in PREFIX.items():
            if message.startswith(prefix):
                return verdict
    return "failed"


def run_logger():
    from prefect import get_run_logger
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("prefect.flow_runs")


def final_state(fn):
    """Wrap a flow function (below `@flow`): its outcome as the final state and a verdict tag.

    The wrapper keeps `fn`'s signature, docstring and module globals (Prefect resolves the
    parameters' annotations, e.g. `ConfigurationNames`, in the function's globals)."""
    import types

    run = _run_with_outcome

    def wrapper(*args, **kwargs):  # free names only: it runs with fn's globals
        return run(fn, args, kwargs)

    rebound = types.FunctionType(wrapper.__code__, fn.__globals__, fn.__name__,
                                 fn.__defaults__, wrapper.__closure__)
    rebound.__kwdefaults__ = fn.__kwdefaults__
    return functools.update_wrapper(rebound, fn)


def _run_with_outcome(fn, args, kwargs):
    from prefect.states import Failed, State

    from tasks.evaluation import tag_flow_run  # how the nightly tags its runs; never fails it

    try:
        result = fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - every outcome becomes the run's final state
        verdict = verdict_of(exc)
        if exit_code(exc) is None:  # a bug or the timeout: its traceback is the lead
            run_logger().error("the run failed: %s", describe(exc), exc_info=exc)
        elif os.environ.get("SEARCHEVAL_DEBUG"):
            run_logger().error("the run ended %s", verdict, exc_info=exc)
        tag_flow_run([VERDICT_TAG + verdict])
        return Failed(message=final_message(exc), data=exc)
    failed = isinstance(result, State) and not result.is_completed()
    tag_flow_run([VERDICT_TAG + ("failed" if failed else "passed")])
    return result
