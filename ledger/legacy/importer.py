"""`ledger import`: legacy results trees and single JSON files into the ledger.

All or nothing: the rows go in inside one transaction, file by file as they are
checked (reading.py), and the first bad file or record (in file order) rolls all of it back.
Idempotent: rows carry a content key and a key already present is skipped. Compile
records without a recorded cache_state get it from the rule the 0003 data migration
runs (cache_rule.py): the legacy-only records, the bulk of a tree, from its readers,
so that each row is written once; any other from the migration's own UPDATE over the
rows just added. On SQLite the cache cells' triggers judge the batch once
(cells.appending), not each row, and a tree larger than the ledger goes in with the
indexes it would enter in no order set aside and made again after it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection, Engine

from ledger import gc_pause
from ledger.legacy.cache_rule import backfill_sql
from ledger.legacy.reading import STATED_COLUMNS, Batch, Parts, find_json_files, reading, tree_bytes
from ledger.storage import cell_ids
from ledger.storage.bulk import KeysTaken, fill_missing_keys, insert_new, insert_sql, scattered_indexes_aside
from ledger.storage.models import compile_records, instrument_records
from ledger.watch.cells import appending

__all__ = ["ImportSummary", "find_json_files", "import_parts", "import_paths"]


@dataclass
class ImportSummary:
    files: int = 0
    records: int = 0
    added_compile: int = 0
    added_instrument: int = 0
    duplicates: int = 0
    by_state: Counter = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)


_KEY_AT = STATED_COLUMNS.index("record_key")
# What a legacy record takes in its JSON file, at least (bench/bench_import.py's: about
# 450 bytes); an estimate of a tree's records from its size, low on purpose.
_BYTES_PER_RECORD = 1024


def _insert_part(conn: Connection, part: Batch, summary: ImportSummary, cells: dict,
                 taken: KeysTaken | None) -> None:
    if part.fast_rows:
        rows = cell_ids.ids(conn, part.fast_cells, part.fast_rows, part.fast_slots, cells)
        if taken is not None:
            rows = taken.new(rows, _KEY_AT)
        sql = insert_sql(conn, compile_records, (*STATED_COLUMNS, "cell_id"), keyed=taken is None)
        summary.added_compile += conn.exec_driver_sql(sql, rows).rowcount if rows else 0
    summary.added_compile += insert_new(conn, compile_records, part.compile_rows, taken)
    summary.added_instrument += insert_new(conn, instrument_records, part.instrument_rows)
    summary.duplicates += len(part)


@contextmanager
def _scattered_indexes(conn: Connection, files: list[Path], rows_before: int) -> Iterator[KeysTaken | None]:
    """A tree with more records than the ledger has rows goes in with SCATTERED_INDEXES
    set aside and made again after it (on SQLite; PostgreSQL keeps them: dropping one
    there would lock out every reader until the commit)."""
    if not _sets_aside(conn, files, rows_before):
        yield None
        return
    with scattered_indexes_aside(conn) as taken:
        yield taken


def _sets_aside(conn: Connection, files: list[Path], rows_before: int) -> bool:
    return conn.dialect.name == "sqlite" and rows_before * _BYTES_PER_RECORD <= tree_bytes(files)


def _max_id(conn: Connection) -> int:
    return conn.execute(select(func.coalesce(func.max(compile_records.c.id), 0))).scalar()


def _backfill_since(conn: Connection, max_id: int) -> None:
    # Only the rows just added: the rule never touches a row that has a state, and
    # on a big ledger a full-table WHERE cache_state IS NULL would be a full scan.
    conn.execute(text(backfill_sql(conn.dialect.name) + " AND id > :max_id"), {"max_id": max_id})


def _count_states_since(conn: Connection, max_id: int, summary: ImportSummary) -> None:
    states = conn.execute(
        select(compile_records.c.cache_state, func.count())
        .where(compile_records.c.id > max_id)
        .group_by(compile_records.c.cache_state)
    ).all()
    summary.by_state.update({state: n for state, n in states})


def import_paths(
    engine: Engine,
    paths: Iterable[str | Path],
    *,
    skip_invalid: bool = False,
    progress: Callable[[Iterable[Path]], Iterable[Path]] | None = None,
) -> ImportSummary:
    """Import every record under `paths` in one transaction: all or nothing."""
    files = find_json_files(paths)
    engine.dispose()  # no open database connection may cross into forked readers
    with gc_pause.paused(), reading(files, skip_invalid, progress) as parts:
        return import_parts(engine, files, parts)


def import_parts(engine: Engine, files: list[Path], parts: Parts) -> ImportSummary:
    """The checked rows of `files`, as reading() yields them, in one transaction.
    (`ledger import` starts the readers first: they parse while the ledger opens.)"""
    summary = ImportSummary(files=len(files))
    with engine.begin() as conn:
        fill_missing_keys(conn)
        first_id = _max_id(conn)
        cells: dict = {}  # the fast rows' cell ids found so far
        with appending(conn, first_id), cell_ids.own_ids(conn), \
                _scattered_indexes(conn, files, first_id) as taken:  # every row written with its own cell
            for part, skipped, count in parts:
                summary.records += count
                summary.skipped.extend(skipped)
                since = _max_id(conn) if part.compile_rows else None
                _insert_part(conn, part, summary, cells, taken)
                if since is not None:  # rows with or without a state of their own
                    _backfill_since(conn, since)
        _count_states_since(conn, first_id, summary)
    summary.duplicates -= summary.added_compile + summary.added_instrument
    return summary
