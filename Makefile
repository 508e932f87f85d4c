# Every target works on a fresh machine: the venv is made and the project installed
# on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-fast probe migrate bench lint wheel clean

$(STAMP): pyproject.toml ci/constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,postgres]' -c ci/constraints.txt
	touch $(STAMP)

install: $(STAMP)

# Both cores (pytest-xdist; JOBS=1 for one process): the cases marked alone (a lock, a
# timing, processes counted) run last, with no other case beside them (tests/alone.py).
JOBS ?= auto
XDIST = $(if $(filter 1,$(JOBS)),-p no:xdist,-n $(JOBS))

# Where PYTHONDONTWRITEBYTECODE is set (this machine, CI's), nothing writes the
# checkout's bytecode, and every `ledger` a case starts, and every revision the chain
# loads, compiles its modules (ledger/, probes/: the package ledger.probes, migrations/)
# from source again: write them once before a run (a wheel's install writes its own).
BYTECODE = $(BIN)/python -m compileall -q ledger migrations probes

FAST = not jax and not slow and not postgresql and not slurm and not chromium
FAST_PASSED := $(VENV)/.fast-tier-passed
# what the tier's verdict depends on: the files git sees (tracked, and new ones not ignored)
SOURCES := $(wildcard $(shell git ls-files --cached --others --exclude-standard 2>/dev/null))

# The suite: the fast tier first (below), then every other case. The fast tier is run
# only if it has not passed on these files since they last changed ($(FAST_PASSED)): after
# `make test-fast`, as in CI, its cases are not run twice.
# LEGS=elsewhere (.ci/run's): the cases the jax legs run beside the suite on the floor and
# the newest jax (ci/jax_legs.cases) are left to them, not run a third time on this jax.
LEGS ?= here
LEGS_CASES := $(shell grep -v '^\#' ci/jax_legs.cases)
NOT_LEGS := $(if $(filter elsewhere,$(LEGS)), and not ($(LEGS_CASES)),)

test: $(FAST_PASSED)
	$(BYTECODE)
	$(BIN)/pytest -q $(XDIST) -m "not ($(FAST))$(NOT_LEGS)"

# The developer's loop: every case that needs neither a JAX compile nor a server nor a
# browser and takes under 0.3 s (the jax and slow markers), in under 30 s. Under it JAX has
# no platform (tests/conftest.py), so a case that compiles without its jax marker fails
# instead of slowing the loop, and a case over 0.3 s of CPU fails (tests/fast_budget.py).
# Property tests take their budgets from a hypothesis profile (tests/conftest.py):
# HYPOTHESIS_PROFILE=ci, the default and CI's, or quick (a tenth of the examples), e.g.
# `HYPOTHESIS_PROFILE=quick make test`.
test-fast: $(STAMP)
	@rm -f $(FAST_PASSED)
	@$(MAKE) --no-print-directory $(FAST_PASSED)

$(FAST_PASSED): $(STAMP) $(SOURCES)
	$(BYTECODE)
	LEDGER_TEST_TIER=fast $(BIN)/pytest -q $(XDIST) -m "$(FAST)"
	touch $@

# The main job: a cold/warm pair of a realistic built-in objective into ./ledger.db.
probe: $(STAMP)
	$(BIN)/ledger probe --objective mge --cold-warm --tag make-probe

migrate: $(STAMP)
	$(BIN)/alembic upgrade head

bench: $(STAMP)
	$(BIN)/python bench/bench_backfill.py
	$(BIN)/python bench/bench_import.py
	$(BIN)/python bench/bench_cli_startup.py
	$(BIN)/python bench/bench_probe_overhead.py
	$(BIN)/python bench/bench_check.py
	$(BIN)/python bench/bench_went_cold.py
	$(BIN)/python bench/bench_report.py
	$(BIN)/python bench/bench_concurrency.py
	$(BIN)/python bench/bench_sweep.py
	$(BIN)/python bench/bench_sql_stream.py
	$(BIN)/python bench/bench_record.py
	$(BIN)/python bench/bench_predict.py
	$(BIN)/python bench/bench_record_program.py

lint: $(STAMP)
	$(BIN)/ruff check .

# The product: dist/jax_compile_ledger-<version>-py3-none-any.whl, for `pip install` on a node.
wheel: $(STAMP)
	$(BIN)/pip wheel --quiet --no-deps . -w dist

clean:
	rm -rf $(VENV) build dist *.egg-info
