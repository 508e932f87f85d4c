"""Rendering query results: an aligned table for people, CSV and JSON for tools."""

from __future__ import annotations

import csv
import io
import json
from typing import Sequence


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def _numeric_text(value) -> bool:
    if value is None:
        return True
    try:
        float(value)
        return isinstance(value, str)
    except (TypeError, ValueError):
        return False


def format_table(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    numeric = [bool(rows) and all(isinstance(r[i], (int, float)) or _numeric_text(r[i]) for r in rows)
               for i in range(len(columns))]

    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out.extend(line(row) for row in cells)
    return "\n".join(out) + "\n"


def format_csv(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(["" if v is None else v for v in row] for row in rows)
    return buf.getvalue()


def _json_default(value):
    if isinstance(value, bytes):  # a BLOB: hex, as SQLite's hex() would show it
        return value.hex()
    return str(value)


def format_json(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    return json.dumps([dict(zip(columns, row)) for row in rows], indent=1, default=_json_default) + "\n"
