"""The one compiled module of searcheval, beside pyproject.toml (which holds everything else).

`searcheval._native` (searcheval/_native.c) reads a `{query: {doc: score}}` run in one pass,
parses a TREC run file's lines in one pass and hashes a column of strings in one pass. It is
optional: where no C compiler is at hand the install goes on without it, and the dict path
(`searcheval.metrics.dicts`), the run files (pyarrow's CSV reader) and the string hashes
(`searcheval.io.trec.string_hashes`) run in Python, pyarrow and numpy, a few times slower.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("searcheval._native", ["searcheval/_native.c"],
                             extra_compile_args=["-O2"], optional=True)])
