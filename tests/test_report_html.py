"""`ledger report --html`: a self-contained page whose matplotlib charts render in a real
browser (headless Chromium, Debian's `chromium` package: ci/chromium.sh installs it)."""

from __future__ import annotations

import base64
import html as html_lib
import json
import os
import re
import signal
import sqlite3
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ledger.report.html import SORT

from .case_kinds import chromium
from .conftest import CORPUS, query, run_cli, write_json
from .ledgers import add_row, add_verdict, recorded_runs

CHROMIUM = chromium()
needs_chromium = pytest.mark.chromium  # tests/case_kinds.py: skips without it, fails under LEDGER_REQUIRE_ALL
# The background-networking flags keep Chromium from calling out at start (a closed
# network refuses it many times over); a fresh profile per run keeps runs apart.
FLAGS = ["--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
IMG = re.compile(r'<img class="chart" alt="[^"]*" src="data:image/png;base64,([A-Za-z0-9+/=]+)">')
# Run after the page has loaded: each chart's decoded and laid-out size, into the DOM
# that --dump-dom prints.
PROBE = ("<script>window.addEventListener('load', () => {"
         "const s = [...document.images].map(i => { const r = i.getBoundingClientRect();"
         " return [i.naturalWidth, i.naturalHeight, r.width, r.height]; });"
         "const pre = document.createElement('pre'); pre.id = 'sizes'; pre.textContent = JSON.stringify(s);"
         "document.body.appendChild(pre); });</script>")


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """The corpus with its 25 pins and one regression: an HTML report, 3 keys, 6 charts
    (built once: matplotlib takes seconds)."""
    tmp_path = tmp_path_factory.mktemp("html")
    db = tmp_path / "ledger.db"
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    slow = add_row(db, "prodigy-census-ral32-warm", "vag", compile_s=163.0, timestamp="2026-08-02T10:00:00")
    add_verdict(db, 1, slow, "regression")
    out = tmp_path / "report.html"
    r = run_cli("report", "--db", db, "--html", out)
    assert r.exit_code == 0, r.output
    # one line saying what was written, and not the markdown report as well
    assert (r.stdout, r.stderr) == (f"wrote {out} (3 tables, 6 charts)\n", "")
    return out


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.slow
def test_page_is_self_contained_with_matplotlib_pngs(page):
    text = page.read_text()
    assert not re.search(r"(src|href)=\"(?!data:)", text) and "<link" not in text
    assert text.count("<script") == 1 and SORT in text  # the few inline lines that sort a table
    assert "http://" not in text and "https://" not in text
    images = IMG.findall(text)
    assert len(images) == text.count("<img") == 6
    for b64 in images:
        data = base64.b64decode(b64)
        assert min(png_size(data)) > 100
        assert b"Matplotlib" in data[:200]  # the PNG's Software text chunk: drawn by matplotlib
    # the 3 key tables and the time-saved one
    assert text.count("<table>") == 4 and "<td>regression</td>" in text and "<h2>time saved</h2>" in text
    assert not list(page.parent.glob(".report.html.*"))  # the temp file was renamed, not left


DRAWN_ELSEWHERE = """
import sys
from ledger.command import report_html
print(report_html(sys.argv[2], sys.argv[1]), "matplotlib" in sys.modules)
"""


@pytest.mark.slow
def test_the_charts_are_drawn_in_a_forked_process_and_equal_those_drawn_here(page, tmp_path):
    """`ledger report --html` draws in a forked process (ledger/workers.py), which loads
    matplotlib while the command queries: its page is byte for byte the one drawn in one
    process (write_html without a drawer, as where there is no fork), and the command's
    own process never imports matplotlib."""
    from ledger.report import lines as rl
    from ledger.report.html import _charted, _charts, write_html
    from ledger.report.text import host_title
    from ledger.storage.open import open_ledger

    db, forked, here = page.parent / "ledger.db", tmp_path / "forked.html", tmp_path / "here.html"
    out = subprocess.run([sys.executable, "-c", DRAWN_ELSEWHERE, str(db), str(forked)], capture_output=True, text=True,
                         timeout=120, check=False)
    assert (out.returncode, out.stdout, out.stderr) == (0, "(3, 6) False\n", "")
    with open_ledger(str(db), "read") as ledger:
        assert write_html(ledger.engine, here) == (3, 6)
        # and each chart is the one drawn from every point the page's queries found (the
        # drawer is handed only its own lines' points)
        with ledger.engine.connect() as conn:
            lines = rl.collect(conn, None)
            charted = _charted(lines)
            points = rl.series(conn, None, per_key=100, only=[ln for ln in lines if ln.host in charted])
            whole = [png for host, group in rl.group_by_host(lines) if host in charted
                     for png in _charts(host_title(host), group, points)]
    assert forked.read_bytes() == here.read_bytes() == page.read_bytes()
    assert IMG.findall(forked.read_text()) == whole


FORKED_WHEN = """
import sys
from ledger import workers
loaded, real = [], workers.forked_pool
def pool(*args, **kwargs):
    loaded.append("sqlalchemy" in sys.modules)
    return real(*args, **kwargs)
workers.forked_pool = pool
from ledger.command import report_html
print(report_html(sys.argv[2], sys.argv[1]), loaded)
"""


@pytest.mark.slow
def test_the_drawing_process_forks_before_sqlalchemy_loads(page, tmp_path):
    """The drawer imports matplotlib while the command imports SQLAlchemy, not after it:
    ledger/report/html.py and what it imports load none of it (a module-level import in
    savings, filters, lines or runs would fork the drawer a sixth of a second later)."""
    out = subprocess.run([sys.executable, "-c", FORKED_WHEN, str(page.parent / "ledger.db"), str(tmp_path / "r.html")],
                         capture_output=True, text=True, timeout=120, check=False)
    assert (out.returncode, out.stdout, out.stderr) == (0, "(3, 6) [False]\n", "")


@pytest.mark.slow
def test_a_function_named_like_a_formula_is_drawn_as_its_name(tmp_path):
    """matplotlib reads text between two dollar signs as math: a function named so
    (`jit_$\\frac$` is no formula it can parse) crashed the drawing; a chart's words are
    a ledger's values, drawn as they are."""
    db = tmp_path / "ledger.db"
    recorded_runs(db, 5, 3, functions=3)
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE compile_records SET function = ? WHERE function = 'jit_fn0'", ("jit_$\\frac$",))
    con.close()
    out = tmp_path / "r.html"
    r = run_cli("report", "--db", db, "--html", out)
    assert (r.exit_code, r.output) == (0, f"wrote {out} (1 table, 2 charts)\n")
    assert "jit_$\\frac$" in out.read_text()


@pytest.mark.slow
def test_a_process_that_loaded_jax_or_runs_threads_draws_here_and_never_forks(page, tmp_path):
    """The Python API called from a program that has loaded JAX (or runs a thread of its
    own): a fork there may deadlock (JAX warns so at every fork), so the charts are drawn in
    the program's process, the same page, and nothing is said."""
    db = page.parent / "ledger.db"
    for first in ("import jax", "import threading; threading.Thread(target=threading.Event().wait, daemon=True).start()"):
        out = tmp_path / "r.html"
        run = subprocess.run([sys.executable, "-c", f"{first}\n{DRAWN_ELSEWHERE}", str(db), str(out)],
                             capture_output=True, text=True, timeout=120, check=False)
        assert (run.returncode, run.stdout, run.stderr) == (0, "(3, 6) True\n", ""), first
        assert out.read_bytes() == page.read_bytes()


@pytest.mark.slow
def test_ctrl_c_while_the_charts_process_runs_ends_both_saying_nothing(page, tmp_path):
    """Ctrl-C reaches every process of the terminal's group: the drawing process (here in
    its matplotlib import or waiting for work) leaves it to the command, which exits 130,
    prints no worker's traceback and leaves no process behind."""
    ledger = Path(sys.executable).with_name("ledger")
    run = subprocess.Popen([str(ledger), "report", "--html", str(tmp_path / "r.html"), "--db", str(page.parent / "ledger.db")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(_group(run.pid)) < 2 and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)  # until the drawing process has forked
    assert run.poll() is None, run.communicate()
    os.killpg(run.pid, signal.SIGINT)
    out, err = run.communicate(timeout=60)
    assert (run.returncode, out, err) == (130, "", "")
    deadline = time.monotonic() + 30  # the drawer exits as its pool shuts down, or (interrupted
    while _group(run.pid) and time.monotonic() < deadline:  # before that) within 0.2 s of its parent
        time.sleep(0.05)
    assert _group(run.pid) == []
    assert not (tmp_path / "r.html").exists()


def _group(pgid: int) -> list[str]:
    return subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True, check=False).stdout.split()


@pytest.mark.slow
def test_html_to_a_missing_folder_is_one_line_error(db, tmp_path):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    r = run_cli("report", "--db", db, "--html", tmp_path / "no" / "report.html")
    assert r.exit_code == 1 and r.output.splitlines()[-1].startswith("error: cannot write ")
    assert query(db, "SELECT count(*) FROM pins") == [(0,)]


def _chromium(*args, cwd) -> subprocess.CompletedProcess:
    profile = f"--user-data-dir={cwd / 'chromium-profile'}"
    return subprocess.run([CHROMIUM, *FLAGS, profile, *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False)


@needs_chromium
def test_every_chart_renders_in_headless_chromium(page, tmp_path):
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    r = _chromium("--dump-dom", probed.as_uri(), cwd=tmp_path)
    found = re.search(r'<pre id="sizes">(.*?)</pre>', r.stdout)
    assert found, r.stderr[-2000:]
    sizes = json.loads(found.group(1))
    assert len(sizes) == 6
    for natural_w, natural_h, shown_w, shown_h in sizes:
        assert natural_w > 100 and natural_h > 100 and shown_w > 100 and shown_h > 100, sizes


@needs_chromium
def test_screenshot(page, tmp_path):
    shot = tmp_path / "report.png"
    r = _chromium(f"--screenshot={shot}", "--window-size=1200,2000", page.as_uri(), cwd=tmp_path)
    assert shot.exists(), r.stderr[-2000:]
    assert png_size(shot.read_bytes()) == (1200, 2000) and shot.stat().st_size > 50_000


@pytest.fixture(scope="module")
def program_page(tmp_path_factory):
    """60 recorded runs of a 250-compile program (15,000 rows, 61 functions of its own and
    the rest eager primitives): the page that was 10.8 MB of unreadable charts."""
    tmp_path = tmp_path_factory.mktemp("program")
    db = tmp_path / "ledger.db"
    recorded_runs(db, 60, 250)
    out = tmp_path / "report.html"
    r = run_cli("report", "--db", db, "--html", out)
    assert (r.exit_code, r.output) == (0, f"wrote {out} (1 table, 2 charts)\n")
    return out


# A screen at 1400 px wide; no chart may be taller than two of them.
SCREEN_H = 900


@pytest.mark.slow
def test_a_recorded_programs_page_stays_small_and_its_charts_fixed(program_page):
    text = program_page.read_text()
    assert len(text.encode()) < 2_000_000
    images = [png_size(base64.b64decode(b)) for b in IMG.findall(text)]
    assert len(images) == 2 and all(h <= 2 * SCREEN_H and w <= 1400 for w, h in images), images
    # the program first: its summary and its own functions; the primitives folded in one line
    assert text.index("<h2>recorded: python fit.py</h2>") < text.index("<h2>local_cpu")
    assert "<summary>189 eager primitive compiles," in text
    assert "jit_prim" not in text[text.index("<h2>local_cpu"):text.index("<h2>time saved")]
    assert "<summary>61 lines</summary>" in text  # the key table of 61 functions starts folded


@needs_chromium
def test_the_first_screen_shows_the_programs_summary_and_top_functions(program_page, tmp_path):
    probe = ("<script>window.addEventListener('load', () => {"
             "const h = [...document.querySelectorAll('h2')].find(e => e.textContent.startsWith('recorded:'));"
             "const t = h.nextElementSibling.nextElementSibling;"
             "const rows = [...t.querySelectorAll('tbody tr')].slice(0, 10).map(r => r.getBoundingClientRect().bottom);"
             "const imgs = [...document.images].map(i => i.getBoundingClientRect().height);"
             "const pre = document.createElement('pre'); pre.id = 'at';"
             "pre.textContent = JSON.stringify({top10: Math.max(...rows), imgs}); document.body.appendChild(pre); });"
             "</script>")
    probed = tmp_path / "probed.html"
    probed.write_text(program_page.read_text().replace("</body>", probe + "</body>"))
    r = _chromium("--dump-dom", "--window-size=1400,900", probed.as_uri(), cwd=tmp_path)
    found = re.search(r'<pre id="at">(.*?)</pre>', r.stdout)
    assert found, r.stderr[-2000:]
    at = json.loads(found.group(1))
    assert at["top10"] <= SCREEN_H and all(0 < h <= 2 * SCREEN_H for h in at["imgs"]), at
    shot = tmp_path / "program.png"
    r = _chromium(f"--screenshot={shot}", "--window-size=1400,900", program_page.as_uri(), cwd=tmp_path)
    assert shot.exists() and png_size(shot.read_bytes()) == (1400, 900), r.stderr[-2000:]


# Two recorded programs, each run cold then warm (the newest), on a quiet host, their
# processes' times kept: what the first screen must show for the newest run of each.
FULL_SIG = ", ".join(["f64[3]"] * 60) + " -> f64[]"
PROGRAMS = {  # command: [(function, kind, call site, signature, cold s, warm s, trace s)], wall s of the warm run
    "python fit_mge.py --quick-update": ([
        ("jit_full_pipeline_from_params", "jit", "autogalaxy/analysis/analysis.py:120 log_likelihood_function",
         FULL_SIG, 6.4, 0.3, 4.8),
        ("jit_while", "jit", "autolens/lens/tracer.py:88 traced_grid_2d_list_from", "f64[40,2] -> f64[40,2]",
         1.2, 0.1, 0.4),
        ("jit_multiply", "eager", "autoarray/structures/grids.py:301 __mul__", "f64[3], f64[] -> f64[3]",
         0.05, 0.02, 0.01)], 23.0),
    "python other_fit.py": ([
        ("jit_call", "jit", "autofit/non_linear/fitness.py:210 call", "f64[12] -> f64[]", 3.0, 0.2, 1.0)], 9.5),
}


def _program_rows() -> list[dict]:
    rows, i = [], 0
    for p, (command, (fns, _)) in enumerate(PROGRAMS.items()):
        for run, state in ((f"run-{p}-cold", "cold"), (f"run-{p}-warm", "warm")):
            for fn, kind, site, sig, cold, warm, trace in fns:
                i += 1
                rows.append({"transform": "recorded", "function": fn, "function_kind": kind, "call_site": site,
                             "input_signature": sig, "command": command, "run_id": run, "phase": None,
                             "cache_state": state, "compile_s": cold if state == "cold" else warm, "trace_s": trace,
                             "hardware": "local_cpu", "hostname": "node1", "jax_version": "0.11.2",
                             "mixed_precision": False, "cache_dir": "/c", "cache_key": f"{fn}-{p}", "status": "ok",
                             "host_cpu_count": 8, "host_load_avg_1m": 0.5, "pid": 100 + p, "compile_index": i,
                             "timestamp": f"2026-07-0{1 + p}T1{0 if state == 'cold' else 1}:00:{i:02d}+00:00"})
    return rows


@pytest.fixture(scope="module")
def programs_page(tmp_path_factory):
    from datetime import datetime, timedelta

    tmp_path = tmp_path_factory.mktemp("programs")
    db = tmp_path / "ledger.db"
    assert run_cli("import", write_json(tmp_path / "rows.json", _program_rows()), "--db", db).exit_code == 0
    con = sqlite3.connect(db)
    with con:
        for p, (_, wall) in enumerate(PROGRAMS.values()):
            start = datetime.fromisoformat(f"2026-07-0{1 + p}T11:00:00+00:00")
            con.execute("INSERT INTO recorded_processes (run_id, hostname, pid, started, ended, wall_s, ended_by)"
                        " VALUES (?, 'node1', ?, ?, ?, ?, 'exit')",
                        (f"run-{p}-warm", 100 + p, start.isoformat(), (start + timedelta(seconds=wall)).isoformat(), wall))
    con.close()
    out = tmp_path / "report.html"
    assert run_cli("report", "--db", db, "--html", out).exit_code == 0
    return out


# For each program's row of the glance table: the bottom of each cell the first screen
# must show, and its text.
GLANCE = ("<script>window.addEventListener('load', () => {"
          "const rows = [...document.querySelectorAll('table.glance tbody tr')].map(r =>"
          " Object.fromEntries(['cmd', 'time', 'share', 'removed', 'top'].map(c => {"
          "  const td = r.querySelector('td.' + c); const b = td.getBoundingClientRect();"
          "  return [c, [td.innerText, b.bottom, b.right]]; })));"
          "const pre = document.createElement('pre'); pre.id = 'glance'; pre.textContent = JSON.stringify(rows);"
          "document.body.appendChild(pre); });</script>")


@needs_chromium
def test_the_first_screen_shows_each_programs_time_share_savings_and_costliest_call_sites(programs_page, tmp_path):
    probed = tmp_path / "probed.html"
    probed.write_text(programs_page.read_text().replace("</body>", GLANCE + "</body>"))
    r = _chromium("--dump-dom", "--window-size=1400,900", probed.as_uri(), cwd=tmp_path)
    found = re.search(r'<pre id="glance">(.*?)</pre>', r.stdout, re.DOTALL)
    assert found, r.stderr[-2000:]
    rows = json.loads(html_lib.unescape(found.group(1)))
    assert [row["cmd"][0] for row in rows] == ["python other_fit.py", "python fit_mge.py --quick-update"]  # newest first
    for row in rows:  # every cell on the first screen, none past its right edge
        assert all(bottom <= SCREEN_H and right <= 1400 for _, bottom, right in row.values()), row
    other, mge = rows
    # 23.0 s, of which 5.21 s tracing and lowering and 0.42 s XLA: 24%; the cache removed
    # (6.4 - 0.3) + (1.2 - 0.1) + (0.05 - 0.02) = 7.23 s
    assert mge["time"][0] == "23.0 s" and mge["share"][0] == "24% compiling: 5.2 s tracing and lowering, 0.4 s XLA"
    assert mge["removed"][0] == "7.23 s"
    top = mge["top"][0].splitlines()
    assert top[0] == "jit_full_pipeline_from_params 5.10 s: autogalaxy/analysis/analysis.py:120 log_likelihood_function"
    assert top[1] == "jit_while 0.500 s: autolens/lens/tracer.py:88 traced_grid_2d_list_from"
    assert len(top) == 2  # the eager primitive is not among a program's own functions
    assert (other["time"][0], other["removed"][0]) == ("9.5 s", "2.80 s")
    assert "autofit/non_linear/fitness.py:210 call" in other["top"][0]
    shot = tmp_path / "first.png"
    r = _chromium(f"--screenshot={shot}", "--window-size=1400,900", programs_page.as_uri(), cwd=tmp_path)
    assert shot.exists() and png_size(shot.read_bytes()) == (1400, 900), r.stderr[-2000:]


@pytest.mark.slow
def test_a_long_signature_is_folded_with_the_whole_one_on_hover(programs_page):
    text = programs_page.read_text()
    whole = html_lib.escape(FULL_SIG)
    assert f'<td title="{whole}">60x f64[3] -&gt; f64[]</td>' in text  # the program's function table
    assert "jit_full_pipeline_from_params(60x f64[3] -&gt; f64[])</td>" in text  # the key table's cell
    # spelled out nowhere but in a hover: no 15-line cell
    assert ", f64[3], f64[3], f64[3]" not in re.sub(r' title="[^"]*"', "", text)
