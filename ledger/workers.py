"""Forked worker processes, for the CPU-bound Python a command can do beside its own
work on another core: an import's readers (ledger/legacy/reading.py) and the HTML
report's chart drawing (ledger/report/html.py).

Fork, not spawn: a worker starts in milliseconds with what its parent has imported, and
is started before any database connection is opened, so none crosses into it. Where
fork is missing (Windows, or a Python without it) there is no pool, and the caller does
the work itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable


def can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods()


def _exit_with_parent(parent: int, then: Callable[[], None] | None) -> None:
    """Pool initializer: a worker whose command died (SIGKILL, the OOM killer) exits too,
    instead of waiting on its pipes for work that never comes; then `then`, if given.
    Ctrl-C is the command's: it reaches every process of the terminal's group, and a
    worker would print its own KeyboardInterrupt traceback under the command's one line;
    the command answers it and shuts the pool down."""
    import signal
    import threading
    import time

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()
    if then is not None:
        then()


def forked_pool(workers: int, then: Callable[[], None] | None = None):
    """A ProcessPoolExecutor of `workers` forked processes, each running `then` first
    (e.g. an import the work will need). Shut it down when done (its `with` block)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_exit_with_parent, initargs=(os.getpid(), then))
