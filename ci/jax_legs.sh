#!/usr/bin/env bash
# The jax legs: the probe's cache-state tests on the jax range pyproject.toml declares,
# its floor (the lowest jax and jaxlib on the lowest Python) and the newest jax (on
# Python 3.12). The main suite runs on one jax; these cover what reads JAX internals
# (probes/jax_internals.py): the probe's evidence, the cache-key components, predict, the
# recorder's truth, and the watch that reads them. Which tests those are, their marker
# says (`jax_legs`, tests/conftest.py; the expression is ci/jax_legs.cases), not a list here.
#
# Each leg is a throwaway venv under ${LEDGER_JAX_LEGS_DIR:-/tmp/ledger-jax-legs}
# (outside the tree) with the project's wheel installed, built once from a copy of the
# working tree. The tests run from a copy of tests/ and pyproject.toml (pytest's settings)
# there, without the package's source beside them, so they import the installed package,
# not the checkout. A leg fails if a test fails or skips, or none ran.
#
#   bash ci/jax_legs.sh          # both legs
#   bash ci/jax_legs.sh floor    # one: floor or newest
#
# Needs pyenv's Pythons (`pyenv root`, else /root/.pyenv) and the package index.
set -euo pipefail
LEG="jax legs"
source "$(dirname "$0")/legs_lib.sh"  # ROOT, die, outside_tree, pyenv_python, leg_wheel
DIR=$(outside_tree LEDGER_JAX_LEGS_DIR "${LEDGER_JAX_LEGS_DIR:-/tmp/ledger-jax-legs}")
NEWEST_PYTHON=3.12
CASES=$(grep -v '^#' "$ROOT/ci/jax_legs.cases")  # which cases: one definition, the Makefile's too

# The floor, as pyproject.toml declares it.
declared() {  # declared PATTERN WHAT: the version a `>=` in pyproject.toml names
    local v
    v=$(sed -n "s/^ *$1 *>= *\([0-9][0-9.]*\).*/\1/p" "$ROOT/pyproject.toml" | head -n1)
    [ -n "$v" ] || die "pyproject.toml declares no $2 floor (looked for $1>=...)"
    echo "$v"
}
FLOOR_PYTHON=$(declared 'requires-python *= *"' "requires-python")
FLOOR_JAX=$(declared '"jax' "jax")
FLOOR_JAXLIB=$(declared '"jaxlib' "jaxlib")

leg() {  # leg NAME PYTHON JAX-REQUIREMENTS...
    local name=$1 python=$2; shift 2
    local venv="$DIR/$name" run="$DIR/$name-run" log="$DIR/$name.log" start=$SECONDS
    local install_log="$DIR/$name-install.log"
    rm -rf "$venv" "$run" && mkdir -p "$run"
    # every test module is collected (-m picks among them): pyproject.toml brings pytest's
    # settings (tests/field left out) and what tests/test_packaging.py reads as it loads
    cp -r "$DIR/src/tests" "$run/tests" && cp "$DIR/src/pyproject.toml" "$run/"
    # --no-compile: byte-compiling every installed module (jax, scipy, matplotlib...) is CPU a leg
    # does not need beside the suite; the tests compile the few modules they import
    if ! { "$python" -m venv "$venv" && "$venv/bin/pip" install -q --no-compile "$WHEEL[test]" "$@"; } >"$install_log" 2>&1; then
        tail -n 30 "$install_log" >&2
        die "leg $name: installing the project with $* on $("$python" -V 2>&1) failed (log: $install_log)"
    fi
    local versions
    versions=$("$venv/bin/python" - <<'EOF'
import platform
from importlib.metadata import version
print(f"python {platform.python_version()}, jax {version('jax')} (jaxlib {version('jaxlib')},"
      f" ml_dtypes {version('ml_dtypes')})")
EOF
)
    local t0=$SECONDS rc=0
    # a case's PostgreSQL variant is the main suite's (no server runs yet, nor psycopg here), as is
    # a case whose JAX path another leg case takes (legs_covered, tests/conftest.py)
    (cd "$run" && LEDGER_REQUIRE_ALL=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        --junitxml="$DIR/$name.xml" -m "$CASES" tests) >"$log" 2>&1 || rc=$?
    verdict "jax leg $name" "jax leg $name: $versions" "$venv/bin/python" "$DIR/$name.xml" "$log" "$rc" \
        $((SECONDS - t0)) "$start"
}

mkdir -p "$DIR"
which=${1:-all}
case "$which" in all|floor|newest) ;; *) die "unknown leg '$which': floor, newest or nothing for both" ;; esac
# Both Pythons are found before minutes of installing.
FLOOR_PY=$(pyenv_python "$FLOOR_PYTHON")
NEWEST_PY=$(pyenv_python "$NEWEST_PYTHON")
copy_tree "$DIR/src"  # what is installed: the working tree as git sees it
# One wheel for both legs, built before them: two installs building in one source tree at
# once collide in its build/ folder (CI, 2026-12-06: "No such file or directory:
# 'build/bdist.linux-x86_64/wheel/./ledger/migrations/versions/0018_cell_ids.py'").
WHEEL=$(leg_wheel "$DIR" "$NEWEST_PY")  # LEDGER_WHEEL where set
# The two legs at once, each in its own venv and dirs: beside the suite on two cores, one
# leg alone left a core idle for the minute after the suite ended (.ci/run's times).
pids=()
if [ "$which" != newest ]; then
    # the floor's ml_dtypes too (ci/constraints.txt: 0.7 s of CPU a jax import, in every case's processes)
    leg floor "$FLOOR_PY" "jax==$FLOOR_JAX" "jaxlib==$FLOOR_JAXLIB" -c "$DIR/src/ci/constraints.txt" &
    pids+=($!)
fi
if [ "$which" != floor ]; then
    # the newest release of both: what a plain install picks on this Python
    leg newest "$NEWEST_PY" jax jaxlib &
    pids+=($!)
fi
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
exit $failed
