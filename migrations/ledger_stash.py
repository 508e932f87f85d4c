"""Lossless downgrades: what an older schema has no column for is kept aside.

A downgrade that drops columns would lose what they held (measured cache states,
probe provenance). Instead it copies those values, for the rows that have any, into
a side table `_ledger_stash_<rev>`; the upgrade that adds the columns back restores
them and drops the side table, so head -> 0001 -> head gives the same rows and
states. Rows are matched on id *and* their legacy identity, so a row written by an
old-schema tool in between (which may reuse an id) is never given another's values.

Used by migrations only; plain SQL text, so old revisions keep working as the
models change.
"""

from __future__ import annotations

from contextlib import contextmanager

from alembic import op

PREFIX = "_ledger_stash_"

# What identifies a row beyond its id (the legacy fields no tool rewrites).
IDENTITY = ("timestamp", "hostname", "transform", "tag", "compile_s")


def _same(a: str, b: str) -> str:
    if op.get_bind().dialect.name == "sqlite":
        return f"{a} IS {b}"
    return f"{a} IS NOT DISTINCT FROM {b}"


def stash(table: str, name: str, columns: list[str], where: str) -> None:
    """Copy id, identity and `columns` of the rows matching `where` into `name`."""
    cols = ", ".join(("id", *IDENTITY, *columns))
    op.execute(f"DROP TABLE IF EXISTS {name}")
    op.execute(f"CREATE TABLE {name} AS SELECT {cols} FROM {table} WHERE {where}")
    from sqlalchemy import text

    if op.get_bind().execute(text(f"SELECT count(*) FROM {name}")).scalar() == 0:
        op.execute(f"DROP TABLE {name}")  # nothing to keep: leave no empty table behind


def restore(table: str, name: str, columns: list[str]) -> None:
    """Put stashed values back (if a stash exists) and drop the stash."""
    bind = op.get_bind()
    from sqlalchemy import inspect

    if not inspect(bind).has_table(name):
        return
    match = " AND ".join([f"s.id = {table}.id", *(_same(f"s.{c}", f"{table}.{c}") for c in IDENTITY)])
    targets = ", ".join(columns)
    values = ", ".join(f"s.{c}" for c in columns)
    op.execute(
        f"UPDATE {table} SET ({targets}) = (SELECT {values} FROM {name} AS s WHERE {match}) "
        f"WHERE EXISTS (SELECT 1 FROM {name} AS s WHERE {match})"
    )
    op.execute(f"DROP TABLE {name}")


def drop_all() -> None:
    """Drop every stash: below 0001 nothing can restore them, and a table left at base
    makes the next upgrade refuse the database as foreign (tables, no revision)."""
    from sqlalchemy import inspect

    for name in inspect(op.get_bind()).get_table_names():
        if name.startswith(PREFIX):
            op.drop_table(name)


def any_set(columns: list[str]) -> str:
    return "(" + " OR ".join(f"{c} IS NOT NULL" for c in columns) + ")"


@contextmanager
def sqlite_triggers_kept(table: str):
    """Around a batch operation that rebuilds `table` on SQLite (a dropped column: a
    copy, then DROP TABLE, which drops the table's triggers with it), put its triggers
    back as they were, armed values included (0009's cache_cells triggers). Other
    databases alter in place and keep them."""
    from sqlalchemy import text

    bind = op.get_bind()
    kept = []
    if bind.dialect.name == "sqlite":
        kept = bind.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :t"),
                            {"t": table}).all()
    yield
    for name, sql in kept:
        op.execute(f'DROP TRIGGER IF EXISTS "{name}"')
        op.execute(sql)
