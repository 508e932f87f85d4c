#!/usr/bin/env bash
# PostgreSQL for the tests: Debian's `postgresql` package, a server on loopback.
#
#   eval "$(bash ci/postgres.sh start)"   # install if missing, start, print the exports
#   bash ci/postgres.sh stop              # stop the server, if start started it
#
# start prints two export lines and nothing else on stdout:
#   PGPASSFILE          a pgpass file (mode 600) holding a random password for the
#                       role ledger_test: the password is never on a command line,
#                       in this script's output or in a log
#   LEDGER_TEST_PG_URL  postgresql+psycopg://ledger_test@127.0.0.1:PORT/postgres
# The tests create a database per test through that URL and drop it afterwards.
# Needs root (CI runs as root; a person runs it with sudo).
#
# Where a server already runs (a shared machine), start uses it and stop leaves it
# running: only a server start started is stopped, as recorded in $LEDGER_PG_STATE
# (/tmp/ledger-ci-postgres). start sets the role's password anew: a second run beside
# someone else's on one server gives its own LEDGER_PG_STATE and LEDGER_PG_ROLE, so
# neither stops the other's server nor changes the other's password.
set -euo pipefail
STATE=${LEDGER_PG_STATE:-/tmp/ledger-ci-postgres}
ROLE=${LEDGER_PG_ROLE:-ledger_test}
[[ $ROLE =~ ^[a-z_][a-z0-9_]{0,62}$ ]] || { echo "LEDGER_PG_ROLE must be a plain lower-case name: $ROLE" >&2; exit 2; }

as_postgres() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi
}

cluster_field() {  # cluster_field VERSION COLUMN: a column of `pg_lsclusters` for VERSION/main
    pg_lsclusters -h | awk -v v="$1" -v c="$2" '$1 == v && $2 == "main" {print $c}'
}

start() {
    if ! command -v pg_ctlcluster >/dev/null; then
        SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends postgresql >&2
    fi
    local ver port pw
    ver=$(ls /usr/lib/postgresql | sort -V | tail -1)
    [ -n "$(cluster_field "$ver" 1)" ] || pg_createcluster "$ver" main >&2
    mkdir -p "$STATE" && chmod 700 "$STATE"
    if [ "$(cluster_field "$ver" 4)" != online ]; then
        pg_ctlcluster "$ver" main start >&2
        echo "$ver" >"$STATE/started"
    fi
    port=$(cluster_field "$ver" 3)
    pw=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    # the password reaches psql on stdin, not on its command line
    as_postgres psql -q -X -p "$port" -v ON_ERROR_STOP=1 >&2 <<SQL
DO \$\$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '$ROLE') THEN CREATE ROLE $ROLE LOGIN CREATEDB; END IF;
END \$\$;
ALTER ROLE $ROLE PASSWORD '$pw';
SQL
    (umask 077 && echo "127.0.0.1:$port:*:$ROLE:$pw" >"$STATE/pgpass")
    echo "export PGPASSFILE=$STATE/pgpass"
    echo "export LEDGER_TEST_PG_URL=postgresql+psycopg://$ROLE@127.0.0.1:$port/postgres"
}

stop() {
    if [ -f "$STATE/started" ]; then
        pg_ctlcluster "$(cat "$STATE/started")" main stop >&2
        rm -f "$STATE/started"
    fi
    rm -f "$STATE/pgpass"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
