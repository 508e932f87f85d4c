"""The fast tier's budget: under `make test-fast` every case, its fixtures included,
takes under BUDGET_S seconds, or it fails saying so (mark it slow, or make it cheaper).

What is measured is CPU time, not wall time: this process's and that of the child
processes it waited for (a `ledger` subprocess, a forked reader), from the start of
the case's setup to the end of its teardown. A shared machine's load stretches a
case's wall time by whatever the other work takes, but hardly its CPU time, so the
check holds on a busy 2-core machine and still fails a case that does too much. CPU time
is not immune to load either: caches and cores are shared, and at a load of 6 to 7 on 2
cores eight cases went over 0.3 s that had passed twice at a load of 2.5. So where the load average per core is over
BUSY (measured as the case ends), the budget is doubled and the message says so; CI
runs the tier on its own quiet machine, at the plain budget where that machine is as
fast as REFERENCE_S says (below). A case that waits instead
(a sleep, a timeout) uses little CPU: wall time is held too, to a looser WAIT_S, which
load alone does not reach for a case in budget.

The work every case would otherwise pay on first use (importing SQLAlchemy, alembic
and the ledger's modules) is done once per process before the first case (warm()),
so no case is charged for being the first to need a module; the Makefile writes the
checkout's bytecode before the tier (alembic loads each revision anew for every
upgrade, and a `ledger` subprocess imports the ledger anew). Nor is a case charged for
a full collection of what earlier cases left (_sweep()).

The budget is for a machine as fast as the one it was set on, and the same VM is not
always that fast: on one day its fast tier took 27-34 s against 16-21 s, its slowest
case 0.32-0.37 s against 0.19 s, and its yardstick (_yardstick(), a fixed piece of
SQLite and Python work) swung from 50 to 100 ms between runs minutes apart. So each
worker measures the yardstick before its first case and every SWEEP_EVERY cases after
(between cases, out of their measure), and a machine slower than REFERENCE_S gets the
budget scaled by as much, at most twice it, as a busy one does; a faster one keeps it.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import pkgutil
import resource
import sqlite3
import tempfile
import time

import pytest

BUDGET_S = 0.3
WAIT_S = 1.5
BUSY = 2.0  # load average per core
LOG_ENV = "LEDGER_FAST_BUDGET_LOG"  # a file: each case's CPU and wall time, the load and the yardstick appended
SWEEP_EVERY = 25
_SWEEP = [0]
# what _yardstick() takes on a machine the budget fits: chosen from that day's 50-100 ms,
# against a tier 1.5-1.8x slower than on the days its budget was set
REFERENCE_S = 0.035
MOST = 2.0  # the budget is never stretched further than this, for load and speed together
_YARDSTICK = [REFERENCE_S]
_START = pytest.StashKey[tuple]()


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _yardstick() -> float:
    """CPU seconds of a fixed piece of work like a case's: rows written to SQLite, grouped,
    and Python dicts made and sent through JSON. The least of three."""
    def once() -> float:
        t0 = time.process_time()
        con = sqlite3.connect(":memory:")
        con.execute("CREATE TABLE t (a INTEGER, b TEXT, c REAL)")
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", ((i, f"k{i % 97}", i * 0.5) for i in range(20_000)))
        rows = con.execute("SELECT b, count(*), sum(c) FROM t GROUP BY b ORDER BY b").fetchall()
        json.loads(json.dumps([{"key": b, "n": n, "sum": c, "i": i} for i in range(40) for b, n, c in rows]))
        con.close()
        return time.process_time() - t0

    return min(once() for _ in range(3))


def stretch(load: float, yardstick: float) -> float:
    """How much the budget stretches: twice on a busy machine (load per core over BUSY), by
    the yardstick against REFERENCE_S on a slow one; never below 1 nor over MOST."""
    return min(MOST, max(1.0, yardstick / REFERENCE_S, 2.0 if load > BUSY else 1.0))


def warm() -> None:
    """Import what the tier's cases use, once: every module of the ledger (not the
    probes nor the recorder's site hook, which import jax or must not be imported);
    and run the revision chain once (alembic's imports)."""
    import ledger
    from ledger.storage.open import open_ledger

    for module in pkgutil.walk_packages(ledger.__path__, "ledger."):
        if not module.name.startswith(("ledger.probes", "ledger.recorder.site", "ledger.migrations")):
            importlib.import_module(module.name)
    with tempfile.TemporaryDirectory() as tmp, open_ledger(f"{tmp}/warm.db", "migrate", create=True) as opened:
        opened.migrate("upgrade", "head")
    # what is loaded now lives for the session: out of the collector's sight, so that a
    # full collection in whichever case triggers it does not scan all of it again
    gc.collect()
    gc.freeze()
    _YARDSTICK[0] = _yardstick()


def _sweep() -> None:
    """Out of every case's measure: what earlier cases left behind is frozen, so that a
    full collection inside a case scans that case's own objects, not the session's heap
    (a full collection of the heap costs 0.1 to 0.14 s here, and fell on whichever case
    tripped it, up to 0.3 s from 0.1 s for the same case). Every SWEEP_EVERY cases the
    frozen garbage is collected, between cases, so that memory stays bounded."""
    _SWEEP[0] += 1
    if _SWEEP[0] % SWEEP_EVERY == 0:
        gc.unfreeze()
        gc.collect()
        _YARDSTICK[0] = _yardstick()  # the machine's speed drifts over minutes
    gc.freeze()


def start(item) -> None:
    _sweep()
    item.stash[_START] = (_cpu(), time.monotonic())


def judge(item, report) -> None:
    """At teardown's report: the case's CPU and wall time against the budget."""
    started = item.stash.get(_START, None)
    if started is None or report.when != "teardown" or not report.passed:
        return
    cpu, wall = _cpu() - started[0], time.monotonic() - started[1]
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    times = stretch(load, _YARDSTICK[0])
    budget, wait = times * BUDGET_S, times * WAIT_S
    if os.environ.get(LOG_ENV):
        with open(os.environ[LOG_ENV], "a") as log:
            log.write(f"{cpu:.3f}\t{wall:.3f}\t{load:.1f}\t{item.nodeid}\t{_YARDSTICK[0] * 1000:.0f} ms\n")
    if cpu > budget or wall > wait:
        why = (f", x{times:.2f}: load {load:.1f} per core, yardstick {_YARDSTICK[0] * 1000:.0f} ms"
               f" (at {REFERENCE_S * 1000:.0f} ms, x1)" if times > 1 else "")
        report.outcome = "failed"
        report.longrepr = (f"over the fast tier's budget: {cpu:.2f} s of CPU (at most {budget:.2f} s), {wall:.2f} s"
                           f" of wall time (at most {wait:.2f} s{why}): mark it slow, or make it cheaper"
                           " (tests/fast_budget.py)")
