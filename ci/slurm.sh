#!/usr/bin/env bash
# SLURM for the tests: Debian's slurmctld, slurmd, slurm-client and munge, one node
# (this machine) in one partition, daemons run directly (no systemd needed).
#
#   eval "$(bash ci/slurm.sh start)"   # install if missing, configure, start, print the exports
#   bash ci/slurm.sh stop              # stop what start started; idempotent
#
# start waits (at most 60 s) until the node is idle, then prints these lines and
# nothing else on stdout (progress and logs go to stderr):
#   export LEDGER_TEST_SLURM=1
#   export LEDGER_TEST_SLURM_PARTITION=debug
# Running start again while SLURM is up only checks it and prints the same lines.
# When start fails it prints the daemons' log tails, undoes what it did and exits 1.
#
# It writes /etc/slurm/slurm.conf, marked by its first line ("# written by
# jax-compile-ledger ci/slurm.sh; ..."), and refuses to touch one it did not write,
# or SLURM daemons it did not start. Daemon state, spool, logs and pid files live in
# $LEDGER_SLURM_STATE (/tmp/ledger-ci-slurm), with a record of which daemons start
# started; stop cancels every job, stops only those daemons, removes the slurm.conf
# it wrote and the state dir. The packages stay installed.
# Jobs run as the user who submits them: their --output directories must be writable
# by that user. There is no accounting, hence no sacct.
# Needs root: CI runs as root; for anyone else it reruns itself through sudo.
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
    exec sudo env LEDGER_SLURM_STATE="${LEDGER_SLURM_STATE:-}" bash "$0" "$@"
fi
STATE=${LEDGER_SLURM_STATE:-/tmp/ledger-ci-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by jax-compile-ledger ci/slurm.sh"
PARTITION=debug
WAIT_S=60
STARTED_MUNGED=""

log() { echo "slurm.sh: $*" >&2; }

alive() {  # alive PID NAME: PID is a running NAME process (a zombie is not)
    [ -n "$1" ] && [ "$(cat "/proc/$1/comm" 2>/dev/null)" = "$2" ] \
        && ! grep -q '^[0-9]* ([^)]*) Z' "/proc/$1/stat" 2>/dev/null
}

running() {  # running NAME: some NAME process runs (a zombie left to reap does not count)
    local pid
    for pid in $(pgrep -x "$1"); do
        if alive "$pid" "$1"; then return 0; fi
    done
    return 1
}

# the pid of a running NAME that start recorded, else nothing
ours() {
    local pid
    pid=$(cat "$STATE/started-$1" 2>/dev/null || true)
    if alive "$pid" "$1"; then echo "$pid"; fi
}

show_logs() {
    local f
    for f in "$STATE/slurmctld.log" "$STATE/slurmd.log" /var/log/munge/munged.log; do
        [ -f "$f" ] || continue
        echo "----- tail $f" >&2
        tail -n 40 "$f" >&2
    done
}

write_conf() {  # writes $CONF if it differs; returns 0 when it changed
    local node cpus new
    node=$(hostname -s)
    cpus=$(nproc)
    new=$(cat <<EOF
$MARK; stop removes it
ClusterName=ledgerci
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=$PARTITION Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
)
    if [ -f "$CONF" ] && [ "$(cat "$CONF")" = "$new" ]; then
        return 1
    fi
    mkdir -p "$(dirname "$CONF")"
    printf '%s\n' "$new" >"$CONF.tmp"
    chmod 644 "$CONF.tmp"
    mv "$CONF.tmp" "$CONF"
    log "wrote $CONF ($node, $cpus CPUs, partition $PARTITION)"
    return 0
}

start_munged() {
    if ! running munged; then
        if [ ! -s /etc/munge/munge.key ]; then
            if command -v mungekey >/dev/null; then
                mungekey --create --keyfile=/etc/munge/munge.key >&2
            else
                create-munge-key -f >&2
            fi
            chown munge:munge /etc/munge/munge.key
            chmod 400 /etc/munge/munge.key
        fi
        # /run/munge is made by systemd-tmpfiles elsewhere
        mkdir -p /run/munge /var/log/munge /var/lib/munge
        chown munge:munge /run/munge /var/log/munge /var/lib/munge
        chmod 755 /run/munge
        runuser -u munge -- /usr/sbin/munged >&2 || { log "munged did not start"; show_logs; exit 1; }
        STARTED_MUNGED=1
    fi
    local i
    for i in $(seq 51); do
        if munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then break; fi
        [ "$i" = 51 ] && { log "munge does not work"; show_logs; exit 1; }
        sleep 0.2
    done
    # munged forks to daemonize: only its pid file names the process that stays
    if [ -n "$STARTED_MUNGED" ]; then
        cat /run/munge/munged.pid >"$STATE/started-munged"
        log "started munged (pid $(cat "$STATE/started-munged"))"
    fi
}

start_daemon() {  # start_daemon NAME: slurmctld or slurmd, if none is running
    local name=$1 pid i
    running "$name" && return 0
    rm -f "$STATE/$name.pid"
    "$name" >&2  # both daemonize and write their pid files
    for i in $(seq 50); do
        pid=$(cat "$STATE/$name.pid" 2>/dev/null || true)
        if alive "$pid" "$name"; then
            echo "$pid" >"$STATE/started-$name"
            log "started $name (pid $pid)"
            return 0
        fi
        sleep 0.2
    done
    log "$name did not start"; show_logs; exit 1
}

start() {
    local t0=$SECONDS i st munged_before
    # on failure, undo what start did (after any log tails went to stderr)
    trap 'if [ $? != 0 ]; then log "start failed; stopping what it started"; stop; fi' EXIT
    if [ -f "$CONF" ] && ! grep -qxF "$MARK; stop removes it" "$CONF"; then
        log "$CONF exists and was not written by this script; refusing to replace it."
        log "Move it aside (and stop any SLURM daemons using it) to use ci/slurm.sh."
        exit 1
    fi
    mkdir -p "$STATE"
    chmod 755 "$STATE"
    if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
        || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
        munged_before=""
        if running munged; then munged_before=yes; fi
        log "installing slurmctld slurmd slurm-client munge"
        apt-get update -qq >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            slurmctld slurmd slurm-client munge >&2
        # where services may start on install, the munged that came up is start's
        if [ -z "$munged_before" ] && running munged; then
            STARTED_MUNGED=1
        fi
        log "installed in $((SECONDS - t0)) s"
    fi
    if running slurmctld || running slurmd; then
        if [ -z "$(ours slurmctld)" ] && [ -z "$(ours slurmd)" ]; then
            log "SLURM daemons not started by this script are running; stop them first."
            exit 1
        fi
    fi
    mkdir -p "$STATE/slurmctld" "$STATE/slurmd"
    if write_conf; then
        # a changed slurm.conf (other hostname or CPU count) needs fresh daemons
        stop_daemon slurmd
        stop_daemon slurmctld
    fi
    start_munged
    start_daemon slurmctld
    start_daemon slurmd
    for i in $(seq $((WAIT_S * 2))); do
        st=$(sinfo -h -p "$PARTITION" -o %T 2>/dev/null || true)
        # idle once up; a start while jobs run finds it busy, which is up too
        case $st in idle | mixed | allocated | completing) break ;; esac
        if [ "$i" = $((WAIT_S * 2)) ]; then
            log "node not idle after $WAIT_S s (state: '${st:-no answer}')"
            show_logs
            exit 1
        fi
        sleep 0.5
    done
    log "up: node $(hostname -s) $st in partition $PARTITION after $((SECONDS - t0)) s"
    trap - EXIT
    echo "export LEDGER_TEST_SLURM=1"
    echo "export LEDGER_TEST_SLURM_PARTITION=$PARTITION"
}

stop_daemon() {  # stop_daemon NAME: TERM, then KILL, the NAME that start started
    local name=$1 pid i
    pid=$(ours "$name")
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        for i in $(seq 50); do
            alive "$pid" "$name" || break
            sleep 0.2
        done
        if alive "$pid" "$name"; then kill -9 "$pid" 2>/dev/null || true; fi
        log "stopped $name (pid $pid)"
    fi
    rm -f "$STATE/started-$name"
}

stop() {
    local i
    if [ -n "$(ours slurmctld)" ]; then
        scancel --quiet --partition="$PARTITION" >&2 || true
        for i in $(seq 50); do
            [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
            sleep 0.2
        done
    fi
    stop_daemon slurmd
    stop_daemon slurmctld
    stop_daemon munged
    if [ -f "$CONF" ] && grep -qxF "$MARK; stop removes it" "$CONF"; then
        rm -f "$CONF"
    fi
    rm -rf "$STATE"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
