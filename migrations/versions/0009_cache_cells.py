"""The cache cells: each cell's summary, kept between checks so a check reads only
the rows that arrived since the last one.

- cache_cells: one row per cache cell (the cell, jax version and cache dir:
  record.CACHE_CELL; `cell_key` is the values' canonical JSON), with what the
  cache findings of `ledger check` read: the newest ok row and its state, the last
  warm row, the first cold row and the number of cold rows.
- cache_cells_state: one row: `upto`, the highest compile_records.id folded into
  cache_cells (0: nothing is, the next check rebuilds from every row), and
  `cell_fields`, the cell's definition it was folded under (a later revision that
  changes the cell makes the next check rebuild).

Only `ledger check` writes the cells (ledger/watch/cells.py). Inserting rows above
`upto` needs nothing; everything that could make a folded summary wrong resets
`upto` to 0, by a trigger on compile_records, so no writer (the ledger's own, or a
person's ad-hoc SQL) can leave it stale: a DELETE or UPDATE of a folded row, an
INSERT at or below `upto`, a TRUNCATE (PostgreSQL).

- check_runs.upto, check_runs.pins_digest: the highest row id a run judged and the
  pins it judged against. A check whose previous run judged the same pins with the
  same options, and under which no folded row changed since, takes that run's
  pinned verdicts and judges only the rows above its `upto` (ledger/watch/check.py).

Empty at upgrade: the first check after it builds the cells and judges every row
(what every check cost before), so the upgrade itself reads no rows.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import keep_tables, put_back_tables

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

_FOLDED = "(SELECT upto FROM cache_cells_state WHERE id = 1)"
_RESET = "UPDATE cache_cells_state SET upto = 0 WHERE id = 1"
# SQLite: row triggers whose condition holds `upto` as a literal, re-armed by each
# fold (ledger/watch/cells.py), so an import pays a comparison per row, not a query
# (a subquery per row cost a 100k-record import a quarter of its time). Armed at 0:
# nothing is folded yet.
_SQLITE_TRIGGERS = {
    "cache_cells_on_insert": "AFTER INSERT ON compile_records WHEN NEW.id <= 0",
    "cache_cells_on_update": "AFTER UPDATE ON compile_records WHEN OLD.id <= 0 OR NEW.id <= 0",
    "cache_cells_on_delete": "AFTER DELETE ON compile_records WHEN OLD.id <= 0",
}
# PostgreSQL: statement triggers over the transition tables (a row trigger per
# imported row would cost an import its speed); one function, by operation.
_PG_FUNCTION = f"""
CREATE FUNCTION cache_cells_reset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        {_RESET};
    ELSIF TG_OP = 'INSERT' THEN
        IF EXISTS (SELECT 1 FROM new_rows WHERE id <= {_FOLDED}) THEN {_RESET}; END IF;
    ELSIF TG_OP = 'UPDATE' THEN
        IF EXISTS (SELECT 1 FROM old_rows WHERE id <= {_FOLDED})
           OR EXISTS (SELECT 1 FROM new_rows WHERE id <= {_FOLDED}) THEN {_RESET}; END IF;
    ELSE
        IF EXISTS (SELECT 1 FROM old_rows WHERE id <= {_FOLDED}) THEN {_RESET}; END IF;
    END IF;
    RETURN NULL;
END $$
"""
_PG_TRIGGERS = {
    "cache_cells_on_insert": "AFTER INSERT ON compile_records REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT",
    "cache_cells_on_update": ("AFTER UPDATE ON compile_records REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
                              " FOR EACH STATEMENT"),
    "cache_cells_on_delete": "AFTER DELETE ON compile_records REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT",
    "cache_cells_on_truncate": "AFTER TRUNCATE ON compile_records FOR EACH STATEMENT",
}


def upgrade() -> None:
    op.create_table(
        "cache_cells",
        sa.Column("cell_key", sa.Text, primary_key=True),
        sa.Column("newest", sa.Text, nullable=False),  # "timestamp|id|state" of the newest ok row
        sa.Column("last_warm", sa.Text),  # "timestamp|id" of the newest warm row
        sa.Column("first_cold", sa.Text),  # "timestamp|id" of the oldest cold row
        sa.Column("n_cold", sa.Integer, nullable=False),
    )
    state = op.create_table(
        "cache_cells_state",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("upto", sa.BigInteger, nullable=False),
        sa.Column("cell_fields", sa.Text),
    )
    op.bulk_insert(state, [{"id": 1, "upto": 0, "cell_fields": None}])
    with op.batch_alter_table("check_runs") as batch:
        batch.add_column(sa.Column("upto", sa.BigInteger))
        batch.add_column(sa.Column("pins_digest", sa.Text))
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        for name, when in _PG_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {when} EXECUTE FUNCTION cache_cells_reset()")
    else:
        for name, when in _SQLITE_TRIGGERS.items():
            op.execute(f"CREATE TRIGGER {name} {when} BEGIN {_RESET}; END")
    # check runs' upto and pins_digest, kept aside by a downgrade (migrations/ledger_stash.py);
    # cache_cells is not kept: it is derived, and rebuilt from upto 0 by the next check
    put_back_tables(revision, ("check_runs",))


def downgrade() -> None:
    keep_tables(revision, ("check_runs",))
    postgres = op.get_bind().dialect.name == "postgresql"
    for name in _PG_TRIGGERS if postgres else _SQLITE_TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {name}" + (" ON compile_records" if postgres else ""))
    if postgres:
        op.execute("DROP FUNCTION IF EXISTS cache_cells_reset()")
    with op.batch_alter_table("check_runs") as batch:
        batch.drop_column("pins_digest")
        batch.drop_column("upto")
    op.drop_table("cache_cells_state")
    op.drop_table("cache_cells")
