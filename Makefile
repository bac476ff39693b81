# From a fresh clone: `make demo` and `make test` each set up .venv from the lock, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/python -m pip --disable-pip-version-check --quiet

# Offline always: litellm uses the cost map bundled with it instead of fetching one.
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test lint bench lock clean

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --require-hashes -r requirements.lock
	$(PIP) install --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/cafe.py

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_overhead.py
	$(BIN)/python benchmarks/bench_sessions.py

# Regenerate the lock (needs uv: pip install uv). Hashes for every platform and Python >= 3.10.
lock:
	uv pip compile pyproject.toml --extra dev --generate-hashes --universal \
		--python-version 3.10 --constraints lock-constraints.txt -o requirements.lock

clean:
	rm -rf $(VENV) .agenttrace-demo .pytest_cache .mypy_cache .ruff_cache
