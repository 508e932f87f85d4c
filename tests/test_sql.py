"""`ledger sql`: answers reads, refuses anything that would write, changes nothing;
streams its rows (the table is capped, and says so) and stops at Ctrl-C."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .case_kinds import LEDGER
from .conftest import CORPUS, CORPUS_COMPILE, CORPUS_STATES, PgDb, examples, run_cli


@pytest.fixture
def loaded(db):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    return db


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_select_as_aligned_table(loaded):
    result = run_cli("sql", "SELECT cache_state, count(*) AS n FROM compile_records GROUP BY 1 ORDER BY 1", "--db", loaded)
    assert result.exit_code == 0
    assert result.output == (
        "cache_state   n\n"
        "-----------  --\n"
        f"cold         {CORPUS_STATES['cold']}\n"
        f"none         {CORPUS_STATES['none']}\n"
        f"unknown       {CORPUS_STATES['unknown']}\n"
        f"warm         {CORPUS_STATES['warm']}\n"
    )


def test_select_csv_and_json(loaded):
    q = "SELECT transform, compile_s FROM compile_records WHERE tag = 'cache-warm'"
    assert run_cli("sql", q, "--csv", "--db", loaded).output == "transform,compile_s\nvag,2.27\n"
    # JSON lines: one object per row
    assert run_cli("sql", q, "--json", "--db", loaded).output == '{"transform": "vag", "compile_s": 2.27}\n'
    two = run_cli("sql", "SELECT 1 AS a, NULL AS b UNION ALL SELECT 2, 'x'", "--json", "--db", loaded).output
    assert [json.loads(line) for line in two.splitlines()] == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]
    assert run_cli("sql", "SELECT 1 AS a WHERE 0", "--json", "--db", loaded).output == ""
    assert run_cli("sql", "SELECT 1 AS a, 2 AS b WHERE 0", "--csv", "--db", loaded).output == "a,b\n"


def test_table_valued_json_functions_work(loaded):
    result = run_cli("sql", "SELECT count(*) FROM compile_records, json_each('[1, 2]')", "--csv", "--db", loaded)
    assert (result.exit_code, result.output) == (0, "count(*)\n178\n")
    assert run_cli("sql", "UPDATE sqlite_master SET sql = ''", "--db", loaded).exit_code == 1


def test_with_and_pragma_reads_work(loaded):
    assert run_cli("sql", "WITH t AS (SELECT 1 AS x) SELECT x FROM t", "--db", loaded).exit_code == 0
    result = run_cli("sql", "PRAGMA table_info(compile_records)", "--db", loaded)
    assert result.exit_code == 0 and "cache_state" in result.output


WRITES = [
    "DROP TABLE compile_records",
    "DELETE FROM compile_records",
    "UPDATE compile_records SET cache_state = 'warm'",
    "INSERT INTO compile_records (tag) VALUES ('x')",
    "CREATE TABLE t (x)",
    "CREATE INDEX ix_t ON compile_records (tag)",
    "ALTER TABLE compile_records ADD COLUMN x",
    "ATTACH DATABASE 'other.db' AS o",
    "PRAGMA user_version = 7",
    "VACUUM",
    "REPLACE INTO compile_records (id) VALUES (1)",
    "WITH x AS (SELECT 1) DELETE FROM compile_records",
]


@pytest.mark.slow
@pytest.mark.parametrize("statement", WRITES)
def test_writes_are_refused_and_change_nothing(loaded, tmp_path, statement):
    before = _digest(loaded)
    result = run_cli("sql", statement, "--db", loaded)
    assert result.exit_code == 1
    assert result.output == "error: ledger sql is read-only: only SELECT, WITH ... SELECT, EXPLAIN and read-only PRAGMAs run\n"
    assert _digest(loaded) == before
    assert not (tmp_path / "other.db").exists()


@pytest.mark.parametrize("statement", ["SELECT 1; DROP TABLE compile_records", "SELECT 1; SELECT 2"])
def test_several_statements_are_refused(loaded, statement):
    before = _digest(loaded)
    result = run_cli("sql", statement, "--db", loaded)
    assert result.exit_code == 1
    assert result.output == "error: ledger sql runs one statement at a time\n"
    assert _digest(loaded) == before
    assert run_cli("sql", "SELECT count(*) FROM compile_records", "--db", loaded).output.endswith(f"{CORPUS_COMPILE}\n")


def test_sql_errors_are_one_line(loaded):
    result = run_cli("sql", "SELECT nope FROM compile_records", "--db", loaded)
    assert result.exit_code == 1 and result.output == "error: sql error: no such column: nope\n"
    assert run_cli("sql", "SELECT 1", "--csv", "--json", "--db", loaded).output == "error: choose one of --csv and --json\n"


def test_path_with_uri_characters_is_opened_read_only(tmp_path):
    odd = tmp_path / "a#b?c%41.db"
    assert run_cli("import", CORPUS, "--db", odd).exit_code == 0
    before = _digest(odd)
    result = run_cli("sql", "SELECT count(*) FROM compile_records", "--csv", "--db", odd)
    assert (result.exit_code, result.output) == (0, f"count(*)\n{CORPUS_COMPILE}\n")
    assert run_cli("sql", "DELETE FROM compile_records", "--db", odd).exit_code == 1
    assert _digest(odd) == before
    # nothing beside it but SQLite's own WAL files (a reader of a WAL database makes
    # them), and no row in the WAL
    beside = {p.name: p.stat().st_size for p in tmp_path.iterdir() if p.name != odd.name}
    assert set(beside) <= {"a#b?c%41.db-wal", "a#b?c%41.db-shm"} and not beside.get("a#b?c%41.db-wal")


def test_not_a_database_is_one_line(tmp_path):
    (tmp_path / "notes.db").write_text("hello")
    result = run_cli("sql", "SELECT 1", "--db", tmp_path / "notes.db")
    assert result.exit_code == 1 and result.output.startswith(f"error: cannot read {tmp_path / 'notes.db'}: ")
    assert run_cli("sql", "SELECT 1", "--db", tmp_path).output == f"error: {tmp_path} is not a database file\n"


values = st.one_of(st.none(), st.integers(), st.floats(), st.booleans(), st.binary(max_size=6),
                   st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6),
                   st.sampled_from(["", " ", ",", '"', "\n", "\r", "a,b", '""']))


@pytest.mark.slow  # a property test (on a fresh clone hypothesis first builds its Unicode tables: 1.6 s)
@settings(max_examples=examples(100))
@given(rows=st.lists(st.lists(values, min_size=1, max_size=3), max_size=4))
def test_csv_is_what_csv_writer_writes_with_each_blob_as_its_hex(rows):
    """A BLOB's hex goes out as it is (csv.writer's scan of a long field was slow); every
    line is still the one csv.writer writes of the row with each BLOB made hex."""
    from ledger.output import format_csv, write_csv

    columns = [f"c{i}" for i in range(max(map(len, rows), default=1))]
    rows = [row + [None] * (len(columns) - len(row)) for row in rows]
    want = io.StringIO()
    writer = csv.writer(want, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([v.hex() if type(v) is bytes else v for v in row] for row in rows)
    streamed = io.StringIO()
    write_csv(streamed, columns, iter(rows))
    assert format_csv(columns, rows) == streamed.getvalue() == want.getvalue()


def test_blobs_are_hex_in_every_format_and_read_pragmas(loaded):
    blob = "SELECT 1 AS n, x'00ff' AS b UNION ALL SELECT 2, 'x''\n'"  # a BLOB, then text in its column
    assert run_cli("sql", blob, "--json", "--db", loaded).output == '{"n": 1, "b": "00ff"}\n{"n": 2, "b": "x\'\\n"}\n'
    assert run_cli("sql", blob, "--csv", "--db", loaded).output == 'n,b\n1,00ff\n2,"x\'\n"\n'
    assert run_cli("sql", blob, "--db", loaded).output == "n  b\n-  ----\n1  00ff\n2  x'\\n\n"
    assert run_cli("sql", "PRAGMA user_version", "--csv", "--db", loaded).output == "user_version\n0\n"


# -- streaming, the table's cap, Ctrl-C ---------------------------------------------------

ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"


def _counting(n: int) -> str:
    return f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {n}) SELECT x FROM c"


@pytest.fixture
def target(any_db):
    """A database `ledger sql` runs on: a SQLite ledger file, or a PostgreSQL database."""
    if not isinstance(any_db, PgDb):
        assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    return any_db


def _table(n: int) -> str:
    width = len(str(n))
    return "x".rjust(width) + "\n" + "-" * width + "\n" + "".join(f"{i:>{width}}\n" for i in range(1, n + 1))


def _sql(*args, timeout: float = 120) -> subprocess.CompletedProcess:
    """`ledger sql` as its own process: an endless query that is not cut short fails
    the test by the timeout, not by hanging it."""
    return subprocess.run([LEDGER, "sql", *map(str, args)], check=False, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_table_is_capped_and_says_so(target):
    # an endless query: the table takes 1001 rows and leaves the rest unasked
    result = _sql(ENDLESS, "--db", target)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == _table(1000) + "... (first 1000 rows; use --csv or --limit 0 for all)\n"
    result = _sql(ENDLESS, "--limit", "3", "--db", target)
    assert (result.returncode, result.stdout) == (0, _table(3) + "... (first 3 rows)\n")
    # exactly as many rows as the cap, or --limit 0: all of them, and no closing line
    assert run_cli("sql", _counting(1000), "--db", target).stdout == _table(1000)
    assert run_cli("sql", _counting(1500), "--limit", "0", "--db", target).stdout == _table(1500)
    assert run_cli("sql", ENDLESS, "--limit", "-1", "--db", target).exit_code == 2


@pytest.mark.slow
def test_csv_and_json_lines_stream_every_row_or_the_limit(target):
    out = run_cli("sql", _counting(2500), "--csv", "--db", target).stdout
    assert out == "x\n" + "".join(f"{i}\n" for i in range(1, 2501))
    # an endless query ends at --limit: rows are taken as they come, not all first
    assert _sql(ENDLESS, "--csv", "--limit", "2", "--db", target).stdout == "x\n1\n2\n"
    assert _sql(ENDLESS, "--json", "--limit", "2", "--db", target).stdout == '{"x": 1}\n{"x": 2}\n'


def _failing_at(row: int, pg: bool) -> str:
    """Rows 1, 2, ... that fail at `row`: division by zero on PostgreSQL, bad JSON
    on SQLite (whose division by zero is NULL)."""
    fail = f"(x - {row}) / (x - {row})" if pg else f"json(CASE WHEN x = {row} THEN 'bad' ELSE '1' END)"
    return f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x, {fail} AS f FROM c"


def test_an_error_before_the_output_starts_prints_no_row(target):
    """An error on the first row, in any format; in the table, an error in any row it
    shows (it prints when it has them all): the one line, and nothing on stdout."""
    pg = isinstance(target, PgDb)
    message = "error: sql error: division by zero\n" if pg else "error: sql error: malformed JSON\n"
    for row, args in ((1, ["--csv"]), (1, ["--json"]), (1, []), (500, [])):
        result = run_cli("sql", _failing_at(row, pg), *args, "--db", target)
        assert (result.exit_code, result.stdout, result.stderr) == (1, "", message), (row, args)


def test_an_error_after_rows_were_printed_ends_them_with_one_line(target):
    """Streamed rows are out before the error comes: the output stops after the last
    whole row (SQLite: two before the failing one, as Python's sqlite3 reads a row
    ahead; PostgreSQL: the last whole chunk of 1000, as libpq drops a partial one),
    and the error is the usual one line."""
    pg = isinstance(target, PgDb)
    result = run_cli("sql", _failing_at(4500, pg), "--csv", "--db", target)
    assert result.exit_code == 1
    assert result.stdout == "x,f\n" + "".join(f"{i},1\n" for i in range(1, 4001 if pg else 4499))
    assert result.stderr == ("error: sql error: division by zero\n" if pg else "error: sql error: malformed JSON\n")


# Subprocesses from here: a real signal, a real pipe.


class Ledger:
    """`ledger sql ...` running, its stdout read line by line as it comes."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([LEDGER, "sql", *map(str, args)], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.read: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def first_lines(self, n: int, timeout: float) -> list[str]:
        stop = time.monotonic() + timeout
        while len(self.read) < n:
            try:
                line = self.lines.get(timeout=max(0.0, stop - time.monotonic()))
            except queue.Empty:
                self.proc.kill()
                pytest.fail(f"{n} lines not printed within {timeout} s (got {self.read!r})")
            assert line is not None, f"ended after {self.read!r}: {self.proc.communicate()[1]}"
            self.read.append(line)
        return self.read

    def interrupt(self) -> tuple[int, float, str, str]:
        """SIGINT, and another while the first is handled: (exit status, seconds from
        the first signal to the exit, rest of stdout, stderr)."""
        start = time.monotonic()
        self.proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail("SIGINT did not end the query within 30 s")
        took = time.monotonic() - start
        rest = []
        while (line := self.lines.get(timeout=5)) is not None:
            rest.append(line)
        return rc, took, "".join(rest), self.proc.stderr.read()


