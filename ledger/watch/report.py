"""`ledger report`: the ledger as markdown, one table per host key.

A compile time compares only within one comparability key, so the report never
ranks across keys: each (hardware, hostname, jax_version, mixed_precision) gets its
own heading and table, and a line of a table is one cell and transform, with its
newest warm and cold row side by side (the cold/warm speed-up is the cache's win
within that key), its pin and the newest verdict the check stored for it.

The database does the work: one window pass picks the newest warm and cold row of
every key (the table read once), so Python only sees one row per key, plus the pins
and the newest verdict per cell (small tables). The text holds no current time: the
README block (readme_block.py) must be the same text for the same ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import sqlalchemy as sa

from ledger.record import CELL_FIELDS, COLD, HOST_KEY_FIELDS, STATELESS_KEY, STATUS_OK, WARM
from ledger.watch.keys import LOADED_SQL
from ledger.watch.pins import filter_sql

# The host part of the key a table stands for; cache_state is not in it because a
# table line shows warm and cold side by side (each is its own key, never pooled).
HOST = tuple(f for f in HOST_KEY_FIELDS if f != "cache_state")
GROUP = STATELESS_KEY  # HOST, then the cell
assert GROUP == (*HOST, *CELL_FIELDS)
LOADED_MARK = "†"
LOADED_NOTE = f"{LOADED_MARK} measured on a loaded host (1-minute load above the usable cores)"
INTRO = ("Compile times in seconds. Each table is one comparability key: compare only within a table. "
         "Per cell and transform, the newest ok row of each cache state; rows whose cache_state is none "
         "or unknown, and failed rows, are not shown.")
COLUMNS = ("cell", "transform", "warm s", "cold s", "cold/warm", "pin s", "verdict", "source tag", "time")
NUMERIC = ("warm s", "cold s", "cold/warm", "pin s")
# Within one check run a cell may get several verdicts: the worst one speaks for it.
SEVERITY = "CASE v.verdict WHEN 'went-cold' THEN 4 WHEN 'regression' THEN 3 WHEN 'inconclusive' THEN 2 ELSE 1 END"


@dataclass
class Line:
    """One table line: one cell and transform within one host key."""

    host: tuple
    cell: tuple  # dataset_class, model_type, instrument, transform
    warm: Optional[dict] = None  # {id, compile_s, tag, timestamp, loaded}
    cold: Optional[dict] = None
    pin: Optional[dict] = None  # {id, row_id, compile_s, tag, timestamp, loaded}
    verdict: Optional[str] = None

    @property
    def source(self) -> Optional[dict]:
        """The newest row shown on the line (warm or cold): what was measured last."""
        rows = [r for r in (self.warm, self.cold) if r is not None]
        return max(rows, key=lambda r: (r["timestamp"] or "", r["id"])) if rows else None


def _newest_rows_sql(where: str) -> str:
    part = ", ".join((*GROUP, "cache_state"))
    return (
        f"SELECT {', '.join(GROUP)}, cache_state, id, compile_s, tag, timestamp, loaded FROM ("
        f" SELECT {part}, id, compile_s, tag, timestamp, CASE WHEN {LOADED_SQL} THEN 1 ELSE 0 END AS loaded,"
        f"  ROW_NUMBER() OVER (PARTITION BY {part} ORDER BY COALESCE(timestamp, '') DESC, id DESC) AS rn"
        f" FROM compile_records r WHERE r.cache_state IN ('{WARM}', '{COLD}')"
        f"  AND COALESCE(r.status, '{STATUS_OK}') = '{STATUS_OK}' AND r.compile_s IS NOT NULL{where}"
        ") newest WHERE rn = 1"
    )


def _verdicts_sql(where: str) -> str:
    cols = ", ".join(f"r.{c}" for c in GROUP)
    return (
        f"SELECT {', '.join(GROUP)}, verdict FROM ("
        f" SELECT {cols}, v.verdict, ROW_NUMBER() OVER (PARTITION BY {cols}"
        f"  ORDER BY v.check_run_id DESC, {SEVERITY} DESC, v.id DESC) AS rn"
        f" FROM verdicts v JOIN compile_records r ON r.id = v.row_id WHERE 1 = 1{where}"
        ") newest WHERE rn = 1"
    )


def _norm(row, names) -> tuple:
    # mixed_precision comes back 0/1 from SQLite, a bool from PostgreSQL
    return tuple(bool(row[n]) if n == "mixed_precision" and row[n] is not None else row[n] for n in names)


def collect(conn, filters: dict | None = None) -> list[Line]:
    """The report's lines, in report order (host key, then cell, then transform)."""
    where, params = filter_sql(filters, "r")
    lines: dict[tuple, Line] = {}

    def line(row) -> Line:
        key = _norm(row, GROUP)
        if key not in lines:
            lines[key] = Line(host=key[: len(HOST)], cell=key[len(HOST):])
        return lines[key]

    for row in conn.execute(sa.text(_newest_rows_sql(where)), params).mappings():
        shown = {k: row[k] for k in ("id", "compile_s", "tag", "timestamp")} | {"loaded": bool(row["loaded"])}
        setattr(line(row), "warm" if row["cache_state"] == WARM else "cold", shown)
    pin_sql = (f"SELECT {', '.join(GROUP)}, id, row_id, compile_s, tag, timestamp, loaded_host FROM pins r"
               f" WHERE r.cache_state = '{WARM}'{where}")
    for row in conn.execute(sa.text(pin_sql), params).mappings():
        line(row).pin = {k: row[k] for k in ("id", "row_id", "compile_s", "tag", "timestamp")} | {
            "loaded": bool(row["loaded_host"])}
    for row in conn.execute(sa.text(_verdicts_sql(where)), params).mappings():
        key = _norm(row, GROUP)
        if key in lines:  # a verdict about a cell with nothing left to show stays out
            lines[key].verdict = row["verdict"]
    return [lines[k] for k in sorted(lines, key=_sort_key)]


