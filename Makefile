# Quickstart: `make run` checks this host; `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: run test lint bench docs eval clean

$(BIN)/gpuhealth: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

run: $(BIN)/gpuhealth
	$(BIN)/gpuhealth check; rc=$$?; [ $$rc -le 2 ] || exit $$rc

test: $(BIN)/gpuhealth
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest

bench: $(BIN)/gpuhealth
	$(BIN)/python bench/check_from_bundle.py
	$(BIN)/python bench/kernel_log_scan.py
	$(BIN)/python bench/monitor_sampling.py

eval: $(BIN)/gpuhealth
	$(BIN)/python tests/eval_cases.py

docs: $(BIN)/gpuhealth
	$(BIN)/python -m gpuhealth.checks.docgen docs/checks

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache
