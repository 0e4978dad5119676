# teamctl — the two set-up commands are `make demo` and `make test`; each creates or reuses .venv.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
E2E_DIR := .cache/e2e
CLAUDE_VERSION := 2.1.332
CLAUDE_BIN := $(E2E_DIR)/claude/node_modules/.bin/claude
CODEX_VERSION := 0.171.0
CODEX_BIN := $(E2E_DIR)/codex/node_modules/.bin/codex
OPENCODE_VERSION := 1.18.33
OPENCODE_BIN := $(E2E_DIR)/opencode/node_modules/.bin/opencode
QWEN_VERSION := 0.24.4
QWEN_BIN := $(E2E_DIR)/qwen/node_modules/.bin/qwen
GEMINI_VERSION := 0.61.0
GEMINI_BIN := $(E2E_DIR)/gemini/node_modules/.bin/gemini

.PHONY: help demo test unit properties pyc e2e e2e-needs e2e-clis lint coverage bench bench-needs soak venv \
	install system-deps clean

help:  ## this list
	@grep -E '^[a-z0-9]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 12

venv: $(STAMP)

# Debian's python3 has no venv module until python3-venv: installed here as root, named if not.
$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -c 'import venv, ensurepip' 2>/dev/null || .ci/system-deps venv
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# teamctl on PATH: the venv's own entry point, linked into ~/.local/bin (no system pip needed).
BIN_DIR ?= $(HOME)/.local/bin
install: $(STAMP)  ## put `teamctl` on PATH: links .venv/bin/teamctl into ~/.local/bin (BIN_DIR=...)
	mkdir -p "$(BIN_DIR)"
	ln -sf "$(CURDIR)/$(VENV)/bin/teamctl" "$(BIN_DIR)/teamctl"
	@echo "teamctl -> $(BIN_DIR)/teamctl"
	@case ":$$PATH:" in *":$(BIN_DIR):"*) ;; \
		*) echo "add it to PATH: export PATH=\"$(BIN_DIR):\$$PATH\"";; esac

system-deps:  ## the Debian packages the tests, e2e tests and benchmarks use (installed as root)
	.ci/system-deps

demo: $(STAMP)  ## a 3-member team of simulated teammates, launched, messaged, answered (offline)
	$(PY) fixtures/demo/run_demo.py

# The suite runs on every core (pytest-xdist): each test has its own TEAMCTL_HOME and daemon.
# Two workers per core: the tests wait on daemons and processes more than they compute (a run
# with one per core kept the two cores half idle; two per core: 9 min 25 s -> 8 min 30 s here).
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 2 )))
# pytest rewrites each test module's asserts and caches the result beside its bytecode — unless
# PYTHONDONTWRITEBYTECODE is set (the project VM sets it): then every worker rewrote and compiled
# every test module again at each run (collecting the unit layer: 2.0 s -> 0.8 s with the cache)
PYTEST = PYTHONDONTWRITEBYTECODE= $(PY) -m pytest
# --dist worksteal: a worker that ran out of tests takes half of another's, so no worker is left
# with a long tail while the others wait (the unit layer: 1.7 s between the first and the last
# worker's end with xdist's default chunks).
test: $(STAMP) lint pyc  ## lint, then the unit, integration and fault tests, in parallel
	$(PYTEST) -m "not e2e" -q -n $(TEST_JOBS) --dist worksteal --durations=15

# Every test starts a daemon and several CLIs, each a new interpreter. Where the environment sets
# PYTHONDONTWRITEBYTECODE (the project VM does), each one compiled the project's ~110 modules
# from source again: 0.12 s of a daemon's 0.39 s start, ~250 daemons a run. The bytecode is
# written once here; a source edited later is still compiled (its timestamp no longer matches).
pyc: $(STAMP)
	$(PY) -m compileall -q orchestrator runtimes fixtures tests bench >/dev/null

# One worker per core and one more, to compute while another waits: the unit tests' waits are
# short now (issue 46's eighth pass: ~9 s of 41 serially), and each worker collects the whole
# layer again (~1.9 s of CPU), so a fourth worker on two cores cost more than it overlapped
# (two cores, same minutes: -n 2 28.6-32.6 s, -n 3 24.2-27.7 s, -n 4 26.9-32.5 s).
UNIT_JOBS ?= $(shell echo $$(( $$(nproc) + 1 )))
unit: $(STAMP) pyc  ## the in-process unit tests only (seconds)
	$(PYTEST) tests/unit -q -n $(UNIT_JOBS) --dist worksteal

# The property tests (hypothesis) with ten times the suite's examples (tests/conftest.py's
# profiles): make unit and make test give each property 40 examples, CI gives it 400 as well.
properties: $(STAMP) pyc  ## the property tests with the thorough budget (CI runs it)
	TEAMCTL_HYPOTHESIS=thorough $(PYTEST) tests/unit -q -m hypothesis -n $(UNIT_JOBS) --dist worksteal

# quoted, each $(CURDIR)-based: a checkout's path may hold a space (abspath would split it)
E2E_ENV = TEAMCTL_E2E_CLAUDE="$(CURDIR)/$(CLAUDE_BIN)" TEAMCTL_E2E_CODEX="$(CURDIR)/$(CODEX_BIN)" \
	TEAMCTL_E2E_OPENCODE="$(CURDIR)/$(OPENCODE_BIN)" TEAMCTL_E2E_QWEN="$(CURDIR)/$(QWEN_BIN)" \
	TEAMCTL_E2E_GEMINI="$(CURDIR)/$(GEMINI_BIN)"

