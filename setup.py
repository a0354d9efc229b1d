"""The one compiled part of searcheval, beside pyproject.toml (which holds everything else).

`searcheval.metrics._dictscan` reads a `{query: {doc: score}}` run in one pass in C. It is
optional: where no C compiler is at hand the install goes on without it and the dict path reads
the run in Python, a few times slower (`searcheval.metrics.dicts`).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("searcheval.metrics._dictscan", ["searcheval/metrics/_dictscan.c"],
                             extra_compile_args=["-O2"], optional=True)])
