"""Compile and sibling rows from a source into the destination.

Every row is checked by the record contract's one validator (ledger/record_validation.py),
the one `ledger import` uses: a source changed by hand or by an older writer holds
what import would refuse (text in a number column, inf, a BLOB, a cache_state or
status outside the vocabulary), and a refused row stops the merge with one line
naming the source, the row's id and the field. The values are read as the database
stores them (driver-level SQL, no SQLAlchemy type processing, which would turn 'yes'
into True in a boolean column); SQLite's 0/1 booleans are the one representation
undone before the check.

Rows are keyed so that a row already there is not added again (storage/bulk.py);
a row whose identity matches but whose cache_state differs is a conflict, reported
(the destination's stays).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from sqlalchemy.exc import SQLAlchemyError

from ledger.errors import LedgerError, first_line
from ledger.record import COMPILE_FIELDS, INSTRUMENT_COLUMNS, STATUS_OK
from ledger.record_validation import INT64, RecordError, compile_row, instrument_row
from ledger.storage.bulk import insert_new, lookup
from ledger.storage.models import compile_records, instrument_records

CHUNK = 10_000
_COMPILE = ("id", *COMPILE_FIELDS, "record_key")
_INSTRUMENT = ("id", "record_json", *INSTRUMENT_COLUMNS, "record_key")
_BOOLS = frozenset(name for name, kind in COMPILE_FIELDS.items() if kind is bool)


def shown(value, limit: int = 200) -> str:
    """A value in an output line: as it is when printable, else quoted (a newline in a
    tag must not start a line of its own), and cut short."""
    text = value if isinstance(value, str) and value.isprintable() else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def chunks(src, display: str, table: str, columns) -> Iterator[list[dict]]:
    # the column names are the contract's, never input
    sql = f"SELECT {', '.join(columns)} FROM {table} ORDER BY id"
    try:
        result = src.execution_options(stream_results=True).exec_driver_sql(sql)
        while rows := result.fetchmany(CHUNK):
            yield [dict(zip(columns, r)) for r in rows]
    except SQLAlchemyError as exc:
        raise LedgerError(f"cannot read {display}: {first_line(exc)}") from None


def _key(row: dict, computed: int) -> int:
    """The source's own key when it has one (the identity its earlier merges used), else
    the one computed from the content, as `ledger import` keys."""
    key = row["record_key"]
    if key is None:
        return computed
    if type(key) is not int or not INT64[0] <= key <= INT64[1]:
        raise RecordError(f"record_key is not a 64-bit integer ({shown(repr(key), 60)})")
    return key


def sqlite_bools(rec: dict) -> dict:
    """`rec` with its boolean columns' 1/0 (how SQLite stores true/false) made bools."""
    for name in _BOOLS.intersection(rec):
        if type(rec[name]) is int and rec[name] in (0, 1):
            rec[name] = bool(rec[name])
    return rec


def checked_compile_row(raw: dict) -> dict:
    """The destination's row for a source row, or RecordError naming the field."""
    row = compile_row(sqlite_bools({name: raw[name] for name in COMPILE_FIELDS}))
    row["record_key"] = _key(raw, row["record_key"])
    return row


def checked_instrument_row(raw: dict) -> dict:
    text = raw["record_json"]
    if not isinstance(text, str):
        raise RecordError(f"record_json is not text ({shown(repr(text), 60)})")
    try:
        rec = json.loads(text)
    except (ValueError, RecursionError):
        raise RecordError("record_json is not JSON") from None
    if not isinstance(rec, dict):
        raise RecordError("record_json is not a JSON object")
    hardware = raw["hardware"]
    if hardware is not None and not isinstance(hardware, str):
        raise RecordError(f"hardware is not a string ({shown(repr(hardware), 60)})")
    try:
        row = instrument_row(rec, default_hardware=hardware)
    except RecordError as exc:
        if str(exc).startswith("holds"):  # NaN or Infinity: the record is record_json's
            raise RecordError(f"record_json {exc}") from None
        raise
    row["record_key"] = _key(raw, row["record_key"])
    return row


def checked(rows: list[dict], check, display: str, kind: str = "row") -> list[dict]:
    """check(raw) of each row, or LedgerError naming the source, the row's kind and id."""
    out = []
    for raw in rows:
        try:
            out.append(check(raw))
        except RecordError as exc:
            raise LedgerError(f"{display}: {kind} {raw['id']}: {exc}") from None
    return out


def copy_compile_rows(src, dest, display: str, wanted: set) -> tuple[int, int, list[str], dict]:
    """(added, already present, conflicts, {source id: record_key} of the `wanted` ids)."""
    added = present = 0
    conflicts: list[str] = []
    keys: dict = {}
    for raws in chunks(src, display, "compile_records", _COMPILE):
        rows = checked(raws, checked_compile_row, display)
        keys.update((raw["id"], row["record_key"]) for raw, row in zip(raws, rows) if raw["id"] in wanted)
        _fill_defaults(rows)
        n = insert_new(dest, compile_records, rows)
        added += n
        if n < len(rows):  # some were there: the same identity must say the same state
            have = lookup(dest, compile_records, "record_key", "cache_state", [r["record_key"] for r in rows])
            mine = {r["record_key"]: r for r in rows}
            for key, state in have.items():
                row = mine[key]
                if state != row.get("cache_state"):
                    conflicts.append(f"row {shown(row.get('transform'))} {row.get('tag')!r} {shown(row.get('timestamp'))}:"
                                     f" cache_state {row.get('cache_state')} in the source, {state} here (kept)")
            present += len(rows) - n
    return added, present, conflicts, keys


def _fill_defaults(rows: list[dict]) -> None:
    # The validator leaves a column out where the table's default applies (status
    # 'ok'); insert_new writes the union of a batch's columns, so a row without one
    # would write NULL into a NOT NULL column: say the default outright.
    for row in rows:
        row.setdefault("status", STATUS_OK)


def copy_instrument_rows(src, dest, display: str) -> tuple[int, int]:
    added = present = 0
    for raws in chunks(src, display, "instrument_records", _INSTRUMENT):
        rows = checked(raws, checked_instrument_row, display)
        n = insert_new(dest, instrument_records, rows)
        added, present = added + n, present + len(rows) - n
    return added, present