# Measured here: 0.1-0.2 s from SIGINT to the exit on SQLite, 0.2-0.7 s on PostgreSQL (a
# cancel request, then the process's exit) on a loaded 2-core machine. The tests hold the
# outcome, not the time (a shared machine stalls any process now and then): each query
# could never end on its own within interrupt()'s 30 s, so an exit 130 is the signal's.


def _wait_until_running(db: PgDb, marker: str) -> None:
    import psycopg

    with psycopg.connect(db.conninfo, autocommit=True) as con:
        for _ in range(300):
            if con.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s",
                           (f"%{marker}%",)).fetchone()[0]:
                return
            time.sleep(0.05)
    pytest.fail("the query never ran")


def _still_running(db: PgDb, marker: str) -> int:
    import psycopg

    with psycopg.connect(db.conninfo, autocommit=True) as con:
        for _ in range(40):  # the server ends a cancelled query at once; allow 2 s
            n = con.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s AND pid <> pg_backend_pid()",
                            (f"%{marker}%",)).fetchone()[0]
            if not n:
                return 0
            time.sleep(0.05)
    return n


@pytest.mark.slow
def test_sigint_stops_an_endless_query_inside_the_database(target, tmp_path):
    """The statement never returns a row to Python (SQLite is stepping it; PostgreSQL
    is computing it): SIGINT must reach into the database, not wait for a row."""
    if isinstance(target, PgDb):
        marker = f"ledger_sigint_{uuid.uuid4().hex[:8]}"
        run = Ledger(f"/* {marker} */ WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c)"
                     " SELECT count(*) FROM c", "--csv", "--db", target)
        _wait_until_running(target, marker)
    else:
        # Python's sqlite3 hands a row over once it has stepped to the next: "1" is
        # out when SQLite is looking, for ever, for a row after 2
        run = Ledger(f"{ENDLESS} WHERE x <= 2", "--csv", "--db", target)
        run.first_lines(2, timeout=30)
    time.sleep(0.2)
    rc, took, rest, stderr = run.interrupt()
    assert (rc, rest, stderr) == (130, "", "interrupted\n")
    print(f"exit {took:.2f} s after SIGINT")
    assert run.read == ([] if isinstance(target, PgDb) else ["x\n", "1\n"])
    if isinstance(target, PgDb):  # cancelled on the server, not left running there
        assert _still_running(target, marker) == 0


