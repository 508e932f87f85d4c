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
runs the tier on its own quiet machine, at the plain budget. A case that waits instead
(a sleep, a timeout) uses little CPU: wall time is held too, to a looser WAIT_S, which
load alone does not reach for a case in budget.

The work every case would otherwise pay on first use (importing SQLAlchemy, alembic
and the ledger's modules) is done once per process before the first case (warm()),
so no case is charged for being the first to need a module; the Makefile writes the
checkout's bytecode before the tier (alembic loads each revision anew for every
upgrade, and a `ledger` subprocess imports the ledger anew). Nor is a case charged for
a full collection of what earlier cases left (_sweep()).
"""

from __future__ import annotations

import gc
import importlib
import os
import pkgutil
import resource
import tempfile
import time

import pytest

BUDGET_S = 0.3
WAIT_S = 1.5
BUSY = 2.0  # load average per core
LOG_ENV = "LEDGER_FAST_BUDGET_LOG"  # a file: each case's CPU and wall time and the load appended, to see the margins
SWEEP_EVERY = 25
_SWEEP = [0]
_START = pytest.StashKey[tuple]()


def _cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


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
    busy = load > BUSY
    budget, wait = (2 * BUDGET_S, 2 * WAIT_S) if busy else (BUDGET_S, WAIT_S)
    if os.environ.get(LOG_ENV):
        with open(os.environ[LOG_ENV], "a") as log:
            log.write(f"{cpu:.3f}\t{wall:.3f}\t{load:.1f}\t{item.nodeid}\n")
    if cpu > budget or wall > wait:
        doubled = f", doubled: load {load:.1f} per core" if busy else ""
        report.outcome = "failed"
        report.longrepr = (f"over the fast tier's budget: {cpu:.2f} s of CPU (at most {budget:.1f} s), {wall:.2f} s"
                           f" of wall time (at most {wait:.1f} s{doubled}): mark it slow, or make it cheaper"
                           " (tests/fast_budget.py)")
