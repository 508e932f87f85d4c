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
#
# Needs pyenv's Python 3.12 (`pyenv root`, else /root/.pyenv) and the package index.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${LEDGER_PYTEST_LEG_DIR:-/tmp/ledger-pytest-leg}
PYTHON_VERSION=3.12
TEST=pytest_leg/test_optax_ledger.py

die() { echo "pytest leg: $*" >&2; exit 1; }

DIR=$(realpath -m "$DIR")
case "$DIR/" in
    "$ROOT"/*) die "LEDGER_PYTEST_LEG_DIR ($DIR) is inside the tree: give a dir outside $ROOT" ;;
    /|//) die "LEDGER_PYTEST_LEG_DIR is /" ;;
esac

pyenv_root() {
    local root=""
    if command -v pyenv >/dev/null 2>&1; then root=$(pyenv root 2>/dev/null || true); fi
    if [ -z "$root" ] || [ ! -d "$root/versions" ]; then root=/root/.pyenv; fi
    [ -d "$root/versions" ] || die "no pyenv here (no pyenv on PATH, no /root/.pyenv): the leg needs pyenv's Python $PYTHON_VERSION"
    echo "$root"
}
PYTHON=$(ls -d "$(pyenv_root)"/versions/"$PYTHON_VERSION".*/bin/python 2>/dev/null | sort -V | tail -n1)
[ -n "$PYTHON" ] && [ -x "$PYTHON" ] || die "no Python $PYTHON_VERSION in $(pyenv_root)/versions (pyenv install $PYTHON_VERSION)"

# What is built: the working tree as git sees it (tracked, and new files not ignored).
git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || die "$ROOT is not a git checkout: the leg builds what git sees of it"
start=$SECONDS
rm -rf "$DIR/src" "$DIR/venv" "$DIR/wheel" "$DIR/run" && mkdir -p "$DIR/src" "$DIR/run"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
    | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
    | tar --null -T - -cf -) | tar -xf - -C "$DIR/src"
cp -r "$DIR/src/tests/pytest_leg" "$DIR/run/pytest_leg"

install_log="$DIR/install.log"
if ! { "$PYTHON" -m venv "$DIR/venv" \
        && "$DIR/venv/bin/pip" wheel -q --no-deps "$DIR/src" -w "$DIR/wheel" \
        && "$DIR/venv/bin/pip" install -q --no-compile "$DIR"/wheel/jax_compile_ledger-*.whl optax pytest pytest-xdist; } \
        >"$install_log" 2>&1; then
    tail -n 30 "$install_log" >&2
    die "building the wheel or installing it with optax on $("$PYTHON" -V 2>&1) failed (log: $install_log)"
fi
install_s=$((SECONDS - start))
versions=$("$DIR/venv/bin/python" - <<'PY'
import platform
from importlib.metadata import version
print(f"python {platform.python_version()}, jax {version('jax')} (jaxlib {version('jaxlib')}),"
      f" optax {version('optax')}, pytest {version('pytest')}, ledger {version('jax-compile-ledger')}")
PY
)
echo "pytest leg: $versions (venv, wheel and install: $install_s s)"

log="$DIR/test.log" report="$DIR/report.json" t0=$SECONDS rc=0
rm -f "$report"
(cd "$DIR/run" && LEDGER_PYTEST_LEG_REPORT="$report" "$DIR/venv/bin/python" -m pytest -q -p no:cacheprovider \
    --junitxml="$DIR/leg.xml" "$TEST") >"$log" 2>&1 || rc=$?
tests_s=$((SECONDS - t0))
summary=$("$DIR/venv/bin/python" - "$DIR/leg.xml" "$report" 2>/dev/null <<'PY' || echo "0 0 0 0"
import json
import os
import sys
import xml.etree.ElementTree as ET
suites = ET.parse(sys.argv[1]).getroot()
suites = [suites] if suites.tag == "testsuite" else list(suites)
print(*(sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")))
if os.path.exists(sys.argv[2]):  # each session: what its listener heard, and the ledger's rows
    for name, r in json.load(open(sys.argv[2])).items():
        print(f"  session {name}: {r['tests']} tests compiled in their call; listener {r['compiles']} compiles,"
              f" {r['hits']} hits; ledger the same rows, {r['warm']} warm ({r['seconds']} s)")
PY
)
read -r tests failures errors skipped <<<"$(head -n1 <<<"$summary")"
passed=$((tests - failures - errors - skipped))
line="pytest leg: $passed passed"
[ "$failures$errors" = 00 ] || line+=", $failures failed, $errors errors"
[ "$skipped" = 0 ] || line+=", $skipped skipped"
echo "$line in $tests_s s (leg $((SECONDS - start)) s with venv and install)"
tail -n +2 <<<"$summary"
if [ "$rc" != 0 ] || [ "$tests" = 0 ] || [ "$skipped" != 0 ] || [ "$passed" != "$tests" ]; then
    tail -n 40 "$log" >&2
    echo "pytest leg failed (pytest exit $rc; log: $log)" >&2
    exit 1
fi
