"""The report as text: the columns and cells of each table line (the HTML page shows
the same), the heading of each host key, and the whole report as markdown."""

from __future__ import annotations

import math

from ledger import savings
from ledger.output import shown
from ledger.record import CELL_FIELDS, SHAPE_FIELDS
from ledger.report.lines import Line, group_by_host
from ledger.rows import function_name

LOADED_MARK = "†"
LOADED_NOTE = f"{LOADED_MARK} measured on a loaded host (1-minute load above the usable cores)"
INTRO = ("Compile times in seconds. Each table is one comparability key: compare only within a table. "
         "Per cell and transform, the newest ok row of each cache state; rows whose cache_state is none "
         "or unknown, and failed rows, are not shown.")
COLUMNS = ("cell", "transform", "warm s", "cold s", "cold/warm", "pin s", "verdict", "source tag", "time")
NUMERIC = ("warm s", "cold s", "cold/warm", "pin s")


def show(value) -> str:
    """A value in a report cell: '-' for none, else as a line of output shows it (a
    stored line break escaped: it would end the markdown table's row)."""
    return "-" if value is None or value == "" else shown(value)


def host_title(host: tuple) -> str:
    hardware, hostname, jax_version, mixed = host
    mp = "-" if mixed is None else str(bool(mixed)).lower()
    return f"{show(hardware)} · {show(hostname)} · jax {show(jax_version)} · mixed_precision {mp}"


def cell_title(ln: Line) -> str:
    """dataset_class / model_type / instrument: the cell a line belongs to, with its
    batch shape where the table holds more than one."""
    title = " / ".join(show(v) for v in ln.cell[:3])
    function, signature, variant = (ln.cell[CELL_FIELDS.index(f)] for f in ("function", "input_signature", "variant"))
    if function is not None:  # a recorded compile: its cell is the function at a signature
        title += f" {function_name(function, variant)}({show(signature)})"
    if ln.show_shape:
        title += " (" + ", ".join(f"{f} {show(v)}" for f, v in zip(SHAPE_FIELDS, ln.shape)) + ")"
    return title


def significant(value: float, digits: int = 3) -> str:
    """At least `digits` significant digits and at least 2 decimals, never in
    exponent form: a 4 ms toy compile reads 0.00412 (it read 0.00), and a 120 s
    compile still reads 119.99."""
    if value == 0 or not math.isfinite(value):
        return f"{value:.2f}"
    decimals = max(2, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:.{decimals}f}"


def seconds(row: dict | None) -> str:
    if row is None or row.get("compile_s") is None:
        return "-"
    return significant(row["compile_s"]) + (LOADED_MARK if row.get("loaded") else "")


def when(timestamp: str | None) -> str:
    """A stored ISO timestamp to the minute (the seconds are noise in a dashboard)."""
    return "-" if not timestamp else timestamp.replace("T", " ")[:16]


def cells(ln: Line) -> list[str]:
    """The text of one line, in COLUMNS order."""
    speedup = "-"
    if ln.warm and ln.cold and ln.warm["compile_s"] > 0:
        speedup = f"{ln.cold['compile_s'] / ln.warm['compile_s']:.1f}x"
    src = ln.source
    return [cell_title(ln), show(ln.cell[3]), seconds(ln.warm), seconds(ln.cold), speedup, seconds(ln.pin),
            show(ln.verdict), show(src and src["tag"]), when(src and src["timestamp"])]