@pytest.mark.slow
def test_first_line_of_a_long_result_comes_at_once(target):
    """10^7 rows (the old `ledger sql` took 40 s and 3.4 GB for them): the first line
    comes while the rest are still being made, and SIGINT ends the stream."""
    run = Ledger(_counting(10_000_000), "--csv", "--db", target)
    start = time.monotonic()
    assert run.first_lines(3, timeout=10) == ["x\n", "1\n", "2\n"]
    print(f"first lines after {time.monotonic() - start:.2f} s (with the process's start)")
    rc, took, rest, stderr = run.interrupt()
    assert (rc, stderr) == (130, "interrupted\n")
    print(f"exit {took:.2f} s after SIGINT")
    # what was written before the signal is whole lines, in order
    numbers = [int(line) for line in run.read[1:] + rest.splitlines(keepends=True)]
    assert numbers == list(range(1, len(numbers) + 1)) and (not rest or rest.endswith("\n"))
    assert len(numbers) < 10_000_000  # the signal ended the stream, not its last row


PEAK_RSS = """
import resource, subprocess, sys
with open("/dev/null", "w") as null:
    rc = subprocess.run(sys.argv[1:], stdout=null).returncode
print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


@pytest.mark.slow
def test_memory_does_not_grow_with_the_result(target):
    """A million rows of three columns as CSV and as JSON lines: the old `ledger sql`
    held them all (hundreds of MB); streamed, the peak is the process's own."""
    query = f"SELECT x, x * 2 AS y, 'row ' || x AS z FROM ({_counting(1_000_000)}) AS t"
    for fmt in ("--csv", "--json"):
        out = subprocess.run([sys.executable, "-c", PEAK_RSS, LEDGER, "sql", query, fmt, "--db", str(target)],
                             check=False, capture_output=True, text=True, timeout=300)
        rc, peak_kb = map(int, out.stdout.split())
        assert rc == 0, out.stderr
        print(f"{fmt}: peak RSS {peak_kb / 1000:.0f} MB")
        assert peak_kb < 100_000, f"{fmt}: peak RSS {peak_kb / 1000:.0f} MB"


