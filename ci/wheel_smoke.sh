#!/usr/bin/env bash
# The wheel is the product: build it, install it (not editable) into a fresh venv, and
# run every command from a directory outside the tree, as a cluster node would.
#
#   bash ci/wheel_smoke.sh            # CI runs this; a person can too
#
# Work happens under ${LEDGER_WHEEL_SMOKE_DIR:-/tmp/ledger-wheel-smoke} (made anew each
# run). Each step prints `smoke: <what>` and the run stops at the first failure, naming
# it; the last line says how many steps passed.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
WORK=${LEDGER_WHEEL_SMOKE_DIR:-/tmp/ledger-wheel-smoke}
PY=${PY:-python3}
rm -rf "$WORK" && mkdir -p "$WORK/dist" "$WORK/run"
export PIP_DISABLE_PIP_VERSION_CHECK=1
steps=0
step() { echo "smoke: $*"; steps=$((steps + 1)); }
fail() { echo "smoke FAILED: $*" >&2; exit 1; }

step "build the wheel"
if [ -n "${LEDGER_WHEEL:-}" ]; then  # built once for every leg (.ci/run: ci/wheel.sh)
    cp "$LEDGER_WHEEL" "$WORK/dist/" || fail "LEDGER_WHEEL ($LEDGER_WHEEL) cannot be read"
else
    "$PY" -m pip wheel --quiet --no-deps "$REPO" -w "$WORK/dist" >/dev/null
fi
wheel=$(ls "$WORK"/dist/jax_compile_ledger-*.whl)
# The listing is read whole before grep sees it (`unzip -l | grep -q` under pipefail
# fails when grep leaves at the first match and unzip dies of SIGPIPE), and by Python's
# zipfile rather than unzip, so the check needs nothing the machine may lack.
files=$("$PY" -m zipfile -l "$wheel" | awk '{print $1}')
grep -qx 'ledger/migrations/versions/0001_legacy_schema.py' <<<"$files" || fail "the wheel holds no revisions"
grep -q '^migrations/' <<<"$files" && fail "the wheel holds a top-level migrations/"

step "install it into a fresh venv"
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet --no-compile "$wheel[postgres]" >/dev/null
L="$WORK/venv/bin/ledger"
# installed with --no-compile, so the modules the steps import compile once and are kept:
# with PYTHONDONTWRITEBYTECODE (this machine's, CI's) every step compiled jax from source again
unset PYTHONDONTWRITEBYTECODE

# From here on, nothing of the checkout is reachable: another directory, and a Python
# that would import the checkout's ledger/ only if the install were broken.
cd "$WORK/run"
unset LEDGER_DB
where=$("$WORK/venv/bin/python" -c 'import ledger, os; print(os.path.dirname(ledger.__file__))')
case "$where" in "$REPO"*) fail "ledger imports from the checkout ($where)";; esac

step "ledger --version matches the distribution's metadata"
want=$("$WORK/venv/bin/python" -c 'from importlib.metadata import version; print(version("jax-compile-ledger"))')
got=$("$L" --version)
[ "$got" = "ledger $want" ] || fail "--version says '$got', the metadata '$want'"

step "probe: cold then warm into a new ledger"
"$L" probe -o toy -t jit,grad --cold-warm --cache-dir "$WORK/run/cache" --tag smoke --db a.db >probe.out
[ "$("$L" sql "SELECT count(*) FROM compile_records" --db a.db --csv | tail -1)" = 4 ] || fail "probe rows"
states=$("$L" sql "SELECT cache_state FROM compile_records ORDER BY id" --db a.db --csv | tr '\n' ' ')
[ "$states" = "cache_state cold cold warm warm " ] || fail "probe cache states: $states"

step "predict: warm in the probe's cache dir, cold in a fresh one"
warmed=$(ls -d "$WORK/run/cache"/cold-warm-*)  # --cold-warm probes into a fresh dir under --cache-dir
"$L" predict -o toy -t jit,grad --cache-dir "$warmed" --db a.db >predict.out || fail "predict after the probe"
set +e; "$L" predict -o toy -t jit --cache-dir "$WORK/run/fresh" --db a.db >predict.out; rc=$?; set -e
[ "$rc" = 1 ] || fail "predict in a fresh dir exited $rc, not 1 (cold)"

