"""Fixtures: every test gets its own temp database; the legacy corpus ships in
tests/fixtures so the suite runs without ../shared."""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import time
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.testing
from hypothesis import settings
from typer.testing import CliRunner

from ledger.cli import app
from ledger.record import LEGACY_FIELDS
from ledger.storage.open import open_ledger

from . import alone, fast_budget
from .case_kinds import KINDS, PG_ENV, REQUIRE_ALL, require, required_by

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


# -- hypothesis: the budgets are profiles, chosen by HYPOTHESIS_PROFILE -------------------
# ci (the default, what CI runs): the same examples on every run (derandomize), so a run
# never fails on a case no one has seen; no deadline (a loaded machine is not a bug) and no
# example database. quick: a tenth of the examples, for a developer's loop
# (HYPOTHESIS_PROFILE=quick make test-fast). HYPOTHESIS_EXPLORE=1 draws new examples on
# either, when looking for trouble. A test whose examples are each expensive asks for
# examples(n), n being its budget under ci, scaled by the profile.
PROFILE_ENV, EXPLORE_ENV = "HYPOTHESIS_PROFILE", "HYPOTHESIS_EXPLORE"
CI_EXAMPLES = 150
settings.register_profile("ci", max_examples=CI_EXAMPLES, derandomize=True, deadline=None, database=None)
settings.register_profile("quick", settings.get_profile("ci"), max_examples=CI_EXAMPLES // 10)


def _load_profile() -> None:
    name = os.environ.get(PROFILE_ENV, "ci")
    if os.environ.get(EXPLORE_ENV):
        settings.register_profile(f"{name}-explore", settings.get_profile(name), derandomize=False)
        name = f"{name}-explore"
    settings.load_profile(name)


_load_profile()


def examples(n: int) -> int:
    """A test's budget: n examples under ci, the same share of the loaded profile's (one at least)."""
    return max(1, round(n * settings.default.max_examples / CI_EXAMPLES))


# -- kinds of case: each runs, or skips saying why, or (LEDGER_REQUIRE_ALL) fails --------
# tests/case_kinds.py says what each kind needs and how to tell it is here.


# -- tiers: `make test-fast` runs the cases marked neither jax nor slow nor a kind that
# needs a server or a browser. Under it JAX has no platform to compile on, so a case
# that compiles and is not marked jax fails, saying so, instead of slowing the tier.
TIER_ENV = "LEDGER_TEST_TIER"
NO_PLATFORM = "no-jax-in-the-fast-tier"


def jax_platform() -> str:
    """The platform a test's own programs compile on: the CPU (whatever accelerator the
    machine has), and none at all under the fast tier."""
    return NO_PLATFORM if os.environ.get(TIER_ENV) == "fast" else "cpu"


def pytest_configure(config):
    for kind, (needs, _) in KINDS.items():
        config.addinivalue_line("markers", f"{kind}: needs {needs}; skips without it, fails under {REQUIRE_ALL}")
    config.addinivalue_line("markers", "jax: runs a JAX compile, in the test or in a command it starts"
                            " (left out of make test-fast)")
    config.addinivalue_line("markers", "jax_legs: reads JAX internals (probes/jax_internals.py): the probe's evidence,"
                            " cache-key components, predict, the recorder's truth; ci/jax_legs.sh runs its non-server cases"
                            " on the declared jax floor and the newest jax")
    config.addinivalue_line("markers", "legs_covered: a jax_legs case whose JAX path another case of the legs takes;"
                            " ci/jax_legs.sh leaves it to the main suite")
    config.addinivalue_line("markers", "slow: over 0.3 s on a 2-core machine without a compile (or over half"
                            " of it on average: too near the budget for a noisy machine's CPU time): many processes, a lock or"
                            " a timeout waited for, a property test, three ledgers built (left out of make test-fast)")
    alone.configure(config)
    if os.environ.get(TIER_ENV) == "fast":
        os.environ["JAX_PLATFORMS"] = NO_PLATFORM  # read when jax first picks a backend, here or in a child
        fast_budget.warm()  # each case is held to its budget (fast_budget.py), none charged for first imports


def pytest_report_header(config):
    url = os.environ.get(PG_ENV)
    lines = [f"postgresql: {url}" if url else f"postgresql: {PG_ENV} is not set, its cases skip (ci/postgres.sh start)"]
    switches = required_by()
    if switches:
        lines.append(f"required to run, not skip: {', '.join(switches)}")
    return lines


def _kinds(item) -> tuple[str, ...]:
    """The kinds of a case: its markers, and postgresql for a case on a PostgreSQL
    database (the pg_db fixture, or a "postgresql" parameter of any_db and the like)."""
    kinds = {m.name for m in item.iter_markers() if m.name in KINDS}
    params = getattr(item, "callspec", None)
    if "pg_db" in item.fixturenames or (params and any(v == "postgresql" for v in params.params.values()
                                                       if isinstance(v, str))):
        kinds.add("postgresql")
    return tuple(k for k in KINDS if k in kinds)


def pytest_collection_modifyitems(config, items):
    for item in items:
        kinds = _kinds(item)
        item.user_properties.append(("kinds", kinds))  # reports carry them to the summary
        for kind in kinds:
            item.add_marker(kind)  # so that -m postgresql selects the any_db cases too
        if "slurm" in kinds:
            item.add_marker(alone.SERIAL)  # the single-node SLURM's CPUs, and the queue it reads
    alone.list_held(config, items)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # before the fixtures: a case that cannot run does not build its database first
    for kind in dict(item.user_properties).get("kinds", ()):
        require(kind)
    if os.environ.get(TIER_ENV) == "fast":
        fast_budget.start(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under LEDGER_REQUIRE_ALL no case skips, whatever skipped it (a skipif, a skip
    in a test or a library's importorskip): the skip is reported as a failure."""
    report = (yield).get_result()
    if os.environ.get(TIER_ENV) == "fast":
        fast_budget.judge(item, report)
    if report.skipped and isinstance(report.longrepr, tuple) and report.longrepr[0].endswith("case_kinds.py"):
        # a kind missing here: the case's own line, as for a skipif, not require()'s
        path, line, _ = item.reportinfo()
        report.longrepr = (str(path), line + 1, report.longrepr[2])
    if report.skipped and not hasattr(report, "wasxfail") and os.environ.get(REQUIRE_ALL):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        report.outcome = "failed"
        report.longrepr = f"skipped, but {REQUIRE_ALL} is set and every case must run: {reason}"
        report.user_properties.append(("not run", reason))


def _label(report) -> str:
    return "+".join(dict(report.user_properties).get("kinds", ())) or "local"


def case_counts(stats: dict) -> tuple[Counter, Counter, Counter, int]:
    """(ran, skipped, did not run: an error before the test) by kind label, and the
    number of collection errors, from the terminal reporter's stats."""
    ran, skipped, not_run, collect_errors = Counter(), Counter(), Counter(), 0
    for reports in stats.values():
        for r in reports:
            if isinstance(r, pytest.CollectReport):
                collect_errors += r.failed  # pytest itself shows what the error is
            elif not isinstance(r, pytest.TestReport) or r.passed and r.when != "call":
                continue
            elif r.skipped and not hasattr(r, "wasxfail"):
                skipped[_label(r)] += 1
            elif r.when == "call" and "not run" not in dict(r.user_properties):
                ran[_label(r)] += 1
            elif r.when != "teardown":
                not_run[_label(r)] += 1
    return ran, skipped, not_run, collect_errors


def summary_line(stats: dict) -> str:
    """E.g. "cases: 398 local, 90 postgresql, 2 slurm, 2 chromium, 7 namespace,
    4 unprivileged, 2 fork ran; 0 skipped". Every kind is named, 0 or not; a case of
    two kinds counts once, under both names joined by +."""
    ran, skipped, not_run, collect_errors = case_counts(stats)
    labels = ["local", *KINDS, *sorted(set(ran) - {"local", *KINDS})]

    def some(counts: Counter) -> str:
        return " (" + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + ")" if counts else ""

    line = "cases: " + ", ".join(f"{ran[k]} {k}" for k in labels) + f" ran; {sum(skipped.values())} skipped"
    line += some(skipped)
    if not_run:
        line += f"; {sum(not_run.values())} did not run{some(not_run)}"
    if collect_errors:
        line += f"; {collect_errors} collection error{'s' * (collect_errors != 1)}"
    return line


def pytest_terminal_summary(terminalreporter):
    """The line, even under -q: how many cases of each kind ran, and how many did not."""
    terminalreporter.write_line(summary_line(terminalreporter.stats))


# -- PostgreSQL ----------------------------------------------------------------------
# ci/postgres.sh start prints LEDGER_TEST_PG_URL (no password: it is in PGPASSFILE).


@dataclass(frozen=True)
class PgDb:
    """A PostgreSQL database of one test: str() is the URL for --db."""

    url: str

    def __str__(self) -> str:
        return self.url

    @property
    def conninfo(self) -> str:
        return self.url.replace("postgresql+psycopg://", "postgresql://", 1)


def _create(admin: str, name: str, template: str | None = None) -> None:
    import psycopg

    as_copy = f' TEMPLATE "{template}"' if template else ""
    for attempt in range(5):
        try:
            with psycopg.connect(admin, autocommit=True) as con:
                con.execute(f'CREATE DATABASE "{name}"{as_copy}')
            return
        except psycopg.errors.ObjectInUse:
            # "template1 is being accessed by other users": a session that has not
            # quite left it yet; the server's own advice is to try again
            if attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))


_HEAD: list[str] = []  # this process's PostgreSQL ledger at head, the template of at_head


def head_template() -> str:
    """A database the real revision chain brought to head, once per process (dropped at
    its session's end): CREATE DATABASE ... TEMPLATE copies it in 0.2 s, where the chain takes
    0.45 s more on a new database."""
    if not _HEAD:
        base = os.environ[PG_ENV]
        admin, name = PgDb(base).conninfo, f"ledger_t_head_{uuid.uuid4().hex[:12]}"
        _create(admin, name)
        upgraded = run_cli("db", "upgrade", "--db", PgDb(base.rsplit("/", 1)[0] + "/" + name))
        if upgraded.exit_code != 0:  # no template half-way up the chain for the cases after
            _drop(admin, name)
            raise AssertionError(f"the head template's upgrade failed: {upgraded.output}")
        _HEAD.append(name)  # dropped at the session's end
    return _HEAD[0]


def pg_renew_at_head(db: PgDb) -> None:
    """The test database `db`, empty, made a copy of head_template() under its own name."""
    session = _SESSIONS.pop(db.url, None)
    if session is not None:
        session.close()
    admin, name = PgDb(os.environ[PG_ENV]).conninfo, db.url.rsplit("/", 1)[1]
    _drop(admin, name)
    _create(admin, name, head_template())


def pytest_sessionfinish(session):
    for name in _HEAD:  # each process's own (an xdist worker's session ends in it)
        _drop(PgDb(os.environ[PG_ENV]).conninfo, name)


@contextmanager
def pg_database(at_head: bool = False):
    """A fresh PostgreSQL database, dropped after: what pg_db gives a test, and what a
    property test takes for each of its examples. at_head: a copy of head_template(), for
    a test whose subject is not the revision chain."""
    require("postgresql")
    base = os.environ[PG_ENV]
    admin = PgDb(base).conninfo
    name = f"ledger_t_{uuid.uuid4().hex[:12]}"
    _create(admin, name, head_template() if at_head else None)
    db = PgDb(base.rsplit("/", 1)[0] + "/" + name)
    try:
        yield db
    finally:
        session = _SESSIONS.pop(db.url, None)
        if session is not None:
            session.close()
        _drop(admin, name)


_SESSIONS: dict = {}  # a test database's URL: query()'s session in it


def _session(db: PgDb):
    """query()'s one session in a test database, kept until the database is dropped: a
    connection costs 10 ms, and a property test's example makes ten queries. Autocommit
    (each statement commits, as a `with` block did per query, and holds no lock after it),
    and no prepared statements (a revision may change a table between two queries)."""
    import psycopg

    session = _SESSIONS.get(db.url)
    if session is None or session.closed:
        session = _SESSIONS[db.url] = psycopg.connect(db.conninfo, autocommit=True, prepare_threshold=None)
    return session


def _drop(admin: str, name: str) -> None:
    """DROP DATABASE ... WITH (FORCE), which ends our own sessions in it but may not end
    an autovacuum worker's (a superuser's: "must be a member of the role whose process is
    being terminated"); one leaves within moments, so try again."""
    import psycopg

    for attempt in range(20):
        try:
            with psycopg.connect(admin, autocommit=True) as con:
                con.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ObjectInUse):
            if attempt == 19:
                raise
            time.sleep(0.25)


@pytest.fixture
def pg_db():
    with pg_database() as db:  # also for a fixture that asks for pg_db by name, unmarked
        yield db


@pytest.fixture(params=["sqlite", "postgresql"])
def any_db(request, tmp_path):
    """The same test on a SQLite file and on a PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "ledger.db"
    return request.getfixturevalue("pg_db")


def _build_once() -> None:
    """typer's CliRunner.invoke builds the Click command from the app on every call: 50 ms
    of reading each command's signature, most of a fast test's time. The app does not
    change during a session: build it once. (A typer without the hook builds it each time.)"""
    build = getattr(typer.testing, "_get_command", None)
    if build is not None and not hasattr(build, "cache_info"):
        typer.testing._get_command = functools.cache(build)


_build_once()


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
        return [tuple(r) for r in _session(path).execute(sql, params or None).fetchall()]
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
