"""Alembic environment shared by `alembic ...` and `ledger db ...`.

The URL comes from the ledger's resolver (or from `ledger db`, which passes the URL
it resolved), never from alembic.ini. The whole upgrade runs in one transaction
(SQLite DDL included, see ledger/storage/engine.py): a revision that fails leaves the database
at the revision it started from, data intact.
"""

from logging.config import fileConfig

from alembic import context
from alembic.util import CommandError

from ledger.errors import LedgerError
from ledger.storage.engine import make_engine
from ledger.storage.url import resolve_db_url

config = context.config
if config.config_file_name is not None and not config.attributes.get("url"):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    if config.attributes.get("url"):
        return config.attributes["url"]
    # `alembic -x db=path upgrade head` is the command-line spelling of --db.
    try:
        return resolve_db_url(context.get_x_argument(as_dictionary=True).get("db"))
    except LedgerError as exc:  # alembic prints a CommandError as one FAILED line
        raise CommandError(str(exc).replace("--db", "-x db")) from None


def _configure(**kw) -> None:
    context.configure(
        target_metadata=None,  # revisions declare what they touch; no autogenerate
        render_as_batch=True,  # SQLite can only ALTER through batch table copies
        transactional_ddl=True,
        transaction_per_migration=False,
        **kw,
    )


def run_offline() -> None:
    _configure(url=_url(), literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


# PostgreSQL's advisory lock that one database's migrations take: the letters "ledger".
MIGRATION_LOCK = int.from_bytes(b"ledger", "big")


def _one_at_a_time(bind) -> None:
    """On PostgreSQL, wait for any other migration of this database to commit before
    reading where it stands: the first writes of a SLURM array to a new, empty database
    each bring it to head, and all but one failed creating the same tables at once.
    After the wait, Alembic reads the revision the first committed and has nothing to do.
    (SQLite's transaction holds the write lock from its BEGIN: the same, already.)"""
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")


def _migrate() -> None:
    """Run the revisions in one transaction. On SQLite, foreign keys are off while they
    run (a batch operation rebuilds a table: copy, drop, rename, and dropping check_runs
    while verdicts point at it fails even deferred) and checked whole before commit."""
    bind = context.get_bind()
    raw = bind.connection.driver_connection if bind.dialect.name == "sqlite" else None
    if raw is not None and not bind.in_transaction():
        raw.execute("PRAGMA foreign_keys = OFF")  # a no-op inside a transaction
    try:
        with context.begin_transaction():
            _one_at_a_time(bind)
            context.run_migrations()
            if raw is not None and (bad := bind.exec_driver_sql("PRAGMA foreign_key_check").first()):
                raise CommandError(f"the migration leaves a row of {bad[0]} pointing at no {bad[2]} row")
    finally:
        if raw is not None and not bind.in_transaction():
            raw.execute("PRAGMA foreign_keys = ON")


def run_online() -> None:
    given = config.attributes.get("connection")
    if given is not None:  # `ledger` passes the connection it opened
        _configure(connection=given)
        _migrate()
        return
    from sqlalchemy.exc import OperationalError

    from ledger.errors import first_line
    from ledger.storage.url import redact

    url = _url()
    engine = make_engine(url)
    try:
        try:
            connection = engine.connect()
        except OperationalError as exc:
            # a stopped server, a wrong password, an unwritable path: one line, as
            # `ledger` says it, not a driver traceback (and never the password)
            raise CommandError(f"cannot open {redact(url)}: {redact(first_line(exc))}") from None
        with connection:
            _configure(connection=connection)
            _migrate()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
