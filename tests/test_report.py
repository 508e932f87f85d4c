"""`ledger report`: markdown per host key, pins and verdicts on their lines, the README block."""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from .case_kinds import LEDGER, unprivileged
from .conftest import CORPUS, query, run_cli
from .ledgers import add_row, add_verdict

START, END = "<!-- ledger-report:start -->", "<!-- ledger-report:end -->"
HEADER = "| cell | transform | warm s | cold s | cold/warm | pin s | verdict | source tag | time |"
RULE = "|---|---|---:|---:|---:|---:|---|---|---|"
HEADINGS = [
    "### local_cpu · DESKTOP-H143S82 · jax 0.10.2 · mixed_precision false",
    "### local_cpu · euclid-ral-compute-22 · jax 0.10.2 · mixed_precision false",
    "### local_gpu_NVIDIA_A100_80GB_PCIe · euclid-ral-gpu-2 · jax 0.10.2 · mixed_precision false",
]
RAL = """\
### local_cpu · euclid-ral-compute-22 · jax 0.10.2 · mixed_precision false

| cell | transform | warm s | cold s | cold/warm | pin s | verdict | source tag | time |
|---|---|---:|---:|---:|---:|---|---|---|
| imaging / delaunay_matern / hst | laxmap_vag | 21.16 | 21.18 | 1.0x | {p1} | - | prodigy-census-ral32-warm | 2026-07-28 20:13 |
| imaging / delaunay_matern / hst | vag | 16.29 | 16.29 | 1.0x | {p2} | - | prodigy-census-ral32-warm | 2026-07-28 20:04 |
| imaging / knn / hst | laxmap_vag | 1.37 | 21.32 | 15.6x | {p3} | - | prodigy-census-ral32-warm | 2026-07-28 20:29 |
| imaging / mge / hst | laxmap_vag | 1.81 | 62.86 | 34.7x | {p4} | - | prodigy-census-ral32-warm | 2026-07-28 20:30 |
| imaging / pixelization / hst | laxmap_vag | 1.16 | 18.14 | 15.7x | {p5} | - | prodigy-census-ral32-warm | 2026-07-28 20:03 |
| imaging / pixelization / hst | pyloop_vag | 1.00 | 15.51 | 15.5x | {p6} | - | prodigy-census-ral32-warm | 2026-07-28 19:21 |
"""
RAL_PINS = {"p1": "21.16", "p2": "16.29", "p3": "1.37", "p4": "1.81", "p5": "1.16", "p6": "1.00"}


def imported(db):
    r = run_cli("import", CORPUS, "--db", db)
    assert r.exit_code == 0, r.output
    return db


def report(db, *args):
    return run_cli("report", "--db", db, *args)


UNCHECKED = "### what to do\n\nThis ledger has not been checked: `ledger check` says what to do.\n\n\n"


def key_tables(text: str) -> str:
    """The per-key tables: the report after its opening "what to do", up to its time-saved section."""
    return text.partition("Compile times in seconds.")[2].partition("### time saved")[0]


def headings(text: str) -> list[str]:
    return [ln for ln in key_tables(text).splitlines() if ln.startswith("### ")]


def table_lines(text: str) -> list[str]:
    return [ln for ln in key_tables(text).splitlines() if ln.startswith("| ") and ln != HEADER]


def pin_all_by_sql(db) -> int:
    """25 pins, as `ledger pins update` would make them: the newest warm row per key."""
    key = ("hardware, hostname, jax_version, mixed_precision, cache_state, dataset_class, model_type, instrument,"
           " transform, n_batch, batch_size")
    con = sqlite3.connect(db)
    with con:
        con.execute(
            f"INSERT INTO pins (pin_key, {key}, row_id, compile_s, tag, timestamp, pinned_at, loaded_host)"
            f" SELECT 'k' || id, {key}, id, compile_s, tag, timestamp, '2026-08-01T00:00:00', 0 FROM ("
            f"  SELECT *, ROW_NUMBER() OVER (PARTITION BY {key} ORDER BY timestamp DESC, id DESC) AS rn"
            "   FROM compile_records WHERE cache_state = 'warm') WHERE rn = 1")
    n = con.execute("SELECT count(*) FROM pins").fetchone()[0]
    con.close()
    return n


