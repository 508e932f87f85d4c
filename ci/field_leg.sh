#!/usr/bin/env bash
# The field leg: `ledger record` on a real PyAutoLens fit, on the field's stack: Python
# 3.12, the newest autolens on the index and the jax it resolves (autolens refuses the
# jax the main suite runs on). tests/field/test_autolens_record.py records the program
# tests/field/autolens_fit.py twice (cold, then warm) and holds the ledger's rows to the
# program's own jax.monitoring oracle.
#
# A throwaway venv under ${LEDGER_FIELD_LEG_DIR:-/tmp/ledger-field-leg} (outside the
# tree) gets the project's wheel, built from a copy of the working tree, with autolens
# and pytest. The test runs from a copy of tests/field there, so it runs the installed
# ledger, not the checkout. The leg fails if the test fails or skips, or none ran.
#
#   bash ci/field_leg.sh
#   PIP_NO_CACHE_DIR=1 bash ci/field_leg.sh    # as a fresh CI machine installs: no pip cache
#
# Needs pyenv's Python 3.12 (`pyenv root`, else /root/.pyenv) and the package index. The venv,
# the wheel and the verdict: ci/legs_lib.sh, shared with the pytest leg.
set -euo pipefail
LEG="field leg" DIR_VAR=LEDGER_FIELD_LEG_DIR DIR=${LEDGER_FIELD_LEG_DIR:-/tmp/ledger-field-leg}
TESTS=field TEST=field/test_autolens_record.py REPORT=LEDGER_FIELD_LEG_REPORT
# autolens with everything it requires, as the field installs it (about 1 GB in 120
# distributions: sphinx, ipython, pandas, scikit-learn... that the fit never imports; a
# --no-deps install of only what it imports works, but on other scipy, SQLAlchemy and
# psutil than the field's).
PACKAGES=(autolens pytest)
VERSIONS=$(cat <<'PY'
import platform
from importlib.metadata import version
print(f"python {platform.python_version()}, jax {version('jax')} (jaxlib {version('jaxlib')}),"
      f" autolens {version('autolens')}, ledger {version('jax-compile-ledger')}")
PY
)
SUMMARY=$(cat <<'PY'
import json, sys
for run, r in json.load(open(sys.argv[1])).items():  # the program's oracle and the ledger's rows, per run
    biggest = ", ".join(f"{name} {s} s" for name, s in r["biggest"])
    print(f"  {run}: oracle {r['compiles']} compiles of {r['functions']} functions, {r['written']} written,"
          f" {r['hits']} hits (biggest: {biggest}; program {r['seconds']} s); ledger {r['rows']} rows {r['states']}")
PY
)
source "$(dirname "$0")/legs_lib.sh"
venv_leg
