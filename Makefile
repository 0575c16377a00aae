# threshold-bot: `make demo` and `make test` are the two set-up commands (see README.md).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint layers typecheck pytest bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,redis]'
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

pytest: $(STAMP)
	$(BIN)/pytest -q

test: lint layers typecheck pytest

bench: $(STAMP)
	$(BIN)/pip install -q -e '.[dev,redis,bench]'
	for f in bench/bench_*.py bench/regimes/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