def test_corpus_report_is_one_table_per_host_key(db):
    r = report(imported(db))
    assert r.exit_code == 0, r.output
    assert r.output.startswith(f"{UNCHECKED}Compile times in seconds. Each table is one comparability key")
    # the RTX 2060 host has only unknown rows: nothing to compare, no table
    assert headings(r.output) == HEADINGS
    assert r.output.count(HEADER) == 3 and r.output.count(RULE) == 3
    assert RAL.format(**dict.fromkeys(RAL_PINS, "-")) in r.output
    assert "| imaging / mge / hst | vag | 4.30 | 150.34 | 35.0x | - | - | prodigy-census-warm | 2026-07-28 16:04 |" \
        in r.output
    # a cell with only a cold row: no speed-up, and its source is the cold row
    assert "| datacube_img / mge / hst | pyloop_vag | - | 166.01 | - | - | - | mb_homo_pyloop_bs1_cold" \
        " | 2026-07-21 21:52 |" in r.output
    assert len(table_lines(r.output)) == 27 and "†" not in r.output


@pytest.mark.slow
def test_report_is_deterministic_and_read_only(db):
    imported(db)
    before = query(db, "SELECT count(*) FROM compile_records")
    assert report(db).output == report(db).output
    assert query(db, "SELECT count(*) FROM compile_records") == before
    missing = report(db.with_name("none.db"))
    assert (missing.exit_code, missing.output) == (1, f"error: no ledger database at {db.with_name('none.db')}\n")


def test_25_pins_from_pins_update_show_grouped_by_key(db):
    up = run_cli("pins", "update", "--db", imported(db))
    assert up.exit_code == 0 and up.output.endswith("25 pins: 25 new, 0 repinned, 0 unchanged\n"), up.output
    text = report(db).output
    assert RAL.format(**RAL_PINS) in text
    pinned = [ln for ln in table_lines(text) if ln.split(" | ")[5] != "-"]
    assert len(pinned) == 25
    assert headings(text) == HEADINGS


def test_sql_pins_and_the_newest_verdict(db):
    assert pin_all_by_sql(imported(db)) == 25
    warm = query(db, "SELECT id FROM compile_records WHERE tag = 'prodigy-census-ral32-warm' AND transform = 'vag'")[0][0]
    slow = add_row(db, "prodigy-census-ral32-warm", "vag", compile_s=163.0, timestamp="2026-08-02T10:00:00",
                   tag="slow-one")
    add_verdict(db, 1, warm, "ok")
    add_verdict(db, 2, warm, "ok")
    add_verdict(db, 2, slow, "regression")  # the worst verdict of the newest run speaks
    text = report(db).output
    assert ("| imaging / delaunay_matern / hst | vag | 163.00 | 16.29 | 0.1x | 16.29 | regression | slow-one"
            " | 2026-08-02 10:00 |") in text
    assert RAL.format(**RAL_PINS).splitlines()[6] in text  # the other lines of that key keep "-"
    add_verdict(db, 3, slow, "ok")  # a newer run said ok
    assert "| 16.29 | ok | slow-one |" in report(db).output


def test_loaded_host_rows_are_marked(db):
    add_row(imported(db), "prodigy-census-ral32-warm", "vag", compile_s=17.5, timestamp="2026-08-02T10:00:00",
            tag="busy", host_load_avg_1m=40.0, host_cpu_count=32)
    text = report(db).output
    assert "| imaging / delaunay_matern / hst | vag | 17.50† | 16.29 | 0.9x | - | - | busy | 2026-08-02 10:00 |" in text
    ral = text.split(HEADINGS[1])[1].split("### ")[0]
    assert ral.rstrip().endswith("† measured on a loaded host (1-minute load above the usable cores)")
    assert text.count("† measured") == 1  # the footnote goes under the table it is about


