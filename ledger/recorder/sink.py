"""Rows out of the program's way: a writer thread commits the records as they come.

What arrived within GATHER_S of the first record is one transaction through the
storage layer (ledger/storage/writer.add_compile_records, each row validated by
ledger/record_validation), so a row is committed well within a second of its compile
and a SIGKILL keeps every row written before it. The compile path only puts a dict on a queue; host state,
provenance and the database (opened at the first record, so a program that compiles
nothing creates no ledger) are this thread's. A ledger that is briefly locked is
retried, not dropped; one that cannot be written at all costs the program one line.
"""

from __future__ import annotations

import os
import queue
import threading
import time

from ledger.recorder.hook import warn_once

RETRY_FOR_S = 30.0  # how long one batch waits out a locked ledger before it is given up
GATHER_S = 0.25  # a batch is what arrived within this of its first record (a commit each: fewer is faster)
_STOP = object()


def _retryable(err: BaseException, opened: bool) -> bool:
    # A locked SQLite file (at open, the gate's read says so in its message) is waited
    # out; so is an OperationalError of a ledger that was open (a server that dropped
    # the connection). Anything else (a bad row, a refused revision, no server) is final.
    if "locked" in str(err) or "busy" in str(err):
        return True
    return opened and type(err).__name__ == "OperationalError"


class Sink:
    def __init__(self, db: str | None):
        self.db = db
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._ledger = None
        self._dead = False
        self._start_lock = threading.Lock()
        self.written = 0
        self._pid = os.getpid()

    def start(self) -> None:
        """Start the writer thread now: its imports (SQLAlchemy, alembic, the storage
        layer: half a second) then overlap the program's own work instead of following
        its first compile, or its end. The database is still only opened at a record."""
        if self._pid != os.getpid():
            # a forked child: the parent's thread, queue and connections are not its own
            self._queue, self._thread, self._ledger, self._pid = queue.Queue(), None, None, os.getpid()
        if self._thread is None:
            with self._start_lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="ledger-record", daemon=True)
                    self._thread.start()

    def put(self, record: dict) -> None:
        if self._dead:
            return
        self.start()
        self._queue.put(record)

    def flush(self, timeout: float = 60.0) -> bool:
        """Wait until every record put so far is written (or given up)."""
        if self._thread is None or not self._thread.is_alive():
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout)

    def close(self, timeout: float = 60.0) -> None:
        if self._thread is not None and self._thread.is_alive():
            if not self.flush(timeout):
                warn_once(f"gave up waiting {timeout:.0f} s for the ledger; the last compiles may be missing")
                return
            self._queue.put(_STOP)
            self._thread.join(5.0)

    # -- the writer thread -------------------------------------------------------------
    def _run(self) -> None:
        try:  # imported ahead of the first record: see start()
            import ledger.storage.migrate
            import ledger.storage.open
            import ledger.storage.writer  # noqa: F401
            import probes.host  # noqa: F401
        except Exception:  # noqa: BLE001, S110 - the first write reports what is wrong
            pass
        while True:
            items = [self._queue.get()]
            time.sleep(GATHER_S)  # what a burst of small compiles hands over, in one commit
            while True:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            batch = [i for i in items if isinstance(i, dict)]
            if batch and not self._dead:
                self._write(batch)
            for item in items:
                if isinstance(item, threading.Event):
                    item.set()  # a flush: everything before it is written (or given up)
            if any(item is _STOP for item in items):
                break
        if self._ledger is not None:
            self._ledger.close()

    def _open(self):
        if self._ledger is None:
            from ledger.storage.open import open_ledger

            self._ledger = open_ledger(self.db, "write")
        return self._ledger

    def _write(self, batch: list[dict]) -> None:
        from ledger.storage.writer import add_compile_records, measured_row
        from probes import host

        state = host.host_state()  # once a batch: they came within moments of each other
        rows = []
        for record in batch:
            try:
                rows.append(measured_row(finish(record, state)))
            except Exception as err:  # noqa: BLE001
                warn_once("a compile was not recorded", err)
        deadline = time.monotonic() + RETRY_FOR_S
        pause, attempts = 0.05, 0
        while rows:
            attempts += 1
            try:
                add_compile_records(self._open().engine, rows)
                self.written += len(rows)
                return
            except Exception as err:  # noqa: BLE001 - never the program's failure
                # a new ledger that a sibling process is bringing to head at this moment
                # (spawned workers' first compiles) fails to open once or twice: try again
                first_open = self._ledger is None and attempts < 3
                if (first_open or _retryable(err, self._ledger is not None)) and time.monotonic() < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 1.0)
                    continue
                if self._ledger is None:  # the ledger cannot be opened: stop trying
                    self._dead = True
                warn_once(f"cannot write to the ledger {self.db or ''}".rstrip(), err)
                return


def finish(record: dict, state: dict) -> dict:
    """A hook's record made a full record: host state (sampled by the writer, off the
    compile path) and provenance."""
    from ledger.record import PROBE_RECORD_FIELDS
    from probes import host

    rec = dict(record)
    prov = rec.pop("_provenance", {}) or {}
    fields = set(PROBE_RECORD_FIELDS)
    for k, v in state.items():
        if k in fields and rec.get(k) is None:
            rec[k] = v
    prov.update(host.static_provenance())
    rec["provenance"] = host.dumps(prov)
    return rec
