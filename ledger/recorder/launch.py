"""`ledger record -- COMMAND`: the command runs as itself, with the recorder on its path.

Before anything runs, the ledger is checked (a --db or LEDGER_DB that cannot be
opened or created is one `error:` line and exit 1), the run's spool dir is made, and
an ingester is started (ledger/recorder/ingester.py serve()): a process of its own, in a
session of its own (a Ctrl-C at the terminal is the command's alone), which outlives
the command to take its spooled rows in. Then the ledger *becomes* the command
(exec: same process, argv, stdin, stdout, stderr, working directory and signals), so
its exit status, or its death by a signal, is the command's own with nothing in
between to get wrong. A command that cannot be run ends as a shell ends it: 127 when
it is not found, 126 when it cannot be executed, with the shell's message.

What the command's environment gains, inherited by every process it starts:
- PYTHONPATH, first: the directory of the recorder's sitecustomize (ledger/recorder/site),
  which leaves sys.path again at startup;
- LEDGER_RECORD: the run's spool dir (ledger/recorder/config.py); LEDGER_RECORD_PATH:
  where this ledger's code is, for a program whose Python lacks it.
The ledger's URL is not among them: no password reaches the command's environment.
"""

from __future__ import annotations

import errno
import os
import shutil
import socket
import sys
import uuid
from pathlib import Path

from ledger.errors import LedgerError
from ledger.recorder import config as _config
from ledger.recorder import spool
from ledger.recorder.config import ENV, ENV_PATH, RecordConfig, command_text

SITE_DIR = Path(_config.SITE_DIR)
LEDGER_ROOT = Path(__file__).resolve().parents[2]  # the directory that holds ledger/


class CannotRun(Exception):
    """The command cannot be executed: the shell's message and exit status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


def exec_recorded(command: list[str], db: str | None, tag: str | None, cell: dict) -> int:
    """Become the command, recorded. Returns only when it cannot be run: its status."""
    if not command:
        raise LedgerError("no command to record: ledger record [OPTIONS] -- COMMAND [ARGS...]")
    if not (SITE_DIR / "sitecustomize.py").is_file():
        raise LedgerError(f"this ledger is installed without its recorder ({SITE_DIR} is missing)")
    target = check_ledger(db)
    try:
        executable = find_command(command[0])
    except CannotRun as err:
        print(f"ledger record: {err}", file=sys.stderr, flush=True)
        return err.status
    config = RecordConfig(run_dir="", run_id=uuid.uuid4().hex, tag=tag, command=command_text(command), cell=cell,
                          main_pid=os.getpid(), host=socket.gethostname())
    try:
        lock = config.create(target)
    except OSError as err:
        raise LedgerError(f"cannot make the run's spool dir in {spool.spool_root(target)}: {err.strerror}") from None
    from ledger.recorder.ingester import start_ingester

    try:
        start_ingester(db, config.run_dir, os.getpid(), lock)  # the ingester holds the run's lock from here
    except BaseException:
        spool.remove_run(config.run_dir, own=spool.own_root())  # nothing spooled yet: nothing to keep
        raise
    finally:
        os.close(lock)
    env = dict(os.environ)
    env[ENV] = config.run_dir
    env[ENV_PATH] = str(LEDGER_ROOT)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(SITE_DIR) + (os.pathsep + old if old else "")
    try:
        os.execve(executable, command, env)
    except OSError as err:
        return _exec_failed(executable, command, env, err)
    return 0  # pragma: no cover - execve does not return


def check_ledger(db: str | None):
    """The ledger the rows will go to, refused now (not at the program's first compile)
    if it cannot be opened or created."""
    from ledger.storage import revisions as rv
    from ledger.storage.sqlite_file import is_locked
    from ledger.storage.url import resolve

    target = resolve(db)
    if target.value.startswith("sqlite") and target.path is None:
        raise LedgerError("an in-memory SQLite database vanishes with the command: give a file path")
    if target.path is None:
        from ledger.storage.open import open_ledger

        with open_ledger(db, "write"):
            pass  # reachable, at head (or made so): the ingester opens it again
        return target
    path = target.path
    if path.exists():
        if not path.is_file():
            raise LedgerError(f"cannot use {path} as a ledger: not a regular file")
        try:
            rv.gate(target.display, *_status_without_waiting(path), "write")
        except LedgerError as err:
            if not is_locked(err):
                raise  # a ledger held by another writer is no refusal: the ingester waits for it
        if not os.access(path, os.W_OK):
            raise LedgerError(f"cannot write to the ledger {path}: permission denied")
        return target
    _check_creatable(path)
    return target


def _status_without_waiting(path: Path):
    """The file's revision, read at once: a ledger locked by another writer is no reason
    to hold the command back (its rows wait in the spool), so no busy wait here."""
    from ledger.storage import revisions as rv
    from ledger.storage.sqlite_file import BUSY_TIMEOUT_ENV

    saved = os.environ.get(BUSY_TIMEOUT_ENV)
    os.environ[BUSY_TIMEOUT_ENV] = "0.05"
    try:
        return rv.sqlite_status(path)
    finally:
        if saved is None:
            del os.environ[BUSY_TIMEOUT_ENV]
        else:
            os.environ[BUSY_TIMEOUT_ENV] = saved


def _check_creatable(path: Path) -> None:
    parent = path.parent
    if not parent.is_dir():
        raise LedgerError(f"cannot create the ledger {path}: {parent} is not a directory")
    probe = parent / f".{path.name}.{uuid.uuid4().hex[:8]}.probe"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as err:
        raise LedgerError(f"cannot create the ledger {path}: {err.strerror}") from None
    os.close(fd)
    probe.unlink()


def find_command(name: str) -> str:
    """The file the shell would run for ``name``: 127 if there is none, 126 if it is
    there but cannot be run (the messages bash gives)."""
    if "/" in name:
        if not os.path.exists(name):
            raise CannotRun(f"{name}: No such file or directory", 127)
        return _runnable(name)
    found = shutil.which(name, mode=os.F_OK)
    if found is None:
        raise CannotRun(f"{name}: command not found", 127)
    executable = shutil.which(name)  # the first one that may be executed, as bash picks
    return _runnable(executable or found)


def _runnable(path: str) -> str:
    if os.path.isdir(path):
        raise CannotRun(f"{path}: Is a directory", 126)
    if not os.access(path, os.X_OK):
        raise CannotRun(f"{path}: Permission denied", 126)
    return path


def _exec_failed(executable: str, command: list[str], env: dict, err: OSError) -> int:
    if err.errno == errno.ENOEXEC:
        # no #! line: a shell runs such a file as a shell script, and so does this
        try:
            os.execve("/bin/sh", ["/bin/sh", executable, *command[1:]], env)
        except OSError as again:
            err = again
    if err.errno == errno.ENOENT:
        interpreter = _interpreter(executable)
        if interpreter:
            print(f"ledger record: {executable}: {interpreter}: bad interpreter: No such file or directory",
                  file=sys.stderr, flush=True)
            return 127  # as bash 5.2 has it ("cannot execute: required file not found")
    if err.errno == errno.E2BIG:
        print(f"ledger record: {command[0]}: Argument list too long", file=sys.stderr, flush=True)
        return 126
    print(f"ledger record: {executable}: {err.strerror}", file=sys.stderr, flush=True)
    return 127 if err.errno == errno.ENOENT else 126


def _interpreter(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            first = f.readline(256)
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    parts = first[2:].strip().split()
    return parts[0].decode(errors="replace") if parts else None