def _holds_open(pid: int, path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.path.realpath(fd) == str(path.resolve()) for fd in fds.iterdir())
    except OSError:  # gone, or a descriptor closed while looking
        return False


@pytest.mark.slow
def test_sigint_stops_a_query_waiting_for_a_writers_lock(any_db, tmp_path):
    """A writer holds the database (SQLite: a file not in WAL mode under BEGIN
    EXCLUSIVE; PostgreSQL: an ACCESS EXCLUSIVE lock): the query waits for it, up to
    the busy timeout (600 s) on SQLite, and SIGINT must end the wait."""
    if isinstance(any_db, PgDb):
        import psycopg

        marker = f"ledger_lock_{uuid.uuid4().hex[:8]}"
        writer = psycopg.connect(any_db.conninfo)
        writer.execute("CREATE TABLE t (x int)")
        writer.commit()
        writer.execute("LOCK TABLE t IN ACCESS EXCLUSIVE MODE")
        run = Ledger(f"SELECT x FROM t /* {marker} */", "--csv", "--db", any_db)
        _wait_until_running(any_db, marker)
    else:
        db = tmp_path / "plain.db"
        writer = sqlite3.connect(db, isolation_level=None)
        writer.execute("CREATE TABLE t (x)")
        writer.execute("BEGIN EXCLUSIVE")
        run = Ledger("SELECT x FROM t", "--csv", "--db", db)
        for _ in range(600):
            if _holds_open(run.proc.pid, db):
                break
            time.sleep(0.05)
    try:
        time.sleep(0.3)
        rc, took, rest, stderr = run.interrupt()
    finally:
        writer.rollback() if isinstance(any_db, PgDb) else writer.execute("ROLLBACK")
        writer.close()
    assert (rc, rest, stderr, run.read) == (130, "", "interrupted\n", [])
    print(f"exit {took:.2f} s after SIGINT")


