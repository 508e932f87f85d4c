"""A pytest session as one run of the ledger, in every process that runs its tests.

The process pytest starts first (the serial session, or pytest-xdist's controller) makes
the run: it checks the ledger (refused before a test runs, as `ledger record` refuses),
makes the run's spool dir and holds its lock, the way `ledger record` does for its
command (ledger/recorder/launch.py). Each process that runs tests (itself, or each xdist
worker, told the run through its workerinput) records into that one run, each into its
own spool file: a row is durable the moment its compile returns, whatever kills the
worker, and a row is one compile of one pid (nothing twice). At the session's end the
first process takes every file in (ledger/recorder/ingester.drain): one run, every test.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from dataclasses import asdict, dataclass

from ledger.pytest_plugin.after_jax import when_jax_imported
from ledger.pytest_plugin.tally import TallyWriter
from ledger.record import GIT_DIRTY
from ledger.recorder.config import RecordConfig, command_text
from ledger.recorder.hook import Recorder, install, uninstall

WORKER_KEY = "ledger_session"  # the run, in an xdist worker's workerinput
GIT_TIMEOUT_S = 10.0


@dataclass
class SessionRun:
    """What every process of the session records with (plain values: it travels to xdist workers)."""

    run_dir: str | None  # None: a budget judged in a session that records into no ledger
    run_id: str
    tag: str | None
    command: str
    git_commit: str | None

    def as_input(self) -> dict:
        return asdict(self)


def git_commit(root: str) -> str | None:
    """The commit of the git checkout ``root`` is in, GIT_DIRTY after it when tracked files
    changed; None outside a checkout, or without git."""
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                                  check=False)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    head = git("rev-parse", "--verify", "-q", "HEAD")
    if not head:
        return None
    return head + (GIT_DIRTY if git("status", "--porcelain", "--untracked-files=no") else "")


def open_run(db: str | None, tag: str | None, args: list[str], root: str) -> tuple[SessionRun, int]:
    """Make the session's run for the ledger ``db``: (the run, its lock's descriptor, held
    until the rows are in). LedgerError when the ledger cannot be used."""
    from ledger.recorder.launch import check_ledger

    target = check_ledger(db)
    command = command_text(["pytest", *args])
    config = RecordConfig(run_dir="", run_id=uuid.uuid4().hex, tag=tag, command=command, main_pid=os.getpid(),
                          host=socket.gethostname())
    lock = config.create(target)
    return SessionRun(config.run_dir, config.run_id, tag, command, git_commit(root)), lock


class Recording:
    """This process's recording of the session: the compile hook installed once jax's own
    module has executed, each compile spooled and kept for its test (tally.TallyWriter)."""

    def __init__(self, run: SessionRun):
        self.run = run
        self.writer = TallyWriter(run.run_dir)
        self.recorder: Recorder | None = None
        self.base = {"git_commit": run.git_commit}
        self.context = dict(self.base, test_id=None, test_phase=None)
        self.failed = False

    def start(self) -> None:
        when_jax_imported(self._install)

    def _install(self) -> None:
        if self.recorder is not None or self.failed:
            return
        config = RecordConfig(run_dir=self.run.run_dir or "", run_id=self.run.run_id, tag=self.run.tag,
                              command=self.run.command)
        recorder = Recorder(config, self.writer)
        if not install(recorder):  # the line why is on stderr (hook.warn_once)
            self.failed = True
            return
        recorder.context = self.context
        self.recorder = recorder

    def enter(self, test_id: str | None, phase: str | None) -> None:
        """The compiles from now on are ``test_id``'s, in ``phase``."""
        if self.recorder is None and "jax" in sys.modules:
            self._install()  # jax came in through a loader the import hook could not follow
        self.context = dict(self.base, test_id=test_id, test_phase=phase)
        if self.recorder is not None:
            self.recorder.context = self.context

    def leave(self) -> None:
        self.enter(None, None)

    def stop(self) -> None:
        if self.recorder is not None:
            uninstall(self.recorder)
            self.recorder = None

