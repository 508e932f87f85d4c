"""The spool: where a recorded process puts each compile the moment it returns.

A recorded process never opens the ledger (SQLAlchemy, a lock, a migration: seconds,
and a row lost with the process if it dies first). Each process appends one JSON line
per compile to its own file in the run's spool dir, with one ``write`` on an
``O_APPEND`` descriptor: once the call returns, the kernel keeps the line whatever
kills the process next, SIGKILL included. The ingester (ledger/recorder/ingester.py)
moves lines into the ledger; what it could not move stays here until the next
command that writes to that ledger takes it in.

Layout, beside the ledger it belongs to (a SQLite file ``x.db`` has ``x.db.spool/``;
any other ledger a dir under the user's state dir, named by a digest of its redacted
URL; ``LEDGER_SPOOL_DIR`` overrides both)::

    <spool root>/<run id>/run.json          the run (tag, cell, command, main pid)
    <spool root>/<run id>/<host>-<pid>.jsonl one file per recorded process
    <spool root>/<run id>/ingester.lock     held by the run's ingester while it lives
    <spool root>/<run id>/done-<pid>        the ingester's answer to that pid's goodbye

Imported by recorded processes at jax import: the standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket

ENV_SPOOL_DIR = "LEDGER_SPOOL_DIR"
RUN_FILE = "run.json"
LOCK_FILE = "ingester.lock"
SUFFIX = ".jsonl"

# Line kinds besides a compile record (a line with no "_line" key).
AMEND = "amend"  # JAX's backend_compile_duration for the record just before it
BYE = "bye"  # the process is exiting normally: answer with done-<pid>
UNRECORDED = "unrecorded"  # jax was imported but its compiles could not be recorded
STARTED = "started"  # the recorder is in place in this process


def spool_root(target) -> str:
    """The spool root of the ledger ``target`` (ledger.storage.url.Target)."""
    override = os.environ.get(ENV_SPOOL_DIR)
    if override:
        return os.path.abspath(override)
    if target.path is not None:
        return f"{target.path}.spool"
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    digest = hashlib.sha256(target.display.encode()).hexdigest()[:16]
    return os.path.join(state, "jax-compile-ledger", "spool", digest)


def process_file(run_dir: str, pid: int | None = None) -> str:
    name = f"{socket.gethostname()}-{pid if pid is not None else os.getpid()}{SUFFIX}"
    return os.path.join(run_dir, name.replace(os.sep, "_"))


def done_file(run_dir: str, pid: int) -> str:
    return os.path.join(run_dir, f"done-{pid}")


def read_run(run_dir: str) -> dict:
    with open(os.path.join(run_dir, RUN_FILE), encoding="utf-8") as f:
        return json.load(f)


def write_run(run_dir: str, run: dict) -> None:
    os.makedirs(run_dir, mode=0o700, exist_ok=True)
    tmp = os.path.join(run_dir, f".{RUN_FILE}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(run, f, sort_keys=True)
    os.replace(tmp, os.path.join(run_dir, RUN_FILE))


class SpoolWriter:
    """This process's spool file, reopened after a fork (a child writes its own)."""

    def __init__(self, run_dir: str):
        self.run_dir = run_dir
        self._pid = None
        self._fd = None

    def _descriptor(self) -> int:
        pid = os.getpid()
        if self._pid != pid:  # first use, or a forked child: the parent's file is not ours
            self._fd = os.open(process_file(self.run_dir, pid),
                               os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
            self._pid = pid
        return self._fd

    def write(self, line: dict) -> None:
        data = (json.dumps(line, separators=(",", ":"), default=str) + "\n").encode()
        fd = self._descriptor()
        while data:  # one write, in practice: a line is far below what a write takes at once
            data = data[os.write(fd, data):]

    def note(self, kind: str, **fields) -> None:
        self.write({"_line": kind, "pid": os.getpid(), **fields})


def parse_lines(data: bytes) -> tuple[list[dict], int]:
    """The complete lines of ``data`` as objects, and how many bytes they took. A torn
    last line (the writer died inside its write) is left for later, or for never."""
    end = data.rfind(b"\n") + 1
    out = []
    for raw in data[:end].splitlines():
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            continue  # a line torn by a crash and then appended to: nothing to keep
        if isinstance(obj, dict):
            out.append(obj)
    return out, end


def ingester_alive(run_dir: str) -> bool:
    """Whether the run's ingester still holds its lock (it holds it while it lives)."""
    import fcntl

    try:
        fd = os.open(os.path.join(run_dir, LOCK_FILE), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def hold_lock(run_dir: str) -> int | None:
    """Take the run's ingester lock for this process's life: its descriptor, or None
    if another ingester holds it."""
    import fcntl

    fd = os.open(os.path.join(run_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def runs(root: str) -> list[str]:
    """The run dirs under a spool root, oldest first."""
    try:
        with os.scandir(root) as it:
            dirs = [e.path for e in it if e.is_dir() and not e.name.startswith(".")]
    except OSError:
        return []
    return sorted(dirs, key=lambda d: os.stat(d).st_mtime if os.path.exists(d) else 0)


def spool_files(run_dir: str) -> list[str]:
    try:
        with os.scandir(run_dir) as it:
            return sorted(e.path for e in it if e.name.endswith(SUFFIX))
    except OSError:
        return []
