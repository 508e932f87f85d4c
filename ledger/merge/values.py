"""One source value checked as a column of the destination that the record contract's
row validator does not cover (a prediction's own columns, a cache prune's): storable
text, seconds, a count, an ISO 8601 time. Each returns the value to write or raises
RecordError naming the column."""

from __future__ import annotations

import math

from ledger.merge.rows import shown
from ledger.record_validation import INT64, TIMESTAMP_FORM, RecordError, text_ok, timestamp_ok


def text(name: str, value):
    """A string of storable text (no NUL, valid UTF-8), or None."""
    if value is not None and not isinstance(value, str):
        raise RecordError(f"{name} is not a string ({shown(repr(value), 60)})")
    if value is not None and not text_ok(value):
        raise RecordError(f"{name} is not storable text (a NUL character or invalid UTF-8)")
    return value


def seconds(name: str, value, signed: bool = False):
    """A finite number of seconds, not negative (``signed``: either sign), as a float; or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecordError(f"{name} is not a number ({shown(repr(value), 60)})")
    try:
        out = float(value)
    except OverflowError:  # an int too large for a float
        out = math.inf
    if not math.isfinite(out):
        raise RecordError(f"{name} is not a finite number ({shown(repr(value), 60)})")
    if out < 0 and not signed:
        raise RecordError(f"{name} is negative ({value!r})")
    return out


def signed_seconds(name: str, value):
    """Seconds of either sign (what a cache saved: a read slower than the compile it
    replaced saved less than nothing, ledger/savings.py), finite; or None."""
    return seconds(name, value, signed=True)


def count(name: str, value):
    """An integer from 0 to 2**63-1 (a whole float, as SQLite may hold one, made int); or None."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise RecordError(f"{name} is not an integer ({shown(repr(value), 60)})")
    if value is not None and not 0 <= value <= INT64[1]:
        raise RecordError(f"{name} is not a count from 0 to 2**63-1 ({shown(str(value), 60)})")
    return value


def time(name: str, value):
    """An ISO 8601 time as the record contract writes one (timestamp_ok)."""
    if not isinstance(value, str) or not timestamp_ok(value):
        raise RecordError(f"{name} is not an ISO 8601 time {TIMESTAMP_FORM} ({shown(repr(value), 60)})")
    return value
