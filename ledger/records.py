"""Turning a JSON record into a row: validation, sibling-record kinds, content keys.

Pure functions, no database: the importer and the probe's writer both go through
here, so a record is checked and keyed the same way whichever path brings it in.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import operator
import pickle
from typing import Any

from .cache_rule import CACHE_STATE_SOURCES, CACHE_STATES, SOURCE_RECORDED
from .models import COMPILE_FIELDS, INSTRUMENT_COLUMNS, LEGACY_FIELDS


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


def _check(name: str, value: Any, kind: type) -> Any:
    if value is None:
        return None
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RecordError(f"{name} is not a number ({value!r})")
        if not math.isfinite(value):
            raise RecordError(f"{name} is not a finite number ({value!r})")
        return float(value)
    if kind is int:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecordError(f"{name} is not an integer ({value!r})")
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise RecordError(f"{name} is not true/false ({value!r})")
        return value
    if not isinstance(value, str):
        raise RecordError(f"{name} is not a string ({value!r})")
    return value


# What identifies a compile measurement: its legacy content plus, for probe rows,
# the run and phase (a failed transform has no timings to tell it apart).
KEY_FIELDS = (*LEGACY_FIELDS, "run_id", "phase")


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


def compile_key(row: dict) -> int:
    return key_of_values(tuple(map(row.get, KEY_FIELDS)))


def compile_row(rec: dict, *, default_hardware: str | None = None) -> dict:
    """A compile_records row from a legacy or exported record: the columns it has
    values for (absent ones are NULL or their default), checked, plus its key.

    This runs once per imported record (100,000s of them), hence the exact-type fast
    path before the general check."""
    row: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    for name, value in rec.items():
        kind = COMPILE_FIELDS.get(name)
        if kind is not None:
            # exact type and (for floats) finite: v - v is NaN for inf and NaN
            if value is None or (type(value) is kind and (kind is not float or value - value == 0.0)):
                row[name] = value
            else:
                row[name] = _check(name, value, kind)
        elif name == "host_state":
            if not isinstance(value, dict):
                raise RecordError(f"host_state is not an object ({value!r})")
            for key, hv in value.items():
                column = f"host_{key}"
                if column in COMPILE_FIELDS:
                    row[column] = _check(f"host_state.{key}", hv, COMPILE_FIELDS[column])
                else:
                    extras.setdefault("host_state", {})[key] = hv
        elif name not in ("id", "record_key"):
            extras[name] = value  # kept, not dropped: lands in provenance
    if row.get("hardware") is None and default_hardware is not None:
        row["hardware"] = default_hardware
    row.pop("record_kind", None)  # always the column default, 'compile'
    if row.get("status") is None:
        row.pop("status", None)  # the column default, 'ok'
    state = row.get("cache_state")
    if state is not None:
        if state not in CACHE_STATES:
            raise RecordError(f"cache_state {state!r} is not one of {', '.join(CACHE_STATES)}")
        if row.get("cache_state_source") not in CACHE_STATE_SOURCES:
            row["cache_state_source"] = SOURCE_RECORDED
    elif "cache_state_source" in row:
        # Left for the backfill rule, which the importer runs as SQL afterwards.
        row["cache_state_source"] = None
    if extras:
        prov = json.loads(row["provenance"]) if row.get("provenance") else {}
        if not isinstance(prov, dict):
            prov = {"provenance": prov}
        prov.update(extras)
        row["provenance"] = json.dumps(prov, sort_keys=True, default=str)
    row["record_key"] = compile_key(row)
    return row


def instrument_row(rec: dict, *, default_hardware: str | None = None) -> dict:
    """An instrument_records row: the record kept whole, common fields as columns."""
    row = {name: (None if rec.get(name) is None else str(rec.get(name))) for name in INSTRUMENT_COLUMNS}
    if row["hardware"] is None:
        row["hardware"] = default_hardware
    canonical = json.dumps(rec, sort_keys=True, separators=(",", ":"))
    row["record_kind"] = instrument_kind(rec)
    row["record_json"] = json.dumps(rec)
    row["record_key"] = _digest64(canonical.encode())
    return row


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


def plain_legacy(rec: dict) -> bool:
    """True for a record of legacy fields only: eligible for legacy_rows_fast()."""
    return rec.keys() <= _LEGACY_SET


def legacy_rows_fast(records: list[dict], *, default_hardware: str | None = None) -> list[tuple] | None:
    """Rows (in FAST_COLUMNS order) for records that hold legacy fields only, with
    the same checks, normalization and keys as compile_row(), done a column at a
    time with C-level builtins. None when some value needs compile_row() (to be
    converted, or to be reported with its record index)."""
    if not records:
        return []
    full = len(_LEGACY_SET)
    tuples = [_ALL_LEGACY(r) if len(r) == full else tuple(map(r.get, _LEGACY_NAMES)) for r in records]
    for i, (name, kind) in enumerate(LEGACY_FIELDS.items()):
        types = set(map(type, map(_COLUMN[i], tuples)))
        if not types <= _OK_TYPES[kind]:
            return None
        if kind is float:
            if not all(map(math.isfinite, [v for v in map(_COLUMN[i], tuples) if v is not None])):
                return None
            if int in types:
                tuples = [t[:i] + (float(t[i]),) + t[i + 1:] if type(t[i]) is int else t for t in tuples]
    if default_hardware is not None:
        h = _LEGACY_NAMES.index("hardware")
        tuples = [t[:h] + (default_hardware,) + t[h + 1:] if t[h] is None else t for t in tuples]
    no_run = (None, None)  # run_id, phase: the rest of KEY_FIELDS
    return [t + (key_of_values(t + no_run),) for t in tuples]
