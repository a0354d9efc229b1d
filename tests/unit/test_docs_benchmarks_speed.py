"""docs/benchmarks-speed.md: its Python example runs and its assertion holds; the benchmark
commands it names exist with the options it names."""

import re
from pathlib import Path

from searcheval.cli import main

PAGE = Path(__file__).resolve().parents[2] / "docs" / "benchmarks-speed.md"


def test_the_python_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, str(PAGE), "exec"), {})


def test_the_benchmark_options_it_names_exist(capsys):
    text = PAGE.read_text(encoding="utf-8")
    for command, options in (("score", ["--id-spaces", "--large-queries", "--ranx",
                                        "--no-in-process", "--trec-eval-source"]),
                             ("backend", ["--queries", "--concurrency", "--delay-ms", "--rounds",
                                          "--compare"]),
                             ("load", ["--products", "--labels"]),
                             ("wands", ["--products", "--queries", "--labels", "--dataset",
                                        "--no-model", "--no-raw", "--warm-runs",
                                        "--configurations", "--directory"])):
        assert f"searcheval benchmark {command}" in text
        try:
            main(["benchmark", command, "--help"])
        except SystemExit:
            pass
        usage = capsys.readouterr().out
        for option in options:
            assert option in text and option in usage, (command, option)
