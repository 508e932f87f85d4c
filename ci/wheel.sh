#!/usr/bin/env bash
# The project's wheel, built once from the working tree as git sees it (a copy, never the
# checkout), into DIR (outside the tree); prints its path. .ci/run gives it to every leg
# as LEDGER_WHEEL, so the wheel smoke, the jax legs, the field leg and the pytest leg
# install one wheel instead of each building its own.
#
#   bash ci/wheel.sh /tmp/ledger-wheel
set -euo pipefail
LEG="wheel"
source "$(dirname "$0")/legs_lib.sh"  # ROOT, die, outside_tree, copy_tree, leg_wheel
[ $# = 1 ] || die "usage: ci/wheel.sh DIR"
DIR=$(outside_tree DIR "$1")
mkdir -p "$DIR"
copy_tree "$DIR/src"
unset LEDGER_WHEEL  # built here, whatever the caller's
leg_wheel "$DIR" "$(command -v python3)"