# Three tests at a time: they mostly wait on the real CLIs (a serial run used 3 min of CPU in
# 13.7 min). The real Qwen Code's runs with the others again since a Qwen member is ready only
# once it listed teamctl's MCP tools (docs/runtimes.md).
E2E_JOBS ?= 3
E2E_CLIS := $(CLAUDE_BIN) $(CODEX_BIN) $(OPENCODE_BIN) $(QWEN_BIN) $(GEMINI_BIN)
e2e: e2e-needs $(STAMP) pyc $(E2E_CLIS)  ## the real CLIs (pinned npm), sshd, Chromium, Xvfb
	$(E2E_ENV) $(PYTEST) -m e2e tests/e2e -q -n $(E2E_JOBS) --dist load --durations=10

# What the e2e tests need beyond `make test`, said first and installed as root (else named).
e2e-needs:
	@echo "make e2e needs node and npm (the pinned CLIs), openssh-server, bubblewrap, Chromium," \
		"Xvfb and xclip: .ci/system-deps e2e installs them as root"
	.ci/system-deps e2e

e2e-clis: $(E2E_CLIS)  ## install the pinned CLIs the e2e tests run (npm, into .cache/e2e)

# npm picks an old release on Node 20 unless the version is pinned (protocols/claude.md §1).
$(CLAUDE_BIN):
	mkdir -p $(E2E_DIR)/claude
	cd $(E2E_DIR)/claude && (test -f package.json || npm init -y >/dev/null) && \
		npm install --no-audit --no-fund --loglevel=error @anthropic-ai/claude-code@$(CLAUDE_VERSION)
	$(CLAUDE_BIN) --version

$(CODEX_BIN):
	mkdir -p $(E2E_DIR)/codex
	cd $(E2E_DIR)/codex && (test -f package.json || npm init -y >/dev/null) && \
		npm install --no-audit --no-fund --loglevel=error @openai/codex@$(CODEX_VERSION)
	$(CODEX_BIN) --version

# The postinstall runs `opencode --version`, which writes into HOME/XDG: keep those private.
$(OPENCODE_BIN):
	mkdir -p $(E2E_DIR)/opencode
	cd $(E2E_DIR)/opencode && (test -f package.json || npm init -y >/dev/null) && \
		HOME=$$PWD/home XDG_CONFIG_HOME=$$PWD/xdg/config XDG_DATA_HOME=$$PWD/xdg/data \
		XDG_CACHE_HOME=$$PWD/xdg/cache XDG_STATE_HOME=$$PWD/xdg/state \
		npm install --no-audit --no-fund --loglevel=error opencode-ai@$(OPENCODE_VERSION)
	HOME="$(CURDIR)/$(E2E_DIR)/opencode/home" $(OPENCODE_BIN) --version

# Qwen Code, an ACP agent (docs/runtimes.md § ACP); --version writes nothing into HOME.
$(QWEN_BIN):
	mkdir -p $(E2E_DIR)/qwen
	cd $(E2E_DIR)/qwen && (test -f package.json || npm init -y >/dev/null) && \
		npm install --no-audit --no-fund --loglevel=error @qwen-code/qwen-code@$(QWEN_VERSION)
	$(QWEN_BIN) --version

# Gemini CLI, an ACP agent (docs/runtimes.md § ACP); its --version writes under HOME: a private one.
$(GEMINI_BIN):
	mkdir -p $(E2E_DIR)/gemini
	cd $(E2E_DIR)/gemini && (test -f package.json || npm init -y >/dev/null) && \
		npm install --no-audit --no-fund --loglevel=error @google/gemini-cli@$(GEMINI_VERSION)
	HOME="$(CURDIR)/$(E2E_DIR)/gemini/home" $(GEMINI_BIN) --version

lint: $(STAMP)  ## ruff, mypy --strict (the benchmarks too), and vulture (no dead names)
	$(PY) -m ruff check orchestrator runtimes fixtures tests bench
	$(PY) -m mypy
	$(PY) -m vulture orchestrator runtimes lint/vulture_whitelist.py --min-confidence 60

coverage: $(STAMP)  ## line coverage of the core from the unit tests alone
	$(PY) -m pytest tests/unit -q --cov=orchestrator.daemon.mailbox \
		--cov=orchestrator.daemon.members --cov=orchestrator.daemon.teams --cov-report=term-missing

# The pinned CLIs are e2e's, every one: bench_acp measures the Gemini CLI beside Qwen Code (it
# was left out of a fresh clone's `make bench`, which installed the other four only).
bench: bench-needs $(STAMP) pyc $(E2E_CLIS)  ## every benchmark, with its figures (installs what they use)
	$(E2E_ENV) $(PY) bench/run_all.py

bench-needs:
	.ci/system-deps bench

soak: $(STAMP)  ## 1000 messages to 5 members while members and the daemon are killed
	cd bench && ../$(PY) soak.py

clean:  ## remove .venv, .cache and the demo's home
	rm -rf $(VENV) .cache .demo-home
