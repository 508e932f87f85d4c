"""What a SQLite ledger file needs from the machine: how long a writer waits for the
lock, whether the file sits on a network filesystem, and the one way to open it
read-only.

Many `ledger probe`s and imports write one file at once. SQLite serialises them:
each write transaction takes the write lock when it begins (BEGIN IMMEDIATE, see
engine.py) and waits up to the busy timeout for it, so no writer fails with
"database is locked" and none loses rows. In WAL mode readers never wait for
writers. Both need the file's locks to work, which network filesystems (NFS,
Lustre, GPFS ...) do not promise across nodes: there the ledger warns, and does not
switch to WAL, which needs memory shared by every process on one host.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.errors import LedgerError

BUSY_TIMEOUT_ENV = "LEDGER_BUSY_TIMEOUT"
# Long enough for the longest write a ledger does: a large import is one transaction
# (100,000 records take a few seconds, a million under a minute on a laptop).
DEFAULT_BUSY_TIMEOUT_S = 600.0

NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "cifs", "smb3", "smbfs", "ceph", "fuse.ceph", "beegfs", "fuse.beegfs",
    "glusterfs", "fuse.glusterfs", "fuse.sshfs", "afs", "9p", "panfs", "wekafs", "fuse.s3fs",
})


def is_locked(exc: BaseException) -> bool:
    """SQLite's "database is locked" or "busy" in an error, or in the one line a
    LedgerError made of it: another connection holds the lock. SQLite says it only in
    its message, so this is the one place that reads the message for it."""
    text = str(getattr(exc, "orig", None) or exc)
    return "locked" in text or "busy" in text


def busy_timeout_s() -> float:
    """Seconds a SQLite writer waits for the lock: $LEDGER_BUSY_TIMEOUT, else 600."""
    raw = os.environ.get(BUSY_TIMEOUT_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_BUSY_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise LedgerError(f"{BUSY_TIMEOUT_ENV}={raw!r} is not a number of seconds")
    return value


def read_only_uri(path: Path) -> str:
    """The URI that opens `path` read-only. A WAL file whose folder this user cannot write
    (a group's shared ledger) and whose -wal file is not there (no writer has it open:
    its first would make one) is opened immutable: SQLite cannot make the -shm file a
    WAL reader needs there, and refused every read with "unable to open database file"."""
    path = Path(path).resolve()
    # as_uri() percent-encodes the path: a '#' or '?' in a file name must not end the
    # path and drop mode=ro
    uri = f"{path.as_uri()}?mode=ro"
    if _wal_file(path) and not os.access(path.parent, os.W_OK) and not Path(f"{path}-wal").exists():
        uri += "&immutable=1"
    return uri


def _wal_file(path: Path) -> bool:
    """Whether the file's header says WAL mode (its read and write versions, bytes 18-19, are 2)."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"


def connect_read_only(path: Path) -> sqlite3.Connection:
    """A connection that can neither create nor change the file at `path` (read_only_uri()).
    It waits the busy timeout, as a writer does: a reader of a file not in WAL mode waits
    for the writer's lock."""
    return sqlite3.connect(read_only_uri(path), uri=True, timeout=busy_timeout_s(), check_same_thread=False)


@contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """connect_read_only(), closed on leaving. Errors are sqlite3's, for the caller to
    name (a bad file fails on the first read, not here)."""
    con = connect_read_only(path)
    try:
        yield con
    finally:
        con.close()


def filesystem_type(path: Path, mounts: str | None = None) -> str | None:
    """The type of the filesystem holding `path`, from /proc/mounts (None where
    there is no such file, as on macOS)."""
    if mounts is None:
        try:
            mounts = Path("/proc/mounts").read_text()
        except OSError:
            return None
    target = Path(os.path.abspath(path))
    best, best_type = None, None
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        # mount points escape spaces and tabs as octal (\040)
        point = Path(fields[1].encode().decode("unicode_escape"))
        if (point == target or point in target.parents) and (best is None or len(point.parts) > len(best.parts)):
            best, best_type = point, fields[2]
    return best_type


def network_filesystem(path: Path, mounts: str | None = None) -> str | None:
    """The network filesystem's type if `path` is on one, else None."""
    kind = filesystem_type(path.parent if not path.exists() else path, mounts)
    return kind if kind in NETWORK_FILESYSTEMS or (kind or "").startswith("nfs") else None


def network_warning(path: Path, kind: str) -> str:
    return (f"warning: {path} is on {kind}, a network filesystem: SQLite's locks are not safe there for "
            "writers on several nodes. Give each node its own ledger file, or use a PostgreSQL server "
            "(LEDGER_DB=postgresql+psycopg://...).")
