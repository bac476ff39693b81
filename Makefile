# From a fresh clone: `make demo` and `make test` each set up .venv from the lock, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP := $(BIN)/python -m pip --disable-pip-version-check --quiet
# Arize Phoenix (tests/test_phoenix.py's OTLP receiver) in a venv of its own, from its own lock.
PHOENIX_VENV := .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
# The lock's uv, never one found on the PATH: what installs must be as pinned as what it installs.
UV := $(BIN)/uv

# Offline always: litellm uses the cost map bundled with it instead of fetching one.
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: demo test check fuzz lint docs bench lock lock-phoenix lock-check lock-range extras-range clean chromium postgresql faketime package-check

# The lock is the whole install: whatever the index publishes later, a fresh clone gets exactly
# the locked files. uv compiled the lock as the complete closure of every extra and the dev
# and docs groups, so pip installs each file with --no-deps, verified by hash, and resolves
# nothing (with dependencies on, the pip a Python 3.11 venv ships takes a locked package's extra,
# litellm's httpx[http2], as a requirement of its own and picks the newest httpx the index
# serves). pip check then proves the lock is complete: a package whose dependency it missed
# fails here.
# The same for uv, which is in the lock (so hash-pinned), and which installs Phoenix's lock.
LOCKED_INSTALL = install --no-deps --require-hashes
$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) $(LOCKED_INSTALL) -r requirements.lock
	$(PIP) install --no-deps --no-build-isolation -e .
	$(PIP) check
	touch $(STAMP)

# uv (from the lock) installs Phoenix's ~150 pinned packages in seconds, the same way.
$(PHOENIX_STAMP): requirements-phoenix.lock | $(STAMP)
	$(UV) venv --quiet --clear --python $(PYTHON) $(PHOENIX_VENV)
	$(UV) pip $(LOCKED_INSTALL) --quiet -r requirements-phoenix.lock \
		--python $(PHOENIX_VENV)/bin/python
	$(UV) pip check --quiet --python $(PHOENIX_VENV)/bin/python
	touch $(PHOENIX_STAMP)

# The other end of package-check: the lock installs, as above, with the oldest pip the venv of
# each supported Python ships (3.10.0's and 3.11.0's), in a new venv each time, so a lock that
# only a current pip can install fails here and not on a user's machine.
# tests/lock_check.py says which interpreters it used and fails on any install error.
lock-check: $(STAMP)
	$(BIN)/python tests/lock_check.py requirements.lock --install-args "$(LOCKED_INSTALL)"

# Each SDK's tests on the lowest and the newest release its extra allows (the lock pins one in
# between): a venv per end, made with the lock's uv from requirements.lock and the end's own
# hash-pinned file (tests/extras-range/, from make lock-range) installed over it.
# tests/extras_range.py prints the package, version and test counts of each end, and fails on a
# failed test or install. CI runs every end (some 12 minutes); `make extras-range
# EXTRAS_RANGE=litellm` runs one extra's.
EXTRAS_RANGE ?= openai anthropic litellm smolagents openai-agents pydantic-ai
extras-range: $(STAMP)
	$(BIN)/python tests/extras_range.py $(EXTRAS_RANGE)

demo: $(STAMP)
	$(BIN)/python examples/cafe.py

# The HTML export is tested in a real headless Chromium, from Debian's packages.
chromium:
	@command -v chromium >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing Debian's chromium for the HTML export's browser test"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else \
			echo "make test needs Chromium: sudo apt-get install chromium" >&2; exit 1; \
		fi; }

# The PostgreSQL session store is tested on a throwaway server (tests/store_servers.py) run
# from Debian's server programs; the tests skip, saying so, where they are missing.
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing Debian's postgresql for the PostgreSQL session store's tests"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; \
		else \
			echo "make test needs PostgreSQL's server: sudo apt-get install postgresql" >&2; exit 1; \
		fi; }

# libfaketime gives a child process a clock of its own: the test of readers merging a writer
# whose host's clock is behind (tests/test_segments_clocks.py; it skips without it).
faketime:
	@ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			echo "installing Debian's faketime for the test of writers on hosts of other clocks"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq faketime >/dev/null; \
		else \
			echo "make test needs libfaketime: sudo apt-get install faketime" >&2; exit 1; \
		fi; }

# On every core, a test file to a worker (pytest-xdist, as make check): on two cores the suite
# takes about half the time of one process, which keeps CI inside its limit as tests grow. Each
# worker has its own servers, home and temporary folders, and no test waits on another's timing.
test: $(STAMP) $(PHOENIX_STAMP) chromium postgresql faketime
	$(BIN)/python -m pytest -n auto --dist loadfile

# The fast loop: every test that needs no browser, no Phoenix and no Docker and does not run
# whole programs in child processes (those are marked e2e and run by make test), that waits out
# no real back-off or time-out (marked slow), and not the fuzz suite (some 3 minutes; its
# regression cases stay in). On every core (pytest-xdist;
# PYTEST_XDIST_AUTO_NUM_WORKERS=N for fewer), a test file to a worker, so a module's fixtures
# (a recorded demo) are made once, as in make test. Compiled modules
# are cached even where PYTHONDONTWRITEBYTECODE is set: each worker would otherwise rewrite the
# tests' asserts and compile them again on every run (some 3 s of CPU a worker).
check: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -m "not e2e and not fuzz and not slow" -q -n auto \
		--dist loadfile