def test_filters(db):
    text = report(imported(db), "--hostname", "euclid-ral-compute-22").output
    assert headings(text) == [HEADINGS[1]] and len(table_lines(text)) == 6
    text = report(db, "--model-type", "knn").output
    assert headings(text) == HEADINGS[:2]
    assert {ln.split(" | ")[0] for ln in table_lines(text)} == {"| imaging / knn / hst"}
    nope = run_cli("report", "--model-type", "nope", "--db", db)  # a typo is not an empty report
    assert (nope.exit_code, nope.stdout, nope.stderr) == (
        2, "", "error: no compile row matches --model-type nope: nothing to report\n")


@pytest.mark.slow  # 0.17-0.25 s of the fast tier's 0.3: a slower CI machine tips it over
def test_update_then_check_then_stale(db, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# Project\n\nIntro.\n\n{START}\nold\n{END}\n\nAfter.\n")
    up = report(imported(db), "--update", readme)
    assert (up.exit_code, up.output) == (0, f"{readme}: report block updated\n")
    text = readme.read_text()
    assert text.startswith(f"# Project\n\nIntro.\n\n{START}\n{UNCHECKED}Compile times in seconds.")
    assert text.endswith(f"\n{END}\n\nAfter.\n") and "\nold\n" not in text
    assert text.split(START)[1].split(END)[0] == "\n" + report(db).output.rstrip("\n") + "\n"
    ok = report(db, "--update", readme, "--check")
    assert (ok.exit_code, ok.output) == (0, f"{readme}: report block is up to date\n")
    add_row(db, "prodigy-census-ral32-warm", "vag", compile_s=16.5, timestamp="2026-08-02T10:00:00", tag="later")
    stale = report(db, "--update", readme, "--check")
    assert (stale.exit_code, stale.output) == (1, f"{readme}: report block is stale: run ledger report --update\n")
    assert readme.read_text() == text  # --check writes nothing
    assert report(db, "--update", readme).exit_code == 0
    assert report(db, "--update", readme, "--check").exit_code == 0
    again = report(db, "--update", readme)
    assert again.output == f"{readme}: report block already up to date\n"


@pytest.mark.slow  # 0.17-0.25 s of the fast tier's 0.3: a slower CI machine tips it over
def test_update_errors(db, tmp_path):
    imported(db)
    readme = tmp_path / "README.md"
    readme.write_text("# No markers here\n")
    r = report(db, "--update", readme)
    assert (r.exit_code, r.output) == (1, (f"error: {readme} has no {START} ... {END} markers: add them where"
                                           " the report goes\n"))
    readme.write_text(f"{END}\n{START}\n")  # wrong order is no block either
    assert report(db, "--update", readme, "--check").exit_code == 1
    assert readme.read_text() == f"{END}\n{START}\n"
    missing = report(db, "--update", tmp_path / "nope.md")
    assert (missing.exit_code, missing.output) == (1, f"error: no such file: {tmp_path / 'nope.md'}\n")
    assert report(db, "--check").exit_code == 2


@pytest.mark.slow
def test_help_imports_neither_matplotlib_nor_sqlalchemy():
    code = (
        "import sys\n"
        "from ledger.cli import app\n"
        "from typer.testing import CliRunner\n"
        "for args in (['--help'], ['report', '--help']):\n"
        "    r = CliRunner().invoke(app, args)\n"
        "    assert r.exit_code == 0, r.output\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'sqlalchemy')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- report --update touches the bytes between its markers and nothing else ----------------

BLOCK = f"{START}\nold\n{END}".encode()


def outside(data: bytes) -> tuple[bytes, bytes]:
    """The bytes before the block's content and from its end marker on."""
    a = data.index(START.encode()) + len(START)
    return data[:a], data[data.index(END.encode(), a):]


def one_error(result) -> str:
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    (line,) = result.output.splitlines()
    assert line.startswith("error: ")
    return line


@pytest.mark.slow  # 0.17-0.25 s of the fast tier's 0.3: a slower CI machine tips it over
def test_update_keeps_every_byte_outside_the_block(db, tmp_path):
    """CRLF, a lone CR, a BOM and bytes that are not UTF-8 outside the block stay as
    they were (the file was read and written as text: every CRLF became LF, and a
    byte like \\xff was refused); the block takes the file's line ending."""
    imported(db)
    readme = tmp_path / "README.md"
    head = b"\xef\xbb\xbf# T\r\n\r\nlatin-1 caf\xe9\rtab\there\r\n"
    tail = b"\r\nafter\r\nlf only\nno newline at the end"
    readme.write_bytes(head + BLOCK.replace(b"\n", b"\r\n") + tail)
    assert report(db, "--update", readme).output == f"{readme}: report block updated\n"
    data = readme.read_bytes()
    assert outside(data) == (head + START.encode(), END.encode() + tail)
    body = report(db).output.rstrip("\n").replace("\n", "\r\n").encode()
    assert data == head + START.encode() + b"\r\n" + body + b"\r\n" + END.encode() + tail
    assert report(db, "--update", readme, "--check").exit_code == 0  # CRLF and all, up to date
    readme.write_bytes(b"# LF\n" + BLOCK + b"\nafter\r\n")  # mostly LF: the block is LF
    report(db, "--update", readme)
    assert b"\r\n" not in readme.read_bytes()[:-2]


def test_update_through_a_symlink_writes_its_target(db, tmp_path):
    imported(db)
    docs = tmp_path / "docs"
    docs.mkdir()
    target = docs / "REPORT.md"
    target.write_bytes(b"x\r\n" + BLOCK + b"\r\n")
    target.chmod(0o664)
    link = tmp_path / "README.md"
    link.symlink_to("docs/REPORT.md")
    assert report(db, "--update", link).output == f"{link}: report block updated\n"
    assert link.is_symlink() and str(link.readlink()) == "docs/REPORT.md"
    assert b"Compile times in seconds." in target.read_bytes() and target.stat().st_mode & 0o777 == 0o664
    assert report(db, "--update", link, "--check").exit_code == 0
    assert sorted(p.name for p in docs.iterdir()) == ["REPORT.md"]  # no temp file left beside it


@pytest.mark.slow  # 0.17-0.25 s of the fast tier's 0.3: a slower CI machine tips it over
def test_update_refuses_a_read_only_file_even_as_root(db, tmp_path):
    """Root passes every permission check and the rename asks only the folder: the
    file's mode bits are what say read-only, and they are read."""
    imported(db)
    readme = tmp_path / "README.md"
    readme.write_bytes(b"# T\n" + BLOCK + b"\n")
    readme.chmod(0o444)
    before = readme.read_bytes()
    assert one_error(report(db, "--update", readme)) == (
        f"error: {readme} is read-only (mode 0444): report --update leaves it as it is (chmod u+w to let it)")
    assert (readme.read_bytes(), readme.stat().st_mode & 0o777) == (before, 0o444)
    stale = report(db, "--update", readme, "--check")  # checking writes nothing: a read-only file is fine
    assert (stale.exit_code, stale.output) == (1, f"{readme}: report block is stale: run ledger report --update\n")
    readme.chmod(0o644)
    report(db, "--update", readme)
    readme.chmod(0o444)
    same = report(db, "--update", readme)
    assert (same.exit_code, same.output) == (0, f"{readme}: report block already up to date\n")


@pytest.mark.slow
@pytest.mark.unprivileged
def test_update_refuses_a_file_the_user_may_not_write(tmp_path):
    """Mode 0464 has a write bit, but not for the file's owner, whom the owner bits
    bind: the system will not open it for them. The rename would still replace it
    (the folder is theirs), so the file itself is asked first."""
    prefix, _ = unprivileged()
    own = Path(tempfile.mkdtemp(prefix="ledger-unprivileged-")) if os.geteuid() == 0 else tmp_path / "own"
    own.mkdir(exist_ok=True)
    try:
        imported(own / "ledger.db")
        readme = own / "README.md"
        readme.write_bytes(b"# T\n" + BLOCK + b"\n")
        readme.chmod(0o464)
        if os.geteuid() == 0:  # all of it nobody's, as a user's checkout is theirs
            nobody = pwd.getpwnam("nobody")
            for path in (own, own / "ledger.db", readme):
                os.chown(path, nobody.pw_uid, nobody.pw_gid)
        r = subprocess.run([*prefix, LEDGER, "report", "--update", str(readme), "--db", str(own / "ledger.db")],
                           capture_output=True, text=True, cwd=own, timeout=120, check=False)
        assert (r.returncode, r.stdout, r.stderr) == (1, "", f"error: cannot write {readme}: Permission denied\n")
        assert readme.read_bytes() == b"# T\n" + BLOCK + b"\n" and readme.stat().st_mode & 0o777 == 0o464
        assert sorted(p.name for p in own.iterdir()) == ["README.md", "ledger.db"]
    finally:
        if os.geteuid() == 0:
            shutil.rmtree(own)


@pytest.mark.slow  # 0.17-0.25 s of the fast tier's 0.3: a slower CI machine tips it over
def test_update_refuses_anything_but_a_regular_file_of_sane_size(db, tmp_path):
    imported(db)
    folder = tmp_path / "folder"
    folder.mkdir()
    big = tmp_path / "big.md"
    with big.open("wb") as f:  # a block and then 16 MiB of nothing (sparse)
        f.write(b"# T\n" + BLOCK + b"\n")
        f.truncate(16 * 2**20 + 1)
    linked = tmp_path / "linked.md"
    linked.write_bytes(b"# T\n" + BLOCK + b"\n")
    os.link(linked, tmp_path / "other-name.md")
    cases = {
        folder: f"error: {folder} is a directory: report --update writes only into a regular file",
        big: f"error: {big} is 16777217 bytes, over 16 MiB: report --update takes a README, not this",
        linked: (f"error: {linked} has 2 hard links: an update would change this name only and leave the others"
                 " with the old text"),
    }
    for path, message in cases.items():
        for extra in ((), ("--check",)) if path != linked else ((),):
            assert one_error(report(db, "--update", path, *extra)) == message
    assert big.stat().st_size == 16 * 2**20 + 1 and linked.read_bytes() == b"# T\n" + BLOCK + b"\n"


def _bounded(*args: str) -> subprocess.CompletedProcess:
    """`ledger args...` in a process of its own with 1 GiB of address space and a
    minute: a read that never ends fails the test, not the machine."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2**30, 2**30))

    return subprocess.run([LEDGER, *args], capture_output=True, text=True, timeout=60, preexec_fn=limit,
                          check=False)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
def test_update_of_an_endless_file_answers_at_once(db, tmp_path, kind):
    """Opening a FIFO blocks until a writer comes, and /dev/zero never ends (it was
    read whole, to gigabytes): what a file is, is asked before it is opened."""
    imported(db)
    if kind == "fifo":
        path, what = tmp_path / "README.md", "a FIFO"
        os.mkfifo(path)
    else:
        path, what = Path(kind), "a character device"
    for extra in ((), ("--check",)):
        r = _bounded("report", "--update", str(path), *extra, "--db", str(db))
        assert (r.returncode, r.stdout, r.stderr) == (
            1, "", f"error: {path} is {what}: report --update writes only into a regular file\n")


@pytest.mark.slow  # 0.17-0.25 s of the fast tier's 0.3: a slower CI machine tips it over
def test_update_with_odd_file_names(db, tmp_path):
    """A name with a newline or a quote is a name like any other; one too long for
    the system is one line (the newline shown escaped: the error stays one line)."""
    imported(db)
    for name in ("new\nline.md", "it's \"quoted\".md"):
        readme = tmp_path / name
        readme.write_bytes(b"# T\n" + BLOCK + b"\n")
        assert report(db, "--update", readme).output == f"{readme}: report block updated\n"
        assert report(db, "--update", readme, "--check").exit_code == 0
    assert one_error(report(db, "--update", tmp_path / "new\nmissing.md")) == (
        f"error: no such file: {tmp_path}/new\\nmissing.md")
    huge = tmp_path / ("x" * 300)
    assert one_error(report(db, "--update", huge)) == f"error: cannot read {huge}: File name too long"


def test_a_marker_in_the_ledgers_own_text_cannot_end_the_block(db, tmp_path):
    """A tag holding an end marker (or any "<!--", which would hide the README after
    it) is written escaped: the next update finds the same block."""
    add_row(imported(db), "prodigy-census-ral32-warm", "vag", compile_s=16.5, timestamp="2026-08-02T10:00:00",
            tag=f"x{END}\n{START}y <!-- z")
    readme = tmp_path / "README.md"
    readme.write_bytes(b"# T\n" + BLOCK + b"\nafter\n")
    report(db, "--update", readme)
    data = readme.read_bytes()
    assert data.count(START.encode()) == 1 and data.count(END.encode()) == 1 and data.count(b"<!--") == 2
    assert b"&lt;!-- ledger-report:end -->" in data and data.endswith(f"{END}\nafter\n".encode())
    assert report(db, "--update", readme, "--check").exit_code == 0


def test_charts_put_aware_and_legacy_naive_times_on_one_axis():
    """New rows carry the one clock's aware UTC times, legacy rows naive local ones;
    matplotlib cannot compare the two kinds, so a chart reads an aware time as its UTC."""
    from datetime import datetime

    from ledger.report.html import _time

    assert _time("2026-12-04T13:56:02+05:30") == datetime(2026, 12, 4, 8, 26, 2)
    assert _time("2026-12-04T13:56:02+00:00") < _time("2026-12-04T13:56:03")
    assert (_time("not a time"), _time(None)) == (None, None)


@pytest.mark.slow
def test_a_panels_date_axis_has_3_to_8_ticks_for_any_span_without_a_warning():
    """The date locator the panels use, on spans from ten minutes (ONE_POINT_SPAN either side
    of a point) to sixty years: matplotlib warns ("unable to pick an appropriate interval")
    where its tick range is too narrow, as 5 at most was for spans of two hours to three years."""
    import warnings
    from datetime import datetime, timedelta

    from matplotlib.dates import date2num
    from matplotlib.figure import Figure

    from ledger.report.html import date_locator

    ax, start = Figure().add_subplot(), datetime(2026, 1, 1)
    counts = set()
    for i in range(400):
        seconds = 600 * (60 * 365 * 86400 / 600) ** (i / 399)
        locator = date_locator()
        ax.xaxis.set_major_locator(locator)
        ax.set_xlim(date2num(start), date2num(start + timedelta(seconds=seconds)))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            counts.add(len(locator()))
    assert min(counts) >= 3 and max(counts) <= 8, counts


@pytest.mark.slow
def test_a_panel_of_one_point_is_a_point_on_a_clock_of_minutes_and_titles_stay_apart():
    """A cell measured once (or twice within seconds) was drawn on a 24-hour axis; a long
    signature made a panel's title run into its neighbour's."""
    from datetime import timedelta

    from matplotlib.dates import num2date
    from matplotlib.figure import Figure

    from ledger.report.html import LABEL, ONE_POINT_SPAN, _draw_cell, _label
    from ledger.report.lines import Line

    sig = ", ".join(["f64[3]"] * 60)
    ln = Line(("local_cpu", "n1", "0.10.2", False), (None, None, None, "recorded", "jit_full", sig, None, None),
              pin={"compile_s": 0.3, "id": 1, "row_id": 1, "tag": None, "timestamp": None, "loaded": False})
    for stamps in (["2026-07-01T10:00:00+00:00"], ["2026-07-01T10:00:00+00:00", "2026-07-01T10:00:09+00:00"]):
        ax = Figure().add_subplot()
        _draw_cell(ax, ln, [{"cache_state": "warm", "compile_s": 0.3 + i, "timestamp": t, "mark": None}
                            for i, t in enumerate(stamps)])
        lo, hi = (num2date(v) for v in ax.get_xlim())
        assert timedelta(minutes=9) < hi - lo < 2 * ONE_POINT_SPAN + timedelta(minutes=1)
        assert next(len(line.get_xdata()) for line in ax.get_lines()) == len(stamps)  # drawn, as points
    title = ax.get_title(loc="left")
    assert title.splitlines()[0] == _label(ln) and len(_label(ln)) <= LABEL and "60x f64[3]" in _label(ln)
    assert title.splitlines()[1] == "(pin 0.300 s)"  # on a line of its own
