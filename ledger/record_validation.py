"""A record checked against the contract (ledger/record.py) and made a row: types,
storable text, sibling-record kinds, and the content keys that make imports
idempotent.

Pure functions, no database: the importer, the probe's writer and merge all go
through here, so a record is checked and keyed the same way whichever path brings
it in. The values a person types for a row (the tag and the cell: LINE_FIELDS) are
held to check_text_value() here, and the CLI's options (ledger/cli/options.py) and
ProbeSpec hold what is typed to the same function before any work is done.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import operator
import pickle
import re
from collections import deque
from datetime import datetime
from typing import Any

from ledger.record import (
    CACHE_STATE_SOURCES,
    CACHE_STATES,
    CELL_LABELS,
    COMPILE_FIELDS,
    DURATION_FIELDS,
    FUNCTION_KINDS,
    INSTRUMENT_COLUMNS,
    KEY_FIELDS,
    LEGACY_FIELDS,
    PROCESS_KEY_FIELDS,
    RECORDED_KEY_FIELDS,
    SOURCE_RECORDED,
    STATUS_FAILED,
    STATUS_OK,
    TEST_PHASES,
)


class RecordError(ValueError):
    """A record that cannot be stored as it is; the caller adds file and index."""


def is_compile_record(rec: dict) -> bool:
    # The legacy trees mix compile records with siblings; compile_s is the one
    # field every compile record has and no sibling has.
    return "compile_s" in rec


def instrument_kind(rec: dict) -> str:
    kind = rec.get("record_kind")
    if isinstance(kind, str) and kind and kind != "compile":
        return kind
    if {"serialize_s", "deserialize_s", "blob_mb", "trace_export_s"} & rec.keys():
        return "export_probe"
    if "rollup_tottime_s" in rec:
        return "trace_profile"
    return "other"


STATUSES = (STATUS_OK, STATUS_FAILED)  # a probe writes one of these; a legacy record none
INT64 = (-(2**63), 2**63 - 1)  # what SQLite's INTEGER (and PostgreSQL's BIGINT) hold


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def text_ok(value: str) -> bool:
    """Storable text: no NUL (SQLite's string functions stop at one, so the backfill
    rule would read a different tag than Python does) and valid UTF-8 (no lone
    surrogates, which JSON can carry and SQLite cannot store)."""
    if "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# The fields a person names a row by, which lines of output show (pins, check, the
# report): the tag and the cell's text. Each is one line of printable text of at most
# TEXT_VALUE_MAX characters (check_text_value), whichever way it comes in.
LINE_FIELDS = ("tag", *CELL_LABELS, "transform")
TEXT_VALUE_MAX = 200
# C0 and C1 control characters (tab, newline, CR, ESC, NUL, DEL, NEL) and the Unicode
# line and paragraph separators: each would break a line of output or drive a terminal.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class _Line:
    """The kind of a LINE_FIELDS column: a str, held to check_text_value()."""


_LINE = _Line
_KINDS = {**COMPILE_FIELDS, **dict.fromkeys(LINE_FIELDS, _LINE)}


def check_text_value(name: str, value: str) -> str:
    """`value` (a str) when it is fit for a tag or cell value, else RecordError naming
    `name` (a field, or the option it was typed as): storable text (no lone surrogate,
    as a byte that is not UTF-8 arrives in argv), no control character or line
    separator, at most TEXT_VALUE_MAX characters. The one rule for such values: the
    row validator, the CLI's options and ProbeSpec all call it."""
    if not text_ok(value):
        raise RecordError(f"{name} is not storable text (a NUL character or invalid UTF-8)")
    if not (value.isascii() and value.isprintable()):
        found = _CONTROL.search(value)
        if found:
            raise RecordError(f"{name} holds a control character ({found.group()!r}); "
                              "a tag or cell value is one line of printable text")
    if len(value) > TEXT_VALUE_MAX:
        raise RecordError(f"{name} is {len(value)} characters long; a tag or cell value is at most {TEXT_VALUE_MAX}")
    return value


# A timestamp: ISO 8601 as YYYY-MM-DDTHH:MM:SS, optional fractional seconds, optional
# UTC offset (Z or +HH:MM). "Newest" is decided in text order, so the form is held
# exactly: datetime.fromisoformat() alone would take a space for the T (which sorts
# before it), a date alone or a week date. Every timestamp of the legacy corpus has
# this form (seconds, no offset), as the probe and `ledger record` write it, so no
# legacy form needs an exception. The regex is the shape; fromisoformat() then refuses
# what no calendar has (a 30th of February, hour 24, offset +25:00).
_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:Z|[+-][0-9]{2}:[0-9]{2})?")
TIMESTAMP_FORM = "YYYY-MM-DDTHH:MM:SS[.ffffff][+HH:MM]"


