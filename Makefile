# searcheval: `make run` evaluates the fixtures on the embedded database; `make test` runs the suite.
# Both set everything up first (idempotent: a second `make install` does nothing).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
OUTPUT ?= out

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install browser run test bench example-service ui clean

install: $(STAMP)

# torch first, pinned: 2.13.0 is the CPU build on this disk; unpinned, pip pulls a CUDA build of GBs.
# setup.py compiles searcheval/_native.c in place: a changed C file is built again
$(STAMP): pyproject.toml setup.py searcheval/_native.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test,example]'
	touch $(STAMP)

# One nightly evaluation of the example project (searcheval.yaml: the fixtures) on the embedded database (exit 0 passed, 1 tripped, 2 bad input).
run: install
	$(VENV)/bin/searcheval run --output $(OUTPUT)

# Headless Chromium for the Prefect UI test (tests/deploy): apt-get installs it when missing (as root).
CHROMIUM := /usr/bin/chromium
browser:
	@test -x $(CHROMIUM) || { \
	  if [ "$$(id -u)" != 0 ]; then \
	    echo "make browser: $(CHROMIUM) is missing; as root: apt-get install -y chromium" >&2; \
	    exit 1; \
	  fi; \
	  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

test: install browser
	$(VENV)/bin/pytest

bench: install
	$(VENV)/bin/searcheval benchmark metrics

# The example search service (examples/search_service/README.md) over the fixtures, in the
# foreground until Ctrl-C; EXAMPLE_PORT=0 picks a free port.
EXAMPLE_PORT ?= 8900
example-service: install
	$(PY) -m examples.search_service --fixtures fixtures --port $(EXAMPLE_PORT)

# A local Prefect server with its UI on UI_PORT (the UI is told that port: PREFECT_UI_API_URL);
# runs, `searcheval serve` and workers reach it with PREFECT_API_URL=http://127.0.0.1:$(UI_PORT)/api.
UI_PORT ?= 4200
ui: install
	$(VENV)/bin/searcheval ui --port $(UI_PORT)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis $(OUTPUT)
