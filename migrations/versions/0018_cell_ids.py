"""Each compile row's cell as a stored, indexed id: compile_records.cell_id and `cells`.

A cell is the comparability key without cache_state (ledger/record.py: STATELESS_KEY,
the 13 columns below as this revision wrote them). `cells` holds one row per cell in
this ledger, with its values and `key`, a text made from them in SQL; cell_id points at
it (ledger/storage/cell_ids.py gives new rows theirs, with the same key text). So
`ledger check` reads a lineage's rows through the index on cell_id and groups by one
integer, not by 13 columns (issue 33: the first check of a 1M-row ledger).

The data step: every existing row gets its cell here. On PostgreSQL in two set-based
statements (the cells from one scan grouped by key, numbered in the order of their first
rows as the writers number them, then one UPDATE that finds each row's cell by key); on
SQLite in one UPDATE that numbers the cells as it meets them (_cells_in_one_pass). The
index on cell_id is built after, in one sort. 0009's
triggers on compile_records are set aside for the UPDATE and put back as they were: a
new column changes no folded summary, and firing them per row would cost a check run's
`upto` a million statements.

An UPDATE of a key column afterwards (ad-hoc SQL) clears that row's cell_id, by a
trigger: the next `ledger check` gives it its cell again.

Downgrade: the column, its index, the trigger and `cells` go; nothing is kept aside:
every value here is derived from the row's own columns.

Revision ID: 0018
Revises: 0017
"""

from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op
from ledger_stash import sqlite_triggers_kept

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")  # SQLite's INTEGER PRIMARY KEY is 64-bit
# The cell, frozen as this revision wrote it (ledger/record.py: STATELESS_KEY)
COLUMNS = [("hardware", sa.Text), ("hostname", sa.Text), ("jax_version", sa.Text), ("mixed_precision", sa.Boolean),
           ("dataset_class", sa.Text), ("model_type", sa.Text), ("instrument", sa.Text), ("transform", sa.Text),
           ("function", sa.Text), ("input_signature", sa.Text), ("variant", sa.Integer), ("n_batch", sa.Integer),
           ("batch_size", sa.Integer)]
NAMES = [name for name, _ in COLUMNS]
INDEX = "ix_compile_records_cell_id"
TRIGGER = "cell_ids_on_key_update"
_CHANGED = " OR ".join(f"NEW.{n} IS NOT OLD.{n}" for n in NAMES)
_PG_CHANGED = " OR ".join(f"NEW.{n} IS DISTINCT FROM OLD.{n}" for n in NAMES)
_PG_FUNCTION = """
CREATE FUNCTION cell_ids_clear() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.cell_id := NULL;
    RETURN NEW;
END $$
"""


def key_sql(dialect: str, table: str = "") -> str:
    """The cell's key text (ledger/storage/cell_ids.py makes the same, and
    tests/test_cell_ids.py holds the two equal)."""
    prefix = f"{table}." if table else ""
    parts = []
    for name in NAMES:
        value = f"CAST({prefix}{name} AS TEXT)"
        parts.append(f"COALESCE(CAST(LENGTH({value}) AS TEXT) || ':' || {value}, '-')")
    text = " || ".join(parts)
    return f"md5({text})" if dialect == "postgresql" else text


def upgrade() -> None:
    bind = op.get_bind()
    d = bind.dialect.name
    op.create_table("cells", sa.Column("id", ID, primary_key=True), sa.Column("key", sa.Text, nullable=False),
                    *(sa.Column(name, type_) for name, type_ in COLUMNS),
                    sa.UniqueConstraint("key", name="uq_cells_key"))
    op.add_column("compile_records", sa.Column("cell_id", sa.BigInteger))
    cols = ", ".join(NAMES)
    # numbered in the order of each cell's first row, as the writers number them (cell_ids.new_cells_sql):
    # PostgreSQL's GROUP BY may hash, hence the ORDER BY; SQLite's UPDATE meets them in rowid order
    if d == "postgresql":
        op.execute(f"INSERT INTO cells (key, {cols}) SELECT {key_sql(d)}, {cols} FROM compile_records"
                   f" GROUP BY {key_sql(d)}, {cols} ORDER BY MIN(id)")
        op.execute(f"UPDATE compile_records SET cell_id = c.id FROM cells c WHERE c.key = {key_sql(d, 'compile_records')}")
    else:
        with _triggers_aside(bind):
            _cells_in_one_pass(bind)
    op.create_index(INDEX, "compile_records", ["cell_id"])
    if d == "postgresql":
        op.execute(_PG_FUNCTION)
        op.execute(f"CREATE TRIGGER {TRIGGER} BEFORE UPDATE ON compile_records FOR EACH ROW"
                   f" WHEN ({_PG_CHANGED}) EXECUTE FUNCTION cell_ids_clear()")
    else:
        op.execute(f"CREATE TRIGGER {TRIGGER} AFTER UPDATE OF {cols} ON compile_records WHEN {_CHANGED}"
                   " BEGIN UPDATE compile_records SET cell_id = NULL WHERE id = NEW.id; END")


