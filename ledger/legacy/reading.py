"""Reading legacy JSON for `ledger import`: finding the files, parsing them, and
checking every record into rows, in forked reader processes when there is enough
to read (reading is most of an import's time: JSON parsing plus per-record checks
and keys, CPU-bound Python).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ledger.errors import LedgerError
from ledger.legacy.cache_rule import with_states
from ledger.record_validation import (
    FAST_COLUMNS,
    RecordError,
    compile_row,
    instrument_row,
    is_compile_record,
    json_text_is_plain,
    legacy_rows_fast,
    plain_legacy,
)
from ledger.storage.cell_ids import cell_slots
from ledger.workers import can_fork, forked_pool

# A fast row: a legacy-only record checked a column at a time (the common, bulk case),
# with the state the backfill rule gives it.
STATED_COLUMNS = (*FAST_COLUMNS, "cache_state", "cache_state_source")
_CACHE_DIR_AT, _TAG_AT = FAST_COLUMNS.index("cache_dir"), FAST_COLUMNS.index("tag")


@dataclass
class Batch:
    compile_rows: list[dict] = field(default_factory=list)
    fast_rows: list[tuple] = field(default_factory=list)  # in STATED_COLUMNS order
    # the fast rows' distinct cells, and each row's as an index among them (cell_ids.cell_slots)
    fast_cells: list[tuple] = field(default_factory=list)
    fast_slots: list[int] = field(default_factory=list)
    instrument_rows: list[dict] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.compile_rows) + len(self.fast_rows) + len(self.instrument_rows)


def find_json_files(paths: Iterable[str | Path]) -> list[Path]:
    """A tree is `<root>/<hardware>/<name>.json`; walk it in a stable order."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            # *.json in any case; a broken link is kept (and reported when read), a
            # directory that happens to be called x.json is not a file to import
            found = (f for f in p.rglob("*") if f.suffix.lower() == ".json" and (f.is_file() or f.is_symlink()))
            files.extend(sorted(found))
        elif p.is_file():
            files.append(p)
        else:
            raise LedgerError(f"{p}: no such file or directory")
    return files


def tree_bytes(files: list[Path]) -> int:
    """The files' sizes in all (one that cannot be read counts 0: reading it says why)."""
    return sum(map(_size, files))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _hardware_from_path(path: Path) -> str | None:
    # Legacy trees name the hardware in the directory; records normally carry it too.
    parent = path.parent.name
    return parent if parent.startswith("local_") else None


def _load(path: Path, bad: Callable[[str], None]) -> tuple[bool, list] | None:
    """Whether the file's text is plain (rows.json_text_is_plain) and its top-level
    list, or None after reporting why not."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        return bad(f"{path}: cannot read: {exc.strerror or exc}")
    except UnicodeDecodeError as exc:
        return bad(f"{path}: not UTF-8 text: {exc.reason} at byte {exc.start}")
    try:
        data = json.loads(text)
    except ValueError as exc:  # json.JSONDecodeError
        return bad(f"{path}: invalid JSON: {exc}")
    except RecursionError:
        return bad(f"{path}: invalid JSON: nested too deeply")
    if not isinstance(data, list):
        return bad(f"{path}: not a list of records (top level is {type(data).__name__})")
    return json_text_is_plain(text), data


def read_file(path: Path, batch: Batch, skipped: list[str] | None) -> int:
    """Check one file's records into `batch`; returns how many records it held.

    With `skipped` None a bad file or record raises; otherwise it is listed there and
    the rest of the file still goes in."""

    def bad(msg: str) -> None:
        if skipped is None:
            raise LedgerError(msg)
        skipped.append(msg)

    loaded = _load(path, bad)
    if loaded is None:
        return 0
    text_plain, data = loaded
    hardware = _hardware_from_path(path)
    if all(type(rec) is dict for rec in data):
        plain = [rec for rec in data if is_compile_record(rec) and plain_legacy(rec)]
        if len(plain) == len(data):
            fast = legacy_rows_fast(plain, default_hardware=hardware, text_checked=text_plain)
            if fast is not None:
                assert not batch.fast_rows  # one file's fast rows to a batch: their slots index one list
                batch.fast_rows = with_states(fast, _CACHE_DIR_AT, _TAG_AT)
                batch.fast_cells, batch.fast_slots = cell_slots(STATED_COLUMNS, batch.fast_rows)
                return len(data)
    # The general path, record by record: mixed files, extra fields, and any file
    # with a value to convert or to report by its record index.
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            bad(f"{path}: record {i}: not an object ({type(rec).__name__})")
            continue
        try:
            if is_compile_record(rec):
                batch.compile_rows.append(compile_row(rec, default_hardware=hardware))
            else:
                batch.instrument_rows.append(instrument_row(rec, default_hardware=hardware))
        except RecordError as exc:
            bad(f"{path}: record {i}: {exc}")
    return len(data)


def _read_one(job: tuple[Path, bool]) -> tuple[Batch, list[str], int]:
    path, skip_invalid = job
    batch, skipped = Batch(), []
    count = read_file(path, batch, skipped if skip_invalid else None)
    return batch, skipped, count


# Reading is JSON parsing plus per-record checks and keys: CPU-bound Python, and
# most of an import's time. Past this much input, files are read by a pool of
# forked processes, one per core, while this process inserts what they have read.
PARALLEL_BYTES = 4 << 20


Parts = Iterable[tuple[Batch, list[str], int]]  # each file's rows, what it skipped, its record count


@contextmanager
def reading(files: list[Path], skip_invalid: bool, progress) -> Iterator[Parts]:
    """The files' checked rows, in file order, as they become ready."""
    jobs = [(f, skip_invalid) for f in files]
    shown = progress(files) if progress else files
    workers = min(os.cpu_count() or 1, len(files))
    if workers < 2 or tree_bytes(files) <= PARALLEL_BYTES or not can_fork():
        yield (_read_one(job) for job, _ in zip(jobs, shown))
        return
    pool = forked_pool(workers)
    try:
        # The workers forked in forked_pool, before any database connection is
        # opened; map() yields in file order, so the first bad file in order is the
        # one reported.
        results = pool.map(_read_one, jobs)
        yield (result for result, _ in zip(results, shown))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
