"""`ledger import`: legacy results trees and single JSON files into the ledger.

All or nothing: every file is read and every record checked before the first row is
written, and the rows go in inside one transaction. Idempotent: rows carry a content
key and a key already present is skipped. Compile records without a recorded
cache_state get it from the very UPDATE the 0003 data migration runs.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from sqlalchemy import func, select, text
from sqlalchemy.engine import Connection, Engine

from .cache_rule import backfill_sql
from .errors import LedgerError
from .models import compile_records, instrument_records
from .records import KEY_FIELDS, RecordError, compile_key, compile_row, instrument_row, is_compile_record


@dataclass
class ImportSummary:
    files: int = 0
    records: int = 0
    added_compile: int = 0
    added_instrument: int = 0
    duplicates: int = 0
    by_state: Counter = field(default_factory=Counter)
    skipped: list[str] = field(default_factory=list)


@dataclass
class _Batch:
    compile_rows: list[dict] = field(default_factory=list)
    instrument_rows: list[dict] = field(default_factory=list)


def find_json_files(paths: Iterable[str | Path]) -> list[Path]:
    """A tree is `<root>/<hardware>/<name>.json`; walk it in a stable order."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files.extend(sorted(p.rglob("*.json")))
        elif p.is_file():
            files.append(p)
        else:
            raise LedgerError(f"{p}: no such file or directory")
    return files


def _hardware_from_path(path: Path) -> str | None:
    # Legacy trees name the hardware in the directory; records normally carry it too.
    parent = path.parent.name
    return parent if parent.startswith("local_") else None


def read_file(path: Path, batch: _Batch, skipped: list[str] | None) -> int:
    """Check one file's records into `batch`; returns how many records it held.

    With `skipped` None a bad file or record raises; otherwise it is listed there and
    the rest of the file still goes in."""

    def bad(msg: str) -> None:
        if skipped is None:
            raise LedgerError(msg)
        skipped.append(msg)

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        bad(f"{path}: invalid JSON: {exc}")
        return 0
    if not isinstance(data, list):
        bad(f"{path}: not a list of records (top level is {type(data).__name__})")
        return 0
    hardware = _hardware_from_path(path)
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


def _fill_missing_keys(conn: Connection) -> None:
    """Rows that came in by plain INSERT (or lost their key in a downgrade) get one,
    so importing the same records afterwards still adds nothing."""
    cols = [compile_records.c.id, *(compile_records.c[f] for f in KEY_FIELDS)]
    rows = conn.execute(select(*cols).where(compile_records.c.record_key.is_(None))).mappings().all()
    if not rows:
        return
    taken = set(conn.execute(select(compile_records.c.record_key).where(compile_records.c.record_key.is_not(None))).scalars())
    updates = []
    for r in rows:
        key = compile_key(r)
        if key not in taken:  # a true duplicate among keyless rows keeps no key
            taken.add(key)
            updates.append({"k": key, "i": r["id"]})
    if updates:
        conn.execute(text("UPDATE compile_records SET record_key = :k WHERE id = :i"), updates)


def _insert_ignoring_duplicates(conn: Connection, table, rows: list[dict]) -> int:
    if not rows:
        return 0
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    before = conn.execute(select(func.count()).select_from(table)).scalar()
    conn.execute(insert(table).on_conflict_do_nothing(
        index_elements=["record_key"], index_where=text("record_key IS NOT NULL")
    ), rows)
    return conn.execute(select(func.count()).select_from(table)).scalar() - before


def write_batch(conn: Connection, batch: _Batch, summary: ImportSummary) -> None:
    """Insert one checked batch inside the caller's transaction, then backfill."""
    _fill_missing_keys(conn)
    max_id = conn.execute(select(func.coalesce(func.max(compile_records.c.id), 0))).scalar()
    summary.added_compile += _insert_ignoring_duplicates(conn, compile_records, batch.compile_rows)
    summary.added_instrument += _insert_ignoring_duplicates(conn, instrument_records, batch.instrument_rows)
    conn.execute(text(backfill_sql(conn.dialect.name)))
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
    files = find_json_files(paths)
    summary = ImportSummary(files=len(files))
    batch = _Batch()
    skipped = summary.skipped if skip_invalid else None
    for path in progress(files) if progress else files:
        summary.records += read_file(path, batch, skipped)
    with engine.begin() as conn:
        write_batch(conn, batch, summary)
    summary.duplicates = (
        len(batch.compile_rows) + len(batch.instrument_rows) - summary.added_compile - summary.added_instrument
    )
    return summary