# The fuzz suite alone (tests/fuzz/, its regression cases included): 5,000+ hostile session
# files through every reader and command, the same cases every run; make test runs it too.
fuzz: $(STAMP)
	$(BIN)/python -m pytest tests/fuzz -q

# What a user installs: build the sdist and the wheel, install the wheel alone into a clean
# virtual environment (dependencies from the package index), run a decorated agent and the
# command there; then again with the [litellm] extra resolved fresh from the index, which takes
# the newest litellm the extra allows (the lock's, in .venv, is the other end the tests cover).
# Each step runs through tests/package_step.py: a traceback on its stderr fails it, even when
# the exit status is 0 (an error at exit shows only there).
PACKAGE_VENV := .venv-package
STEP := $(PYTHON) $(CURDIR)/tests/package_step.py
package-check: $(STAMP)
	rm -rf dist $(PACKAGE_VENV)
	$(STEP) -- $(UV) build --quiet --out-dir dist
	$(STEP) -- $(UV) venv --quiet --python $(PYTHON) $(PACKAGE_VENV)
	$(STEP) -- $(UV) pip install --quiet --python $(PACKAGE_VENV)/bin/python dist/*.whl
	cd /tmp && $(STEP) -- $(CURDIR)/$(PACKAGE_VENV)/bin/python $(CURDIR)/tests/package_smoke.py core
	$(STEP) -- $(PACKAGE_VENV)/bin/agenttrace --help > /dev/null
	$(STEP) --status 2 --stderr-has "pip install 'rich>=13,<16' (the [cli] extra)" -- \
		$(PACKAGE_VENV)/bin/agenttrace tree any
	$(STEP) -- $(UV) pip install --quiet --python $(PACKAGE_VENV)/bin/python \
		"$$(ls dist/*.whl)[litellm]"
	cd /tmp && $(STEP) -- $(CURDIR)/$(PACKAGE_VENV)/bin/python $(CURDIR)/tests/package_smoke.py litellm
	@echo "package-check: the wheel installs and runs, without extras and with [litellm]"

# import-linter checks the layers and their never-rules; tools/import_cycles.py every import
# cycle, imports inside functions and a package's __init__ included (which acyclic_siblings
# does not see).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/import_cycles.py agenttrace

# The documentation site (mkdocs.yml) into site/. --strict: a broken link, a missing page or a
# page outside the nav fails the build; the reference pages are generated from the code then.
# Never --quiet: it drops the warnings before --strict counts them, and a broken link passes.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# Per-call overhead against a bare span, the scale figures (each in a child process with a time
# cap), then the event stream and resume, and 1,000 random kills of a multi-agent run, each
# resumed to its end (benchmarks/bench_kills.py, the longest: see its row for the time). A full
# run saves its tables in benchmarks/results/ and writes them into docs/performance.md and the
# pages that quote them (benchmarks/figures.py); `make bench BENCH_ARGS=--quick`: a smoke run, which saves nothing.
BENCH_ARGS ?=
QUICK_BENCH = $(filter --quick,$(BENCH_ARGS))
save_as = $(if $(QUICK_BENCH),,--save benchmarks/results/$(1).json)
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_overhead.py $(BENCH_ARGS) $(call save_as,bench_overhead)
	$(BIN)/python benchmarks/bench_scale.py $(BENCH_ARGS) $(call save_as,bench_scale)
	$(BIN)/python benchmarks/bench_sessions.py $(if $(QUICK_BENCH),--events 10000) \
		$(call save_as,bench_sessions)
	$(BIN)/python benchmarks/bench_history.py $(BENCH_ARGS) $(call save_as,bench_history)
	$(BIN)/python benchmarks/bench_full_request.py $(BENCH_ARGS) $(call save_as,bench_full_request)
	$(BIN)/python benchmarks/bench_kills.py $(BENCH_ARGS) $(call save_as,bench_kills)
	$(BIN)/python benchmarks/bench_agents.py $(if $(QUICK_BENCH),--agents 3000) \
		$(call save_as,bench_agents)
	$(if $(QUICK_BENCH),,$(BIN)/python benchmarks/figures.py)

# Regenerate the lock with the lock's uv (a new package is added at its newest; the rest keep
# their pins: uv prefers the versions already in the output file). Hashes for every platform
# and Python >= 3.10.
lock: $(STAMP)
	$(UV) pip compile pyproject.toml --all-extras --group dev --group docs --generate-hashes \
		--universal --python-version 3.10 --constraints lock-constraints.txt -o requirements.lock

# Regenerate Phoenix's lock from phoenix-requirements.in.
lock-phoenix: $(STAMP)
	$(UV) pip compile phoenix-requirements.in --generate-hashes --python-version 3.11 \
		-o requirements-phoenix.lock

# Regenerate the end files of make extras-range: each extra's package at the lowest and the
# newest release its extra allows, everything else at the lock's versions, with hashes.
lock-range: $(STAMP)
	$(BIN)/python tests/extras_range.py --compile

clean:
	rm -rf $(VENV) $(PHOENIX_VENV) $(PACKAGE_VENV) dist site .pytest_cache .mypy_cache .ruff_cache
