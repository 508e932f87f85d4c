"""Engines and the revision gate.

SQLite's Python driver opens transactions lazily and not for DDL, so a migration
that fails half-way would leave half a schema. We take transaction control
(isolation_level=None plus an explicit BEGIN on every SQLAlchemy begin), which
makes DDL transactional: a failed upgrade rolls back to where it started.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError

from .dburl import redact, resolve_db_url, sqlite_path
from .errors import LedgerError, first_line

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"


def make_engine(url: str) -> Engine:
    try:
        engine = create_engine(url)
    except ModuleNotFoundError as exc:
        raise LedgerError(f"no driver for {url.split(':', 1)[0]}: install the {exc.name} package") from None
    except ArgumentError:
        # not the exception's text: it quotes the URL, password and all
        raise LedgerError(f"not a database URL: {redact(url)}") from None
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _connect(dbapi_conn, _record):
            dbapi_conn.isolation_level = None
            dbapi_conn.execute("PRAGMA foreign_keys = ON")

        @event.listens_for(engine, "begin")
        def _begin(conn):
            conn.exec_driver_sql("BEGIN")

    return engine


def alembic_config(url: str):
    from alembic.config import Config

    ini = MIGRATIONS_DIR.parent / "alembic.ini"
    if not (MIGRATIONS_DIR / "env.py").exists():
        raise LedgerError(f"migrations not found at {MIGRATIONS_DIR}: install the ledger from its source tree")
    cfg = Config(str(ini)) if ini.exists() else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # env.py reads this before falling back to the resolver, so `ledger db ...` and
    # `alembic ...` share one env.py and one notion of "the database".
    cfg.attributes["url"] = url
    return cfg


# The revision chain this version of the ledger knows, oldest first. Kept here
# rather than read from migrations/ at every command: importing alembic to parse the
# revision files cost every `ledger` command ~0.4 s. tests/test_migrations.py holds
# this list to the real chain.
REVISIONS = ("0001", "0002", "0003", "0004", "0005")


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        if not inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()


def revision_status(engine: Engine, url: str) -> tuple[str | None, str]:
    """(revision, status): status is head, older, newer (a revision this ledger does
    not know), empty (no tables at all) or foreign (tables but no alembic_version)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        rev = current_revision(engine)
        if rev is None:
            with engine.connect() as conn:
                return None, ("foreign" if inspect(conn).get_table_names() else "empty")
    except SQLAlchemyError as exc:
        raise LedgerError(f"cannot open {redact(url)}: {first_line(exc)}") from None
    if rev == REVISIONS[-1]:
        return rev, "head"
    return rev, ("older" if rev in REVISIONS else "newer")


def refusal(url: str, rev: str | None, status: str) -> str:
    """Why a command will not act on a database in this state."""
    head = REVISIONS[-1]
    return {
        "empty": f"{redact(url)} is an empty database: nothing to read",
        "foreign": f"{redact(url)} has tables but no alembic_version: not a ledger database "
        "(one made by hand holding the legacy schema can be adopted with `alembic stamp 0001`)",
        "newer": f"{redact(url)} is at revision {rev}, which this ledger does not know "
        f"(its newest is {head}): it was written by a newer ledger; upgrade the ledger",
        "older": f"{redact(url)} is at revision {rev}, this ledger needs {head}: "
        "run `ledger db upgrade` (or `alembic upgrade head`) first",
    }[status]


def _gate(engine: Engine, url: str, *, may_create: bool) -> None:
    rev, status = revision_status(engine, url)
    if status == "head":
        return
    if status == "empty" and may_create:
        upgrade(url, "head")
        return
    raise LedgerError(refusal(url, rev, status))


def file_url(db: str | None) -> str:
    """The resolved URL, refusing an in-memory SQLite database: every connection
    would get its own, empty one, and it would vanish with the command."""
    url = resolve_db_url(db)
    if url.startswith("sqlite") and sqlite_path(url) is None:
        raise LedgerError("an in-memory SQLite database vanishes with the command: give a file path")
    return url


def open_for_write(db: str | None) -> Engine:
    """An engine on a database at head; a new or empty one is brought to head first."""
    url = file_url(db)
    engine = make_engine(url)
    _gate(engine, url, may_create=True)
    return engine


def open_for_read(db: str | None) -> Engine:
    """An engine on an existing ledger database at head; never creates or changes one."""
    url = file_url(db)
    path = sqlite_path(url)
    if path is not None and not path.exists():
        raise LedgerError(f"no ledger database at {path}")
    engine = make_engine(url)
    _gate(engine, url, may_create=False)
    return engine


@contextmanager
def writing(db: str | None) -> Iterator[Engine]:
    """open_for_write() for one command. If the command fails, a database file it
    created and that holds no rows is removed rather than left behind."""
    path = sqlite_path(file_url(db))
    existed = path is None or path.exists()
    engine = open_for_write(db)
    try:
        yield engine
    except BaseException:
        if not existed:
            _remove_if_empty(engine, path)
        raise


def _remove_if_empty(engine: Engine, path: Path) -> None:
    try:
        with engine.connect() as conn:
            n = conn.execute(text("SELECT (SELECT count(*) FROM compile_records) + (SELECT count(*) FROM instrument_records)")).scalar()
    except Exception:  # not even a schema: nothing of value in it
        n = 0
    engine.dispose()
    if n == 0:
        path.unlink(missing_ok=True)


def upgrade(url: str, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(url), revision)
