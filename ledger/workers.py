"""Forked worker processes, for the CPU-bound Python a command can do beside its own
work on another core: an import's readers (ledger/legacy/reading.py) and the HTML
report's chart drawing (ledger/report/html.py).

Fork, not spawn: a worker starts in milliseconds with what its parent has imported, and
is started before any database connection is opened, so none crosses into it. Where
fork is missing (Windows, or a Python without it), or not safe (can_fork), there is no
pool, and the caller does the work itself.

A fork happens with SIGINT blocked (sigint_blocked): a Ctrl-C in the moment between a
fork and the child's own handling of it would otherwise raise in the child's at-fork
hooks (logging's, say) and print their traceback under the command's one line, or be
swallowed by the parent's. The recorder's ingester forks the same way
(ledger/recorder/ingester.py).
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))  # every thread, native ones too
    except OSError:
        import threading

        return threading.active_count()


def can_fork() -> bool:
    """Whether to fork: the platform has it, and this process runs no other thread that
    the child could inherit holding a lock, and has not loaded JAX (whose runtime threads
    make a fork a likely deadlock: JAX warns so at every fork). `ledger` started as a
    command never has either; a program calling the Python API (ledger.command) may."""
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods() and "jax" not in sys.modules and _threads() == 1


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT held back while the block forks: a child starts with it blocked (it calls
    ignore_sigint), and a Ctrl-C meanwhile reaches this process as it leaves the block."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a Ctrl-C meanwhile raises now


def ignore_sigint() -> None:
    """In a child forked in sigint_blocked: SIGINT ignored, then unblocked (one that
    arrived since is dropped as it becomes ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _exit_with_parent(parent: int, then: Callable[[], None] | None) -> None:
    """Pool initializer: a worker whose command died (SIGKILL, the OOM killer) exits too,
    instead of waiting on its pipes for work that never comes; then `then`, if given.
    Ctrl-C is the command's: it reaches every process of the terminal's group, and a
    worker would print its own KeyboardInterrupt traceback under the command's one line;
    the command answers it and shuts the pool down."""
    import threading
    import time

    ignore_sigint()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
    if then is not None:
        then()


def forked_pool(workers: int, then: Callable[[], None] | None = None):
    """A ProcessPoolExecutor of `workers` processes, forked now (with SIGINT blocked), each
    running `then` first (e.g. an import the work will need). Shut it down when done (its
    `with` block)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_exit_with_parent, initargs=(os.getpid(), then))
    try:
        with sigint_blocked():
            pool.submit(int)  # with fork, every worker is started at the first job
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    return pool
