#!/usr/bin/env bash
# The ledger on an accelerator, repeatable: `make probe`'s pair, `ledger record` of a small
# jitted program (cold, then warm) and `ledger predict`, on a TPU machine that has JAX but no
# network, each checked against JAX's own events (ci/tpu_check.py says what is checked).
#
#   bash ci/tpu.sh wheels          # here, with the package index: .whl-tpu/ gets this tree's
#                                  # wheel and what the TPU machine lacks, for its Python 3.11
#   bash ci/tpu.sh run [OUTDIR]    # there, from the checkout's root (.whl-tpu/ beside it):
#                                  # installs under /tmp/site, runs the checks, exit 1 on a failure
#
# Tried here on the CPU, as the machine is (its own JAX on PYTHONPATH, nothing else):
#   PYTHON=/usr/bin/python3 PYTHONPATH=<a dir holding jax, jaxlib, numpy, scipy, ml_dtypes,
#   opt_einsum> LEDGER_TPU_SITE=/tmp/site-cpu JAX_PLATFORMS=cpu LEDGER_TPU_BACKEND=cpu bash ci/tpu.sh run /tmp/out
#
# The machine keeps its own JAX (0.10.2, with libtpu, numpy and scipy): the wheels go under
# /tmp/site, at the end of PYTHONPATH, installed without their dependencies. Not carried:
# matplotlib, which only `ledger report --html` needs. With the device tool of this
# workplace (one call; .whl-tpu is git-ignored, so it is carried by name):
#
#   run(command="bash ci/tpu.sh run $OUT", carry=[".whl-tpu"], timeout_s=600)
#
# The tool sends the checkout its session started in. From another worktree (a helper's),
# put this script, ci/tpu_check.py and the wheels in that checkout's ignored .whl-tpu/
# (.whl-tpu/ci/tpu.sh, .whl-tpu/ci/tpu_check.py, .whl-tpu/.whl-tpu/*.whl) and run
# "bash .whl-tpu/ci/tpu.sh run $OUT" with the same carry: the script finds its wheels
# beside its own folder. Anywhere else, copy the checkout with .whl-tpu/ to the machine
# and run the same line. 2026-12-05, one TPU v5e chip: 16 of 16 checks in 198 s; 2026-12-06, with
# typer 0.28.0 pinned: 16 of 16 in 207 s (docs/benchmarks.md).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEELS="$ROOT/.whl-tpu"
PYVER=${LEDGER_TPU_PYTHON:-3.11}
# What the ledger imports beyond the standard library and JAX, as tested here (the
# versions of the checkout's .venv when this was written); typer vendors click (and is
# held below 0.29, which needs pydantic: pyproject.toml says why).
DEPS="sqlalchemy==2.1.9 typing_extensions==4.16.0 alembic==1.20.1 mako==1.4.3 markupsafe==3.0.4 psutil==7.2.2
      typer==0.28.0 annotated-doc==0.0.7 shellingham==1.5.4 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2
      pygments==2.21.0"

die() { echo "ci/tpu.sh: $*" >&2; exit 1; }

wheels() {
    local py=${PYTHON:-python3}
    rm -rf "$WHEELS" && mkdir -p "$WHEELS"
    git -C "$ROOT" check-ignore -q .whl-tpu || echo /.whl-tpu/ >> "$(git -C "$ROOT" rev-parse --git-path info/exclude)"
    "$py" -m pip wheel -q --no-deps "$ROOT" -w "$WHEELS"
    # shellcheck disable=SC2086
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$WHEELS" $DEPS
    ls "$WHEELS"
    du -sh "$WHEELS"
}

run() {
    local out=${1:-$ROOT/tpu-out} site=${LEDGER_TPU_SITE:-/tmp/site} py=${PYTHON:-python3}
    [ -d "$WHEELS" ] || die "no $WHEELS: make it with 'bash ci/tpu.sh wheels' where pip reaches an index"
    mkdir -p "$out" "$site"
    PIP_CONFIG_FILE=/dev/null "$py" -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$site" "$WHEELS"/*.whl
    export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$site" PATH="$site/bin:$PATH" PYTHONUNBUFFERED=1
    "$py" -c "import jax; print('jax', jax.__version__, jax.devices())" 2>&1 | tee "$out/devices.txt"
    cd "$out"  # the checks' files, and any ./ledger.db, stay out of the checkout
    "$py" "$ROOT/ci/tpu_check.py" "$out" --backend "${LEDGER_TPU_BACKEND:-tpu}"
}

case "${1:-}" in
    wheels) wheels ;;
    run) shift; run "$@" ;;
    *) die "usage: bash ci/tpu.sh wheels | run [OUTDIR]" ;;
esac
