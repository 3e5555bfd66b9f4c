# Quickstart: `make run` checks this host; `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two install levels, each with its own stamp: `make run` needs only the runtime dependencies; `make test`
# (and bench, which reuses the test hosts) adds the test extras, upgrading a venv that `make run` made.
RUNTIME := $(VENV)/.installed-runtime
TESTENV := $(VENV)/.installed-test

.PHONY: run test lint bench docs demo eval tables mine clean

$(RUNTIME): pyproject.toml
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(TESTENV): $(RUNTIME)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# The development environment (the name older instructions use).
$(BIN)/gpuhealth: $(TESTENV)
	touch $@

run: $(RUNTIME)
	$(BIN)/gpuhealth check; rc=$$?; [ $$rc -le 2 ] || exit $$rc

test: $(TESTENV)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/python -m pytest

bench: $(TESTENV)
	$(BIN)/python bench/check_from_bundle.py
	$(BIN)/python bench/kernel_log_scan.py
	$(BIN)/python bench/monitor_sampling.py
	$(BIN)/python bench/paste_session.py

eval: $(TESTENV)
	$(BIN)/python tests/eval_cases.py

# The README's example: rebuild the bundle from its test host (and the generated trace) into demo/, check it.
demo: $(RUNTIME)
	$(BIN)/python examples/make_examples.py demo
	$(BIN)/gpuhealth check --from demo/h100x8-xid-ecc.tar.gz; rc=$$?; [ $$rc -le 2 ] || exit $$rc
	@echo "Live views on the generated 8-GPU trace: $(BIN)/gpuhealth watch --source replay:demo/h100x8.trace"

docs: $(RUNTIME)
	$(BIN)/python -m gpuhealth.checks.docgen docs/checks
	$(BIN)/python -m gpuhealth.knowledge.docgen docs/signatures.md

# The knowledge tables pre-parsed (src/gpuhealth/knowledge/_tables/): after editing a .csv table there.
tables: $(RUNTIME)
	$(BIN)/python -c "from gpuhealth.knowledge import write_tables; write_tables()"

# The NVIDIA driver's messages mined from its source (docs/mined-messages.md): CHECKOUT is a clone (or bare git
# directory) of NVIDIA/open-gpu-kernel-modules with its tags; the table is rewritten, coverage printed per tag.
CHECKOUT ?= tools/mine/checkouts/open-gpu-kernel-modules
mine:
	nice -n 10 $(PYTHON) tools/mine/mine_nvrm.py --checkout $(CHECKOUT)

clean:
	rm -rf $(VENV) build demo src/*.egg-info .pytest_cache
