"""The report as one self-contained HTML page (`ledger report --html`), charts drawn
by matplotlib.

First, the recorded programs at a glance: for the newest run of each, its time, the
share of it spent compiling (tracing and lowering apart from XLA), what the cache
removed, and its costliest functions with their call sites; then each program's
functions. Per host key: a bar chart of the newest cold against the newest warm compile of each
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

from ledger import savings
from ledger.files import atomic_write
from ledger.record import CELL_FIELDS, COLD, WARM
from ledger.report import lines as rl
from ledger.report import runs as rr
from ledger.report import text
from ledger.report.lines import Line
from ledger.rows import fold_signature

if TYPE_CHECKING:
    from matplotlib.figure import Figure

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
    "table.glance td{vertical-align:top}td.cmd{max-width:260px;overflow-wrap:anywhere}td.time{white-space:nowrap}"
    "ol.top{margin:0;padding-left:1.3em}code{font-size:12px;color:#444;overflow-wrap:anywhere}"
)
GLANCE_TOP = 3  # a program's costliest functions named in the glance table
TOP = 10  # a program's own functions in its table; the rest in one line
LABEL = 56  # characters of a chart's cell label (a panel is a third of the page wide)


def _title(ln: Line, limit: int = 200) -> str:
    """A line's cell as a table shows it: text.cell_title's words, a long input signature
    folded (``60x f64[3]``); the whole one is in the cell's hover (``_full``)."""
    sig = ln.cell[CELL_FIELDS.index("input_signature")]
    if sig is None:
        return text.cell_title(ln)
    shown_cell = list(ln.cell)
    shown_cell[CELL_FIELDS.index("input_signature")] = fold_signature(sig, limit)
    return text.cell_title(Line(ln.host, tuple(shown_cell), show_shape=ln.show_shape))


def _full(ln: Line) -> str:
    return text.cell_title(ln)


def _label(ln: Line) -> str:
    """A chart's label of a line: folded, and cut to what a panel has room for."""
    out = f"{_title(ln, LABEL)} · {text.show(ln.cell[3])}"
    return out if len(out) <= LABEL else out[: LABEL - 3] + "..."


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    # zlib's fastest level: a tenth of a PNG's time, for PNGs a fifth larger (a 0.25 MB page 0.30 MB)
    fig.savefig(buf, format="png", dpi=100, pil_kwargs={"compress_level": 1})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _cost(ln: Line) -> float:
    return max(_bar(ln.cold), _bar(ln.warm))


