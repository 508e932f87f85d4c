"""The entries of a JAX persistent-cache dir, read from the files alone.

An entry is one file, ``<key>-cache`` (``<key>`` in jax 0.4.30), where the key is
``<module name>-<hash>``: the module name is the function JAX compiled (jit_loss). JAX's
LRU eviction keeps ``<key>-atime`` beside it (last access, nanoseconds, 8 bytes) and a
``.lockfile``: neither is an entry. Older JAX (its GFileCache) writes ``_temp_<key>`` and
renames it: a temp file, never an entry. The file is the compressed (zstd, else zlib) entry
of JAX's compilation_cache module (jax._src.compilation_cache): 4 bytes of compile time in whole seconds (big-endian),
then the serialized executable. Only the first bytes are decompressed, streamed: an
entry is megabytes, its compile time 4 bytes.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass
from pathlib import Path

SUFFIX, ATIME, TEMP = "-cache", "-atime", "_temp_"
TIME_BYTES = 4
CHUNK = 4096
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


@dataclass
class Entry:
    key: str
    function: str
    bytes: int
    mtime: float  # when it was written (seconds since the epoch)
    atime: float | None  # its -atime companion (LRU eviction on), seconds
    jax_compile_s: int | None  # what JAX recorded inside the entry
    unread: str | None = None  # why jax_compile_s is None
    name: str = ""  # the file's name in the dir


def _function(key: str) -> str:
    return key.rsplit("-", 1)[0] if "-" in key else key


def _zstd():
    try:
        from compression import zstd  # Python 3.14
        return zstd.ZstdDecompressor
    except ImportError:
        pass
    try:
        import zstandard
    except ImportError:
        return None
    return lambda: zstandard.ZstdDecompressor().decompressobj()


def compile_seconds(path: Path) -> tuple[int | None, str | None]:
    """JAX's recorded compile seconds of one entry, streaming only its first bytes."""
    try:
        with path.open("rb") as f:
            head = f.read(CHUNK)
            if head.startswith(ZSTD_MAGIC):
                make = _zstd()
                if make is None:
                    return None, "zstd entry, and no zstandard module here"
                decomp = make()
            else:
                decomp = zlib.decompressobj()
            out = b""
            while len(out) < TIME_BYTES and head:
                out += decomp.decompress(head)
                head = f.read(CHUNK)
    except (OSError, zlib.error, ValueError) as exc:
        return None, f"unreadable: {type(exc).__name__}"
    except Exception as exc:  # noqa: BLE001 - a zstd error class of whichever module decoded it
        return None, f"unreadable: {type(exc).__name__}"
    if len(out) < TIME_BYTES:
        return None, "shorter than its header"
    return int.from_bytes(out[:TIME_BYTES], "big"), None


def _atime(dir_path: Path, key: str) -> float | None:
    try:
        raw = (dir_path / f"{key}{ATIME}").read_bytes()
    except OSError:
        return None
    return int.from_bytes(raw[:8], "little") / 1e9 if len(raw) >= 8 else None


def is_entry(name: str) -> bool:
    """A file JAX reads as an entry: not its lock, an -atime file or a temp file."""
    return not name.startswith((".", TEMP)) and not name.endswith(ATIME)


def scan(dir_path: Path) -> list[Entry]:
    """Every entry of the dir, by key (a missing dir is the caller's one-line error)."""
    out = []
    with os.scandir(dir_path) as it:
        files = [e for e in it if e.is_file(follow_symlinks=False) and is_entry(e.name)]
    for e in files:
        key = e.name.removesuffix(SUFFIX)
        st = e.stat(follow_symlinks=False)
        seconds, why = compile_seconds(Path(e.path))
        out.append(Entry(key, _function(key), st.st_size, st.st_mtime, _atime(dir_path, key), seconds, why, e.name))
    return sorted(out, key=lambda x: x.key)