def timestamp_ok(value: str) -> bool:
    if _TIMESTAMP.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


_SECONDS_FORM = "YYYY-MM-DDTHH:MM:SS"
_SEPARATORS = tuple((i, c.encode()) for i, c in enumerate(_SECONDS_FORM) if c in "-T:")
_DIGITS = b"0123456789"


def _timestamps_ok(values: list[str]) -> bool:
    """timestamp_ok() for each of many. All in the seconds form (the legacy corpus, the
    probe, `ledger record`) is checked on the values joined, with C-level bytes
    operations: at each separator's place its character, digits everywhere else (the
    regex costs ~1 us a value, this ~0.1 us); the calendar by fromisoformat()."""
    n, width = len(values), len(_SECONDS_FORM)
    text = "".join(values)
    if len(text) == n * width and text.isascii() and set(map(len, values)) == {width}:
        data = text.encode()
        if any(data[i::width] != sep * n for i, sep in _SEPARATORS):
            return False
        if data.translate(None, _DIGITS) != b"".join(sep for _, sep in _SEPARATORS) * n:
            return False
        try:
            deque(map(datetime.fromisoformat, values), maxlen=0)
        except ValueError:
            return False
        return True
    return all(map(timestamp_ok, values))


def _check_measures(row: dict) -> None:
    """The timestamp's form and the durations' sign (their type is checked already)."""
    stamp = row.get("timestamp")
    if stamp is not None and not timestamp_ok(stamp):
        raise RecordError(f"timestamp is not an ISO 8601 time {TIMESTAMP_FORM} ({_short(stamp)})")
    for name in DURATION_FIELDS:
        if (s := row.get(name)) is not None and s < 0:
            raise RecordError(f"{name} is negative ({s!r})")


def _check(name: str, value: Any, kind: type) -> Any:
    if value is None:
        return None
    if kind is _LINE:
        return check_text_value(name, _check(name, value, str))
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RecordError(f"{name} is not a number ({_short(value)})")
        try:
            value = float(value)
        except OverflowError:
            raise RecordError(f"{name} is not a finite number ({_short(value)})") from None
        if not math.isfinite(value):
            raise RecordError(f"{name} is not a finite number ({value!r})")
        return value
    if kind is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecordError(f"{name} is not an integer ({_short(value)})")
        if not INT64[0] <= value <= INT64[1]:
            raise RecordError(f"{name} is out of the 64-bit integer range ({_short(value)})")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise RecordError(f"{name} is not true/false ({_short(value)})")
        return value
    if not isinstance(value, str):
        raise RecordError(f"{name} is not a string ({_short(value)})")
    if not text_ok(value):
        raise RecordError(f"{name} is not storable text (a NUL character or invalid UTF-8)")
    return value


def _fast_ok(value: Any, kind: type) -> bool:
    # exact type, and the cheap checks _check would make: finite floats (v - v is
    # NaN for inf and NaN), 64-bit ints, plain ASCII text without NUL
    if value is None:
        return True
    if kind is _LINE:  # isprintable(): for ASCII, no control character
        return type(value) is str and len(value) <= TEXT_VALUE_MAX and value.isascii() and value.isprintable()
    if type(value) is not kind:
        return False
    if kind is str:
        return value.isascii() and "\x00" not in value
    if kind is float:
        return value - value == 0.0
    if kind is int:
        return INT64[0] <= value <= INT64[1]
    return True


_key_buffer = io.BytesIO()
_key_pickler = pickle.Pickler(_key_buffer, protocol=4)
# Fast mode writes no memo: a value seen twice in one tuple is written twice, so the
# bytes depend only on the values, never on which objects happen to be shared.
_key_pickler.fast = True


def _digest64(data: bytes) -> int:
    # A signed 64-bit integer: fits SQLite's INTEGER and PostgreSQL's BIGINT. At a
    # million rows the chance of any collision is about 3e-8.
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


def key_of_values(values: tuple) -> int:
    """Content key of the KEY_FIELDS values, in order. Pickle (binary floats, no
    repr) is a quarter of the cost of repr() here, which matters at 100,000s of
    records; the values must be normalized first (ints in float columns as floats)."""
    _key_pickler.dump(values)
    data = _key_buffer.getvalue()
    _key_buffer.seek(0)
    _key_buffer.truncate()
    return _digest64(data)


_BEFORE_0012 = len(RECORDED_KEY_FIELDS) - len(PROCESS_KEY_FIELDS)