# One value is capped: SQLite refuses to build a value over BUILD_LIMIT, so a huge one
# costs nothing (it was 24x its size in memory: zeroblob(1e8) took 2.4 GB), and a value
# of the answer over CELL_LIMIT is refused as it arrives.

TOO_BIG = ("error: sql error: a value is over 1048576 bytes, the cap on one value of ledger sql: "
           "select a part of it (substr(x, 1, n)) or its length (length(x))\n")
TOO_BIG_TO_BUILD = ("error: sql error: the query builds a value over 67108864 bytes, more than ledger sql lets"
                    " SQLite make: select less\n")
HUGE = ["SELECT zeroblob(1e8)", "SELECT hex(zeroblob(50000000)) AS t", "SELECT 1 AS a, zeroblob(1e9) AS b"]

PEAK_RSS_OUT = """
import resource, subprocess, sys
# an address-space ceiling, so that a ledger that does try the whole value fails
# instead of bringing the OOM killer
limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
with open(sys.argv[1], "w") as out:
    p = subprocess.run(sys.argv[2:], stdout=out, stderr=subprocess.PIPE, text=True, preexec_fn=limit)
print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(p.stderr, end="")
"""


@pytest.mark.slow
@pytest.mark.parametrize("query", HUGE)
@pytest.mark.parametrize("fmt", ["table", "--csv", "--json"])
def test_a_huge_value_is_refused_in_one_line_at_a_bounded_cost(tmp_path, query, fmt):
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    out_file = tmp_path / "out"
    args = [LEDGER, "sql", query, "--db", str(db)] + ([] if fmt == "table" else [fmt])
    out = subprocess.run([sys.executable, "-c", PEAK_RSS_OUT, str(out_file), *args],
                         check=False, capture_output=True, text=True, timeout=300)
    head, _, stderr = out.stdout.partition("\n")
    rc, peak_kb = map(int, head.split())
    print(f"{query} {fmt}: peak RSS {peak_kb / 1000:.0f} MB, {out_file.stat().st_size} bytes out")
    assert (rc, stderr, out_file.read_text()) == (1, TOO_BIG_TO_BUILD if sys.version_info >= (3, 11) else TOO_BIG, "")
    assert peak_kb < 300_000, f"peak RSS {peak_kb / 1000:.0f} MB"


