"""`ledger cache prune`: remove the entries of a JAX cache dir that save least per byte.

The plan: every entry unused for N days (its last use: the newest of its last row in the
ledger, its -atime file and its write), in order of least saved seconds per byte (the
inventory's evidence; without a ledger none, so 0 for all), the oldest last use first on a
tie. ``--unused-days`` alone removes them all; ``--max-size`` removes them in that order
until the dir's entries fit, and an entry used within N days is never removed to get there.

Only the files named as JAX names an entry (JAX_NAME, UTF-8) count: for the plan, and for
``--max-size``, which sums them alone, as JAX's own eviction does (a core dump beside them
is no reason to remove every entry). Temp files, the lock and any other file are never
touched.

Removal is safe beside running jobs. An entry goes by unlink: a reader that opened it keeps
reading, and a writer still writing it writes into a file no longer in the dir, so the dir
never holds a half-written entry because of a prune. Each entry is stat'ed again just
before it goes and is left alone if a writer rewrote it since the plan. Where JAX's LRU
eviction is on (the dir has its ``.lockfile``), each removal holds JAX's own lock, as JAX's
get, put and eviction do, so the entry and its -atime file go together; the whole prune
waits LOCK_TIMEOUT_S for it at most (a job suspended while holding it), then skips what
stays locked, saying so.

With a ledger, each removal's cache_prunes row is committed before its file goes, and taken
back if the file stays (another user's entry in a sticky dir): a prune stopped at any point
(an entry that cannot go, a ledger that refuses the record, a kill) leaves a true record. An
entry that cannot go is a line of its own; the prune goes on.
"""

from __future__ import annotations

import os
import re
import socket
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path

import sqlalchemy as sa

from ledger.cache.entries import ATIME, SUFFIX
from ledger.cache.inventory import DAY, Inventory, Item, iso, last_use
from ledger.errors import LedgerError, first_line

DEFAULT_DAYS_WITH_SIZE = 7  # --max-size without --unused-days protects a week's use
MAX_DAYS = 100_000  # 270 years: past it, a date is no longer a date
LOCKFILE = ".lockfile"  # JAX's lru_cache: a FileLock (fcntl.flock on POSIX)
LOCK_TIMEOUT_S = 10.0  # JAX's own default wait for it: the longest a whole prune waits
UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
         "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
JAX_NAME = re.compile(r".+-[0-9a-f]{64}(-cache)?")  # <module name>-<sha256>, with -cache after jax 0.4.30
SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+) ?([a-z]*)")


class PruneUsageError(LedgerError):
    """A bad --unused-days or --max-size, or neither: exit 2, nothing removed."""

    exit_code = 2


def parse_size(text: str) -> int:
    """Bytes from 500M, 2G, 1.5GB, 3GiB, 1000 (K, M, G, T: powers of 1000, as the MB shown)."""
    found = SIZE.fullmatch(text.lower())
    if found is None or found[2] not in UNITS or len(text) > 40:
        raise PruneUsageError(f"--max-size must be a size such as 500M, 2G, 1.5GB or 1000 (bytes), not {text!r}")
    try:
        size = Decimal(found[1]) * UNITS[found[2]]
    except InvalidOperation:  # pragma: no cover - the pattern admits only plain decimals
        raise PruneUsageError(f"--max-size must be a size, not {text!r}") from None
    if size != int(size):  # 0.5 is not 0 bytes
        raise PruneUsageError(f"--max-size must be a whole number of bytes, not {text!r} ({size} bytes)")
    return int(size)


def parse_days(text: str) -> int:
    """Whole days from 0 to MAX_DAYS."""
    value = text
    if not value.isascii() or not value.isdigit() or len(value) > 6 or int(value) > MAX_DAYS:
        raise PruneUsageError(f"--unused-days must be a whole number of days from 0 to {MAX_DAYS}, not {text!r}")
    return int(value)


def mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB"


def jax_entry(item: Item) -> bool:
    """A file named as JAX names an entry: the only kind a prune removes or counts."""
    name = item.entry.name
    return JAX_NAME.fullmatch(name) is not None and name.isprintable() and _utf8(name)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a name of bytes that are not UTF-8: never JAX's
        return False
    return True


@dataclass
class Removal:
    item: Item
    reason: str
    skipped: str | None = None  # why it stayed after all (a writer, JAX's lock, the system), if it did
    note: str | None = None  # what stayed of a removed entry (its -atime file), if anything

    def as_json(self) -> dict:
        return self.item.as_json() | {"reason": self.reason, "skipped": self.skipped, "note": self.note}


@dataclass
class Plan:
    inventory: Inventory
    unused_days: int
    max_size: int | None
    removals: list[Removal] = field(default_factory=list)
    protected: int = 0  # entries used within unused_days (or not named as JAX names entries)
    dry_run: bool = True
    recorded: bool = False  # rows written to the ledger's cache_prunes
    stopped: str | None = None  # why the prune stopped before its end (the ledger refused a record)

    @property
    def removed(self) -> list[Removal]:
        return [r for r in self.removals if r.skipped is None]

    def remaining_bytes(self) -> int:
        """What JAX's entries in the dir total once the removals are done."""
        return entries_bytes(self.inventory.items) - sum(r.item.entry.bytes for r in self.removed)

    def as_json(self) -> dict:
        return {"cache_dir": self.inventory.cache_dir, "ledger": self.inventory.ledger, "dry_run": self.dry_run,
                "unused_days": self.unused_days, "max_size": self.max_size, "protected": self.protected,
                "removals": [r.as_json() for r in self.removals], "recorded": self.recorded, "stopped": self.stopped,
                "bytes_freed": sum(r.item.entry.bytes for r in self.removed),
                "jax_compile_s": sum(r.item.entry.jax_compile_s or 0 for r in self.removed),
                "bytes_left": self.remaining_bytes()}


