# Quickstart: `make run` checks this host; `make test` runs every test.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Two install levels, each with its own stamp: `make run` needs only the runtime dependencies; `make test`
# (and bench, which reuses the test hosts) adds the test extras, upgrading a venv that `make run` made.
RUNTIME := $(VENV)/.installed-runtime
TESTENV := $(VENV)/.installed-test

# `make install`: gpuhealth in a venv of its own (not this clone's .venv), linked onto PATH. As root:
# /opt/gpuhealth/venv and /usr/local/bin/gpuhealth (the path every file in deploy/ runs); as a user:
# ~/.local/share/gpuhealth/venv and ~/.local/bin/gpuhealth. INSTALL_VENV and INSTALL_BIN override both
# (a test installs into a temporary directory); INSTALL_FROM is what pip installs (this clone, or a wheel);
# INSTALL_PIP_FLAGS goes to pip (e.g. --no-index --find-links DIR on a machine without PyPI).
ifeq ($(shell id -u),0)
INSTALL_VENV ?= /opt/gpuhealth/venv
INSTALL_BIN ?= /usr/local/bin
else
INSTALL_VENV ?= $(HOME)/.local/share/gpuhealth/venv
INSTALL_BIN ?= $(HOME)/.local/bin
endif
INSTALL_FROM ?= .
INSTALL_PIP_FLAGS ?=

.PHONY: run test lint bench docs demo eval tables mine mine-tools mine-api mine-legacy clean install uninstall dist

$(RUNTIME): pyproject.toml
	@echo "Setting up $(VENV): a Python venv in this clone with gpuhealth (editable) and its runtime dependencies"
	@echo "(click, rich, nvidia-ml-py, starlette, uvicorn, prometheus_client); about half a minute, once."
	[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $@

$(TESTENV): $(RUNTIME)
	@echo "Adding the test extras to $(VENV) (pytest, hypothesis, ruff, httpx2, playwright, build)"
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# The development environment (the name older instructions use).
$(BIN)/gpuhealth: $(TESTENV)
	touch $@

run: $(RUNTIME)
	$(BIN)/gpuhealth check; rc=$$?; echo; \
	echo "gpuhealth is in this clone's venv: run it as $(CURDIR)/$(BIN)/gpuhealth, or \`make install\` puts it on PATH."; \
	[ $$rc -le 2 ] || exit $$rc

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
	$(BIN)/python -m gpuhealth.monitor.correlate docs/correlations.md

# The knowledge tables pre-parsed (src/gpuhealth/knowledge/_tables/): after editing a .csv table there.
tables: $(RUNTIME)
	$(BIN)/python -c "from gpuhealth.knowledge import write_tables; write_tables()"

# The NVIDIA driver's messages mined from its source (docs/mined-messages.md): CHECKOUT is a clone (or bare git
# directory) of NVIDIA/open-gpu-kernel-modules with its tags; the table is rewritten, coverage printed per tag.
CHECKOUT ?= tools/mine/checkouts/open-gpu-kernel-modules
mine:
	nice -n 10 $(PYTHON) tools/mine/mine_nvrm.py --checkout $(CHECKOUT)

# The container toolkit's and nvidia-installer's messages (docs/mined-messages.md): CHECKOUTS holds a clone (or bare git
# directory) of each, named nvidia-container-toolkit and nvidia-installer, with their tags.
CHECKOUTS ?= tools/mine/checkouts
mine-tools:
	nice -n 10 $(PYTHON) tools/mine/mine_tools.py --checkouts $(CHECKOUTS)

MINED = tools/mine/checkouts
mine-api:
	nice -n 10 $(PYTHON) tools/mine/mine_api.py --cuda-include $(MINED)/cuda-include --nvml $(MINED)/go-nvml \
		--nccl $(MINED)/nccl --dcgm $(MINED)/DCGM --pytorch $(MINED)/pytorch

# Each GPU's last driver branch (knowledge/legacy_gpus.csv, GH209): SUPPORTED_GPUS is the supported-gpus.json of a driver
# package (sh NVIDIA-Linux-x86_64-<version>.run -x); LEGACY_SOURCE its source keys (knowledge/sources.py).
SUPPORTED_GPUS ?= tools/mine/checkouts/supported-gpus.json
LEGACY_SOURCE ?= SGJ525 (legacybranch); LEGACYGPU
mine-legacy:
	nice -n 10 $(PYTHON) tools/mine/mine_legacy_gpus.py --json $(SUPPORTED_GPUS) --source "$(LEGACY_SOURCE)"

install:
	@echo "Installing gpuhealth into $(INSTALL_VENV) (its own venv), linked from $(INSTALL_BIN)/gpuhealth"
	[ -x $(INSTALL_VENV)/bin/python ] || $(PYTHON) -m venv $(INSTALL_VENV)
	$(INSTALL_VENV)/bin/python -m pip install --quiet $(INSTALL_PIP_FLAGS) $(INSTALL_FROM)
	mkdir -p $(INSTALL_BIN)
	ln -sfn $(INSTALL_VENV)/bin/gpuhealth $(INSTALL_BIN)/gpuhealth
	$(INSTALL_BIN)/gpuhealth --version
	@case ":$$PATH:" in *":$(INSTALL_BIN):"*) ;; \
	  *) echo "$(INSTALL_BIN) is not on PATH: add it (e.g. in ~/.profile: export PATH=\"$(INSTALL_BIN):\$$PATH\")";; esac

uninstall:
	rm -f $(INSTALL_BIN)/gpuhealth
	rm -rf $(INSTALL_VENV)

# The wheel and the sdist (each with the LICENSE) in $(DIST), built by PyPA's `build` in an isolated env.
DIST ?= dist
dist: $(RUNTIME)
	$(BIN)/python -c "import build" 2>/dev/null || $(BIN)/pip install --quiet 'build>=1'
	rm -rf $(DIST)
	$(BIN)/python -m build --outdir $(DIST) .

clean:
	rm -rf $(VENV) build dist demo src/*.egg-info .pytest_cache
