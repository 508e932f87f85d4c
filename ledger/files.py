"""Writing a file the ledger hands to someone else (a report, an export, a sweep's
record): whole or not at all, in its place, as the file it replaces was."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int, otherwise: str) -> str:
    """What a file that is not a regular one is, for a refusal ("a FIFO", ...). Asked of
    a stat before opening, because opening a FIFO blocks."""
    return next((name for test, name in _KINDS if test(mode)), otherwise)


def atomic_write(path, data: str | bytes) -> None:
    """Write `data` (text is written as UTF-8, its newlines as given) to `path` through
    a temp file in the same folder and a rename, so a reader (a browser, CI, another
    node) never sees half a file, and a failed write leaves the old file as it was and
    no temp file behind.

    A symlink is followed: its target is written and the link stays a link. The file
    that is replaced keeps its mode and, where this process may give them, its owner
    and group; a new file gets the usual mode (0666 less the umask)."""
    path = Path(os.path.realpath(path))
    try:
        old = os.stat(path)
    except FileNotFoundError:
        old = None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        # mkstemp makes 0600, owned by us: make it what the file it replaces was (the
        # owner first: a chown may clear the set-id bits that the chmod then restores)
        if old and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
            _keep_owner(tmp, old)
        os.chmod(tmp, stat.S_IMODE(old.st_mode) if old else 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _keep_owner(tmp: str, old: os.stat_result) -> None:
    """Root gives the owner back (a README owned by its user stays theirs); anyone
    else may at least keep the group, where they are in it."""
    for uid in (old.st_uid, -1):
        try:
            os.chown(tmp, uid, old.st_gid)
            return
        except PermissionError:
            continue


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
