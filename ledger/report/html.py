"""The report as one self-contained HTML page (`ledger report --html`), charts drawn
by matplotlib.

Per host key: a bar chart of the newest cold against the newest warm compile of each
cell and transform, and compile time over time per cell and transform with its pin
as a horizontal line and the rows a check called a regression (or went-cold, or a
cache not reused) marked.
Images are PNGs inline as base64 data URLs and the style is inline: the page works
offline, as a CI artifact or an e-mail attachment. Agg only: no display is needed.
"""

from __future__ import annotations

import base64
import html
import io
import re
from datetime import datetime, timedelta, timezone

import matplotlib

matplotlib.use("Agg")  # before anything draws: CI machines have no display

from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import NullFormatter

from ledger.files import atomic_write
from ledger.record import COLD, WARM
from ledger.report import lines as rl
from ledger.report import text
from ledger.report.lines import Line

WARM_COLOR, COLD_COLOR, PIN_COLOR, MARK_COLOR = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"
NCOLS = 3
# Every chart has one fixed size: the costliest BARS lines in the bar chart, PANELS cells in
# the over-time one (findings first), charts for the CHARTED costliest host keys: at most
# 2 * CHARTED charts, a page of a few hundred kB whatever the ledger holds.
BARS, PANELS, CHARTED = 20, 6, 6
LONG_TABLE = 25  # rows beyond which a table starts folded
STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}"
    "table{border-collapse:collapse;margin:1em 0;font-size:14px}"
    "th,td{border:1px solid #ccc;padding:3px 8px}td.num{text-align:right}th{background:#f3f3f3}"
    "img.chart{display:block;max-width:100%;margin:1em 0}.note{font-size:13px;color:#555}"
    "th{cursor:pointer}summary{cursor:pointer;color:#555}"
)


def _label(ln: Line) -> str:
    return f"{text.cell_title(ln)} · {text.show(ln.cell[3])}"


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _cost(ln: Line) -> float:
    return max(_bar(ln.cold), _bar(ln.warm))


def bar_chart(title: str, lines: list[Line]) -> str:
    """Newest cold against newest warm compile of the BARS costliest cells and transforms
    (log scale: the cache's wins span 0.2 s to 700 s), in a figure of one fixed size."""
    lines = sorted(lines, key=_cost, reverse=True)[:BARS]
    labels = [_label(ln)[:60] for ln in lines]
    # a fixed layout, room for 60-character labels: the constrained one measures every label again
    fig = Figure(figsize=(10, 6))
    fig.subplots_adjust(left=0.36, right=0.97, top=0.93, bottom=0.09)
    ax = fig.add_subplot()
    ys = range(len(lines))
    warm = [_bar(ln.warm) for ln in lines]
    cold = [_bar(ln.cold) for ln in lines]
    ax.barh([y - 0.2 for y in ys], warm, height=0.4, color=WARM_COLOR, label="warm (newest)")
    ax.barh([y + 0.2 for y in ys], cold, height=0.4, color=COLD_COLOR, label="cold (newest)")
    ax.set_yticks(list(ys), labels, fontsize=8)
    ax.invert_yaxis()
    if any(v > 0 for v in warm + cold):
        ax.set_xscale("log")
    ax.set_xlabel("compile_s (log)")
    ax.set_title(f"cold vs warm compile: {title}" + (f" (the {BARS} costliest)" if len(labels) == BARS else ""),
                 fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    return _png(fig)


def _time(ts):
    """A row's time for a chart's axis: an aware time (the one clock) as its UTC, a
    legacy naive one as it is, so the two kinds share one axis (matplotlib cannot
    compare them)."""
    try:
        t = datetime.fromisoformat(ts) if ts else None
    except ValueError:
        return None
    return t.astimezone(timezone.utc).replace(tzinfo=None) if t is not None and t.tzinfo else t


# Beyond this a value has no room for the axis margins (matplotlib's limits overflow to inf):
# such a value (a hand-edited row, merged or imported) stays in the table, out of the chart.
CHART_MAX_S = 1e300


def _fits(value) -> bool:
    return value is None or abs(value) < CHART_MAX_S


def _drawable(points: list[dict]) -> list[dict]:
    return [p for p in points if _fits(p["compile_s"])]


def _bar(row: dict | None) -> float:
    return row["compile_s"] if row and row["compile_s"] is not None and _fits(row["compile_s"]) else 0


def _draw_cell(ax, ln: Line, points: list[dict]) -> None:
    points = _drawable(points)
    for state, color in ((WARM, WARM_COLOR), (COLD, COLD_COLOR)):
        pts = [(_time(p["timestamp"]), p["compile_s"]) for p in points if p["cache_state"] == state]
        pts = [(t, v) for t, v in pts if t is not None]
        if pts:
            ax.plot([t for t, _ in pts], [v for _, v in pts], "o-", color=color, ms=4, lw=1)
    marked = [(_time(p["timestamp"]), p["compile_s"]) for p in points if p["mark"]]
    marked = [(t, v) for t, v in marked if t is not None]
    if marked:
        ax.plot([t for t, _ in marked], [v for _, v in marked], "x", color=MARK_COLOR, ms=10, mew=2)
    title = _label(ln)
    pin = ln.pin["compile_s"] if ln.pin and _fits(ln.pin["compile_s"]) else None
    if ln.pin:
        title += f"  (pin {text.significant(ln.pin['compile_s'])} s)"
    if pin is not None:
        ax.axhline(pin, color=PIN_COLOR, ls="--", lw=1.2)
    values = [p["compile_s"] for p in points if p["compile_s"] is not None] + ([pin] if pin is not None else [])
    if values and min(values) > 0 and max(values) / min(values) > 10:
        ax.set_yscale("log")  # warm and cold differ by up to 100x: both stay readable
        ax.yaxis.set_minor_formatter(NullFormatter())
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.margins(x=0.08, y=0.1)
    times = {t for t in (_time(p["timestamp"]) for p in points) if t is not None}
    if len(times) == 1:
        # one instant has no width: matplotlib would span years around it
        (only,) = times
        ax.set_xlim(only - timedelta(hours=12), only + timedelta(hours=12))
    ax.set_title(title, fontsize=8)
    ax.set_ylabel("compile_s", fontsize=7)
    ax.tick_params(which="both", labelsize=7)


def _legend(fig: Figure, top: float) -> None:
    """One legend for every panel, above them: a legend inside a panel hides points
    (and placing it "best" costs a search over every point of every panel)."""
    handles = [Line2D([], [], color=WARM_COLOR, marker="o", ms=4, lw=1, label="warm"),
               Line2D([], [], color=COLD_COLOR, marker="o", ms=4, lw=1, label="cold"),
               Line2D([], [], color=PIN_COLOR, ls="--", lw=1.2, label="pin (expected warm)"),
               Line2D([], [], color=MARK_COLOR, marker="x", ms=8, mew=2, lw=0, label="a finding (regression, went-cold, cache-not-reused)")]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, top), ncol=4, fontsize=8, frameon=False)