step "record: a plain python program's compiles"
printf 'import jax, jax.numpy as jnp\nprint(float(jax.jit(lambda x: x * 2)(jnp.ones(3)).sum()))\n' >prog.py
out=$("$L" record --db r.db --tag smoke -- "$WORK/venv/bin/python" prog.py)
[ "$out" = "6.0" ] || fail "record changed the program's output: '$out'"
[ "$("$L" sql "SELECT count(*) > 0 FROM compile_records WHERE function IS NOT NULL" --db r.db --csv | tail -1)" = 1 ] \
    || fail "record kept no compile"

step "import the legacy corpus"
cp -r "$REPO/tests/fixtures/legacy-results" corpus
"$L" import corpus --db b.db >/dev/null

step "db current / downgrade / upgrade"
head=$("$WORK/venv/bin/python" -c 'from ledger.storage.revisions import HEAD; print(HEAD)')
grep -q "$head" <<<"$("$L" db current --db b.db)" || fail "db current is not $head"
"$L" db downgrade 0002 --db b.db >/dev/null
"$L" db upgrade --db b.db >/dev/null
grep -q "$head" <<<"$("$L" db current --db b.db)" || fail "db upgrade back to $head"

step "sql and export"
"$L" sql "SELECT cache_state, count(*) FROM compile_records GROUP BY 1 ORDER BY 1" --db b.db >/dev/null
"$L" export --db b.db -o export.json
"$L" export --db b.db --format csv -o export.csv

step "pins, check, explain"
"$L" pins update --db b.db >/dev/null
"$L" pins list --db b.db >/dev/null
set +e; "$L" check --db b.db >/dev/null; rc=$?; set -e
[ "$rc" -le 1 ] || fail "check exited $rc"
cold=$("$L" sql "SELECT min(id) FROM compile_records WHERE cache_state = 'cold'" --db a.db --csv | tail -1)
"$L" explain "$cold" --db a.db >/dev/null

step "report --html"
"$L" report --db b.db >/dev/null
"$L" report --html report.html --db b.db >/dev/null
grep -q '<html' report.html || fail "report.html"

step "runs, diff, cache, cache prune --dry-run"
"$L" runs --db a.db | grep -q "^1 runs; " || fail "runs: not one run in a.db"
set +e; "$L" diff --db a.db >diff.out 2>&1; rc=$?; set -e
[ "$rc" = 2 ] && grep -q "is the only run of objective toy" diff.out || fail "diff of a single run: rc $rc"
"$L" cache "$warmed" --db a.db --json | grep -q '"hits": 1' || fail "cache: no entry with the probe's warm hit"
before=$(cd "$warmed" && ls -l --time-style=+%s . | sha256sum)
"$L" cache prune "$warmed" --unused-days 0 --dry-run --db a.db | grep -q "^would remove 2 entries, " \
    || fail "cache prune --dry-run: not the probe's two entries"
[ "$(cd "$warmed" && ls -l --time-style=+%s . | sha256sum)" = "$before" ] || fail "cache prune --dry-run changed the dir"

step "merge"
"$L" merge a.db --db b.db >/dev/null

step "sweep plan and run"
cat >mini.toml <<'EOF'
objectives = ["toy"]
transforms = ["jit"]
repeats = 1
cold_warm = true
steady_calls = 1
cache = "shared"

[grid]
dataset_class = ["imaging"]
EOF
"$L" sweep plan mini.toml >/dev/null
"$L" sweep run mini.toml --db c.db >/dev/null
[ "$("$L" sql "SELECT count(*) FROM compile_records" --db c.db --csv | tail -1)" = 2 ] || fail "sweep rows"

step "alembic revisions from the installed package"
"$WORK/venv/bin/python" - <<'EOF'
from alembic.script import ScriptDirectory
from ledger.storage.migrate import alembic_config
script = ScriptDirectory.from_config(alembic_config("sqlite:///unused.db"))
assert "site-packages" in script.dir, script.dir
print("revisions:", " ".join(r.revision for r in reversed(list(script.walk_revisions()))))
EOF

echo "wheel smoke: all $steps steps passed ($(basename "$wheel"))"
