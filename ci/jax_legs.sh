#!/usr/bin/env bash
# The jax legs: the probe's cache-state tests on the jax range pyproject.toml declares,
# its floor (the lowest jax and jaxlib on the lowest Python) and the newest jax (on
# Python 3.12). The main suite runs on one jax; these cover what reads JAX internals
# (probes/jax_internals.py): the probe's evidence, the cache-key components, predict, the
# recorder's truth, and the watch that reads them. Which tests those are, their marker
# says (`jax_legs`, tests/conftest.py), not a list here.
#
# Each leg is a throwaway venv under ${LEDGER_JAX_LEGS_DIR:-/tmp/ledger-jax-legs}
# (outside the tree) with the project installed from a copy of the working tree, not
# editable. The tests run from a copy of tests/ and pyproject.toml (pytest's settings)
# there, without the package's source beside them, so they import the installed package,
# not the checkout. A leg fails if a test fails or skips, or none ran.
#
#   bash ci/jax_legs.sh          # both legs
#   bash ci/jax_legs.sh floor    # one: floor or newest
#
# Needs pyenv's Pythons (`pyenv root`, else /root/.pyenv) and the package index.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${LEDGER_JAX_LEGS_DIR:-/tmp/ledger-jax-legs}
NEWEST_PYTHON=3.12

die() { echo "jax legs: $*" >&2; exit 1; }

DIR=$(realpath -m "$DIR")
case "$DIR/" in
    "$ROOT"/*) die "LEDGER_JAX_LEGS_DIR ($DIR) is inside the tree: give a dir outside $ROOT" ;;
    /|//) die "LEDGER_JAX_LEGS_DIR is /" ;;
esac

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

pyenv_root() {
    local root=""
    if command -v pyenv >/dev/null 2>&1; then root=$(pyenv root 2>/dev/null || true); fi
    if [ -z "$root" ] || [ ! -d "$root/versions" ]; then root=/root/.pyenv; fi
    [ -d "$root/versions" ] || die "no pyenv here (no pyenv on PATH, no /root/.pyenv): the legs need pyenv's Python $FLOOR_PYTHON and $NEWEST_PYTHON"
    echo "$root"
}
PYENV_ROOT_DIR=$(pyenv_root)

python_for() {  # python_for 3.10: pyenv's newest 3.10.x
    local py
    py=$(ls -d "$PYENV_ROOT_DIR"/versions/"$1".*/bin/python 2>/dev/null | sort -V | tail -n1)
    [ -n "$py" ] && [ -x "$py" ] || die "no Python $1 in $PYENV_ROOT_DIR/versions (pyenv install $1)"
    echo "$py"
}

# What is installed: the working tree as git sees it (tracked, and new files not
# ignored), without the checkout's build/ or egg-info, which a build would pick up.
copy_tree() {
    git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || die "$ROOT is not a git checkout: the legs install what git sees of it"
    rm -rf "$DIR/src" && mkdir -p "$DIR/src"
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
        | tar --null -T - -cf -) | tar -xf - -C "$DIR/src"
}

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
    if ! { "$python" -m venv "$venv" && "$venv/bin/pip" install -q --no-compile "$DIR/src[test]" "$@"; } >"$install_log" 2>&1; then
        tail -n 30 "$install_log" >&2
        die "leg $name: installing the project with $* on $("$python" -V 2>&1) failed (log: $install_log)"
    fi
    local versions
    versions=$("$venv/bin/python" - <<'EOF'
import platform
from importlib.metadata import version
print(f"python {platform.python_version()}, jax {version('jax')} (jaxlib {version('jaxlib')})")
EOF
)
    local t0=$SECONDS rc=0
    # a case's PostgreSQL variant is the main suite's (no server runs yet, nor psycopg here)
    (cd "$run" && LEDGER_REQUIRE_ALL=1 "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        --junitxml="$DIR/$name.xml" -m "jax_legs and not postgresql" tests) >"$log" 2>&1 || rc=$?
    local tests_s=$((SECONDS - t0)) counts
    counts=$("$venv/bin/python" - "$DIR/$name.xml" 2>/dev/null <<'EOF' || echo "0 0 0 0"
import sys
import xml.etree.ElementTree as ET
suites = ET.parse(sys.argv[1]).getroot()
suites = [suites] if suites.tag == "testsuite" else list(suites)
print(*(sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")))
EOF
)
    local tests failures errors skipped
    read -r tests failures errors skipped <<<"$counts"
    local passed=$((tests - failures - errors - skipped))
    local line="jax leg $name: $versions: $passed passed"
    [ "$failures$errors" = 00 ] || line+=", $failures failed, $errors errors"
    [ "$skipped" = 0 ] || line+=", $skipped skipped"
    echo "$line in $tests_s s (leg $((SECONDS - start)) s with venv and install)"
    if [ "$rc" != 0 ] || [ "$tests" = 0 ] || [ "$skipped" != 0 ] || [ "$passed" != "$tests" ]; then
        tail -n 40 "$log" >&2
        echo "jax leg $name failed (pytest exit $rc; log: $log)" >&2
        return 1
    fi
}

mkdir -p "$DIR"
which=${1:-all}
case "$which" in all|floor|newest) ;; *) die "unknown leg '$which': floor, newest or nothing for both" ;; esac
# Both Pythons are found before minutes of installing.
FLOOR_PY=$(python_for "$FLOOR_PYTHON")
NEWEST_PY=$(python_for "$NEWEST_PYTHON")
copy_tree
failed=0
if [ "$which" != newest ]; then
    leg floor "$FLOOR_PY" "jax==$FLOOR_JAX" "jaxlib==$FLOOR_JAXLIB" || failed=1
fi
if [ "$which" != floor ]; then
    # the newest release of both: what a plain install picks on this Python
    leg newest "$NEWEST_PY" jax jaxlib || failed=1
fi
exit $failed
