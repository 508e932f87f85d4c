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


def stash(table: str, name: str, columns: list[str], where: str, identity: tuple = IDENTITY) -> None:
    """Copy id, identity and `columns` of the rows matching `where` into `name`."""
    cols = ", ".join(("id", *identity, *columns))
    op.execute(f"DROP TABLE IF EXISTS {name}")
    op.execute(f"CREATE TABLE {name} AS SELECT {cols} FROM {table} WHERE {where}")
    from sqlalchemy import text

    if op.get_bind().execute(text(f"SELECT count(*) FROM {name}")).scalar() == 0:
        op.execute(f"DROP TABLE {name}")  # nothing to keep: leave no empty table behind


def restore(table: str, name: str, columns: list[str], identity: tuple = IDENTITY) -> None:
    """Put stashed values back (if a stash exists) and drop the stash."""
    bind = op.get_bind()
    from sqlalchemy import inspect

    if not inspect(bind).has_table(name):
        return
    match = " AND ".join([f"s.id = {table}.id", *(_same(f"s.{c}", f"{table}.{c}") for c in identity)])
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


def _table_stash(rev: str, table: str) -> str:
    return f"{PREFIX}{rev}_{table}"


def keep_tables(rev: str, tables: tuple[str, ...]) -> None:
    """Copy each of `tables` whole into its side table before a downgrade drops, rekeys
    or deletes any of it (pins of recorded rows, check runs' columns, predictions)."""
    from sqlalchemy import text

    for table in tables:
        name = _table_stash(rev, table)
        op.execute(f"DROP TABLE IF EXISTS {name}")
        op.execute(f"CREATE TABLE {name} AS SELECT * FROM {table}")
        if op.get_bind().execute(text(f"SELECT count(*) FROM {name}")).scalar() == 0:
            op.execute(f"DROP TABLE {name}")


# A kept pin comes back only while its source row is there (an older tool may have
# deleted it in between: the upgrade's own rules then unpin it, and say so).
PINS_OF_ROWS = {"pins": "row_id IN (SELECT id FROM compile_records)"}


def put_back_tables(rev: str, tables: tuple[str, ...], unique: dict | None = None,
                    only: dict | None = None) -> None:
    """The upgrade's end: each kept row is put back over the row with its id, or added
    where none has it; rows an older tool wrote in between stay, except one holding a
    kept row's `unique` {table: column} value (the kept row wins). `only` {table: SQL}:
    kept rows that no longer hold are dropped. Updated in place, not deleted and
    inserted: verdicts point at check_runs by id."""
    from sqlalchemy import inspect

    bind = op.get_bind()
    kept = [t for t in tables if inspect(bind).has_table(_table_stash(rev, t))]
    for table in kept:
        if cond := (only or {}).get(table):
            op.execute(f"DELETE FROM {_table_stash(rev, table)} WHERE NOT ({cond})")
    for table in reversed(kept):  # children first
        if col := (unique or {}).get(table):
            name = _table_stash(rev, table)
            op.execute(f"DELETE FROM {table} WHERE {col} IN (SELECT {col} FROM {name})"
                       f" AND id NOT IN (SELECT id FROM {name})")
    for table in kept:  # parents first
        _put_back(bind, table, _table_stash(rev, table))


def _put_back(bind, table: str, name: str) -> None:
    from sqlalchemy import inspect

    cols = [c["name"] for c in inspect(bind).get_columns(name)]
    rest = [c for c in cols if c != "id"]
    op.execute(f"UPDATE {table} SET ({', '.join(rest)}) = (SELECT {', '.join(rest)} FROM {name} AS s"
               f" WHERE s.id = {table}.id) WHERE id IN (SELECT id FROM {name})")
    listed = ", ".join(cols)
    op.execute(f"INSERT INTO {table} ({listed}) SELECT {listed} FROM {name}"
               f" WHERE id NOT IN (SELECT id FROM {table})")
    op.execute(f"DROP TABLE {name}")
    if bind.dialect.name == "postgresql":  # explicit ids leave the sequence behind
        op.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                   f" GREATEST((SELECT max(id) FROM {table}), 1))")
