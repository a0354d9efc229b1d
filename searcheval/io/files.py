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

from searcheval.defaults import MAX_FIELD_CHARS
from searcheval.errors import InputError


_BOM = b"\xef\xbb\xbf"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# --------------------------------------------------------------------------- parsing helpers


def read_text(path: Path) -> str:
    """A UTF-8 text file, with or without a byte-order mark (dropped). Any other encoding is
    refused with the line and the byte offset of the first byte that is not UTF-8."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError("file not found", file=path) from None
    except IsADirectoryError:
        raise InputError("expected a file, found a folder", file=path) from None
    except OSError as exc:
        raise InputError(f"cannot read the file ({exc.__class__.__name__}: {exc})", file=path) from None
    if data.startswith(_BOM):
        data = data[len(_BOM):]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, data, exc.start) from None
    if not text.strip():
        raise InputError("the file is empty", file=path)
    return text


def _not_utf8(path: Path, data: bytes, offset: int) -> InputError:
    line = data.count(b"\n", 0, offset) + 1
    column = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return _undecodable_at(path, line, column, offset, data[:2])


def _undecodable_at(path: Path, line: int, column: int, offset: int, head: bytes) -> InputError:
    what = "UTF-16 text" if head in (b"\xff\xfe", b"\xfe\xff") else "not UTF-8 text"
    return InputError(f"{what} (byte {column} of the line) at byte {offset + 1} of the file: "
                      "save the file as UTF-8", file=path, line=line)


#: what a JSON reader says of JSON nested deeper than Python's parser goes (about 1,000 levels:
#: it raised RecursionError, a crash of the whole command)
TOO_DEEP = "invalid JSON: nested too deep (arrays and objects within each other)"

#: characters no stored text may hold: Postgres text cannot carry NUL
_NUL = "\x00"


def control_problem(value: str, *, identifier: bool = False) -> str | None:
    """Why `value` cannot be stored or written: a NUL anywhere; in an identifier (a query or
    document id, written to TREC and CSV files), any control character. None when it is fine."""
    if _NUL in value:
        return f"holds a NUL character (at character {value.index(_NUL) + 1}), which Postgres " \
               "text cannot carry"
    if identifier:
        for i, ch in enumerate(value):
            if ord(ch) < 32 or 127 <= ord(ch) < 160:
                return f"holds the control character U+{ord(ch):04X} (at character {i + 1}), " \
                       "which an id in a TREC or CSV file cannot carry"
    return None


def read_json(path: Path) -> tuple[Any, str]:
    """A JSON file's value and its text (for line numbers), or an InputError naming the line."""
    text = read_text(path)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", file=path, line=exc.lineno) from None
    except RecursionError:
        raise InputError(TOO_DEEP, file=path) from None


#: most nodes a YAML document may expand to once its aliases are followed (a 775-byte "billion
#: laughs" expands to 10^9), and its deepest nesting
MAX_YAML_NODES = 100_000
MAX_YAML_DEPTH = 64


class YAMLTooLarge(ValueError):
    pass


def safe_yaml(text: str):
    """yaml.safe_load with limits: no tags beyond the safe ones, at most MAX_YAML_NODES nodes once
    aliases are expanded, at most MAX_YAML_DEPTH levels; YAMLTooLarge (a ValueError) otherwise,
    before anything is constructed."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise YAMLTooLarge(f"nested deeper than {MAX_YAML_DEPTH} levels") from None
        if node is None:
            return None
        sizes: dict[int, int] = {}

        def size(n, depth: int) -> int:
            if depth > MAX_YAML_DEPTH:
                raise YAMLTooLarge(f"nested deeper than {MAX_YAML_DEPTH} levels")
            if id(n) in sizes:
                return sizes[id(n)]
            total = 1
            if isinstance(n, yaml.SequenceNode):
                for child in n.value:
                    total += size(child, depth + 1)
                    if total > MAX_YAML_NODES:
                        break
            elif isinstance(n, yaml.MappingNode):
                for key, value in n.value:
                    total += size(key, depth + 1) + size(value, depth + 1)
                    if total > MAX_YAML_NODES:
                        break
            if total > MAX_YAML_NODES:
                raise YAMLTooLarge(f"expands to more than {MAX_YAML_NODES:,} values once its "
                                   "aliases (*name) are followed")
            sizes[id(n)] = total
            return total

        size(node, 0)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def read_yaml_list(path: str | Path, key: str) -> list:
    """The non-empty list under `key` of a YAML file (prefect.yaml, automations.yaml)."""
    import yaml

    path = Path(path)
    try:
        document = safe_yaml(read_text(path))
    except yaml.YAMLError as exc:
        raise InputError(f"not valid YAML: {exc}", file=path) from None
    except YAMLTooLarge as exc:
        raise InputError(f"YAML refused: {exc}", file=path) from None
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
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not finite(value):
        raise InputError(f"expected a number, got {short_repr(value)}", file=file, line=line,
                         field=field_name)
    return value


def short_repr(value: Any, limit: int = 80) -> str:
    """repr(value), cut to `limit` characters: a message stays one readable line."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def finite(value: int | float) -> bool:
    """math.isfinite, False (not OverflowError) for an int beyond a float's range."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def string_field(obj: dict, key: str, *, file: Path, line: int | None, prefix: str = "",
            required: bool = True, identifier: bool = False) -> str | None:
    value = obj.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InputError(f"expected a non-empty string, got {short_repr(value)}", file=file,
                         line=line, field=prefix + key)
    problem = control_problem(value, identifier=identifier)
    if problem:
        raise InputError(problem, file=file, line=line, field=prefix + key)
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
        except RecursionError:
            raise InputError(TOO_DEEP, file=path, line=line_no) from None
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
            raise _undecodable(path) from None
        except OSError as exc:
            raise InputError(f"cannot read the file ({exc.__class__.__name__}: {exc})",
                             file=path) from None


def _undecodable(path: Path) -> InputError:
    """The refusal of a file that is not UTF-8: the line, and the byte in it and in the file,
    of the first byte that is not UTF-8 (read line by line: a large file is never held)."""
    offset, head = 0, b""
    with open(path, "rb") as fh:
        for number, raw in enumerate(fh, start=1):  # a binary file splits at b"\n" only
            skip = len(_BOM) if number == 1 and raw.startswith(_BOM) else 0
            head = head or raw[:2]
            try:
                raw[skip:].decode("utf-8")
            except UnicodeDecodeError as exc:
                column = skip + exc.start + 1
                return _undecodable_at(path, number, column, offset + column - 1, head)
            offset += len(raw)
    return InputError("not UTF-8 text; save the file as UTF-8", file=path)


# the csv module refuses a field longer than 131072 characters with an error that names no
# line; searcheval reads fields up to defaults.MAX_FIELD_CHARS and refuses longer ones by line
csv.field_size_limit(max(csv.field_size_limit(), MAX_FIELD_CHARS))


def csv_problem(exc: csv.Error, kind: str) -> str:
    if "field larger than field limit" in str(exc):
        return (f"a field is longer than {MAX_FIELD_CHARS:,} characters, the longest "
                "searcheval reads (searcheval.defaults.MAX_FIELD_CHARS)")
    return f"not valid {kind}: {exc}"


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
            raise InputError(csv_problem(exc, 'TSV' if delimiter == chr(9) else 'CSV'),
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
        except RecursionError:
            raise InputError(TOO_DEEP, file=path, line=number) from None
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
        document = safe_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InputError(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", file=path,
                         line=mark.line + 1 if mark is not None else None) from None
    except YAMLTooLarge as exc:
        raise InputError(f"YAML refused: {exc}", file=path) from None
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