def bar_chart(title: str, lines: list[Line]) -> str:
    """Newest cold against newest warm compile of the BARS costliest cells and transforms
    (log scale: the cache's wins span 0.2 s to 700 s), in a figure of one fixed size."""
    from ledger.report.mpl import PLAIN, Figure, NullLocator

    lines = sorted(lines, key=_cost, reverse=True)[:BARS]
    labels = [_label(ln) for ln in lines]
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
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(PLAIN)
    ax.set_xlabel("compile_s (log)")
    ax.set_title(f"cold vs warm compile: {title}" + (f" (the {BARS} costliest)" if len(labels) == BARS else ""), y=1.0,
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


# Beyond these a value has no room for the axis margins (matplotlib's limits overflow to
# inf, or on a log axis underflow to 0, and it warns on stderr): such a value (a hand-edited
# row, merged or imported) stays in the table, out of the chart. Zero is drawn.
CHART_MAX_S, CHART_MIN_S = 1e300, 1e-300


def _fits(value) -> bool:
    return value is None or value == 0 or CHART_MIN_S < abs(value) < CHART_MAX_S


def _drawable(points: list[dict]) -> list[dict]:
    return [p for p in points if _fits(p["compile_s"])]


def _bar(row: dict | None) -> float:
    return row["compile_s"] if row and row["compile_s"] is not None and _fits(row["compile_s"]) else 0


def _draw_cell(ax, ln: Line, points: list[dict]) -> None:
    from ledger.report.mpl import PLAIN, ConciseDateFormatter, NullLocator

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
    if ln.pin:  # on a line of its own: a panel's title never runs into its neighbour's
        title += f"\n(pin {text.significant(ln.pin['compile_s'])} s)"
    if pin is not None:
        ax.axhline(pin, color=PIN_COLOR, ls="--", lw=1.2)
    values = [p["compile_s"] for p in points if p["compile_s"] is not None] + ([pin] if pin is not None else [])
    if values and min(values) > 0 and max(values) / min(values) > 10:
        ax.set_yscale("log")  # warm and cold differ by up to 100x: both stay readable
        # (over a decade, so a labelled decade at least; minor ticks, unlabelled, were a third of drawing the panels)
        ax.yaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(PLAIN)
    locator = date_locator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.margins(x=0.08, y=0.1)
    times = sorted({t for t in (_time(p["timestamp"]) for p in points) if t is not None})
    if times and times[-1] - times[0] < ONE_POINT_SPAN:
        # one instant (or a few seconds) has no width: matplotlib would span a day or years
        # around it; a few minutes either side keep it a point on a readable clock
        ax.set_xlim(times[0] - ONE_POINT_SPAN, times[-1] + ONE_POINT_SPAN)
    ax.set_title(title, fontsize=8, loc="left", y=1.0)  # where it goes anyway: no search for it
    ax.set_ylabel("compile_s", fontsize=7)
    ax.tick_params(which="both", labelsize=7)


ONE_POINT_SPAN = timedelta(minutes=5)


def date_locator():
    """A panel's date ticks: 3 to 7 of them, where matplotlib's default draws up to 12 (a
    panel is a third of the page wide, and each tick costs drawing). A narrower range
    finds no interval for some spans and warns (tests/test_report.py tries 10 min to 60 years)."""
    from ledger.report.mpl import AutoDateLocator

    return AutoDateLocator(minticks=3, maxticks=7)


def _legend(fig: Figure, top: float) -> None:
    """One legend for every panel, above them: a legend inside a panel hides points
    (and placing it "best" costs a search over every point of every panel)."""
    from ledger.report.mpl import Line2D

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
    from ledger.report.mpl import Figure

    lines = chosen(lines)
    nrows = max(1, -(-len(lines) // NCOLS))  # no empty rows: at most PANELS panels
    # a fixed layout: the constrained one measures every tick label of every panel again
    height = 2.8 * nrows + 1.3
    fig = Figure(figsize=(12, height))
    # room between rows for a two-line panel title above the date labels of the row before
    fig.subplots_adjust(left=0.06, right=0.98, top=1 - 1.35 / height, bottom=0.4 / height, hspace=0.7, wspace=0.25)
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
        cells = text.cells(ln)
        first = f'<td title="{html.escape(_full(ln))}">{html.escape(_title(ln))}</td>'
        tds = first + "".join(f"<td{' class=num' if c in text.NUMERIC else ''}>{html.escape(v)}</td>"
                              for c, v in zip(text.COLUMNS[1:], cells[1:]))
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


def _section(host: tuple, group: list[Line], charts: tuple[str, str] | None) -> str:
    title = text.host_title(host)
    parts = [f"<section><h2>{html.escape(title)}</h2>", _table(group)]
    if any(ln.loaded for ln in group):
        parts.append(f'<p class="note">{html.escape(text.LOADED_NOTE)}</p>')
    if charts is not None:
        bar, timeline = charts
        parts.append(_img(bar, f"cold vs warm compile, {title}"))
        parts.append(_img(timeline, f"compile_s over time, {title}"))
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


# -- the recorded programs: the first screen -----------------------------------------------
def _s(value: float) -> str:
    return text.significant(value)


def _site(site: str | None) -> str:
    return "<code>call site not recorded</code>" if site is None else f"<code>{html.escape(site)}</code>"


def _run_cells(p) -> tuple[str, str, str]:
    return text.run_cells(p, _s) or ("-", "-", "-")


def _costliest(fns: list) -> list:
    """Functions by their whole compile cost (tracing and lowering too: no cache removes it)."""
    return sorted(fns, key=lambda f: (-f.seconds, f.function))


def _glance(programs: list) -> str:
    """One row per recorded program (its newest run), newest first: what a lens modeller
    asks first. Each program's functions follow in a section of their own."""
    head = "".join(f"<th>{c}</th>" for c in ("program", "newest run", "time", "compiling", "cache removed",
                                              "costliest functions: call site"))
    rows = []
    for p in sorted(programs, key=lambda p: p.timestamp or "", reverse=True):
        time_, compiling, removed = _run_cells(p)
        top = "".join(f"<li>{html.escape(f.function)} {_s(f.seconds)} s: {_site(f.call_site)}</li>"
                      for f in _costliest(p.own)[:GLANCE_TOP])
        rows.append(f'<tr><td class="cmd">{html.escape(p.command)}</td>'
                    f"<td>{html.escape(p.run_id[:12])} on {html.escape(text.show(p.hostname))},"
                    f" {html.escape(text.when(p.timestamp))}</td>"
                    f'<td class="time num">{html.escape(time_)}</td><td class="share">{html.escape(compiling)}</td>'
                    f'<td class="removed">{html.escape(removed)}</td><td class="top"><ol class="top">{top}</ol></td></tr>')
    note = ("Compiling is tracing and lowering, which no cache removes, and XLA's compile or its cache read, over "
            f"the run's processes' time. Cache removed: {savings.SAVED_FROM}.")
    return (f'<section id="programs"><h2>recorded programs: the newest run of each</h2><table class="glance">'
            f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
            f'<p class="note">{html.escape(note)}</p></section>')


PROGRAM_COLUMNS = ("function", "call site", "compiles", "signatures", "trace+lower s", "XLA s", "share", "warm",
                   "cache removed s")
_NUMERIC = {"compiles", "signatures", "trace+lower s", "XLA s", "share", "warm"}


def _function_row(f, total: float) -> str:
    share = f"{100 * f.seconds / total:.0f}%" if total > 0 else "-"
    removed = "unknown" if f.removed is None else _s(f.removed) + (f" (+{f.unknown} unknown)" if f.unknown else "")
    sigs = sorted(str(s) for s in f.signatures)
    shown = html.escape(fold_signature(sigs[0], 60)) if len(sigs) == 1 else str(len(sigs))
    cells = [html.escape(f.function), _site(f.call_site), str(f.compiles), shown, _s(f.trace_s), _s(f.compile_s),
             share, str(f.warm), html.escape(removed)]
    hover = html.escape(sigs[0]) if len(sigs) == 1 else html.escape(" | ".join(sigs)[:2000])
    tds = [f'<td title="{hover}">{c}</td>' if name == "signatures" else
           f"<td{' class=num' if name in _NUMERIC else ''}>{c}</td>" for name, c in zip(PROGRAM_COLUMNS, cells)]
    return f"<tr>{''.join(tds)}</tr>"


def _functions_table(fns: list, total: float) -> str:
    head = "".join(f"<th>{c}</th>" for c in PROGRAM_COLUMNS)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(_function_row(f, total) for f in fns)}</tbody></table>"


def _program(p) -> str:
    """One program's newest run: its summary line, its own functions (the costliest TOP),
    JAX's eager primitives folded into one line."""
    total, own = sum(f.seconds for f in p.functions), _costliest(p.own)
    line = rr.summary(p.run) if p.run is not None else f"{_s(p.compile_s)} s of XLA compiles"
    out = [f"<h2>recorded: {html.escape(p.command)}</h2>",
           (f"<p>Run {html.escape(p.run_id[:12])} on {html.escape(text.show(p.hostname))},"
           f" {html.escape(text.when(p.timestamp))}: {p.compiles} compiles ({p.compiles - p.warm} cold or uncached,"
           f" {p.warm} warm); {html.escape(line)}.</p>"), _functions_table(own[:TOP], total)]
    if len(own) > TOP:
        rest = own[TOP:]
        out.append(f'<p class="note">{len(rest)} more functions: {sum(f.compiles for f in rest)} compiles,'
                   f" {_s(sum(f.seconds for f in rest))} s.</p>")
    if p.eager:
        n, seconds = sum(f.compiles for f in p.eager), sum(f.seconds for f in p.eager)
        out.append(f"<details><summary>{n} eager primitive compiles, {_s(seconds)} s in all</summary>"
                   f"{_functions_table(_costliest(p.eager), total)}</details>")
    return "<section>" + "\n".join(out) + "</section>"


def time_saved(days: list) -> str:
    """What the cache saved per host, cache dir and day (ledger/report/saved.py)."""
    if not days:
        return ""
    head = "".join(f"<th>{html.escape(c)}</th>" for c in (*text.SAVED_COLUMNS[:-1], "saved"))
    rows = "".join(f"<tr><td>{html.escape(text.show(d.hostname))}</td><td>{html.escape(text.show(d.cache_dir))}</td>"
                   f"<td>{d.day}</td><td class=num>{d.compiles}</td><td class=num>{100 * d.hit_rate:.0f}%</td>"
                   f"<td class=num>{html.escape(savings.words(d.saved, _s))}</td></tr>" for d in days)
    table = _wrap(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>", len(days))
    return (f"<h2>time saved</h2><p>{html.escape(savings.SAVED_FROM[0].upper() + savings.SAVED_FROM[1:])}.</p>"
            + table)


def programs_html(programs: list) -> str:
    if not programs:
        return ""
    return "\n".join([_glance(programs), *(_program(p) for p in programs)])


def page(lines: list[Line], charts: dict[tuple, tuple[str, str]], programs: str = "", after: str = "",
         todo: str = "") -> str:
    """The whole HTML report: what to do (the newest check's root causes, markdown), the
    recorded programs (programs_html: their runs at a glance, then each one's functions),
    then one section per host key, with its two charts where `charts` has them (drawing()),
    then ``after`` (HTML: the cache's health, what the cache saved, predictions)."""
    body = ["<h1>Compile ledger report</h1>", from_markdown(todo), programs, f"<p>{html.escape(text.INTRO)}</p>"]
    if not lines:
        body.append("<p>No warm or cold compile rows.</p>")
    body += [_section(host, group, charts.get(host)) for host, group in rl.group_by_host(lines)]
    body.append(after)
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>Compile ledger report</title><style>{STYLE}</style></head>\n<body>\n"
            + "\n".join(body) + f"\n{SORT}\n</body></html>\n")


def _charts(title: str, group: list[Line], points: dict[tuple, list[dict]]) -> tuple[str, str]:
    """A host key's two charts, drawn here, one after the other."""
    return bar_chart(title, group), timeline_chart(title, group, points)


def _keys(group: list[Line]) -> list[tuple]:
    return [(*ln.host, *ln.cell) for ln in chosen(group)]


def _load_matplotlib() -> None:
    import ledger.report.mpl  # noqa: F401


# What draws: draw(chart, *args) gives a call that returns chart(*args), a PNG in base64.
Draw = Callable[..., Callable[[], str]]


def _here(chart: Callable[..., str], *args) -> Callable[[], str]:
    """A Draw that draws in this process, when its result is asked for."""
    return lambda: chart(*args)


@contextmanager
def drawing() -> Iterator[Draw]:
    """What draws the charts: draw(chart, *args) gives a call that returns chart(*args).
    In a forked process (ledger/workers.py) started now, which imports matplotlib (a
    third of the report's time) while this one imports SQLAlchemy and opens the ledger,
    and draws while this one runs the report's other queries; here where there is no
    fork. Enter it before SQLAlchemy loads (this module and what it imports do not load
    it) and before the ledger opens: no connection may cross into the fork."""
    from ledger.workers import can_fork, forked_pool

    if not can_fork():
        yield _here
        return
    pool = forked_pool(1, _load_matplotlib)
    try:
        yield lambda chart, *args: pool.submit(chart, *args).result
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def write_html(engine, path, filters: dict | None = None, draw: Draw | None = None) -> tuple[int, int]:
    """Write the HTML report to `path` atomically; returns its numbers of key tables and
    charts. `draw`: drawing()'s, entered before `engine` connected; else charts are drawn here."""
    from ledger.report import health, predictions, recorded, saved, todo

    draw = draw or _here
    with engine.connect() as conn:
        lines = rl.collect(conn, filters)
        charted = _charted(lines)
        groups = [(host, text.host_title(host), group) for host, group in rl.group_by_host(lines) if host in charted]
        # each chart drawn beside the queries after it: the bars need only the lines
        bars = {host: draw(bar_chart, title, group) for host, title, group in groups}
        points = rl.series(conn, filters, per_key=100, only=[ln for *_, group in groups for ln in chosen(group)])
        timelines = {host: draw(timeline_chart, title, group, {k: points[k] for k in _keys(group) if k in points})
                     for host, title, group in groups}  # handed the points of its own lines only
        costs_of = savings.ColdCosts()  # the programs and the time saved: mostly the same cells
        programs = programs_html(recorded.programs(conn, filters, costs_of))
    days = saved.per_day(engine, filters, costs_of)
    after = "\n".join([from_markdown(health.markdown(engine, filters)), time_saved(days),
                       from_markdown(predictions.markdown(engine, (filters or {}).get("hostname")))])
    charts = {host: (bars[host](), timelines[host]()) for host in bars}
    atomic_write(path, page(lines, charts, programs, after, todo.markdown(engine, filters)))
    tables = len(rl.group_by_host(lines))
    return tables, 2 * min(tables, CHARTED)
