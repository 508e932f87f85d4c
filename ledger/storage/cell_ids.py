"""Each compile row's cell, as a stored and indexed id (revision 0018).

A cell is the comparability key without cache_state (record.STATELESS_KEY): what "the
same cell" means in check, explain and the report. `cells` holds one row per cell seen
in this ledger: its id, its values and `key`, a text made from them in SQL (below);
compile_records.cell_id points at it. So the check finds a cell's or a lineage's rows
through the index on cell_id, and groups a million rows by one integer instead of
sorting them by thirteen columns.

Ids belong to one ledger: `merge` and `import` do not carry them; whatever writes rows
calls assign() in its transaction, and `ledger check` calls it before it folds, so a row
a person INSERTed by hand gets its cell too. A row's cell never changes but with its
values: an UPDATE of a key column (ad-hoc SQL) sets the row's cell_id to NULL, by a
trigger (revision 0018), and the next assign() gives it its new one.
"""

from __future__ import annotations

from ledger.record import STATELESS_KEY

CELL_COLUMNS = STATELESS_KEY


def key_sql(dialect: str, table: str = "") -> str:
    """A cell's key text from a row's key columns (of `table`, if given): each value as
    its length, ':' and its text, or '-' for NULL, so no two cells share a key. On
    PostgreSQL its md5: a signature of any length stays under a btree entry's limit."""
    prefix = f"{table}." if table else ""
    parts = []
    for name in CELL_COLUMNS:
        value = f"CAST({prefix}{name} AS TEXT)"
        parts.append(f"COALESCE(CAST(LENGTH({value}) AS TEXT) || ':' || {value}, '-')")
    text = " || ".join(parts)
    return f"md5({text})" if dialect == "postgresql" else text


def assign(conn) -> int:
    """Give every row without a cell its cell, adding the cells not yet seen; returns how
    many rows it gave one. Two statements, found through the index on cell_id: a
    writer's batch pays for its own rows only."""
    d = conn.dialect.name
    cols = ", ".join(CELL_COLUMNS)
    conn.exec_driver_sql(
        f"INSERT INTO cells (key, {cols}) SELECT DISTINCT {key_sql(d)}, {cols} FROM compile_records"
        " WHERE cell_id IS NULL ON CONFLICT (key) DO NOTHING")
    if d == "postgresql":
        sql = ("UPDATE compile_records SET cell_id = c.id FROM cells c WHERE compile_records.cell_id IS NULL"
               f" AND c.key = {key_sql(d, 'compile_records')}")
    else:  # the correlated form: UPDATE ... FROM needs SQLite 3.33, and a node may have less
        sql = (f"UPDATE compile_records SET cell_id = (SELECT c.id FROM cells c"
               f" WHERE c.key = {key_sql(d, 'compile_records')}) WHERE cell_id IS NULL")
    return conn.exec_driver_sql(sql).rowcount
