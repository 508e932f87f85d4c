"""The merge's scratch folder (a full copy of each SQLite source), gone however the
merge ends: returned, failed, or stopped by SIGTERM or SIGINT.

An exception unwinds through the context and removes it. A signal is taken by a
thread of its own (the signals are blocked in the main thread, and the thread waits
for them with sigtimedwait): it removes the folder and ends the process at once,
exit 128 + the signal's number, even while the main thread waits inside SQLite for
a lock, where a Python signal handler would run only once that wait is over (up to
LEDGER_BUSY_TIMEOUT later). Ending the process then is what SIGKILL does to the
destination, which the merge writes in one transaction: SQLite's journal and
PostgreSQL's closed session undo whatever was not committed.

Where the signals cannot be blocked (a thread other than the main one; a platform
without sigtimedwait), only the exception path is there.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = "ledger-merge-"
SIGNALS = (signal.SIGTERM, signal.SIGINT)
# Sent to the watcher thread alone when the merge is over, so that the merge returns at
# once instead of waiting out the watcher's poll (up to 0.1 s of every merge): a
# real-time signal, which no one sends to a ledger. Without one, the poll ends it.
_WAKE = {signal.SIGRTMIN} if hasattr(signal, "SIGRTMIN") else set()
_POLL_S = 0.1  # how soon the watcher notices that the merge is over, where there is no _WAKE


def _watched() -> set[int]:
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "sigtimedwait"):
        return set()
    # a signal the process was told to ignore (nohup, a background job) stays ignored
    return {s for s in SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}


def _watch(signals: set[int], done: threading.Event, path: Path) -> None:
    # with _WAKE the watcher ends when woken and only then, so the wake never finds it gone
    while _WAKE or not done.is_set():
        info = signal.sigtimedwait(signals | _WAKE, _POLL_S)
        if info is None:
            continue
        if info.si_signo in _WAKE:
            return
        shutil.rmtree(path, ignore_errors=True)
        name = signal.Signals(info.si_signo).name
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        print(f"error: merge stopped by {name}: the destination has all of it or none of it; "
              "its temporary copies are removed", file=sys.stderr, flush=True)
        os._exit(128 + info.si_signo)


@contextmanager
def scratch_dir() -> Iterator[Path]:
    signals = _watched()
    # blocked before the folder exists, so no signal falls between the two
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signals | _WAKE) if signals else None
    try:
        path = Path(tempfile.mkdtemp(prefix=PREFIX))
        done = threading.Event()
        watcher = threading.Thread(target=_watch, args=(signals, done, path), name="ledger-merge-signals",
                                   daemon=True) if signals else None
        if watcher is not None:
            watcher.start()
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
            done.set()
            if watcher is not None:
                for wake in _WAKE:
                    signal.pthread_kill(watcher.ident, wake)
                watcher.join()
    finally:
        if previous is not None:
            # a signal that came after the watcher stopped is delivered now, as usual
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