def compile_key(row: dict) -> int:
    recorded = tuple(map(row.get, RECORDED_KEY_FIELDS))
    if all(v is None for v in recorded):  # a probe or legacy row: its key as before 0011
        return key_of_values(tuple(map(row.get, KEY_FIELDS)))
    if all(v is None for v in recorded[_BEFORE_0012:]):  # no pid, no compile_index: as before 0012
        recorded = recorded[:_BEFORE_0012]
    return key_of_values((*map(row.get, KEY_FIELDS), *recorded))


def compile_row(rec: dict, *, default_hardware: str | None = None) -> dict:
    """A compile_records row from a legacy or exported record: the columns it has
    values for (absent ones are NULL or their default), checked, plus its key.

    This runs once per imported record (100,000s of them), hence the exact-type fast
    path before the general check."""
    row: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    for name, value in rec.items():
        kind = _KINDS.get(name)
        if kind is not None:
            row[name] = value if _fast_ok(value, kind) else _check(name, value, kind)
        elif name == "host_state":
            if not isinstance(value, dict):
                raise RecordError(f"host_state is not an object ({_short(value)})")
            for key, hv in value.items():
                column = f"host_{key}"
                if column in COMPILE_FIELDS:
                    row[column] = _check(f"host_state.{key}", hv, COMPILE_FIELDS[column])
                else:
                    extras.setdefault("host_state", {})[key] = hv
        elif name not in ("id", "record_key"):
            extras[name] = value  # kept, not dropped: lands in provenance
    _check_measures(row)
    if row.get("hardware") is None and default_hardware is not None:
        row["hardware"] = default_hardware
    row.pop("record_kind", None)  # always the column default, 'compile'
    if row.get("status") is None:
        row.pop("status", None)  # the column default, 'ok'
    elif row["status"] not in STATUSES:
        raise RecordError(f"status {_short(row['status'])} is not one of {', '.join(STATUSES)}")
    state = row.get("cache_state")
    if state is not None:
        if state not in CACHE_STATES:
            raise RecordError(f"cache_state {_short(state)} is not one of {', '.join(CACHE_STATES)}")
        if row.get("cache_state_source") not in CACHE_STATE_SOURCES:
            row["cache_state_source"] = SOURCE_RECORDED
    elif "cache_state_source" in row:
        # Left for the backfill rule, which the importer runs as SQL afterwards.
        row["cache_state_source"] = None
    kind = row.get("function_kind")
    if kind is not None and kind not in FUNCTION_KINDS:
        raise RecordError(f"function_kind {_short(kind)} is not one of {', '.join(FUNCTION_KINDS)}")
    if row.get("function") is not None and row.get("variant") is None:
        row["variant"] = 0  # a recorded compile that names no other program of its name and signature
    phase = row.get("test_phase")
    if phase is not None and phase not in TEST_PHASES:
        raise RecordError(f"test_phase {_short(phase)} is not one of {', '.join(TEST_PHASES)}")
    for name in (*PROCESS_KEY_FIELDS, "variant"):  # counts from 0
        if (n := row.get(name)) is not None and n < 0:
            raise RecordError(f"{name} is negative ({n})")
    if extras:
        row["provenance"] = _with_extras(row.get("provenance"), extras)
    row["record_key"] = compile_key(row)
    return row


def _with_extras(provenance: str | None, extras: dict) -> str:
    """Fields the contract has no column for, kept in the provenance JSON."""
    try:
        prov = json.loads(provenance) if provenance else {}
    except ValueError:
        prov = provenance
    if not isinstance(prov, dict):
        prov = {"provenance": prov}
    prov.update(extras)
    try:
        return json.dumps(prov, sort_keys=True, default=str, allow_nan=False)
    except ValueError:  # as for a sibling record: provenance is JSON that SQLite can read
        raise RecordError("holds NaN or Infinity, which JSON (and SQLite's json functions) cannot read") from None


def instrument_row(rec: dict, *, default_hardware: str | None = None) -> dict:
    """An instrument_records row: the record kept whole, common fields as columns; its
    timestamp held to the same form as a compile record's (rows are ordered by it)."""
    stamp = rec.get("timestamp")
    if stamp is not None:
        _check_measures({"timestamp": _check("timestamp", stamp, str)})
    row = {name: (None if rec.get(name) is None else str(rec.get(name))) for name in INSTRUMENT_COLUMNS}
    if row["hardware"] is None:  # the folder's (an import) or the source row's column (a merge): checked too
        row["hardware"] = default_hardware
    for name, value in row.items():
        if not isinstance(value, str):  # None, or a source column's number (stored as it was)
            continue
        if name in LINE_FIELDS:
            check_text_value(name, value)
        elif not text_ok(value):
            raise RecordError(f"{name} is not storable text (a NUL character or invalid UTF-8)")
    try:
        row["record_key"] = instrument_key(rec, default_hardware)
        row["record_json"] = json.dumps(rec, allow_nan=False)
    except ValueError:
        raise RecordError("holds NaN or Infinity, which JSON (and SQLite's json functions) cannot read") from None
    row["record_kind"] = instrument_kind(rec)
    return row


