"""The report as a block of a README: rewrite it (`--update`) or check it (`--check`).

The block sits between two HTML comments, which markdown renders as nothing. Its text
holds no current time, so the same ledger always gives the same block and `--check`
in CI fails only when the ledger moved and the README did not.

An update changes the bytes between the markers and nothing else: the file is read
and written as bytes (a CRLF file keeps its CRLFs, a file in another encoding its
text), the block takes the file's own line ending, and a symlink's target is what is
written. It refuses, in one line and leaving the file as it was, anything but a regular
file of at most MAX_BYTES (a FIFO would block, /dev/zero never end), a file without
any write bit (root could write it, but its owner said no), one the system will not
open for writing, and one with other hard links (the rename would leave them behind).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ledger.errors import LedgerError
from ledger.files import kind_of

START = "<!-- ledger-report:start -->"
END = "<!-- ledger-report:end -->"
MAX_BYTES = 16 * 2**20  # a README, generously; not a disk image


def _span(data: bytes, name: str) -> tuple[int, int]:
    """Where the block's content starts and ends in `data`."""
    start_, end_ = START.encode(), END.encode()
    start = data.find(start_)
    end = data.find(end_, start + len(start_)) if start >= 0 else -1
    if start < 0 or end < 0:
        raise LedgerError(f"{name} has no {START} ... {END} markers: add them where the report goes")
    if 0 <= data.find(start_, start + len(start_)) < end:
        raise LedgerError(f"{name} has two {START} markers before {END}")
    return start + len(start_), end


def _newline(outside: bytes) -> bytes:
    """The file's own line ending, from the bytes the update keeps: CRLF where most
    of its line feeds follow a CR."""
    crlf = outside.count(b"\r\n")
    return b"\r\n" if crlf and 2 * crlf >= outside.count(b"\n") else b"\n"


def render(data: bytes, report: str, name: str = "the file") -> bytes:
    """`data` with the block between the markers replaced by `report`."""
    a, b = _span(data, name)
    eol = _newline(data[:a] + data[b:])
    # "<!--" from the ledger's own text (a hostname, a tag) would open a comment that
    # hides the README after it, or be taken for an end marker by the next update
    body = report.rstrip("\n").replace("<!--", "&lt;!--").encode("utf-8")
    return data[:a] + eol + body.replace(b"\n", eol) + eol + data[b:]


def read(path: Path) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file at `path` (a symlink followed), and its stat.
    What it is, is asked before it is opened: opening a FIFO blocks."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise LedgerError(f"no such file: {path}") from None
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror}") from None
    _regular(path, st)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise LedgerError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise LedgerError(f"{path} was replaced while it was being read: try again")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise LedgerError(f"{path} is over {MAX_BYTES // 2**20} MiB: report --update takes a README, not this")
    return data, st



def _regular(path: Path, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        kind = kind_of(st.st_mode, "not a file")
        raise LedgerError(f"{path} is {kind}: report --update writes only into a regular file")
    if st.st_size > MAX_BYTES:
        raise LedgerError(f"{path} is {st.st_size} bytes, over {MAX_BYTES // 2**20} MiB:"
                          " report --update takes a README, not this")


def _writable(path: Path, st: os.stat_result) -> None:
    """Refuse a file this update may not write, before writing anything. The rename
    that replaces the file asks only its folder, and root passes every permission
    check, so the file's own mode bits are read here, then the system is asked."""
    if not st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH):
        raise LedgerError(f"{path} is read-only (mode {stat.S_IMODE(st.st_mode):04o}): "
                          "report --update leaves it as it is (chmod u+w to let it)")
    if st.st_nlink > 1:
        raise LedgerError(f"{path} has {st.st_nlink} hard links: an update would change this name only"
                          " and leave the others with the old text")
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC))  # opens, writes nothing
    except OSError as exc:
        raise LedgerError(f"cannot write {path}: {exc.strerror}") from None


def update(path: Path, report: str, check: bool = False) -> bool:
    """Bring the block in `path` up to date; with `check`, write nothing. Returns
    whether the block was stale (was, or would have been, rewritten)."""
    from ledger.files import atomic_write

    data, st = read(path)
    new = render(data, report, str(path))
    stale = new != data
    if stale and not check:
        _writable(path, st)
        atomic_write(path, new)
    return stale