def _sort_key(key: tuple) -> tuple:
    return tuple((v is None, v if v is not None else "") for v in key)


def group_by_host(lines: list[Line]) -> list[tuple[tuple, list[Line]]]:
    groups: dict[tuple, list[Line]] = {}
    for ln in lines:
        groups.setdefault(ln.host, []).append(ln)
    return list(groups.items())


# -- text ---------------------------------------------------------------------------------
def _text(value) -> str:
    return "-" if value is None or value == "" else str(value)


def host_title(host: tuple) -> str:
    hardware, hostname, jax_version, mixed = host
    mp = "-" if mixed is None else str(bool(mixed)).lower()
    return f"{_text(hardware)} · {_text(hostname)} · jax {_text(jax_version)} · mixed_precision {mp}"


def seconds(row: Optional[dict]) -> str:
    if row is None or row.get("compile_s") is None:
        return "-"
    return f"{row['compile_s']:.2f}" + (LOADED_MARK if row.get("loaded") else "")


def when(timestamp: Optional[str]) -> str:
    """A stored ISO timestamp to the minute (the seconds are noise in a dashboard)."""
    return "-" if not timestamp else timestamp.replace("T", " ")[:16]


def cells(ln: Line) -> list[str]:
    """The text of one line, in COLUMNS order."""
    speedup = "-"
    if ln.warm and ln.cold and ln.warm["compile_s"] > 0:
        speedup = f"{ln.cold['compile_s'] / ln.warm['compile_s']:.1f}x"
    src = ln.source
    return [" / ".join(_text(v) for v in ln.cell[:3]), _text(ln.cell[3]), seconds(ln.warm), seconds(ln.cold),
            speedup, seconds(ln.pin), _text(ln.verdict), _text(src and src["tag"]), when(src and src["timestamp"])]


def is_loaded_line(ln: Line) -> bool:
    return any(r is not None and r["loaded"] for r in (ln.warm, ln.cold, ln.pin))


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(lines: list[Line]) -> str:
    """The whole report as markdown: a heading and a table per host key."""
    out = [INTRO, ""]
    if not lines:
        return "\n".join([*out, "No warm or cold compile rows."]) + "\n"
    for host, group in group_by_host(lines):
        out += [f"### {_md_escape(host_title(host))}", "", "| " + " | ".join(COLUMNS) + " |",
                "|" + "|".join("---:" if c in NUMERIC else "---" for c in COLUMNS) + "|"]
        out += ["| " + " | ".join(_md_escape(c) for c in cells(ln)) + " |" for ln in group]
        if any(is_loaded_line(ln) for ln in group):
            out += ["", LOADED_NOTE]
        out.append("")
    return "\n".join(out)


def build(engine, filters: dict | None = None) -> list[Line]:
    with engine.connect() as conn:
        return collect(conn, filters)


# -- what the charts draw (the HTML report) ------------------------------------------------
def series(conn, filters: dict | None = None, per_key: int = 200) -> dict[tuple, list[dict]]:
    """The newest `per_key` warm and cold ok rows of each key, oldest first, by line
    key (host + cell), each with the verdict a check marked it with (regression or
    went-cold), if any. A chart of a million points says no more than 200 per key."""
    where, params = filter_sql(filters, "r")
    part = ", ".join((*GROUP, "cache_state"))
    sql = (
        f"SELECT {', '.join(GROUP)}, cache_state, id, compile_s, timestamp, mark FROM ("
        f" SELECT {part}, id, compile_s, timestamp, m.mark,"
        f"  ROW_NUMBER() OVER (PARTITION BY {part} ORDER BY COALESCE(timestamp, '') DESC, id DESC) AS rn"
        " FROM compile_records r LEFT JOIN (SELECT row_id, max(verdict) AS mark FROM verdicts"
        "  WHERE verdict IN ('regression', 'went-cold') GROUP BY row_id) m ON m.row_id = r.id"
        f" WHERE r.cache_state IN ('{WARM}', '{COLD}')"
        f"  AND COALESCE(r.status, '{STATUS_OK}') = '{STATUS_OK}' AND r.compile_s IS NOT NULL{where}"
        f") newest WHERE rn <= {int(per_key)} ORDER BY COALESCE(timestamp, ''), id"
    )
    out: dict[tuple, list[dict]] = {}
    for row in conn.execute(sa.text(sql), params).mappings():
        out.setdefault(_norm(row, GROUP), []).append(
            {k: row[k] for k in ("cache_state", "id", "compile_s", "timestamp", "mark")})
    return out


def atomic_write(path, text: str) -> None:
    """Write `text` to `path` through a temp file in the same folder and a rename, so a
    reader (a browser, CI) never sees half a file."""
    import os
    import tempfile
    from pathlib import Path

    path = Path(path)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.chmod(tmp, mode)  # mkstemp makes 0600: keep the file's own mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask
