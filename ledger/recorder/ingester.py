"""The ingester of ``ledger record``: a process of its own beside the command, detached
from it, that opens the ledger and takes the run's spooled rows in (ingest.RunIngester)
while the command runs, answers each process's goodbye with the run's one line, and
drains what is left once the command is gone, however it died. drain_now() does the same
in-process for ``ledger.recording()``.
"""

from __future__ import annotations

import os
import time

from ledger.recorder import spool
from ledger.recorder.ingest import RunIngester, pid_alive, spooling_alive

LOCKED_GRACE_S = 5.0  # after the goodbye, how long a locked ledger is waited for
INGESTER_BUSY_TIMEOUT_S = 0.5  # one try's wait for a locked SQLite ledger
TICK_S = 0.05  # how often the spool is read while the command runs (a few syscalls; a goodbye waits on it)


def drain_now(db: str | None, run_dir: str) -> str:
    """Take a finished run in now (``ledger.recording()``): its line, or ''."""
    ing, display = drain(db, run_dir)
    return ing.summary(display, ing.run["run_id"]) if ing.held or ing.unrecorded else ""


def drain(db: str | None, run_dir: str) -> tuple[RunIngester, str]:
    """Take a finished run in now: its ingester (what it wrote, kept and heard) and the
    ledger as messages name it (``ledger.recording()``, the pytest plugin's session)."""
    from ledger.storage.open import open_ledger

    config = spool.read_run(run_dir)
    with open_ledger(db, "write") as ledger:
        ing = RunIngester(lambda: ledger, run_dir, config)
        deadline = time.monotonic() + LOCKED_GRACE_S
        while not ing.last_step() and time.monotonic() < deadline:
            time.sleep(0.1)
        ing.remove_if_done()
    return ing, ledger.display


def start_ingester(db: str | None, run_dir: str, program_pid: int, lock: int) -> None:
    """Start the run's ingester, detached (not the command's child: a program that
    waits for any child never sees it), and return once it runs. It inherits ``lock``,
    the run's lock this process took with the run (spool.create_run()), and holds it
    for its life: the run is never without its ingester's lock until it ends."""
    from ledger.workers import sigint_blocked

    read_end, write_end = os.pipe()
    # SIGINT held back until the ingester runs: the middle process never unblocks it (it
    # leaves by os._exit, never through this block's end), the ingester ignores it, and a
    # Ctrl-C meanwhile is this command's as it leaves the block
    with sigint_blocked():
        middle = os.fork()
        if middle == 0:
            try:
                os.close(read_end)
                os.setsid()  # out of the terminal's process group: a Ctrl-C is the command's alone
                if os.fork() == 0:
                    _serve_and_exit(db, run_dir, program_pid, write_end)
            finally:
                os._exit(0)
        os.close(write_end)
        os.waitpid(middle, 0)
        with os.fdopen(read_end, "rb") as f:
            answer = f.read().decode(errors="replace").strip()
    if answer != "ok":
        from ledger.errors import LedgerError

        raise LedgerError(f"cannot start recording: {answer or 'the ingester did not start'}")


def _serve_and_exit(db, run_dir, program_pid, ready_fd) -> None:
    import signal

    from ledger.workers import ignore_sigint

    status = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_IGN)  # a job's signals are the command's; this drains
        ignore_sigint()  # and SIGINT, blocked since the fork (start_ingester)
        from ledger.storage.sqlite_file import BUSY_TIMEOUT_ENV

        # short waits on a locked ledger, tried again each step: the spool keeps the rows
        # meanwhile, and the command's goodbye is answered within LOCKED_GRACE_S
        os.environ[BUSY_TIMEOUT_ENV] = str(INGESTER_BUSY_TIMEOUT_S)
        os.nice(10)  # the program's compiles come first; the spool keeps the rows meanwhile
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)  # not one byte on the command's stdout
        os.write(ready_fd, b"ok\n")
        os.close(ready_fd)
        serve(db, run_dir, program_pid)
        status = 0
    except BaseException:  # noqa: BLE001, S110 - a detached process: nothing above it to tell
        pass
    finally:
        os._exit(status)


def serve(db: str | None, run_dir: str, program_pid: int) -> None:
    """Take the run's rows in while the command lives; drain once it is gone."""
    import sys

    from ledger.storage.open import open_ledger

    config = spool.read_run(run_dir)
    ing = RunIngester(lambda: open_ledger(db, "write"), run_dir, config)
    display = _display(db)
    answered: set[int] = set()
    watch = _Watch(program_pid)
    while watch.alive(TICK_S):
        ing.step()
        _answer_byes(ing, answered, display, config["run_id"])
        ing.processes.poll(pid_alive)  # a worker that ends without a word: its wall time
    ing.processes.gone(program_pid, time.time())  # the command's end, unless it said so itself
    deadline = time.monotonic() + LOCKED_GRACE_S
    while True:
        done = ing.step(final=True)
        if (done and not spooling_alive(run_dir)) or time.monotonic() > deadline:
            break
        ing.processes.poll(pid_alive)
        time.sleep(0.05)
    ing.last_step()
    line = ing.summary(display, config["run_id"])
    if program_pid not in answered and line:
        print(line, file=sys.stderr, flush=True)  # the command died without its goodbye
    ing.remove_if_done()
    if ing.ledger is not None:
        ing.ledger.close()


def _answer_byes(ing: RunIngester, answered: set, display: str, run_id: str) -> None:
    for pid in ing.byes:
        if pid in answered:
            continue
        ok = ing.step(final=True)
        since = getattr(ing, "_bye_at", None) or time.monotonic()
        ing._bye_at = since
        if not ok and time.monotonic() - since < LOCKED_GRACE_S:
            return  # the ledger is locked: wait a while before saying the rows were kept
        answer = spool.done_file(ing.run_dir, pid)
        with open(answer + ".tmp", "w", encoding="utf-8") as f:
            f.write(ing.summary(display, run_id))
        os.replace(answer + ".tmp", answer)
        answered.add(pid)
        ing._bye_at = None


def _display(db: str | None) -> str:
    from ledger.storage.url import resolve

    return resolve(db).display


class _Watch:
    """Whether the command's process still runs (a pidfd where Linux has one)."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.fd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def alive(self, wait: float) -> bool:
        if self.fd is not None:
            import select

            readable, _, _ = select.select([self.fd], [], [], wait)
            return not readable
        time.sleep(wait)
        return pid_alive(self.pid)