def chosen(lines: list[Line]) -> list[Line]:
    """The PANELS lines the over-time chart draws: those with a finding first, then the costliest."""
    return sorted(lines, key=lambda ln: (ln.verdict in (None, "ok"), -_cost(ln)))[:PANELS]


def timeline_chart(title: str, lines: list[Line], points: dict[tuple, list[dict]]) -> str:
    """Compile time over time, one panel per chosen cell and transform, its pin drawn;
    one fixed size, whatever the ledger holds."""
    lines = chosen(lines)
    nrows = -(-PANELS // NCOLS)
    # a fixed layout: the constrained one measures every tick label of every panel again
    height = 2.8 * nrows + 1.3
    fig = Figure(figsize=(12, height))
    fig.subplots_adjust(left=0.06, right=0.98, top=1 - 1.2 / height, bottom=0.4 / height, hspace=0.45, wspace=0.25)
    fig.suptitle(f"compile_s over time: {title}", fontsize=10, y=1 - 0.12 / height)
    _legend(fig, 1 - 0.45 / height)
    axes = fig.subplots(nrows, NCOLS, squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i >= len(lines):
            ax.set_visible(False)
            continue
        ln = lines[i]
        _draw_cell(ax, ln, points.get((*ln.host, *ln.cell), []))
    return _png(fig)


def _wrap(table: str, rows: int) -> str:
    """A long table starts folded: its summary says how many lines it holds."""
    if rows <= LONG_TABLE:
        return table
    return f"<details><summary>{rows} lines</summary>{table}</details>"


def _table(group: list[Line]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in text.COLUMNS)
    body = []
    for ln in group:
        tds = "".join(f"<td{' class=num' if c in text.NUMERIC else ''}>{html.escape(v)}</td>"
                      for c, v in zip(text.COLUMNS, text.cells(ln)))
        body.append(f"<tr>{tds}</tr>")
    return _wrap(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>", len(group))


def _cells(row: str) -> list[str]:
    """A markdown table row's cells (an escaped pipe is text, not a border)."""
    parts = re.split(r"(?<!\\)\|", row.strip())[1:-1]
    return [c.strip().replace("\\|", "|") for c in parts]


def _text(markdown_text: str) -> str:
    return html.escape(html.unescape(markdown_text))


def from_markdown(md: str) -> str:
    """The report's own markdown (text.py: headings, paragraphs, pipe tables, <details>
    lines, bullets) as HTML; every text escaped, only those few tags made. The markdown's
    own escapes (text.py's md()) are read back first, so a value shows as it was stored."""
    out, table = [], []

    def flush() -> None:
        if table:
            head, align, *rows = table
            num = [a.endswith(":") for a in _cells(align)]  # "---:": a column of numbers, right-aligned
            cols = "".join(f"<th>{_text(c)}</th>" for c in _cells(head))
            body = "".join("<tr>" + "".join(f"<td{' class=num' if right else ''}>{_text(c)}</td>"
                                            for c, right in zip(_cells(r), num)) + "</tr>"
                           for r in rows)
            out.append(_wrap(f"<table><thead><tr>{cols}</tr></thead><tbody>{body}</tbody></table>", len(rows)))
            table.clear()

    for ln in md.splitlines():
        if ln.startswith("|"):
            table.append(ln)
            continue
        flush()
        if m := re.fullmatch(r"<details><summary>(.*)</summary>", ln):
            out.append(f"<details><summary>{_text(m.group(1))}</summary>")
        elif ln == "</details>":
            out.append("</details>")
        elif ln.startswith("### "):
            out.append(f"<h2>{_text(ln[4:].replace('`', ''))}</h2>")
        elif ln.startswith("- "):
            out.append(f"<p class=note>{_text(ln[2:])}</p>")
        elif ln.strip():
            out.append(f"<p>{_text(ln)}</p>")
    flush()
    return "\n".join(out)


def _img(png: str, alt: str) -> str:
    return f'<img class="chart" alt="{html.escape(alt)}" src="data:image/png;base64,{png}">'


def _section(host: tuple, group: list[Line], points: dict, charted: bool) -> str:
    title = text.host_title(host)
    parts = [f"<section><h2>{html.escape(title)}</h2>", _table(group)]
    if any(ln.loaded for ln in group):
        parts.append(f'<p class="note">{html.escape(text.LOADED_NOTE)}</p>')
    if charted:
        parts.append(_img(bar_chart(title, group), f"cold vs warm compile, {title}"))
        parts.append(_img(timeline_chart(title, group, points), f"compile_s over time, {title}"))
    else:
        parts.append(f'<p class="note">No charts for this key: charts are drawn for the {CHARTED} costliest'
                     " host keys only.</p>")
    return "\n".join(parts) + "</section>"


# Click a column's heading to sort its table by it (numbers as numbers); no server, no CDN.
SORT = ("<script>document.querySelectorAll('th').forEach((th,i)=>th.onclick=()=>{"
        "const b=th.closest('table').tBodies[0],k=r=>r.cells[i].textContent,"
        "n=v=>parseFloat(v.replace(/[^0-9.eE+-]/g,'')),d=th.dataset.d=th.dataset.d==='1'?'-1':'1';"
        "[...b.rows].sort((x,y)=>{const a=n(k(x)),c=n(k(y));"
        "return (isNaN(a)||isNaN(c)?k(x).localeCompare(k(y)):a-c)*d}).forEach(r=>b.appendChild(r))});</script>")


def _charted(lines: list[Line]) -> set[tuple]:
    cost: dict[tuple, float] = {}
    for ln in lines:
        cost[ln.host] = cost.get(ln.host, 0.0) + _cost(ln)
    return set(sorted(cost, key=lambda h: -cost[h])[:CHARTED])


def page(lines: list[Line], points: dict[tuple, list[dict]], programs: str = "", after: str = "",
         todo: str = "") -> str:
    """The whole HTML report: what to do (the newest check's root causes), the recorded
    programs (what ran, its costliest functions), then one section per host key, then what
    the cache saved and predictions."""
    body = ["<h1>Compile ledger report</h1>", from_markdown(todo), f"<p>{html.escape(text.INTRO)}</p>",
            from_markdown(programs)]
    if not lines:
        body.append("<p>No warm or cold compile rows.</p>")
    charted = _charted(lines)
    body += [_section(host, group, points, host in charted) for host, group in rl.group_by_host(lines)]
    body.append(from_markdown(after))
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Compile ledger report</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + f"\n{SORT}\n</body></html>\n")


def write_html(engine, path, filters: dict | None = None) -> tuple[int, int]:
    """Write the HTML report to `path` atomically; returns its numbers of key tables and
    charts."""
    from ledger.report import health, predictions, recorded, saved, todo

    with engine.connect() as conn:
        lines = rl.collect(conn, filters)
        charted = _charted(lines)
        drawn = [ln for _, group in rl.group_by_host(lines) if group[0].host in charted for ln in chosen(group)]
        points = rl.series(conn, filters, per_key=100, only=drawn)
        programs = "\n".join("\n".join(text.recorded_program(p)) for p in recorded.programs(conn, filters))
    days = saved.per_day(engine, filters)
    after = "\n".join([health.markdown(engine, filters), "\n".join(text.time_saved(days)) if days else "",
                       predictions.markdown(engine, (filters or {}).get("hostname"))])
    atomic_write(path, page(lines, points, programs, after, todo.markdown(engine, filters)))
    tables = len(rl.group_by_host(lines))
    return tables, 2 * min(tables, CHARTED)
