"""Running the Alembic revision chain on an open connection.

`ledger db`, the first write to a new database and `alembic` itself all run the same
migrations/env.py; the ledger hands it its own connection, so one command makes one
engine.
"""

from __future__ import annotations

from pathlib import Path

from ledger.errors import LedgerError

# A checkout keeps the revisions in the top-level migrations/ (alembic.ini's
# script_location); the wheel installs that same directory as ledger/migrations
# (pyproject.toml's package-dir), so the installed package finds them beside itself.
_INSTALLED = Path(__file__).resolve().parents[1] / "migrations"
_CHECKOUT = Path(__file__).resolve().parents[2] / "migrations"


def migrations_dir() -> Path:
    for where in (_INSTALLED, _CHECKOUT):
        if (where / "env.py").is_file() and (where / "versions").is_dir():
            return where
    raise LedgerError(f"the ledger's migrations are missing (looked in {_INSTALLED} and {_CHECKOUT}): "
                      "reinstall jax-compile-ledger")


def alembic_config(url: str, connection=None):
    from alembic.config import Config

    where = migrations_dir()
    # alembic.ini exists only in a checkout; the installed package needs none
    ini = _CHECKOUT.parent / "alembic.ini"
    cfg = Config(str(ini)) if where == _CHECKOUT and ini.is_file() else Config()
    cfg.set_main_option("script_location", str(where))
    # the revisions' shared helpers (ledger_stash.py) sit beside them
    cfg.set_main_option("prepend_sys_path", str(where))
    cfg.set_main_option("path_separator", "os")
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
