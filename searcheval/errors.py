"""Every public exception of searcheval.

`InputError` is refused input: its message names where the problem is (file, line, field) and what
was expected, so that the CLI can print it as one line and exit 2. The others are outcomes the CLI
maps to exit codes: a tripped gate or missed threshold (1), a database failure (3).
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
