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
# Needs pyenv's Python 3.12 (`pyenv root`, else /root/.pyenv) and the package index.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${LEDGER_FIELD_LEG_DIR:-/tmp/ledger-field-leg}
PYTHON_VERSION=3.12
TEST=field/test_autolens_record.py

die() { echo "field leg: $*" >&2; exit 1; }

DIR=$(realpath -m "$DIR")
case "$DIR/" in
    "$ROOT"/*) die "LEDGER_FIELD_LEG_DIR ($DIR) is inside the tree: give a dir outside $ROOT" ;;
    /|//) die "LEDGER_FIELD_LEG_DIR is /" ;;
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

# What is built: the working tree as git sees it (tracked, and new files not ignored),
# without the checkout's build/ or egg-info, which a build would pick up.
git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || die "$ROOT is not a git checkout: the leg builds what git sees of it"
start=$SECONDS
rm -rf "$DIR/src" "$DIR/venv" "$DIR/wheel" "$DIR/run" && mkdir -p "$DIR/src" "$DIR/run"
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
    | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
    | tar --null -T - -cf -) | tar -xf - -C "$DIR/src"
cp -r "$DIR/src/tests/field" "$DIR/run/field"

# autolens with everything it requires, as the field installs it (about 1 GB in 120
# distributions: sphinx, ipython, pandas, scikit-learn... that the fit never imports; a
# --no-deps install of only what it imports works, but on other scipy, SQLAlchemy and
# psutil than the field's). --no-compile: byte-compiling all of it was the install's
# largest cost on 2 cores; the few modules the fit imports compile at its first run.
install_log="$DIR/install.log"
if ! { "$PYTHON" -m venv "$DIR/venv" \
        && "$DIR/venv/bin/pip" wheel -q --no-deps "$DIR/src" -w "$DIR/wheel" \
        && "$DIR/venv/bin/pip" install -q --no-compile "$DIR"/wheel/jax_compile_ledger-*.whl autolens pytest; } \
        >"$install_log" 2>&1; then
    tail -n 30 "$install_log" >&2
    die "building the wheel or installing it with autolens on $("$PYTHON" -V 2>&1) failed (log: $install_log)"
fi
install_s=$((SECONDS - start))
versions=$("$DIR/venv/bin/python" - <<'EOF'
import platform
from importlib.metadata import version
print(f"python {platform.python_version()}, jax {version('jax')} (jaxlib {version('jaxlib')}),"
      f" autolens {version('autolens')}, ledger {version('jax-compile-ledger')}")
EOF
)
echo "field leg: $versions (venv, wheel and install: $install_s s)"

log="$DIR/test.log" report="$DIR/report.json" t0=$SECONDS rc=0
rm -f "$report"
(cd "$DIR/run" && LEDGER_FIELD_LEG_REPORT="$report" "$DIR/venv/bin/python" -m pytest -q -p no:cacheprovider \
    --junitxml="$DIR/field.xml" "$TEST") >"$log" 2>&1 || rc=$?
tests_s=$((SECONDS - t0))
summary=$("$DIR/venv/bin/python" - "$DIR/field.xml" "$report" 2>/dev/null <<'EOF' || echo "0 0 0 0"
import json
import os
import sys
import xml.etree.ElementTree as ET
suites = ET.parse(sys.argv[1]).getroot()
suites = [suites] if suites.tag == "testsuite" else list(suites)
print(*(sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")))
if os.path.exists(sys.argv[2]):  # the program's oracle and the ledger's rows, per run
    for run, r in json.load(open(sys.argv[2])).items():
        biggest = ", ".join(f"{name} {s} s" for name, s in r["biggest"])
        print(f"  {run}: oracle {r['compiles']} compiles of {r['functions']} functions, {r['written']} written,"
              f" {r['hits']} hits (biggest: {biggest}; program {r['seconds']} s); ledger {r['rows']} rows {r['states']}")
EOF
)
read -r tests failures errors skipped <<<"$(head -n1 <<<"$summary")"
passed=$((tests - failures - errors - skipped))
line="field leg: $passed passed"
[ "$failures$errors" = 00 ] || line+=", $failures failed, $errors errors"
[ "$skipped" = 0 ] || line+=", $skipped skipped"
echo "$line in $tests_s s (leg $((SECONDS - start)) s with venv and install)"
tail -n +2 <<<"$summary"
if [ "$rc" != 0 ] || [ "$tests" = 0 ] || [ "$skipped" != 0 ] || [ "$passed" != "$tests" ]; then
    tail -n 40 "$log" >&2
    echo "field leg failed (pytest exit $rc; log: $log)" >&2
    exit 1
fi