def entries_bytes(items: list[Item]) -> int:
    return sum(i.entry.bytes for i in items if jax_entry(i))


def order(items: list[Item]) -> list[Item]:
    """Least saved seconds per byte first; on a tie, the oldest last use first."""
    return sorted(items, key=lambda i: (i.saved_s / max(i.entry.bytes, 1), last_use(i), i.entry.key))


def _reason(unused_days: int, max_size: int | None) -> str:
    parts = [f"unused {unused_days}+ days"] if unused_days or max_size is None else []
    if max_size is not None:
        parts.append(f"to fit --max-size {mb(max_size)}, least saved per byte")
    return "; ".join(parts)


def plan(inv: Inventory, unused_days: int, max_size: int | None, now: float | None = None) -> Plan:
    """What a prune removes, in order; nothing is touched."""
    now = time.time() if now is None else now
    unused = [i for i in inv.items if last_use(i) <= now - unused_days * DAY and jax_entry(i)]
    out = Plan(inv, unused_days, max_size, protected=len(inv.items) - len(unused))
    total, reason = entries_bytes(inv.items), _reason(unused_days, max_size)
    for item in order(unused):
        if max_size is not None and total <= max_size:
            break
        out.removals.append(Removal(item, reason))
        total -= item.entry.bytes
    return out


@contextmanager
def jax_lock(cache_dir: Path, until: float):
    """JAX's own lock of the dir (where eviction made one), waited for until the monotonic
    time ``until`` (once past it, tried once): yields False if not had."""
    path = cache_dir / LOCKFILE
    try:
        import fcntl

        fd = os.open(path, os.O_RDWR)
    except (ImportError, OSError):  # no lock file: eviction is off, JAX locks nothing
        yield True
        return
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= until:
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class PruneRecord:
    """The ledger's cache_prunes rows of one prune: each committed before its entry's file
    goes (add()), and taken back if the file stays (take_back())."""

    def __init__(self, engine, cache_dir: str):
        from ledger.rows import utc_now

        if not _utf8(cache_dir):
            raise LedgerError(f"the cache dir {cache_dir.encode('utf-8', 'surrogateescape')!r} is not UTF-8 text:"
                              " the ledger cannot record its removals (give it through a link with a UTF-8 name)")
        self.engine, self.cache_dir = engine, cache_dir
        self.when, self.host = utc_now(), socket.gethostname()

    def add(self, r: Removal) -> int:
        from ledger.storage.models import cache_prunes

        e = r.item.entry
        row = {"cache_dir": self.cache_dir, "cache_key": e.key, "entry": os.path.join(self.cache_dir, e.name),
               "bytes": e.bytes, "jax_compile_s": e.jax_compile_s, "hits": r.item.hits, "saved_s": r.item.saved_s,
               "last_used": iso(last_use(r.item)), "reason": r.reason, "hostname": self.host,
               "pruned_at": self.when}
        with self.engine.begin() as conn:
            return conn.execute(sa.insert(cache_prunes).values(**row)).inserted_primary_key[0]

    def take_back(self, row_id: int) -> None:
        from ledger.storage.models import cache_prunes

        with self.engine.begin() as conn:
            conn.execute(sa.delete(cache_prunes).where(cache_prunes.c.id == row_id))


def _remove_one(cache_dir: Path, removal: Removal, until: float, wait: float, record: PruneRecord | None) -> None:
    e = removal.item.entry
    path = cache_dir / e.name
    with jax_lock(cache_dir, until) as locked:
        if not locked:
            removal.skipped = f"JAX's lock of the dir is held (a prune waits {wait:g} s for it in all)"
            return
        try:
            st = path.stat(follow_symlinks=False)
        except FileNotFoundError:
            removal.skipped = "already gone"
            return
        except OSError as err:
            removal.skipped = f"cannot read it: {err.strerror}"
            return
        if (st.st_size, st.st_mtime) != (e.bytes, e.mtime):
            removal.skipped = "rewritten since the plan"
            return
        row_id = record.add(removal) if record is not None else None  # the record first: then the file
        try:
            path.unlink()
        except OSError as err:
            removal.skipped = "already gone" if isinstance(err, FileNotFoundError) else f"cannot remove it: {err.strerror}"
            if row_id is not None:
                record.take_back(row_id)
            return
        try:
            (cache_dir / f"{e.name.removesuffix(SUFFIX)}{ATIME}").unlink(missing_ok=True)
        except OSError as err:
            removal.note = f"its {ATIME.lstrip('-')} file stays: {err.strerror}"


def apply(p: Plan, engine=None, timeout: float | None = None) -> None:
    """Remove the plan's entries from the dir, each as safely as the module doc says, and
    with a ledger (``engine``) record each as it goes. A ledger that refuses a record stops
    the prune there (Plan.stopped); what was removed before is recorded and said."""
    from ledger.storage.errors import as_ledger_error

    p.dry_run, wait = False, LOCK_TIMEOUT_S if timeout is None else timeout
    record = PruneRecord(engine, p.inventory.cache_dir) if engine is not None else None
    until = time.monotonic() + wait
    for n, removal in enumerate(p.removals):
        try:
            _remove_one(Path(p.inventory.cache_dir), removal, until, wait, record)
        except Exception as exc:
            error = as_ledger_error(exc)
            if error is None:
                raise
            p.stopped = f"the ledger refused to record a removal, so the prune stopped: {first_line(error)}"
            for rest in p.removals[n:]:
                rest.skipped = rest.skipped or "not reached: the prune stopped"
            break
    p.recorded = record is not None
