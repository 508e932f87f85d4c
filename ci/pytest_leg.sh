#!/usr/bin/env bash
# The pytest leg: `pytest --ledger` on a third-party JAX library's own tests, from its
# installed wheel. tests/pytest_leg/test_optax_ledger.py runs a slice of optax's
# `*_test.py` files (about a minute on a 2-core CPU) twice on one persistent cache, and
# holds the ledger's rows to the session's own jax.monitoring listener, test by test:
# every compile it heard is a row with its test's node id and phase, and every cache hit
# a warm row.
#
# A throwaway venv under ${LEDGER_PYTEST_LEG_DIR:-/tmp/ledger-pytest-leg} (outside the
# tree) gets the project's wheel, built from a copy of the working tree, with optax,
# pytest and pytest-xdist. The test runs from a copy of tests/pytest_leg there, so it runs
# the installed ledger and the installed optax, not the checkout. The leg fails if the
# test fails or skips, or none ran.
#
#   bash ci/pytest_leg.sh
#   PIP_NO_CACHE_DIR=1 bash ci/pytest_leg.sh    # as a fresh CI machine installs: no pip cache
#   LEDGER_PYTEST_LEG_VENV=/tmp/ledger-jax-legs/newest bash ci/pytest_leg.sh
#       # into a venv of this tree's wheel on Python 3.12 already (.ci/run: the newest jax
#       # leg's, the same Python and jax), not a fresh one: optax and pytest-xdist go in
#
# Needs pyenv's Python 3.12 (`pyenv root`, else /root/.pyenv) and the package index. The venv,
# the wheel and the verdict: ci/legs_lib.sh, shared with the field leg.
set -euo pipefail
LEG="pytest leg" DIR_VAR=LEDGER_PYTEST_LEG_DIR DIR=${LEDGER_PYTEST_LEG_DIR:-/tmp/ledger-pytest-leg}
TESTS=pytest_leg TEST=pytest_leg/test_optax_ledger.py REPORT=LEDGER_PYTEST_LEG_REPORT
REUSE_VAR=LEDGER_PYTEST_LEG_VENV
PACKAGES=(optax pytest pytest-xdist)
VERSIONS=$(cat <<'PY'
import platform
from importlib.metadata import version
print(f"python {platform.python_version()}, jax {version('jax')} (jaxlib {version('jaxlib')}),"
      f" optax {version('optax')}, pytest {version('pytest')}, ledger {version('jax-compile-ledger')}")
PY
)
SUMMARY=$(cat <<'PY'
import json, sys
for name, r in json.load(open(sys.argv[1])).items():  # each session: what its listener heard, and the ledger's rows
    print(f"  session {name}: {r['tests']} tests compiled in their call; listener {r['compiles']} compiles,"
          f" {r['hits']} hits; ledger the same rows, {r['warm']} warm ({r['seconds']} s)")
PY
)
source "$(dirname "$0")/legs_lib.sh"
venv_leg
