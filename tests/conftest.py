"""Fixtures: every test gets its own temp database; the legacy corpus ships in
tests/fixtures so the suite runs without ../shared."""

from __future__ import annotations

import json
import os
import sqlite3
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ledger.cli import app
from ledger.storage.open import open_ledger
from ledger.record import LEGACY_FIELDS

FIXTURES = Path(__file__).parent / "fixtures"
CORPUS = FIXTURES / "legacy-results"

# The field's corpus, counted once (docs/migrations.md): 93 records in 9 files, 89 of them
# compile records that backfill to 33 cold, 34 warm, 19 none and 3 unknown, plus 4
# sibling records. test_import.py counts the files themselves against these.
CORPUS_FILES, CORPUS_RECORDS, CORPUS_COMPILE, CORPUS_SIBLINGS = 9, 93, 89, 4
CORPUS_STATES = {"cold": 33, "warm": 34, "none": 19, "unknown": 3}
CORPUS_STATES_TEXT = ", ".join(f"{s} {n}" for s, n in CORPUS_STATES.items())


@pytest.fixture(autouse=True)
def _no_ambient_db(monkeypatch, tmp_path):
    # Tests never touch a ./ledger.db or $LEDGER_DB of the machine running them.
    monkeypatch.delenv("LEDGER_DB", raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def db(tmp_path) -> Path:
    return tmp_path / "ledger.db"


# -- PostgreSQL ----------------------------------------------------------------------
# ci/postgres.sh start prints LEDGER_TEST_PG_URL (no password: it is in PGPASSFILE).
# Without it the PostgreSQL cases skip, saying why; .ci/run sets LEDGER_REQUIRE_PG=1 so
# that there they fail instead.
PG_ENV = "LEDGER_TEST_PG_URL"


def pytest_report_header(config):
    url = os.environ.get(PG_ENV)
    return f"postgresql: {url}" if url else f"postgresql: {PG_ENV} is not set, its cases skip (ci/postgres.sh start)"


def pytest_terminal_summary(terminalreporter):
    """A line each, even under -q, saying whether the PostgreSQL and SLURM cases ran."""
    kinds = {"PostgreSQL": (lambda r: "postgresql" in r.nodeid, os.environ.get(PG_ENV, "no server")),
             "SLURM": (lambda r: "slurm" in r.keywords, "single-node" if os.environ.get("LEDGER_TEST_SLURM")
                       else "no SLURM")}
    for kind, (ours, where) in kinds.items():
        outcomes = {}
        for outcome in ("passed", "failed", "skipped", "error"):
            n = sum(1 for r in terminalreporter.stats.get(outcome, ()) if hasattr(r, "nodeid") and ours(r))
            if n:
                outcomes[outcome] = n
        if outcomes:
            terminalreporter.write_line(f"{kind} cases: " + ", ".join(f"{n} {o}" for o, n in outcomes.items())
                                        + f" ({where})")


@dataclass(frozen=True)
class PgDb:
    """A PostgreSQL database of one test: str() is the URL for --db."""

    url: str

    def __str__(self) -> str:
        return self.url

    @property
    def conninfo(self) -> str:
        return self.url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture
def pg_db():
    base = os.environ.get(PG_ENV)
    if not base:
        if os.environ.get("LEDGER_REQUIRE_PG"):
            pytest.fail(f"LEDGER_REQUIRE_PG is set but {PG_ENV} is not: run ci/postgres.sh start")
        pytest.skip(f"no PostgreSQL server: set {PG_ENV} (ci/postgres.sh start prints it)")
    import psycopg

    admin = PgDb(base).conninfo
    name = f"ledger_t_{uuid.uuid4().hex[:12]}"
    for attempt in range(5):
        try:
            with psycopg.connect(admin, autocommit=True) as con:
                con.execute(f'CREATE DATABASE "{name}"')
            break
        except psycopg.errors.ObjectInUse:
            # "template1 is being accessed by other users": a session that has not
            # quite left it yet; the server's own advice is to try again
            if attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))
    yield PgDb(base.rsplit("/", 1)[0] + "/" + name)
    with psycopg.connect(admin, autocommit=True) as con:
        con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request, tmp_path):
    """The same test on a SQLite file and on a PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "ledger.db"
    return request.getfixturevalue("pg_db")


def run_cli(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def corpus_records() -> list[tuple[Path, dict]]:
    out = []
    for path in sorted(CORPUS.rglob("*.json")):
        out.extend((path, rec) for rec in json.loads(path.read_text()))
    return out


def compile_records_of_corpus() -> list[dict]:
    return [rec for _, rec in corpus_records() if "compile_s" in rec]


def insert_legacy(path: Path, records: list[dict]) -> None:
    """A plain INSERT of just the 18 legacy fields, as a 0001-era writer did."""
    cols = list(LEGACY_FIELDS)
    con = sqlite3.connect(path)
    with con:
        con.executemany(
            f"INSERT INTO compile_records ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
            [tuple(r.get(c) for c in cols) for r in records],
        )
    con.close()


def migrate(path: Path, direction: str, revision: str) -> Path:
    """Move the database at `path` along the real revision chain."""
    with open_ledger(str(path), "migrate", create=True) as ledger:
        ledger.migrate(direction, revision)
    return path


def db_at(path: Path, revision: str) -> Path:
    return migrate(path, "upgrade", revision)


def query(path: Path | PgDb, sql: str, params=()) -> list[tuple]:
    """Rows of `sql` (placeholders: ? on SQLite, %s on PostgreSQL)."""
    if isinstance(path, PgDb):
        import psycopg

        with psycopg.connect(path.conninfo) as con:
            return [tuple(r) for r in con.execute(sql, params or None).fetchall()]
    con = sqlite3.connect(path)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path
