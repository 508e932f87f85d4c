"""The comparability key and the loaded-host rule, as the watch features use them.

The key's fields are defined once in ledger/record.py; this module turns them into
what pins, check and report need: a canonical text for one key (pins.pin_key) and
SQL for the columns and for the loaded-host test, so the whole ledger is grouped
by the database, not in Python.
"""

from __future__ import annotations

import json

from ledger.record import CELL_FIELDS, COMPARABILITY_KEY, HOST_KEY_FIELDS

__all__ = ["CELL_FIELDS", "COMPARABILITY_KEY", "HOST_KEY_FIELDS", "pin_key", "key_columns_sql",
           "LOADED_SQL", "is_loaded"]


def pin_key(row) -> str:
    """Canonical text of a row's comparability key: what pins.pin_key holds.

    JSON of the values in COMPARABILITY_KEY order (NULLs as null; mixed_precision as
    true/false whatever the backend returned), so equal keys give equal text."""
    values = []
    for name in COMPARABILITY_KEY:
        v = row[name]
        if name == "mixed_precision" and v is not None:
            v = bool(v)
        values.append(v)
    return json.dumps(values, separators=(",", ":"))


def key_columns_sql(alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in COMPARABILITY_KEY)


# A host is loaded when its 1-minute load average exceeds the cores the probe could
# use: the CPU affinity where recorded, else the CPU count. XLA compiles on the host
# cores, and load alone has moved one compile 7x. A row with no load or no core count
# (every legacy row) is not called loaded: nothing shows it was.
def same_sql(a: str, b: str, dialect: str) -> str:
    """a equals b, NULL equal to NULL (legacy rows leave key columns NULL)."""
    return f"{a} IS {b}" if dialect == "sqlite" else f"{a} IS NOT DISTINCT FROM {b}"


LOADED_SQL = (
    "(host_load_avg_1m IS NOT NULL AND COALESCE(host_cpu_affinity, host_cpu_count) IS NOT NULL"
    " AND host_load_avg_1m > COALESCE(host_cpu_affinity, host_cpu_count))"
)


def is_loaded(row) -> bool:
    load = row.get("host_load_avg_1m")
    cores = row.get("host_cpu_affinity") or row.get("host_cpu_count")
    return load is not None and cores is not None and load > cores
