"""Running the Alembic revision chain on an open connection.

`ledger db`, the first write to a new database and `alembic` itself all run the same
migrations/env.py; the ledger hands it its own connection, so one command makes one
engine.
"""

from __future__ import annotations

from pathlib import Path

from ledger.errors import LedgerError

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str, connection=None):
    from alembic.config import Config

    ini = MIGRATIONS_DIR.parent / "alembic.ini"
    if not (MIGRATIONS_DIR / "env.py").exists():
        raise LedgerError(f"migrations not found at {MIGRATIONS_DIR}: install the ledger from its source tree")
    cfg = Config(str(ini)) if ini.exists() else Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    # the revisions' shared helpers (ledger_stash.py) sit beside them
    cfg.set_main_option("prepend_sys_path", str(MIGRATIONS_DIR))
    # env.py reads these before falling back to the resolver, so `ledger db ...` and
    # `alembic ...` share one env.py and one notion of "the database".
    cfg.attributes["url"] = url
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def run(direction: str, engine, revision: str) -> None:
    """Upgrade or downgrade to `revision` in one transaction on `engine`."""
    from alembic import command

    with engine.connect() as conn:
        url = engine.url.render_as_string(hide_password=False)
        getattr(command, direction)(alembic_config(url, conn), revision)
        conn.commit()
