"""Writing a file the ledger hands to someone else (a report, an export, a sweep's
record): whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same folder and a rename, so a
    reader (a browser, CI, another node) never sees half a file, and a failed write
    leaves the old file as it was and no temp file behind."""
    path = Path(path)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, mode)  # mkstemp makes 0600: keep the file's own mode, or the usual one
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
