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
#   REUSE_VAR the variable that may name a venv to install into instead of a fresh one
#             (optional: LEDGER_PYTEST_LEG_VENV)
# LEDGER_WHEEL, where set, is the project's wheel every leg installs instead of building its
# own (.ci/run builds it once for all of them: ci/wheel.sh).
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

leg_wheel() {  # leg_wheel DIR PYTHON: the project's wheel: LEDGER_WHEEL where set, else built into DIR/wheel
    # from DIR/src (copy_tree), never in the checkout (two builds in one tree collide in its build/)
    if [ -n "${LEDGER_WHEEL:-}" ]; then
        case "$(basename "$LEDGER_WHEEL")" in jax_compile_ledger-*.whl) ;; *) die "LEDGER_WHEEL ($LEDGER_WHEEL) is not the project's wheel" ;; esac
        [ -f "$LEDGER_WHEEL" ] || die "LEDGER_WHEEL ($LEDGER_WHEEL) is no file"
        echo "$LEDGER_WHEEL"
        return
    fi
    rm -rf "$1/wheel"
    if ! "$2" -m pip wheel -q --no-deps "$1/src" -w "$1/wheel" >"$1/wheel.log" 2>&1; then
        tail -n 30 "$1/wheel.log" >&2
        die "building the project's wheel failed (log: $1/wheel.log)"
    fi
    ls "$1"/wheel/jax_compile_ledger-*.whl
}

venv_leg() {
    DIR=$(outside_tree "$DIR_VAR" "$DIR")
    local python reuse=""
    python=$(pyenv_python "$PYTHON_VERSION")
    [ -n "${REUSE_VAR:-}" ] && reuse=${!REUSE_VAR:-}

    local start=$SECONDS install_log="$DIR/install.log" venv="$DIR/venv" wheel how="venv, wheel and install"
    rm -rf "$DIR/venv" "$DIR/run" && mkdir -p "$DIR/run"
    copy_tree "$DIR/src"
    cp -r "$DIR/src/tests/$TESTS" "$DIR/run/$TESTS"
    wheel=$(leg_wheel "$DIR" "$python")
    if [ -n "$reuse" ]; then
        # a venv on this Python already (CI: the newest jax leg's, of this wheel): the leg's own
        # packages go in, and this wheel over whatever build of the same version is there
        venv=$reuse how="install into $reuse"
        [ -x "$venv/bin/python" ] || die "$REUSE_VAR ($venv) is no venv"
        "$venv/bin/python" -c 'import sys; assert sys.version_info[:2] == tuple(map(int, sys.argv[1].split(".")))' \
            "$PYTHON_VERSION" 2>/dev/null || die "$REUSE_VAR ($venv) is not Python $PYTHON_VERSION"
        if ! "$venv/bin/pip" install -q --no-compile --no-deps --force-reinstall "$wheel" >"$install_log" 2>&1; then
            tail -n 30 "$install_log" >&2
            die "installing the wheel into $venv failed (log: $install_log)"
        fi
    elif ! "$python" -m venv "$venv" >"$install_log" 2>&1; then
        tail -n 30 "$install_log" >&2
        die "making a venv on $("$python" -V 2>&1) failed (log: $install_log)"
    fi
    if ! "$venv/bin/pip" install -q --no-compile "$wheel" "${PACKAGES[@]}" >>"$install_log" 2>&1; then
        tail -n 30 "$install_log" >&2
        die "installing the wheel with ${PACKAGES[*]} on $("$python" -V 2>&1) failed (log: $install_log)"
    fi
    echo "$LEG: $("$venv/bin/python" -c "$VERSIONS") ($how: $((SECONDS - start)) s)"

    local log="$DIR/test.log" report="$DIR/report.json" t0=$SECONDS rc=0
    rm -f "$report"
    (cd "$DIR/run" && env "$REPORT=$report" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
        --junitxml="$DIR/leg.xml" "$TEST") >"$log" 2>&1 || rc=$?
    local failed=0
    verdict "$LEG" "$LEG" "$venv/bin/python" "$DIR/leg.xml" "$log" "$rc" $((SECONDS - t0)) "$start" || failed=1
    [ -f "$report" ] && "$venv/bin/python" -c "$SUMMARY" "$report" 2>/dev/null || true
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
