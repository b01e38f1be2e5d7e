# The two commands the README opens with. Both create .venv if missing and install from this repo.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install

$(BIN)/polis: pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $(BIN)/polis

install: $(BIN)/polis

demo: install
	$(BIN)/python examples/demo.py

test: install
	$(BIN)/python -m pytest -q