def instrument_key(rec: dict, hardware: str | None) -> int:
    """The content key of a sibling record filed under ``hardware``.

    The key covers the hardware the row is filed under, so the same record found
    under two local_* folders is two rows (as for compile records); export writes
    that hardware into the record, so a re-import finds the same key. A stored row
    gives the same key from its record_json and hardware column."""
    keyed = rec if rec.get("hardware") is not None or hardware is None else dict(rec, hardware=hardware)
    return _digest64(json.dumps(keyed, sort_keys=True, separators=(",", ":"), allow_nan=False).encode())


_LEGACY_NAMES = tuple(LEGACY_FIELDS)
_LEGACY_SET = frozenset(LEGACY_FIELDS)
_ALL_LEGACY = operator.itemgetter(*_LEGACY_NAMES)
_OK_TYPES = {
    str: {str, type(None)},
    float: {float, int, type(None)},  # ints are normalized to floats below
    int: {int, type(None)},
    bool: {bool, type(None)},
}
FAST_COLUMNS = (*_LEGACY_NAMES, "record_key")
_COLUMN = [operator.itemgetter(i) for i in range(len(_LEGACY_NAMES))]


_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


def json_text_is_plain(text: str) -> bool:
    """True when no string in this JSON text can hold a NUL or a lone surrogate: JSON
    carries those only as \\u0000 or \\uD8xx-\\uDFxx escapes (raw control characters
    are invalid JSON, raw surrogates invalid UTF-8). One regex over the file instead
    of a check per string."""
    return _SUSPECT_ESCAPE.search(text) is None


def plain_legacy(rec: dict) -> bool:
    """True for a record of legacy fields only: eligible for legacy_rows_fast()."""
    return rec.keys() <= _LEGACY_SET


def legacy_rows_fast(
    records: list[dict], *, default_hardware: str | None = None, text_checked: bool = False
) -> list[tuple] | None:
    """Rows (in FAST_COLUMNS order) for records that hold legacy fields only, with
    the same checks, normalization and keys as compile_row(), done a column at a
    time with C-level builtins. None when some value needs compile_row() (to be
    converted, or to be reported with its record index). `text_checked`: the caller
    knows every string is storable (see json_text_is_plain)."""
    if not records:
        return []
    full = len(_LEGACY_SET)
    tuples = [_ALL_LEGACY(r) if len(r) == full else tuple(map(r.get, _LEGACY_NAMES)) for r in records]
    for i, (name, kind) in enumerate(LEGACY_FIELDS.items()):
        types = set(map(type, map(_COLUMN[i], tuples)))
        if not types <= _OK_TYPES[kind]:
            return None
        if kind is str:
            if not text_checked and not text_ok("\x01".join(filter(None, map(_COLUMN[i], tuples)))):
                return None
            if name == "timestamp":  # compile_row() says which record and why
                present = [v for v in map(_COLUMN[i], tuples) if v is not None]  # '' too
                if present and not _timestamps_ok(present):
                    return None
            if name in LINE_FIELDS:  # compile_row() says which record and why
                present = list(filter(None, map(_COLUMN[i], tuples)))
                text = " ".join(present)
                if present and (max(map(len, present)) > TEXT_VALUE_MAX
                                or not (text.isascii() and text.isprintable()) and _CONTROL.search(text)):
                    return None
        elif kind is float or kind is int:
            present = [v for v in map(_COLUMN[i], tuples) if v is not None]
            if not present:
                continue
            try:
                if kind is int:
                    if min(present) < INT64[0] or max(present) > INT64[1]:
                        return None
                    continue
                if not all(map(math.isfinite, present)):
                    return None
                if name in DURATION_FIELDS and min(present) < 0:
                    return None
                if int in types:
                    tuples = [t[:i] + (float(t[i]),) + t[i + 1:] if type(t[i]) is int else t for t in tuples]
            except OverflowError:  # an int too large for a float
                return None
    if default_hardware is not None:
        h = _LEGACY_NAMES.index("hardware")
        tuples = [t[:h] + (default_hardware,) + t[h + 1:] if t[h] is None else t for t in tuples]
    no_run = (None, None)  # run_id, phase: the rest of KEY_FIELDS
    return [t + (key_of_values(t + no_run),) for t in tuples]
