"""The flow boundary: expected outcomes are not bugs, so they print no traceback.

A refused input (`InputError`), a tripped gate (`GateTripped`), a missed replay threshold
(`ThresholdsMissed`), an incomplete run and a failed database, model or backend (every exception
of the one exit-code table, `searcheval.errors.EXIT_CODES`) end the flow run Failed with their message (the UI and the automations see
it; the nightly flow's message starts with REFUSED:, GATE TRIPPED: or FAILED: and its verdict is a
tag, flows/outcome.py), but Prefect's engine logs every exception a flow or task raises with its traceback
(`Encountered exception during execution`, `Task run failed with exception`). This filter, on
Prefect's flow-run and task-run loggers, turns those records for the expected types into one
DEBUG line without a traceback. Any other exception (a real bug) keeps its traceback, and so does
every exception when SEARCHEVAL_DEBUG is set (`searcheval run --debug`).
"""

from __future__ import annotations

import logging
import os

from searcheval.errors import exit_code

DEBUG_ENV = "SEARCHEVAL_DEBUG"
LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


def expected_outcome(exc: BaseException | None) -> bool:
    return exc is not None and exit_code(exc) is not None


class ExpectedOutcomes(logging.Filter):
    """Demote a record that carries an expected outcome's traceback to one DEBUG line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if isinstance(record.exc_info, tuple) else None
        if expected_outcome(exc) and not os.environ.get(DEBUG_ENV):
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            # the logger let the record through at its first level: at DEBUG it goes on only
            # where DEBUG is wanted (PREFECT_LOGGING_LEVEL=DEBUG)
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


_FILTER = ExpectedOutcomes()


def install() -> None:
    """Idempotent: the filter on each of Prefect's run loggers, once."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def scheduled_run() -> bool:
    """Whether this flow run was created by a deployment's schedule (not by hand, CI, the CLI or
    an automation): a refused scheduled run pages; a manual one answers whoever started it."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    run = getattr(context, "flow_run", None)
    return bool(run is not None and getattr(run, "auto_scheduled", False))
