"""The spool: where a recorded process puts each compile the moment it returns.

A recorded process never opens the ledger (SQLAlchemy, a lock, a migration: seconds,
and a row lost with the process if it dies first). Each process appends one JSON line
per compile to its own file in the run's spool dir, with one ``write`` on an
``O_APPEND`` descriptor: once the call returns, the kernel keeps the line whatever
kills the process next, SIGKILL included. The ingester (ledger/recorder/ingester.py)
moves lines into the ledger; what it could not move stays here until a command that
writes to that same ledger takes it in (ledger/recorder/ingest.py take_in_kept()).

Layout, beside the ledger it belongs to (a SQLite file ``x.db`` has ``x.db.spool/``;
any other ledger a dir under the user's state dir, named by a digest of its redacted
URL; ``LEDGER_SPOOL_DIR`` overrides both, and may be a folder of the user's own)::

    <spool root>/<run id>/ledger-run.json    the marker: the ledger the run belongs to, the run
    <spool root>/<run id>/<host>-<pid>.jsonl one file per recorded process
    <spool root>/<run id>/ingester.lock     held by the run's ingester while it lives
    <spool root>/<run id>/done-<pid>        the ingester's answer to that pid's goodbye

A dir is a run only with the marker, written by the ledger, naming it (a folder of the
user's own, or another ledger's run, is never read, taken in or removed), and the
marker is written only once the run's lock is held (create_run()): no command can take
a run for abandoned while it starts. Removing a run removes only the files named above.

Imported by recorded processes at jax import: the standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket

ENV_SPOOL_DIR = "LEDGER_SPOOL_DIR"
MARKER = "ledger-run.json"
SPOOL_FORMAT = "jax-compile-ledger run 1"  # the marker's "spool" value: this ledger wrote it
RUN_NAME = re.compile(r"[0-9a-f]{32}")  # a run dir's name: its run id (uuid4().hex)
LOCK_FILE = "ingester.lock"
SUFFIX = ".jsonl"
SET_ASIDE = ".set-aside"  # a spool file with a line that is not the recorder's, kept for a person

# Line kinds besides a compile record (a line with no "_line" key).
AMEND = "amend"  # JAX's backend_compile_duration for the record just before it
BYE = "bye"  # the process is exiting normally: answer with done-<pid> (``at``: when, epoch seconds)
EXIT = "exit"  # a process that waits for no answer is exiting normally (``at``: when)
UNRECORDED = "unrecorded"  # jax was imported but its compiles could not be recorded
STARTED = "started"  # the recorder is in place in this process (``started``: the process's start, ``host``)


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


def own_root() -> bool:
    """Whether the spool root is the ledger's own (made by it, removed once empty), not
    a folder LEDGER_SPOOL_DIR names, which may be the user's."""
    return not os.environ.get(ENV_SPOOL_DIR)


def ledger_identity(target) -> str:
    """The ledger a run belongs to, as its marker names it: a SQLite file's real path
    (the same file through a link or a relative path is the same ledger), a server's
    redacted URL."""
    return os.path.realpath(target.path) if target.path is not None else target.display


def process_file(run_dir: str, pid: int | None = None) -> str:
    name = f"{socket.gethostname()}-{pid if pid is not None else os.getpid()}{SUFFIX}"
    return os.path.join(run_dir, name.replace(os.sep, "_"))


def done_file(run_dir: str, pid: int) -> str:
    return os.path.join(run_dir, f"done-{pid}")


def read_run(run_dir: str) -> dict:
    """The run's marker; ValueError if the dir holds none that this ledger wrote."""
    with open(os.path.join(run_dir, MARKER), encoding="utf-8") as f:
        run = json.load(f)
    if not isinstance(run, dict) or run.get("spool") != SPOOL_FORMAT or run.get("run_id") != os.path.basename(run_dir):
        raise ValueError(f"{run_dir} holds no run of this ledger")
    return run


