# markerstore: make demo | make test | make bench | make lint
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# `make test` runs on two pytest-xdist workers (one Spark session each); TEST_WORKERS=0
# runs in one process.
TEST_WORKERS ?= 2

.PHONY: help setup java browser test test-fast test-cluster demo bench soak soak-test lint clean

help:
	@echo "make demo   - set up .venv and run the end-to-end demo"
	@echo "make test   - set up .venv and run the whole test suite"
	@echo "make test-fast - tests without Spark and without slow tests"
	@echo "make test-cluster - a Spark cluster of hosts (network namespaces; root), faults between them"
	@echo "make bench  - run the benchmarks and write docs/BENCHMARKS.md"
	@echo "make soak   - the kill campaign (long): writes docs/RELIABILITY.md"
	@echo "make soak-test - the campaign tests: fault campaigns, Spark driver and executor kills"
	@echo "make lint   - ruff and mypy"

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,dev,delta,iceberg]'
	touch $(STAMP)

setup: $(STAMP) java browser

java:
	@$(PY) -m harness.javacheck

# Headless Chromium (Debian's package) for the report's browser test; without it (no root,
# no apt) that test is skipped with a message.
APT_CHROMIUM := DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    { $(APT_CHROMIUM) >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && \
	      $(APT_CHROMIUM) >/dev/null 2>&1; }; } && echo "installed chromium (browser tests)" \
	      || echo "chromium could not be installed: the browser tests will be skipped"; \
	  else echo "no chromium (apt-get install -y chromium): the browser tests will be skipped"; \
	  fi; }

test: setup
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadgroup -m "not campaign" $(PYTEST_ARGS)

test-fast: setup
	$(PY) -m pytest -m "not spark and not slow" $(PYTEST_ARGS)

# tests/cluster: a standalone Spark cluster, S3 and Spark Connect on hosts of their own
# (network namespaces), and faults between them; `make test` runs a slice of it.
test-cluster: setup
	MARKERSTORE_CLUSTER=full $(PY) -m pytest tests/cluster $(PYTEST_ARGS)

demo: setup
	$(VENV)/bin/markerstore demo

bench: setup
	$(PY) -m benchmarks.run

SOAK_ARGS ?=

soak: setup
	$(PY) -m harness.soak $(SOAK_ARGS)

# The tests marked `campaign` (long fault campaigns, Spark driver and executor kills), the
# Spark driver kills of tests/soak included; CI runs them after `make test`.
soak-test: setup
	MARKERSTORE_SOAK_SPARK=1 $(PY) -m pytest -m campaign $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check markerstore errortable harness tests benchmarks
	$(VENV)/bin/mypy markerstore errortable harness

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache
