"""Reading input files: text (UTF-8), JSON, JSONL, YAML lists, hashes, and the field parsers the
loaders share. Every refusal is an `InputError` naming the file, line and field.
"""

from __future__ import annotations

import csv
import gc
import hashlib
import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from searcheval.errors import InputError


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- parsing helpers


def read_text(path: Path) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("file not found", file=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the file ({exc.__class__.__name__}: {exc})", file=path) from None
    if not text.strip():
        raise InputError("the file is empty", file=path)
    return text


def read_json(path: Path) -> tuple[Any, str]:
    """A JSON file's value and its text (for line numbers), or an InputError naming the line."""
    text = read_text(path)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from None


def read_yaml_list(path: str | Path, key: str) -> list:
    """The non-empty list under `key` of a YAML file (prefect.yaml, automations.yaml)."""
    import yaml

    path = Path(path)
    try:
        document = yaml.safe_load(read_text(path))
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=path) from None
    entries = document.get(key) if isinstance(document, dict) else None
    if not isinstance(entries, list) or not entries:
        raise InputError("expected a non-empty list", file=path, field=key)
    return entries


def parse_time(value: Any, *, file: Path, line: int | None, field_name: str) -> datetime:
    if not isinstance(value, str) or not value.strip():
        raise InputError("expected an ISO 8601 timestamp", file=file, line=line, field=field_name)
    try:
        ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InputError(
            f"expected an ISO 8601 timestamp, got {value!r}", file=file, line=line, field=field_name
        ) from None
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


def number_field(value: Any, *, file: Path, line: int | None, field_name: str, allow_none: bool = False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(f"expected a number, got {value!r}", file=file, line=line, field=field_name)
    return value


def string_field(obj: dict, key: str, *, file: Path, line: int | None, prefix: str = "",
            required: bool = True) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InputError(f"expected a non-empty string, got {value!r}", file=file, line=line,
                         field=prefix + key)
    return value


def json_line_of(text: str, index: int) -> int | None:
    """Best-effort line number of the index-th top-level element of a JSON array (1-based)."""
    depth = 0
    seen = -1
    in_str = False
    escape = False
    line = 1
    for ch in text:
        if ch == "\n":
            line += 1
        if in_str:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth == 2:
                seen += 1
                if seen == index:
                    return line
        elif ch in "]}":
            depth -= 1
    return None


def read_json_list(path: Path) -> tuple[list, str]:
    data, text = read_json(path)
    if not isinstance(data, list):
        raise InputError("expected a JSON list of objects at the top level", file=path)
    return data, text


def parse_grade(raw: str, lo: int, hi: int, *, file: Path, line: int, field_name: str = "grade") -> int:
    try:
        value = float(raw)
    except ValueError:
        raise InputError(f"expected a whole grade in {lo}..{hi}, got {raw.strip()!r}", file=file,
                         line=line, field=field_name) from None
    if not value.is_integer() or not lo <= value <= hi:
        raise InputError(f"expected a whole grade in {lo}..{hi}, got {raw.strip()!r}", file=file,
                         line=line, field=field_name)
    return int(value)



def read_jsonl(path: Path) -> list[tuple[int, dict]]:
    text = read_text(path)
    rows = []
    for line_no, line in enumerate(text.split("\n"), start=1):  # never splitlines(): U+0085
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", file=path, line=line_no) from None
        if not isinstance(obj, dict):
            raise InputError("expected one JSON object per line", file=path, line=line_no)
        rows.append((line_no, obj))
    return rows




def input_hashes(sources: dict[str, Path]) -> dict[str, str]:
    """sha256 of each input file (a Collection's `sources`), for the run history."""
    return {name: sha256_file(path) for name, path in sorted(sources.items())}


def add_grade(qrels: dict[str, dict[str, int]], qid: str, doc: str, grade: int, *, path: Path, line: int) -> None:
    docs = qrels.setdefault(qid, {})
    if doc in docs:
        raise InputError(f"duplicate judgment of ({qid}, {doc})", file=path, line=line)
    docs[doc] = grade


# --------------------------------------------------------------------------- streaming readers
# For files too large to hold as one string (a product catalog, a quarter of a million labels):
# read line by line, where a line ends only at "\n" (never at U+0085, U+2028 or another character
# str.splitlines() breaks at), as UTF-8 with or without a BOM.

_BOM = b"\xef\xbb\xbf"


def iter_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, text with its "\\n") of every line of a UTF-8 file, read as it streams.

    Refuses a missing or unreadable file, and text that is not UTF-8 (naming the line and the
    byte offset in it)."""
    yield from enumerate(_text_file(Path(path)), start=1)


def _text_file(path: Path):
    """The file's lines in text mode, where (newline="\\n") a line ends only at "\\n": C speed.
    A decoding error is located afterwards by reading the bytes (the decoder works in blocks, so
    the lines seen so far do not say where it is)."""
    try:
        fh = open(path, encoding="utf-8-sig", newline="\n")
    except FileNotFoundError:
        raise InputError("file not found", file=path) from None
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.__class__.__name__}: {exc})", file=path) from None
    with fh:
        try:
            yield from fh
        except UnicodeDecodeError:
            line, byte = _undecodable(path)
            raise InputError(f"not UTF-8 text (byte {byte} of the line)", file=path,
                             line=line) from None
        except OSError as exc:
            raise InputError(f"cannot read the file ({exc.__class__.__name__}: {exc})",
                             file=path) from None


def _undecodable(path: Path) -> tuple[int | None, int | None]:
    """(line, 1-based byte in that line) of the first byte that is not UTF-8."""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):  # a binary file splits at b"\n" only
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                return number, exc.start + 1
    return None, None


def iter_delimited(path: str | Path, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(line number where the row starts, cells) of every row of a CSV or TSV file, the header
    first, with the csv module's quoting (a quoted cell may hold a delimiter or a newline).

    Rows ending at "\\r\\n" are read as rows ending at "\\n". Refuses what `iter_lines` refuses and a
    row the csv module cannot parse."""
    path = Path(path)
    reader = csv.reader(_text_file(path), delimiter=delimiter)
    end = 0  # the line the previous row ended on
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(f"not valid {'TSV' if delimiter == chr(9) else 'CSV'}: {exc}",
                             file=path, line=reader.line_num) from None
        yield end + 1, row
        end = reader.line_num


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, dict]]:
    """(line number, object) of every non-blank line of a JSONL file, streamed; a line ends only
    at "\\n", so U+0085 or U+2028 inside a JSON string is part of the value."""
    path = Path(path)
    for number, text in iter_lines(path):
        if not text.strip():
            continue
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"invalid JSON: {exc.msg}", file=path, line=number) from None
        if not isinstance(obj, dict):
            raise InputError("expected one JSON object per line", file=path, line=number)
        yield number, obj


def read_yaml_mapping(path: str | Path) -> dict:
    """The top-level mapping of a YAML file (a dataset's searcheval.yaml, a table mapping)."""
    import yaml

    path = Path(path)
    text = "".join(text for _, text in iter_lines(path))
    if not text.strip():
        raise InputError("the file is empty", file=path)
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", file=path,
                         line=mark.line + 1 if mark is not None else None) from None
    if not isinstance(document, dict):
        raise InputError("expected a mapping of keys to values at the top level", file=path)
    return document


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector paused while a loader builds a few hundred thousand objects
    that hold no cycles (it would otherwise rescan them again and again as they pile up)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