def create_run(root: str, run: dict) -> tuple[str, int]:
    """Make the run's dir under ``root``, take its ingester lock, then write its marker:
    (the dir, the lock's descriptor, for the caller to hand its ingester). Until the
    marker is there no command reads the dir, and from then on the lock is held."""
    import fcntl

    os.makedirs(root, mode=0o700, exist_ok=True)
    run_dir = os.path.join(root, run["run_id"])
    os.mkdir(run_dir, 0o700)
    fd = None
    try:
        fd = os.open(os.path.join(run_dir, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file: it cannot be held
        tmp = os.path.join(run_dir, f".{MARKER}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({**run, "spool": SPOOL_FORMAT}, f, sort_keys=True)
        os.replace(tmp, os.path.join(run_dir, MARKER))
    except BaseException:
        if fd is not None:
            os.close(fd)
        remove_run(run_dir, own=False)
        raise
    return run_dir, fd


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


def parse_lines(data: bytes) -> tuple[list[dict | str], int]:
    """The complete lines of ``data``, each an object or, for a line that is not JSON,
    why; and how many bytes they took. A torn last line (the writer died inside its
    write) is left for later, or for never."""
    end = data.rfind(b"\n") + 1
    out: list[dict | str] = []
    for raw in data[:end].splitlines():
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except ValueError:
            out.append("not JSON")
            continue
        out.append(obj if isinstance(obj, dict) else "not a JSON object")
    return out, end


def _count(value) -> bool:
    return type(value) is int and value >= 0


def _seconds(value) -> bool:
    return type(value) in (int, float) and 0 <= value < float("inf")  # NaN fails the comparison


# Each line kind's fields and their checks: what the recorder writes, and nothing else
# is taken for it (a list where a count belongs once stopped every command that wrote).
_LINE_CHECKS = {
    None: {"pid": _count, "compile_index": _count},  # a compile record (its run id: line_problem())
    AMEND: {"pid": _count, "index": _count, "backend_compile_s": _seconds},
    BYE: {"pid": _count, "at": lambda v: v is None or _seconds(v)},
    EXIT: {"pid": _count, "at": _seconds},
    UNRECORDED: {"pid": _count, "why": lambda v: isinstance(v, str)},
    # a process's start and host (ledger/recorder/processes.py): absent from an older recorder's line
    STARTED: {"pid": _count, "started": lambda v: v is None or _seconds(v), "host": lambda v: v is None or isinstance(v, str)},
}


def line_problem(line: dict | str, run_id: str) -> str | None:
    """Why a parsed spool line is not one the recorder of run ``run_id`` wrote; None if it is."""
    if isinstance(line, str):
        return line
    kind = line.get("_line")
    checks = _LINE_CHECKS.get(kind) if isinstance(kind, (str, type(None))) else None
    if checks is None:
        return f"an unknown line kind {str(kind)[:40]!r}"
    for name, ok in checks.items():
        if not ok(line.get(name)):
            return f"{name} is {json.dumps(line.get(name), default=str)[:40]}"
    if kind is None and line.get("run_id") != run_id:
        return "a compile record of another run"
    return None


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


def take_lock(run_dir: str) -> int | None:
    """Take a kept run's ingester lock: its descriptor, or None if its ingester (or a
    command taking it in) holds it, or the run is going (its lock file is gone). Never
    creates the file: a run has one from its start (create_run())."""
    import fcntl

    try:
        fd = os.open(os.path.join(run_dir, LOCK_FILE), os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def runs(root: str, identity: str) -> list[tuple[str, dict]]:
    """The runs under a spool root that belong to the ledger ``identity`` (ledger_identity()),
    oldest first, each (its dir, its marker). Nothing else in the root is read."""
    try:
        with os.scandir(root) as it:
            dirs = [e.path for e in it if RUN_NAME.fullmatch(e.name) and e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    found = []
    for run_dir in dirs:
        try:
            run = read_run(run_dir)
            when = os.stat(os.path.join(run_dir, MARKER)).st_mtime
        except (OSError, ValueError):
            continue  # no marker yet (starting), or not a run of this ledger's making
        if run.get("ledger") == identity:
            found.append((when, run_dir, run))
    return [(d, r) for _, d, r in sorted(found)]


def remove_run(run_dir: str, set_aside: frozenset | set = frozenset(), own: bool = False) -> None:
    """Remove a run whose records are all in the ledger: the files the ledger wrote,
    nothing else (a file set aside is renamed and kept; the dir stays while anything
    is left in it); then the spool root if ``own`` (the ledger's own) and empty."""
    try:
        with os.scandir(run_dir) as it:
            names = [e.name for e in it]
    except OSError:
        names = []
    ours = [n for n in names if n.endswith(SUFFIX) or n.startswith("done-") or n == f".{MARKER}.tmp"]
    for name in [*ours, MARKER, LOCK_FILE]:  # the marker before the lock: then it is no run
        path = os.path.join(run_dir, name)
        try:
            if path in set_aside:
                os.replace(path, path + SET_ASIDE)
            else:
                os.unlink(path)
        except OSError:
            pass
    for path in (run_dir, os.path.dirname(run_dir)) if own else (run_dir,):
        try:
            os.rmdir(path)
        except OSError:
            return


def spool_files(run_dir: str) -> list[str]:
    try:
        with os.scandir(run_dir) as it:
            return sorted(e.path for e in it if e.name.endswith(SUFFIX))
    except OSError:
        return []
