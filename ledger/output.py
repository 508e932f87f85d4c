"""Rendering query results: an aligned table for people, CSV and JSON for tools.

format_* render a result held in memory. write_* stream one: each row is written as
it comes, and the output is flushed on the first row and then at least every
FLUSH_EVERY_S, so a reader at the other end of a pipe sees rows while a long query
still runs, and holding a result of any length costs one row of memory.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from itertools import chain, islice
from typing import TextIO

FLUSH_EVERY_S = 0.25
WRITE_CHUNK = 1000  # rows rendered and written at once
# The most text the aligned table holds (it holds its rows to align them): with
# values of up to 1 MiB (readonly.CELL_LIMIT), 1000 rows of them would not do.
TABLE_BYTES = 16 << 20
# About the most text one streamed chunk renders: after each chunk the next one's
# rows are as many as fit at the width of the last (WRITE_CHUNK at most), so rows
# of 1 MiB values are written a few at a time, not 1000 (1 GB) at once.
CHUNK_BYTES = 4 << 20


# -- stdout that refuses a write -----------------------------------------------------------
# A full device (ENOSPC), a quota, an I/O error: the command's output is lost, and the
# user is told so in one line (as_ledger_error, and end_output for the interpreter's
# last flush). A closed pipe (EPIPE: `ledger sql ... | head -1`) is no error: Click's
# own handling ends it quietly, exit 1. Only errors of stdout itself are marked, so an
# OSError of any other file keeps its traceback.

_MARK = "ledger_stdout"


class _Stdout(io.TextIOWrapper):
    """sys.stdout, whose write errors say they are stdout's. Marked at the text layer:
    a raw file's write in Python would let a SIGINT land after the bytes went out and
    before the buffer counted them, and they would be written twice."""

    def write(self, s):
        try:
            return super().write(s)
        except OSError as exc:
            setattr(exc, _MARK, True)
            raise

    def flush(self):
        try:
            return super().flush()
        except OSError as exc:
            setattr(exc, _MARK, True)
            raise


def mark_stdout() -> None:
    """Put sys.stdout on a _Stdout: the same fd, encoding, errors and buffering as
    the interpreter gave it. For the `ledger` entry point (ledger/cli/__init__.py)."""
    old = sys.stdout
    try:
        fd = old.fileno()
        old.flush()
    except (AttributeError, OSError, ValueError):
        return  # no stdout, or not a file: nothing to mark
    sys.stdout = _Stdout(io.BufferedWriter(io.FileIO(fd, "w", closefd=False)),
                         encoding=old.encoding, errors=old.errors,
                         line_buffering=old.line_buffering, write_through=old.write_through)


def _drop_stdout() -> None:
    """fd 1 onto /dev/null: what stdout still holds goes nowhere, and the
    interpreter's flush at exit does not fail on it again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def output_error(exc: BaseException) -> str | None:
    """What a write error of stdout means to the user; None for any other error and
    for a closed pipe. What stdout still holds is dropped (_drop_stdout)."""
    if not (isinstance(exc, OSError) and getattr(exc, _MARK, False)) or exc.errno == errno.EPIPE:
        return None
    _drop_stdout()
    return f"cannot write the output: {exc.strerror or os.strerror(exc.errno or 0)}"


def end_output() -> str | None:
    """Flush stdout before the interpreter does. None when it is written; else the
    command fails: output_error's line, or "" (nothing to say) for a closed pipe, as
    Click ends one met earlier."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        said = output_error(exc)
        if said is not None:
            return said
        if exc.errno != errno.EPIPE:
            raise
        _drop_stdout()
        return ""
    except (AttributeError, ValueError):  # no stdout, or closed
        pass
    return None


def three_digits(value: float) -> str:
    """Seconds to three significant digits, as ':.3g' writes them, never in exponent form:
    a root cause of 2,000 cells costs "6000 s a run", which ':.3g' wrote "6e+03"."""
    text = f"{value:.3g}"
    if "e" not in text:
        return text
    if abs(value) >= 1:
        return f"{value:.0f}"
    return f"{value:.{2 - math.floor(math.log10(abs(value)))}f}"


def shown(value) -> str:
    """`value` as a line of output shows it: its text, each character that is not
    printable (a newline, a tab, ESC, U+2028, ...) written as its escape, repr-style
    (\\n, \\x1b, \\u2028). A value stored with a line break (a row from before the rule
    of ledger/record_validation.check_text_value, or written by SQL) cannot start a line
    of its own nor drive the terminal."""
    text = value if isinstance(value, str) else str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, bytes):
        return value.hex()
    return shown(value)


def _csv_rows(writer, buf: io.StringIO, rows: Sequence[Sequence]) -> None:
    """`rows` into `buf` as `writer` (a csv.writer on it) writes them, but a BLOB as its
    hex (as every format shows one; csv.writer would write Python's b'...' repr), written
    as it is: hex never needs quoting, and csv.writer's scan of a long field cost 28 ms a
    MiB of BLOB (`ledger sql --csv` of 300 one-MiB BLOBs: 7.9 s of CPU; 1.7 s as JSON).
    One test over the rows' values, at C speed, for the common case of no BLOB."""
    if bytes not in map(type, chain.from_iterable(rows)):
        writer.writerows(rows)
        return
    for row in rows:
        if bytes in map(type, row):
            fields = [v.hex() if type(v) is bytes else "" if v is None or v == "" else _csv_field(v) for v in row]
            buf.write('""\n' if fields == [""] else ",".join(fields) + "\n")  # csv.writer's one empty field
        else:
            writer.writerow(row)


def _csv_field(value) -> str:
    """One non-empty field as csv.writer writes it within a row: quoted where it must be."""
    one = io.StringIO()
    csv.writer(one, lineterminator="\n").writerow([value])
    return one.getvalue()[:-1]


def _numeric_text(value) -> bool:
    if value is None:
        return True
    try:
        float(value)
        return isinstance(value, str)
    except (TypeError, ValueError):
        return False


def _table_text(columns: Sequence[str], cells: Sequence[Sequence[str]], widths: Sequence[int],
                numeric: Sequence[bool]) -> str:
    def line(values):
        return "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out.extend(line(row) for row in cells)
    return "\n".join(out) + "\n"


def format_table(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(c) for c in columns]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row)]
    numeric = [bool(rows) and all(isinstance(r[i], (int, float)) or _numeric_text(r[i]) for r in rows)
               for i in range(len(columns))]
    return _table_text(columns, cells, widths, numeric)