def md(text) -> str:
    """A value as markdown text: HTML's specials escaped (a tag or cell value such as
    `<img src=x onerror=...>` stays text wherever the markdown is rendered, the README
    block included) and a pipe escaped (it would end the table's cell)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")




def markdown(lines: list[Line], programs: list | None = None, saved: list | None = None, todo: str = "") -> str:
    """The whole report as markdown: what to do (the newest check's root causes), a heading
    and a table per host key, then one per recorded program (ledger/report/recorded.py)."""
    out = [todo] if todo else []
    out += [INTRO, ""]
    if not lines:
        out += ["No warm or cold compile rows of a probe or a program's own jitted functions"
                + (": the recorded programs below compiled only JAX's eager primitives." if programs else "."), ""]
    for host, group in group_by_host(lines):
        out += [f"### {md(host_title(host))}", "", "| " + " | ".join(COLUMNS) + " |",
                "|" + "|".join("---:" if c in NUMERIC else "---" for c in COLUMNS) + "|"]
        out += ["| " + " | ".join(md(c) for c in cells(ln)) + " |" for ln in group]
        if any(ln.loaded for ln in group):
            out += ["", LOADED_NOTE]
        out.append("")
    for program in programs or ():
        out += recorded_program(program)
    if saved:
        out += time_saved(saved)
    return "\n".join(out)


SAVED_COLUMNS = ("host", "cache dir", "day", "compiles", "hit rate", "saved s")


def time_saved(days: list) -> list[str]:
    """Seconds the cache saved per host, cache dir and day (ledger/report/saved.py)."""
    out = ["### time saved", "",
           "Each warm compile against its cell's median cold one; a cell never cold saved an unknown amount.", "",
           "| " + " | ".join(SAVED_COLUMNS) + " |", "|---|---|---|---:|---:|---:|"]
    for d in days:
        saved = significant(d.saved_s) + (f" (+{d.unknown} unknown)" if d.unknown else "")
        out.append(f"| {md(show(d.hostname))} | {md(show(d.cache_dir))} | {d.day} | {d.compiles}"
                   f" | {100 * d.hit_rate:.0f}% | {saved} |")
    return [*out, ""]


PROGRAM_COLUMNS = ("function", "compiles", "signatures", "compile s", "share", "warm", "cache removed s", "call site")
_ALIGN = "|---|---:|---:|---:|---:|---:|---:|---|"
TOP = 10  # the program's own functions shown in its table; the rest are counted in one line


def _removed(value: float | None, unknown: int = 0) -> str:
    if value is None:
        return "unknown"
    return significant(value) + (f" (+{unknown} unknown)" if unknown else "")


def _function_row(f, total: float) -> str:
    share = f"{100 * f.compile_s / total:.0f}%" if total > 0 else "-"
    site = md(f.call_site) if f.call_site else "-"
    return (f"| {md(f.function)} | {f.compiles} | {len(f.signatures)} | {significant(f.compile_s)}"
            f" | {share} | {f.warm} | {_removed(f.removed)} | {site} |")


def recorded_program(p) -> list[str]:
    """Where one recorded program's compile time went in its newest run: a summary line,
    its own functions (the costliest TOP), JAX's eager primitives folded into one line."""
    total = p.compile_s
    removed = None if p.warm and p.unknown == p.warm else p.removed_s
    head = (f"Run {p.run_id[:12]} on {md(show(p.hostname))}, {when(p.timestamp)}: {p.compiles} compiles"
            f" ({p.compiles - p.warm} cold or uncached, {p.warm} warm)")
    cells = run_cells(p, significant)
    if cells is not None and cells[0] != "not recorded":  # the run's time, as the HTML's first screen says it
        time_, compiling, saved = cells
        summary = f"{head}; {time_}, {compiling}; the cache removed {saved}."
    else:
        summary = (f"{head}, {significant(total)} s of compiles; "
                   + ("what the cache removed is unknown (no cold compile of these functions to compare with)."
                      if removed is None else f"the cache removed {_removed(removed, p.unknown)} s"
                      " (each warm compile against its cell's cold one)."))
    out = [f"### recorded: `{md(p.command)}`", "", summary, "",
           "| " + " | ".join(PROGRAM_COLUMNS) + " |", _ALIGN]
    # the program's own functions, or where it has none (every compile an eager primitive: a
    # fit that is not jitted) the costliest primitives: the table is never an empty header
    shown, folded = (p.own, p.eager) if p.own else (p.eager, [])
    out += [_function_row(f, total) for f in shown[:TOP]]
    if len(shown) > TOP:
        rest = shown[TOP:]
        out.append(f"| {len(rest)} more functions | {sum(f.compiles for f in rest)} | |"
                   f" {significant(sum(f.compile_s for f in rest))} | | | | |")
    if folded:
        n, seconds = sum(f.compiles for f in folded), sum(f.compile_s for f in folded)
        out += ["", f"<details><summary>{n} eager primitive compiles, {significant(seconds)} s in all</summary>", "",
                "| " + " | ".join(PROGRAM_COLUMNS) + " |", _ALIGN,
                *(_function_row(f, total) for f in folded), "", "</details>"]
    return [*out, ""]


def run_cells(p, fmt) -> tuple[str, str, str] | None:
    """A program's newest run as both pages say it: its time, the share of it compiling
    (tracing and lowering apart from XLA), and what the cache removed (ledger/savings.py);
    None where the run has no recorded processes' facts."""
    run = p.run
    if run is None:
        return None
    t = run.time
    if t is None:
        time_ = "not recorded"
    else:
        time_ = f"{t.wall_s:.1f} s" + ("" if t.processes == 1 else f" ({t.processes} processes)")
        time_ += "" if t.exact else (" (at least)" if "last seen" in t.ended_by else " (a process killed?)")
    share = "-" if run.share is None else f"{100 * run.share:.0f}%"
    compiling = f"{share} compiling: {run.trace_s:.1f} s tracing and lowering, {run.compile_s:.1f} s XLA"
    return time_, compiling, savings.words(run.saved, fmt)
