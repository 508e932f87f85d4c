"""The process-model matrix of `ledger record`: under every way a Python program starts
workers and every way a job dies, every compile the program's own jax.monitoring
listener saw is a row, and the program's exit status is the one it has unrecorded.

The oracle: each process of the program appends one line per compile to a file, from
JAX's backend_compile_duration event (fired after the compile returned, so after the
recorder spooled it), with one write on an O_APPEND descriptor: what a SIGKILL
leaves of it is what the program saw."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from .case_kinds import LEDGER
from .conftest import jax_platform, query, run_cli
from .helpers import program, program_stderr

pytestmark = pytest.mark.jax  # every case runs a recorded program that compiles

PY = sys.executable

PROGRAM = r'''
import os, sys, time
CASE, SEEN = sys.argv[1], sys.argv[2]
import jax, jax.numpy as jnp

def saw(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        fd = os.open(SEEN, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.close(fd)
jax.monitoring.register_event_duration_secs_listener(saw)

def work(n):
    return float(jax.jit(lambda v: jnp.sin(v) * n + n)(jnp.float32(n)))

def run_children(method):
    import multiprocessing as mp
    ctx = mp.get_context(method)
    if CASE.startswith("process"):
        procs = [ctx.Process(target=work, args=(n,)) for n in (1, 2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        assert [p.exitcode for p in procs] == [0, 0]
    else:
        with ctx.Pool(2) as pool:  # its __exit__ terminates the workers: SIGTERM
            print(sorted(pool.map(work, [1, 2, 3, 4])), flush=True)

if __name__ == "__main__":
    # no compile in the parent before a fork: a child forked from a process whose XLA
    # threads run can deadlock in its own compile, recorded or not (JAX warns of it)
    if not CASE.startswith(("process-", "pool-", "executor", "nested")):
        work(0)
    if CASE.startswith(("process-", "pool-")):
        run_children(CASE.split("-", 1)[1])
    elif CASE == "executor":
        from concurrent.futures import ProcessPoolExecutor
        with ProcessPoolExecutor(2) as ex:
            print(sorted(ex.map(work, [1, 2, 3])), flush=True)
    elif CASE in ("sigterm", "sigint", "sigkill"):
        work(5)
        print("compiled", flush=True)
        time.sleep(600)
    elif CASE == "os-exit":
        work(6)
        os._exit(7)
    elif CASE == "nested":
        import ledger
        db = sys.argv[3]
        with ledger.recording(db=db, tag="outer"):
            work(7)
            with ledger.recording(db=db, tag="inner"):
                work(8)
            work(9)  # the outer block records again once the inner one ended
    else:
        work(10)
        work(11)
    if CASE != "nested":  # its compiles are all inside its blocks
        work(12)
'''

CASES = ["process-fork", "process-forkserver", "process-spawn", "pool-fork", "pool-forkserver", "pool-spawn",
         "executor", "sigterm", "sigint", "sigkill", "os-exit", "nested"]
SIGNALS = {"sigterm": signal.SIGTERM, "sigint": signal.SIGINT, "sigkill": signal.SIGKILL}


# The command starts with SIGINT at its default: a suite run in the background starts
# with it ignored, which a program keeps (and so would not die of it).
DEFAULT_SIGINT = [PY, "-c", ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                             "os.execv(sys.argv[1], sys.argv[1:])")]


def run_case(tmp_path, case: str, recorded: bool, db) -> tuple[int, list[str], subprocess.CompletedProcess]:
    """(exit status, the oracle's lines, the process) of one run of the program."""
    prog = program(tmp_path, PROGRAM, "matrix.py")
    seen = tmp_path / f"seen-{case}-{recorded}"
    command = [PY, str(prog), case, str(seen), str(db)]
    if recorded:
        command = [str(LEDGER), "record", "--db", str(db), "--", *command]
    env = {**os.environ, "JAX_PLATFORMS": jax_platform(), "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.Popen([*DEFAULT_SIGINT, *command], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    try:
        if case in SIGNALS:
            assert proc.stdout.readline() == "compiled\n"
            if case == "sigkill":
                time.sleep(0.05)
            proc.send_signal(SIGNALS[case])  # the program itself: the ledger exec'd it
        out, err = proc.communicate(timeout=180)
    finally:
        proc.kill()
        proc.wait()
    lines = seen.read_text().splitlines() if seen.exists() else []
    done = subprocess.CompletedProcess(command, proc.returncode, out, err)
    done.pid = proc.pid  # the program's own process: the ledger exec'd it
    return proc.returncode, lines, done


@pytest.mark.parametrize("case", CASES)
def test_every_compile_the_program_saw_is_a_row(tmp_path, case):
    db = tmp_path / "ledger.db"
    plain_status, plain_seen, plain = run_case(tmp_path, case, False, db)
    if case == "nested":  # it records itself (ledger.recording()): its plain run is the recorded one
        status, seen, out = plain_status, plain_seen, plain
    else:
        status, seen, out = run_case(tmp_path, case, True, db)
        assert status == plain_status, out.stderr  # how many compiles each worker makes varies by scheduling
    assert seen, out.stderr
    rows = run_cli("sql", "--db", db, "--csv", "SELECT json_extract(provenance, '$.pid'), tag FROM compile_records")
    assert rows.exit_code == 0, rows.output
    pids = [line.split(",")[0] for line in rows.output.splitlines()[1:]]
    print(f"| {case} | {len(seen)} | {len(pids)} | {plain_status} | {status} |")  # the matrix, under -s
    assert sorted(pids) == sorted(seen), out.stderr
    _each_process_has_its_time(db, case, out)
    if case == "nested":
        tags = [line.split(",")[1] for line in rows.output.splitlines()[1:]]
        assert tags.count("inner") == 1 and tags.count("outer") == len(seen) - 1
    else:
        assert program_stderr(out).count("ledger record") == 0
        said = [ln for ln in out.stderr.splitlines() if ln.startswith("ledger record: ")]
        assert len(said) == 1 and said[0].startswith(f"ledger record: {len(seen)} compiles recorded into ")


# How the command's own process ends, as the ledger knows it: its exit said at exit; a
# death by SIGTERM or SIGKILL, or os._exit, skips that, and the ingester sees it gone.
MAIN_ENDED_BY = {"sigterm": "gone", "sigkill": "gone", "os-exit": "gone"}


def _each_process_has_its_time(db, case: str, out) -> None:
    """Every process that compiled has its wall time (recorded_processes): started before
    its first compile, ended after its last; the command's own process ended as it did."""
    from datetime import datetime

    procs = query(db, "SELECT run_id, pid, started, ended, wall_s, ended_by FROM recorded_processes")
    compiled = query(db, "SELECT run_id, pid, min(timestamp), max(timestamp) FROM compile_records GROUP BY 1, 2")
    times = {(r, p): (s, e, w, by) for r, p, s, e, w, by in procs}
    assert set(times) >= {(r, p) for r, p, _, _ in compiled}, (procs, compiled)
    for run_id, pid, first, last in compiled:
        started, ended, wall, by = times[(run_id, pid)]
        s, e = datetime.fromisoformat(started), datetime.fromisoformat(ended)
        assert wall == pytest.approx((e - s).total_seconds(), abs=2e-6) and wall > 0  # microseconds
        # the rows' timestamps are whole seconds: a second's slack either side
        assert (datetime.fromisoformat(first) - s).total_seconds() > -1 and (e - datetime.fromisoformat(last)).total_seconds() > -1
        assert by in ("exit", "gone", "last seen")
    if case != "nested":
        mine = [by for (_, p), (*_, by) in times.items() if p == out.pid]
        assert mine == [MAIN_ENDED_BY.get(case, "exit")], (case, times)
    else:  # each block is a run of its own, and its time is the block's
        assert len(times) == 2 and {by for *_, by in times.values()} == {"exit"}


def _hold_lock(db, release: threading.Event, started: threading.Event):
    """Hold the ledger's write lock until `release` (90 s at most)."""
    con = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    con.execute("BEGIN EXCLUSIVE")
    started.set()
    release.wait(90.0)
    con.execute("COMMIT")
    con.close()


@pytest.mark.alone  # holds the ledger's lock through a recorded run
def test_a_ledger_locked_longer_than_the_program_runs_loses_nothing(tmp_path):
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    started, release = threading.Event(), threading.Event()
    locker = threading.Thread(target=_hold_lock, args=(db, release, started))
    locker.start()
    started.wait()
    try:  # locked for the whole run, program and ingester, and released once it has returned
        status, seen, out = run_case(tmp_path, "plain", True, db)
        assert status == 0 and len(seen) >= 2
        said = out.stderr.splitlines()
        assert len(said) == 1 and said[0].startswith(f"ledger record: {len(seen)} compiles kept in "), out.stderr
        assert said[0].endswith("the next ledger command that writes to this ledger takes them in")
        assert len(os.listdir(f"{db}.spool")) == 1  # the run, kept aside
    finally:
        release.set()
        locker.join()
    taken = run_cli("pins", "update", "--allow-loaded", "--db", db)
    assert f"ledger: took in {len(seen)} compiles kept from `ledger record` run " in taken.stderr
    assert query(db, "SELECT count(*) FROM compile_records") == [(len(seen),)]
    again = run_cli("pins", "update", "--allow-loaded", "--db", db)
    assert "took in" not in again.stderr  # taken once