def format_csv(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)
    _csv_rows(writer, buf, rows)
    return buf.getvalue()


def _json_default(value):
    if isinstance(value, bytes):  # a BLOB: hex, as SQLite's hex() would show it (as _cell, _csv_rows)
        return value.hex()
    return str(value)


def format_json(columns: Sequence[str], rows: Sequence[Sequence]) -> str:
    return json.dumps([dict(zip(columns, row)) for row in rows], indent=1, default=_json_default) + "\n"


def _paced(out: TextIO, rows: Iterable[Sequence], render: Callable[[list], str]) -> int:
    """Write the rows as they come, rendered a chunk at a time (one write per row
    would cost as much as the query); flush on the first row, then whenever
    FLUSH_EVERY_S has passed since the last flush, so that a pipe's buffer does not
    hold the rows of a slow query back; a chunk is about CHUNK_BYTES of text at
    most, as wide as the last chunk's rows were (the first row is written alone).
    Returns the number of rows."""
    chunk, n, due, most = [], 0, 0.0, WRITE_CHUNK
    try:
        for row in rows:
            chunk.append(row)
            now = time.monotonic()
            if now >= due or len(chunk) >= most:
                text = render(chunk)
                out.write(text)
                most = max(1, min(WRITE_CHUNK, CHUNK_BYTES * len(chunk) // max(1, len(text))))
                del text
                n += len(chunk)
                chunk.clear()
                if now >= due:
                    out.flush()
                    due = now + FLUSH_EVERY_S
    except Exception:
        # the query failed after these rows: they are whole, and out before the error
        # (not after an interrupt: that writes nothing more)
        out.write(render(chunk))
        out.flush()
        raise
    out.write(render(chunk))
    out.flush()
    return n + len(chunk)


def write_csv(out: TextIO, columns: Sequence[str], rows: Iterable[Sequence]) -> int:
    """`rows` as CSV with a header line, streamed; NULL is an empty field. Nothing at
    all for a statement without columns."""
    if not columns:
        return _paced(out, rows, lambda chunk: "")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(columns)

    def render(chunk: list) -> str:
        _csv_rows(writer, buf, chunk)
        text = buf.getvalue()
        buf.seek(0)
        buf.truncate()
        return text

    return _paced(out, rows, render)


def write_json_lines(out: TextIO, columns: Sequence[str], rows: Iterable[Sequence]) -> int:
    """`rows` as JSON lines, streamed: one object per row, keyed by column name."""
    encode = json.JSONEncoder(default=_json_default).encode
    return _paced(out, rows, lambda chunk: "".join(encode(dict(zip(columns, row))) + "\n" for row in chunk))


def write_table(out: TextIO, columns: Sequence[str], rows: Iterable[Sequence], limit: int | None,
                more: str = "") -> int:
    """An aligned table of at most `limit` rows (None: all of them, held in memory to
    size the columns) and at most TABLE_BYTES of text (every line is as wide as the
    widest cell makes it), and when there are more, a closing line that says so:
    `... (first 1000 rows<more>)`. Only the rows shown and one more are fetched; the
    first row is shown whatever its width."""
    cells: list[list[str]] = []
    widths = [len(c) for c in columns]
    numeric = [True] * len(columns)
    said = ""
    for row in rows if limit is None else islice(rows, limit + 1):
        if limit is not None and len(cells) == limit:
            said = f"first {limit} rows{more}"
            break
        shown_row = [_cell(v) for v in row]
        wider = [max(w, len(c)) for w, c in zip(widths, shown_row)]
        # the header, the rule and the rows, each as wide as the widest
        if cells and (len(cells) + 3) * (sum(wider) + 2 * len(wider)) > TABLE_BYTES:
            said = f"first {len(cells)} rows: the table holds at most {TABLE_BYTES >> 20} MiB; use --csv or --json for all"
            break
        cells.append(shown_row)
        widths = wider
        numeric = [num and (isinstance(v, (int, float)) or _numeric_text(v)) for num, v in zip(numeric, row)]
    if columns:
        out.write(_table_text(columns, cells, widths, [num and bool(cells) for num in numeric]))
    if said:
        out.write(f"... ({said})\n")
    out.flush()
    return len(cells)
