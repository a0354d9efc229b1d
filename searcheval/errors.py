"""Every public exception of searcheval.

`InputError` is refused input: its message names where the problem is (file, line, field) and what
was expected, so that the CLI can print it as one line and exit 2. The others are outcomes the CLI
maps to exit codes: a tripped gate or missed threshold (1), a database, model, backend or
Prefect server failure (3).

`EXIT_CODES` is the one table of exit codes every command uses (`exit_code(exc)`); the flows'
boundary prints the same exceptions without a traceback (unless --debug / SEARCHEVAL_DEBUG).
"""

from __future__ import annotations

from pathlib import Path


class InputError(ValueError):
    """Bad input: a file, line or field that is not what searcheval expects."""

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.message = message
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = ""
        if self.file is not None:
            where = self.file
            if self.line is not None:
                where += f":{self.line}"
        if self.field is not None:
            where = f"{where} field '{self.field}'" if where else f"field '{self.field}'"
        return f"{where}: {self.message}" if where else self.message


class DatabaseError(Exception):
    """The database cannot be reached or used (exit 3). The message names host and database,
    never the password."""


class ModelError(Exception):
    """A model could not be loaded or run (exit 3): the folder exists but its weights do not
    load. A folder that is no model at all is refused input (InputError)."""


class PrefectServerError(RuntimeError):
    """The local Prefect server a run keeps (searcheval.prefect_server) could not be started or
    stopped (exit 3). The message names its log."""


class GateTripped(Exception):
    """The served configuration regressed against the baseline (exit 1). `table` is the results
    table to print beside the verdict."""

    def __init__(self, message: str, table: str = "") -> None:
        super().__init__(message)
        self.table = table


class RunIncomplete(Exception):
    """Queries failed beyond what their configuration allows, or its backend is down (exit 3):
    the run is published marked incomplete, with its errors listed, not gated, and alerted. `table` is the results table to print."""

    def __init__(self, message: str, table: str = "") -> None:
        super().__init__(message)
        self.table = table


class ThresholdsMissed(Exception):
    """A replay missed a floor or its coverage minimum (exit 1; the flow run ends Failed)."""

    def __init__(self, message: str, table: str = "") -> None:
        super().__init__(message)
        self.table = table


class AlertDeliveryError(RuntimeError):
    """An alert could not be delivered. Logged, never raised past the alert step: the results are
    already published and the verdict stands."""


EXIT_OK, EXIT_TRIPPED, EXIT_REFUSED, EXIT_FAILED = 0, 1, 2, 3

#: The one table of exit codes: an exception's class (or a base of it) -> the code every command
#: exits with. First match in the class's method resolution order wins.
EXIT_CODES: dict[type[BaseException], int] = {
    InputError: EXIT_REFUSED,
    GateTripped: EXIT_TRIPPED,
    ThresholdsMissed: EXIT_TRIPPED,
    RunIncomplete: EXIT_FAILED,  # published, marked incomplete, alerted (issue 23)
    DatabaseError: EXIT_FAILED,
    ModelError: EXIT_FAILED,
    PrefectServerError: EXIT_FAILED,
}

#: Modules whose own exceptions are a failed database (psycopg's, raised after a connection was
#: made) or backend (httpx's): exit 3, never a traceback. Named, not imported: errors.py stays light.
FAILED_MODULES = ("psycopg", "httpx", "httpcore")


def exit_code(exc: BaseException) -> int | None:
    """The exit code of an expected outcome, None for anything else (a bug: it keeps its
    traceback)."""
    for cls in type(exc).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    if type(exc).__module__.split(".")[0] in FAILED_MODULES:
        return EXIT_FAILED
    return None
