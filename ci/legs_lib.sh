# What the legs share (sourced by ci/jax_legs.sh, ci/field_leg.sh and ci/pytest_leg.sh,
# not run): die, a dir outside the tree, pyenv's Pythons; and for the field and pytest
# legs, venv_leg: a throwaway venv outside the tree, on pyenv's Python 3.12,
# with the project's wheel built from the working tree as git sees it (tracked, and new
# files not ignored; not the checkout's build/ or egg-info, which a build would pick up)
# and the packages the leg names; the leg's test folder copied beside it, so the test
# runs the installed ledger, not the checkout; pytest's verdict read from its junit
# file. A leg fails if a test fails or skips, or none ran.
#
# The caller sets LEG, its name in every line ("field leg"), before sourcing this; for
# venv_leg, these too:
#   DIR_VAR   the variable naming its dir (LEDGER_FIELD_LEG_DIR); DIR, that dir
#   TESTS     its folder under tests/ (field); TEST, the file run from there
#   PACKAGES  what pip installs beside the wheel (an array)
#   VERSIONS  Python that prints the versions line
#   REPORT    the variable its test writes its JSON report to; SUMMARY, Python that prints
#             the report's lines (argv[1])
# --no-compile: byte-compiling the packages was an install's largest cost on 2 cores; the
# few modules a test imports compile at its first run, and are kept: PYTHONDONTWRITEBYTECODE
# (set on this machine and CI's) is unset for the legs, else every process a leg starts
# compiled jax, numpy and the rest from source again (a predict case: 36 s -> 14 s).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
unset PYTHONDONTWRITEBYTECODE
PYTHON_VERSION=3.12

die() { echo "$LEG: $*" >&2; exit 1; }

outside_tree() {  # outside_tree VAR DIR: DIR made absolute; refused inside the tree or at /
    local dir
    dir=$(realpath -m "$2")
    case "$dir/" in
        "$ROOT"/*) die "$1 ($dir) is inside the tree: give a dir outside $ROOT" ;;
        /|//) die "$1 is /" ;;
    esac
    echo "$dir"
}

pyenv_python() {  # pyenv_python 3.12: pyenv's newest 3.12.x (pyenv root, else /root/.pyenv)
    local root="" py
    if command -v pyenv >/dev/null 2>&1; then root=$(pyenv root 2>/dev/null || true); fi
    if [ -z "$root" ] || [ ! -d "$root/versions" ]; then root=/root/.pyenv; fi
    [ -d "$root/versions" ] || die "no pyenv here (no pyenv on PATH, no /root/.pyenv): the leg needs pyenv's Python $1"
    py=$(ls -d "$root"/versions/"$1".*/bin/python 2>/dev/null | sort -V | tail -n1)
    [ -n "$py" ] && [ -x "$py" ] || die "no Python $1 in $root/versions (pyenv install $1)"
    echo "$py"
}

copy_tree() {  # copy_tree DEST: the working tree as git sees it (tracked, and new files not ignored)
    git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1 || die "$ROOT is not a git checkout: the leg builds what git sees of it"
    rm -rf "$1" && mkdir -p "$1"
    (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
        | xargs -0 sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh \
        | tar --null -T - -cf -) | tar -xf - -C "$1"
}

venv_leg() {
    DIR=$(outside_tree "$DIR_VAR" "$DIR")
    local python
    python=$(pyenv_python "$PYTHON_VERSION")

    local start=$SECONDS install_log="$DIR/install.log"
    rm -rf "$DIR/venv" "$DIR/wheel" "$DIR/run" && mkdir -p "$DIR/run"
    copy_tree "$DIR/src"
    cp -r "$DIR/src/tests/$TESTS" "$DIR/run/$TESTS"
    if ! { "$python" -m venv "$DIR/venv" \
            && "$DIR/venv/bin/pip" wheel -q --no-deps "$DIR/src" -w "$DIR/wheel" \
            && "$DIR/venv/bin/pip" install -q --no-compile "$DIR"/wheel/jax_compile_ledger-*.whl "${PACKAGES[@]}"; } \
            >"$install_log" 2>&1; then
        tail -n 30 "$install_log" >&2
        die "building the wheel or installing it with ${PACKAGES[*]} on $("$python" -V 2>&1) failed (log: $install_log)"
    fi
    echo "$LEG: $("$DIR/venv/bin/python" -c "$VERSIONS") (venv, wheel and install: $((SECONDS - start)) s)"

    local log="$DIR/test.log" report="$DIR/report.json" t0=$SECONDS rc=0
    rm -f "$report"
    (cd "$DIR/run" && env "$REPORT=$report" "$DIR/venv/bin/python" -m pytest -q -p no:cacheprovider \
        --junitxml="$DIR/leg.xml" "$TEST") >"$log" 2>&1 || rc=$?
    local failed=0
    verdict "$LEG" "$LEG" "$DIR/venv/bin/python" "$DIR/leg.xml" "$log" "$rc" $((SECONDS - t0)) "$start" || failed=1
    [ -f "$report" ] && "$DIR/venv/bin/python" -c "$SUMMARY" "$report" 2>/dev/null || true
    [ "$failed" = 0 ] || exit 1
}

verdict() {  # verdict NAME HEAD PYTHON JUNIT LOG RC TESTS_S START: a leg's line from pytest's junit file;
    # 1 (the log's tail said) if a test failed or skipped, or none ran
    local name=$1 head=$2 python=$3 junit=$4 log=$5 rc=$6 tests_s=$7 start=$8 tests failures errors skipped
    read -r tests failures errors skipped <<<"$("$python" -c "$_JUNIT" "$junit" 2>/dev/null || echo "0 0 0 0")"
    local passed=$((tests - failures - errors - skipped))
    local line="$head: $passed passed"
    [ "$failures$errors" = 00 ] || line+=", $failures failed, $errors errors"
    [ "$skipped" = 0 ] || line+=", $skipped skipped"
    echo "$line in $tests_s s (leg $((SECONDS - start)) s with venv and install)"
    if [ "$rc" != 0 ] || [ "$tests" = 0 ] || [ "$skipped" != 0 ] || [ "$passed" != "$tests" ]; then
        tail -n 40 "$log" >&2
        echo "$name failed (pytest exit $rc; log: $log)" >&2
        return 1
    fi
}

# tests, failures, errors, skipped of a junit file
_JUNIT='
import sys
import xml.etree.ElementTree as ET
suites = ET.parse(sys.argv[1]).getroot()
suites = [suites] if suites.tag == "testsuite" else list(suites)
print(*(sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")))
'