def test_a_value_at_the_cap_is_printed_whole(tmp_path):
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    result = run_cli("sql", "SELECT length(zeroblob(1048576)) AS n, hex(zeroblob(524287)) || '00' AS t", "--csv", "--db", db)
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == "n,t\n1048576," + "00" * 524288 + "\n"
    result = run_cli("sql", "SELECT zeroblob(1048577) AS b", "--csv", "--db", db)
    assert (result.exit_code, result.stdout, result.stderr) == (1, "", TOO_BIG)


def test_a_stored_value_over_the_cap_is_looked_at_as_the_refusal_says(any_db):
    """The refusal names length(x) and substr(x, 1, n): both answer, on either backend
    (they were refused with the value itself)."""
    assert run_cli("db", "upgrade", "--db", any_db).exit_code == 0
    big = "tag-" + "x" * 2_000_000
    if isinstance(any_db, Path):
        con = sqlite3.connect(any_db)
        con.execute("CREATE TABLE notes (x TEXT)")
        con.execute("INSERT INTO notes VALUES (?)", (big,))
        con.commit()
        con.close()
    else:
        import psycopg

        with psycopg.connect(any_db.conninfo) as con:
            con.execute("CREATE TABLE notes (x TEXT)")
            con.execute("INSERT INTO notes VALUES (%s)", (big,))
    whole = run_cli("sql", "SELECT x FROM notes", "--db", any_db)
    assert (whole.exit_code, whole.stderr) == (1, TOO_BIG)
    part = run_cli("sql", "SELECT length(x) AS n, substr(x, 1, 6) AS head FROM notes", "--csv", "--db", any_db)
    assert (part.exit_code, part.stdout, part.stderr) == (0, "n,head\n2000004,tag-xx\n", "")


@pytest.mark.slow
def test_printf_over_the_cap_is_null_as_sqlite_makes_it(tmp_path):
    """SQLite's printf() (and format()) is the one that does not fail over the cap: it
    yields NULL (SQLite's own rule). Still nothing huge is built."""
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    query = "SELECT printf('%.*c', 100000000, 'x') IS NULL AS cut"
    out = subprocess.run([sys.executable, "-c", PEAK_RSS_OUT, str(tmp_path / "out"), LEDGER, "sql", query,
                          "--csv", "--db", str(db)], check=False, capture_output=True, text=True, timeout=300)
    head, _, stderr = out.stdout.partition("\n")
    rc, peak_kb = map(int, head.split())
    assert (rc, stderr, (tmp_path / "out").read_text()) == (0, "", "cut\n1\n")
    assert peak_kb < 300_000, f"peak RSS {peak_kb / 1000:.0f} MB"


