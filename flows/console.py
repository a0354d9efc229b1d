"""What a flow run started from the command line shows on the terminal: Prefect's console logs go
to stderr (the results go to stdout, printed once by the CLI); `--quiet` silences them (the CLI
still prints its one line on stderr for a tripped gate, a refusal or a failure). The logs sent to the Prefect API (the UI's log tab) are never filtered."""

from __future__ import annotations

import logging

NOISY = ("great_expectations",)  # INFO lines about temporary folders, nothing a user acts on


def route_library_logs() -> None:
    """The library's progress lines (`searcheval.progress`, INFO) reach Prefect's console handler
    (through the root logger) and, inside a flow or task run, the run's logs in the API and the
    UI. Called when the flows are imported, in every process that runs them (the CLI, a worker,
    serve)."""
    from prefect.logging.handlers import APILogHandler

    class RunLogs(APILogHandler):
        """Only records logged inside a flow or task run: outside one (a library call in a
        test, a script) there is no run to attach them to."""

        def emit(self, record: logging.LogRecord) -> None:
            from prefect.context import FlowRunContext, TaskRunContext

            if FlowRunContext.get() is None and TaskRunContext.get() is None:
                return
            super().emit(record)

    lines = logging.getLogger("searcheval.progress")
    lines.setLevel(logging.INFO)
    if not any(isinstance(h, APILogHandler) for h in lines.handlers):
        lines.addHandler(RunLogs())


def configure_console(quiet: bool = False) -> None:
    """Call after Prefect is imported (its logging is configured then)."""
    from prefect.logging.handlers import PrefectConsoleHandler

    for name in NOISY:
        logging.getLogger(name).setLevel(logging.WARNING)
    if not quiet:
        return
    from searcheval import progress

    progress.BARS = False
    loggers = [logging.getLogger(), *(logger for logger in logging.root.manager.loggerDict.values()
                                      if isinstance(logger, logging.Logger))]
    for logger in loggers:
        for handler in logger.handlers:
            if isinstance(handler, PrefectConsoleHandler):
                handler.setLevel(logging.CRITICAL + 1)
