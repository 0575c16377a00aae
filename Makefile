# threshold-bot: `make demo` and `make test` are the two set-up commands (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint layers typecheck pytest browser services bench clean schema

# pytest-xdist: one worker per core (auto), or PYTEST_WORKERS=N (0: in this process).  Each
# module runs on one worker (--dist loadfile): its servers start once; the slow modules are
# handed out first (tests/conftest.py), in that order (--no-loadscope-reorder).
# Bytecode is cached even where PYTHONDONTWRITEBYTECODE is set (the tree's __pycache__ is
# ignored by git): each worker and each subprocess would otherwise compile bot/ and rewrite
# the tests' asserts again (two thirds of the collection's time).
PYTEST_WORKERS ?= auto
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile \
	--no-loadscope-reorder

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	# the image's setuptools and wheel: tests/test_packaging.py builds the wheel with them, offline
	$(BIN)/pip install -q -c constraints.txt setuptools wheel
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m demo.app

lint: $(STAMP)
	$(BIN)/ruff check bot demo tests bench
	$(BIN)/ruff format --check bot demo tests bench

layers: $(STAMP)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP) browser services
	$(PYTEST)

# The inner loop: every test but those of the modules marked `servers` (processes, servers,
# browsers; see docs/development.md), in about a minute.
test-fast: $(STAMP)
	$(PYTEST) -m "not servers"

# What the browser tests (tests/test_browser_*.py) need besides the dev extra: Mermaid from
# the npm lock file, and Debian's chromium when apt-get can install it. Neither is fatal: the
# browser tests then skip with the reason (CI sets THRESHOLD_BOT_BROWSER_TESTS=required, and
# a skip fails there).
NODE_MODULES := tests/browser/node_modules
CHROMIUM := /usr/bin/chromium

$(NODE_MODULES)/.installed: tests/browser/package-lock.json
	@if command -v npm >/dev/null; then \
	  npm ci --prefix tests/browser --no-audit --no-fund --loglevel=error && touch $@ \
	  || { rm -rf $(NODE_MODULES); echo "npm ci failed: the browser tests will skip"; }; \
	else echo "no npm: the browser tests will skip (install Node.js and npm)"; fi

browser: $(NODE_MODULES)/.installed
	@if [ ! -x $(CHROMIUM) ]; then \
	  sudo=""; \
	  if [ "$$(id -u)" != 0 ]; then \
	    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo=no; fi; \
	  fi; \
	  if [ "$$sudo" != no ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's chromium for the browser tests"; \
	    { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq \
	      chromium fonts-liberation fonts-noto-color-emoji >/dev/null; } \
	    || echo "apt-get could not install chromium: the browser tests will skip"; \
	  else echo "no $(CHROMIUM) (apt-get install chromium as root): the browser tests will skip"; fi; \
	fi

# What the store, queue and scale tests need besides the dev extra: PostgreSQL's server
# programs (initdb, pg_ctl) and redis-server, from Debian when apt-get is usable.  The tests
# start throwaway servers themselves (tests/services.py); without the programs they skip
# with the reason (CI sets THRESHOLD_BOT_SERVICE_TESTS=required, and a skip fails there).
services:
	@missing=""; \
	if ! command -v initdb >/dev/null && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
	  missing="$$missing postgresql"; fi; \
	if ! command -v redis-server >/dev/null; then missing="$$missing redis-server"; fi; \
	if [ -n "$$missing" ]; then \
	  sudo=""; \
	  if [ "$$(id -u)" != 0 ]; then \
	    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo=no; fi; \
	  fi; \
	  if [ "$$sudo" != no ] && command -v apt-get >/dev/null; then \
	    echo "Installing Debian's$$missing for the service tests"; \
	    { DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing >/dev/null \
	      || { $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	           $$sudo apt-get install -y -qq $$missing >/dev/null; }; } \
	    || echo "apt-get could not install$$missing: those tests will skip"; \
	  else echo "missing$$missing (apt-get install as root): the service tests will skip"; fi; \
	fi

test: lint layers typecheck pytest

# The config's JSON Schema for editors (tests/test_config_schema.py fails when it is stale).
schema: $(STAMP)
	$(BIN)/threshold-bot check-config --schema > schema/threshold-bot.schema.json

bench: $(STAMP) services
	$(BIN)/pip install -q -e '.[dev,bench]'
	for f in bench/bench_*.py bench/regimes/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache $(NODE_MODULES)

# Re-pin constraints.txt (the image's exact dependency versions) from a clean venv; run it
# with the image's Python minor version (PY=python3.11) and commit the result.
.PHONY: constraints
constraints:
	rm -rf .venv-constraints && $(PY) -m venv .venv-constraints
	.venv-constraints/bin/pip install -q --upgrade pip setuptools wheel
	.venv-constraints/bin/pip install -q '.[all]'
	{ echo '# Exact versions of the App image (Dockerfile). Regenerate: make constraints'; \
	  .venv-constraints/bin/pip freeze --all --exclude-editable --exclude pip \
	    --exclude threshold-bot; } > constraints.txt
	rm -rf .venv-constraints

# Re-pin constraints-action.txt: the exact versions the GitHub Action (action.yml) installs, for
# the base package and the extras the Action may add (wandb, mlflow, actions), from a clean venv; run it
# with the Action's default Python (PY=python3.11) and commit the result.  Its hash keys the
# Action's pip cache, so a change of versions starts a new cache.
.PHONY: constraints-action
constraints-action:
	rm -rf .venv-constraints-action && $(PY) -m venv .venv-constraints-action
	.venv-constraints-action/bin/pip install -q --upgrade pip
	.venv-constraints-action/bin/pip install -q '.[wandb,mlflow,actions]'
	{ echo '# Exact versions the GitHub Action installs (action.yml). Regenerate: make constraints-action'; \
	  .venv-constraints-action/bin/pip freeze --exclude-editable --exclude threshold-bot; } \
	  > constraints-action.txt
	rm -rf .venv-constraints-action
