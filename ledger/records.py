"""Turning a JSON record into a row: validation, sibling-record kinds, content keys.

Pure functions, no database: the importer and the probe's writer both go through
here, so a record is checked and keyed the same way whichever path brings it in.
"""

from __future__ import annotations

import hashlib
import json
import math
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


def compile_key(row: dict) -> str:
    return hashlib.sha1(repr(tuple(row.get(f) for f in KEY_FIELDS)).encode()).hexdigest()


def compile_row(rec: dict, *, default_hardware: str | None = None) -> dict:
    """A full compile_records row (every column) from a legacy or exported record."""
    row: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    for name, value in rec.items():
        kind = COMPILE_FIELDS.get(name)
        if kind is not None:
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
    for name in COMPILE_FIELDS:
        row.setdefault(name, None)
    if row["hardware"] is None:
        row["hardware"] = default_hardware
    row["record_kind"] = "compile"
    row["status"] = row["status"] or "ok"
    state = row["cache_state"]
    if state is not None:
        if state not in CACHE_STATES:
            raise RecordError(f"cache_state {state!r} is not one of {', '.join(CACHE_STATES)}")
        if row["cache_state_source"] not in CACHE_STATE_SOURCES:
            row["cache_state_source"] = SOURCE_RECORDED
    else:
        # Left for the backfill rule, which the importer runs as SQL afterwards.
        row["cache_state_source"] = None
    if extras:
        prov = json.loads(row["provenance"]) if row["provenance"] else {}
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
    row["record_key"] = hashlib.sha1(canonical.encode()).hexdigest()
    return row
