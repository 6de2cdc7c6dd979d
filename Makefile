# trialbox — one command per job. Everything is idempotent: run any target again at will.
#
#   make bench   engine → venv → `trialbox bench` (the one command a developer needs)
#   make test    host packages → engine → venv → images → lint → pytest, no layer may skip
#                (what CI runs, via .ci/run)
#   make images  build trialbox/{llm-cpu,agent-ui,runner,fixer,lemonade}:dev (offline: local
#                bases + wheels + Debian's archive)
#   make up      start the LLM server for DEVICE (auto|cpu|rocm|npu|vulkan) and wait until
#                healthy; LLM_SERVER=lemonade|llm-cpu picks the server on the CPU
#   make down    stop the stack
#   make clean   remove containers/networks/volumes labelled trialbox.run (RUN_ID=... for one run)

SHELL := /bin/bash
HOST_PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEVICE ?= auto
# The LLM server on the CPU: llm-cpu or lemonade (empty: trialbox's default; accelerators: Lemonade).
LLM_SERVER ?=
RUN_ID ?=
PYTEST_ARGS ?=
# Long quiet commands (pip, model fetch) run as talking phases: their output as it comes and a
# status line after every 10 s without one, so `make bench` never looks hung (issue 22).
TALK := scripts/talk

.PHONY: install images up down clean bench test lint doctor docker corpus host-packages

host-packages:
	scripts/ensure-host-packages

docker: host-packages
	scripts/ensure-docker

# The venv is rebuilt only when pyproject.toml changes (stamp file).
$(VENV)/.installed: pyproject.toml
	@test -x $(BIN)/python || $(TALK) "creating $(VENV)" $(HOST_PYTHON) -m venv $(VENV)
	@$(TALK) "installing trialbox and its extras into $(VENV) (pip)" \
		$(BIN)/pip install --quiet -e '.[test,llm,corpus,cluster,inspect]'
	@touch $@

install: $(VENV)/.installed
	@if [ -x scripts/setup-gaia-venv ]; then scripts/setup-gaia-venv; fi
	@if [ -x scripts/fetch-models ]; then $(TALK) "fetching the models" scripts/fetch-models; fi

images: docker $(VENV)/.installed
	$(BIN)/trialbox images

up: docker $(VENV)/.installed
	$(BIN)/trialbox up --device $(DEVICE) $(if $(LLM_SERVER),--llm-server $(LLM_SERVER))

down: $(VENV)/.installed
	$(BIN)/trialbox down --device $(DEVICE)

clean: $(VENV)/.installed
	$(BIN)/trialbox clean $(if $(RUN_ID),--run-id $(RUN_ID))

doctor: $(VENV)/.installed
	$(BIN)/trialbox doctor

corpus: $(VENV)/.installed
	$(BIN)/trialbox corpus build

bench: docker install
	$(BIN)/trialbox bench --device $(DEVICE) $(if $(LLM_SERVER),--llm-server $(LLM_SERVER))

# testcontainers: ryuk cannot be pulled where no registry answers, and published ports are
# reached on loopback (DESIGN 2.6). Callers may override any of these.
test: export TESTCONTAINERS_RYUK_DISABLED ?= true
test: export TESTCONTAINERS_CONNECTION_MODE ?= docker_host
test: export TESTCONTAINERS_HOST_OVERRIDE ?= 127.0.0.1
# Every layer must run: a skip (no Docker, no Chromium, no GAIA venv) fails the suite.
test: export TRIALBOX_NO_SKIPS ?= 1
# The fixer image carries Claude Code (the native binary from the npm registry) so its test runs.
test: export TRIALBOX_FIXER_CLAUDE ?= 1
# The unit layer (no engine, no model; ~1,600 tests) runs on every core; the live layers share
# one engine and one small model per module, so they run one test at a time.
test: docker install images corpus lint
	$(BIN)/pytest -n auto --dist loadfile tests/unit $(PYTEST_ARGS)
	$(BIN)/pytest --ignore=tests/unit $(PYTEST_ARGS)

# ruff on everything; mypy --strict on runner/ (its settings: [tool.mypy] in pyproject.toml).
lint: $(VENV)/.installed
	$(BIN)/ruff check runner tests images/llm-cpu/trialbox_llm
	$(BIN)/mypy