@pytest.mark.slow
def test_the_table_stays_small_for_wide_values(tmp_path):
    """The table holds its rows to align them: at most TABLE_BYTES of them, then it
    says it stopped, as it does at 1000 rows."""
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    query = f"SELECT x, printf('%.*c', 1000000, 'y') AS t FROM ({_counting(100)})"
    result = _sql(query, "--db", db)
    assert (result.returncode, result.stderr) == (0, "")
    lines = result.stdout.splitlines()
    assert lines[-1] == "... (first 14 rows: the table holds at most 16 MiB; use --csv or --json for all)"
    assert len(lines) == 2 + 14 + 1 and len(result.stdout) < 16 << 20


@pytest.mark.slow
def test_a_table_of_values_at_the_cap_stays_under_300_mb(tmp_path):
    """1000 rows of 1 MiB BLOBs (2 MiB each as shown, in hex) were 2 GB of table: it stops
    at TABLE_BYTES."""
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    query = f"SELECT zeroblob(1048576) AS b FROM ({_counting(1000)})"
    out = subprocess.run([sys.executable, "-c", PEAK_RSS_OUT, str(tmp_path / "out"), LEDGER, "sql", query,
                          "--db", str(db)], check=False, capture_output=True, text=True, timeout=300)
    head, _, stderr = out.stdout.partition("\n")
    rc, peak_kb = map(int, head.split())
    print(f"table of 1000 x 1 MiB: peak RSS {peak_kb / 1000:.0f} MB")
    lines = (tmp_path / "out").read_text().splitlines()
    assert (rc, stderr, len(lines)) == (0, "", 2 + 5 + 1)
    assert lines[-1] == "... (first 5 rows: the table holds at most 16 MiB; use --csv or --json for all)"
    assert peak_kb < 300_000, f"peak RSS {peak_kb / 1000:.0f} MB"


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["--csv", "--json"])
def test_streamed_values_at_the_cap_stay_under_300_mb(tmp_path, fmt):
    """1000 rows of 1 MiB BLOBs were rendered 1000 at a time (2 GB as hex): now a
    chunk is a few MiB."""
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    query = f"SELECT zeroblob(1048576) AS b FROM ({_counting(300)})"
    out = subprocess.run([sys.executable, "-c", PEAK_RSS_OUT, str(tmp_path / "out"), LEDGER, "sql", query, fmt,
                          "--db", str(db)], check=False, capture_output=True, text=True, timeout=300)
    head, _, stderr = out.stdout.partition("\n")
    rc, peak_kb = map(int, head.split())
    print(f"{fmt} of 300 x 1 MiB: peak RSS {peak_kb / 1000:.0f} MB")
    assert (rc, stderr) == (0, "")
    with open(tmp_path / "out") as f:
        assert sum(1 for _ in f) == 300 + (fmt == "--csv")
    assert peak_kb < 300_000, f"peak RSS {peak_kb / 1000:.0f} MB"


def test_the_cap_where_the_database_is_not_told_of_it():
    """Python 3.10 (no setlimit) and PostgreSQL: each value is checked as it comes,
    in UTF-8 bytes, with the same line."""
    from ledger.errors import LedgerError
    from ledger.storage.readonly import CELL_LIMIT, _capped

    at_cap = [(1, b"x" * CELL_LIMIT, "é" * (CELL_LIMIT // 2), None)]
    assert list(_capped(iter(at_cap))) == at_cap
    for over in (b"x" * (CELL_LIMIT + 1), "x" * (CELL_LIMIT + 1), "é" * (CELL_LIMIT // 2) + "x"):
        with pytest.raises(LedgerError) as err:
            list(_capped(iter([(1, "ok"), (2, over)])))
        assert f"error: {err.value}\n" == TOO_BIG
