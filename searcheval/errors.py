"""The one exception type for input that searcheval refuses.

Every message names where the problem is (file, line, field) and what was expected, so that the
CLI can print it as one line and exit 2.
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
