"""Every input file of the fixtures and every numeric option, mutated: the run is refused (exit 2,
its last line naming the file or option, no traceback) or goes ahead (0); it never crashes, and
nothing is written.

The many examples go through the CLI's own preflight path in this process (`searcheval run
--check`: the same checks a run makes before any work); a few run the whole nightly evaluation
end to end in a process of its own (tests/flows/test_outcomes.py and the end-to-end case here).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from searcheval.cli import main
from searcheval.defaults import MAX_FIELD_CHARS

ROOT = Path(__file__).resolve().parents[2]
FILES = ("catalog.json", "golden_queries.json", "judgments.csv", "baseline.json")
BYTE_MUTATIONS = ("truncate", "bom", "nul", "control", "encoding", "huge")
STRUCTURE_MUTATIONS = ("drop", "rename", "retype", "delimiter")
OPTIONS = {"--tolerance": "float", "--coverage-floor": "float", "--shards": "int",
           "--embed-batch": "int", "--max-queries": "int", "--min-per-category": "int",
           "--relevance-level": "int"}
VALUES = ["nan", "inf", "-inf", "-1", "0", "1", "1.5", "-0.0", "1e308", "99999999999999999999",
          "0x10", ""]


def check(folder: Path, *extra: str) -> tuple[int, list[str]]:
    """`searcheval run --check` in this process: (exit code, stderr lines)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(["run", "--check", "--fixtures", str(folder), "--baseline",
                         str(folder / "baseline.json"), "--output", str(folder / "out"), *extra])
        except SystemExit as exc:  # argparse's own refusal of a flag's value
            code = exc.code
    return code, err.getvalue().strip().splitlines()


def copy_inputs(into: Path) -> Path:
    """The fixtures and the baseline in a folder named `fixtures`: a dataset is known by its
    folder's name, and the baseline is of the dataset `fixtures` (another name is refused as
    another dataset's run, which would hide every other refusal behind that one)."""
    folder = into / "fixtures"
    folder.mkdir()
    for name in FILES[:3]:
        shutil.copy(ROOT / "fixtures" / name, folder / name)
    shutil.copy(ROOT / "baseline.json", folder / "baseline.json")
    return folder


def test_the_unmutated_inputs_pass_the_check(tmp_path):
    """The mutation tests mean something only if the copy they start from is accepted."""
    code, err = check(copy_inputs(tmp_path))
    assert code == 0, err


def mutate_bytes(data: bytes, how: str, at: float, pick: int) -> bytes:
    cut = int(len(data) * at)
    if how == "truncate":
        return data[:cut]
    if how == "bom":
        return b"\xef\xbb\xbf" + data
    if how == "nul":
        return data[:cut] + b"\x00" + data[cut:]
    if how == "control":
        return data[:cut] + bytes([[1, 7, 8, 11, 12, 27, 127][pick % 7]]) + data[cut:]
    if how == "encoding":
        text = data.decode("utf-8") + "caf\u00e9 \u2013"  # text beyond ASCII: encodings differ
        return text.encode(["latin-1", "utf-16", "cp1252", "utf-32"][pick % 4],
                           errors="replace")
    if how == "huge":  # a field past the longest read: inside a value where the format has one
        line_end = data.find(b"\n", cut)
        at_byte = line_end if line_end > 0 else len(data)
        return data[:at_byte] + b"x" * (MAX_FIELD_CHARS + 1) + data[at_byte:]
    raise AssertionError(how)


def mutate_structure(path: Path, how: str, pick: int) -> None:
    if path.suffix == ".csv":
        lines = path.read_text(encoding="utf-8").split("\n")
        rows = [line.split(",") for line in lines]
        column = pick % len(rows[0])
        if how == "drop":
            rows = [r[:column] + r[column + 1:] if len(r) > column else r for r in rows]
        elif how == "rename":
            rows[0][column] = rows[0][column] + "_x"
        elif how == "retype":
            row = 1 + pick % (len(rows) - 2)
            rows[row][column] = ["", "x", "-1", "1e9", "2.5", "null"][pick % 6]
        elif how == "delimiter":
            path.write_text("\n".join(";".join(r) for r in rows), encoding="utf-8")
            return
        path.write_text("\n".join(",".join(r) for r in rows), encoding="utf-8")
        return
    data = json.loads(path.read_text(encoding="utf-8"))
    elements = data if isinstance(data, list) else [data]
    target = elements[pick % len(elements)]
    keys = sorted(target)
    key = keys[pick % len(keys)]
    if how == "drop":
        del target[key]
    elif how == "rename":
        target[key + "_x"] = target.pop(key)
    elif how in ("retype", "delimiter"):
        target[key] = [None, "text", 7, -1.5, [], {}, True, float("nan")][pick % 8]
    path.write_text(json.dumps(data), encoding="utf-8")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FILES), st.sampled_from(BYTE_MUTATIONS + STRUCTURE_MUTATIONS),
       st.floats(0, 1), st.integers(0, 10_000))
def test_a_mutated_input_file_is_refused_naming_it_or_accepted(name, how, at, pick):
    with tempfile.TemporaryDirectory(prefix="se-mut-") as tmp:
        folder = copy_inputs(Path(tmp))
        path = folder / name
        if how in BYTE_MUTATIONS:
            path.write_bytes(mutate_bytes(path.read_bytes(), how, at, pick))
        else:
            mutate_structure(path, how, pick)
        code, err = check(folder)
        assert code in (0, 2), err
        assert not any("Traceback" in line for line in err)
        if code == 2:
            # the mutated file, or (a cross-reference broken: a judgment naming a query that
            # is no longer golden) the file that refers to it
            assert err[-1].startswith("searcheval: ") and any(f in err[-1] for f in FILES), \
                (how, err[-1])
        assert not (folder / "out").exists()


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(sorted(OPTIONS)), st.sampled_from(VALUES))
def test_a_mutated_numeric_option_is_refused_naming_it_or_accepted(flag, value):
    with tempfile.TemporaryDirectory(prefix="se-opt-") as tmp:
        folder = copy_inputs(Path(tmp))
        code, err = check(folder, f"{flag}={value}")
        assert code in (0, 2), err
        assert not any("Traceback" in line for line in err)
        if code == 2:
            assert err[-1].startswith("searcheval: ") and flag in err[-1], err[-1]
        assert not (folder / "out").exists()