def _cells_in_one_pass(bind) -> None:
    """SQLite: every row given its cell in one UPDATE, the cells numbered as the UPDATE meets
    their values (rowid order: each cell's first row, as the writers number them) by a
    function of this connection's; then the cells written, their key made in SQL. A DISTINCT
    scan that made each row's key text and an UPDATE that made it again to look it up took
    2.6x a bare UPDATE at 1M rows; this, about 1.4x (bench/bench_check.py). Where two of the
    value tuples make one key text (a BLOB and the text it spells are one cell to SQL's
    CAST), they are one cell, with its first row's values and number, and the later one's
    rows take its id. (The other way cannot happen: the columns' affinities, TEXT, INTEGER
    and BOOLEAN, store equal values alike, so values Python finds equal have one text.)"""
    cols, marks = ", ".join(NAMES), ", ".join("?" * len(NAMES))
    ids: dict[tuple, int] = {}

    def cell(*values) -> int:
        found = ids.get(values)
        if found is None:
            found = ids[values] = len(ids) + 1
        return found

    raw = bind.connection.dbapi_connection
    raw.create_function("ledger_cell_0018", len(NAMES), cell)
    try:
        op.execute(f"UPDATE compile_records SET cell_id = ledger_cell_0018({cols})")
    finally:
        raw.create_function("ledger_cell_0018", len(NAMES), None)
    if not ids:
        return  # no rows, no cells
    # each value tuple's key text, made in SQL from the values as stored (its id as a placeholder key)
    bind.exec_driver_sql(f"INSERT INTO cells (id, key, {cols}) VALUES (?, ?, {marks})",
                         [(i, str(i), *values) for values, i in ids.items()])
    key_of = dict(bind.exec_driver_sql(f"SELECT id, {key_sql('sqlite')} FROM cells").all())
    number: dict[str, int] = {}  # each key text's cell number
    first: dict[int, int] = {}  # each cell number's first value tuple, whose values it keeps
    for i in sorted(key_of):  # the order the UPDATE met them in
        first.setdefault(number.setdefault(key_of[i], len(number) + 1), i)
    values_of = {i: values for values, i in ids.items()}
    bind.exec_driver_sql("DELETE FROM cells")
    bind.exec_driver_sql(f"INSERT INTO cells (id, key, {cols}) VALUES (?, ?, {marks})",
                         [(n, key_of[i], *values_of[i]) for n, i in first.items()])
    moved = [(i, number[key_of[i]]) for i in key_of if number[key_of[i]] != i]
    if moved:
        bind.exec_driver_sql("CREATE TEMP TABLE ledger_cells_moved (old INTEGER PRIMARY KEY, new INTEGER NOT NULL)")
        bind.exec_driver_sql("INSERT INTO ledger_cells_moved VALUES (?, ?)", moved)
        op.execute("UPDATE compile_records SET cell_id = (SELECT new FROM ledger_cells_moved WHERE old = cell_id)"
                   " WHERE cell_id IN (SELECT old FROM ledger_cells_moved)")
        bind.exec_driver_sql("DROP TABLE ledger_cells_moved")


@contextmanager
def _triggers_aside(bind):
    """0009's triggers dropped for one statement and made again from their own text."""
    kept = bind.exec_driver_sql(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'compile_records'").all()
    for name, _ in kept:
        op.execute(f'DROP TRIGGER "{name}"')
    yield
    for _, sql in kept:
        op.execute(sql)


def downgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}" + (" ON compile_records" if postgres else ""))
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS cell_ids_clear()")
    op.drop_index(INDEX, "compile_records")
    # SQLite drops columns by rebuilding the table, and 0009's triggers with it
    with sqlite_triggers_kept("compile_records"), op.batch_alter_table("compile_records") as batch:
        batch.drop_column("cell_id")
    op.drop_table("cells")
