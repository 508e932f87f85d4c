"""A row INSERTed with a cell id that is not its own loses it, so the next check gives it
its own.

Every writer gives its rows their cell ids (ledger/storage/cell_ids.py), and 0018's
trigger clears a row's id when an UPDATE changes its key. A person's INSERT could still
give a row a wrong one: `INSERT ... SELECT *` of a row with a key column changed copies
the old row's cell id. The check trusts the id (the cache cells fold by it; the pinned
rows meet their pins through it), so that row was read as another cell's: judged
against another key's pin, or not at all. Now such a row's id is cleared as it is
inserted, and `ledger check` gives it its cell first (cell_ids.assign), as it does a
row INSERTed with none.

SQLite: a row trigger, which asks only of a row that has an id whether its cell's key is
the one its values make; PostgreSQL: the same, as a row trigger before the insert. Both
cost an insert a lookup per row (12-17 us on SQLite, 25-50 us on PostgreSQL), which the
writers, whose rows' ids are their own (ledger/storage/cell_ids.py: ids_of), do not
pay: on SQLite they set the trigger aside for their batch, on PostgreSQL they say so in a
setting of their transaction that the trigger's condition reads (`ledger.own_cell_ids`;
both cell_ids.own_ids).

Schema only: no row changes. Downgrade: the trigger (and on PostgreSQL its function) go.

Revision ID: 0025
Revises: 0024
"""

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None

TRIGGER = "cell_ids_on_insert"
# The cell, frozen as 0018 wrote it (ledger/record.py: STATELESS_KEY)
NAMES = ["hardware", "hostname", "jax_version", "mixed_precision", "dataset_class", "model_type", "instrument",
         "transform", "function", "input_signature", "variant", "n_batch", "batch_size"]


def key_sql(dialect: str, table: str = "") -> str:
    """The cell's key text, as 0018 and ledger/storage/cell_ids.py make it (held equal by
    tests/test_cell_ids.py)."""
    prefix = f"{table}." if table else ""
    parts = []
    for name in NAMES:
        value = f"CAST({prefix}{name} AS TEXT)"
        parts.append(f"COALESCE(CAST(LENGTH({value}) AS TEXT) || ':' || {value}, '-')")
    text = " || ".join(parts)
    return f"md5({text})" if dialect == "postgresql" else text


def _not_its_own(dialect: str, row: str) -> str:
    return f"NOT EXISTS (SELECT 1 FROM cells c WHERE c.id = {row}.cell_id AND c.key = {key_sql(dialect, row)})"


_PG_FUNCTION = f"""
CREATE FUNCTION cell_ids_checked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF {_not_its_own("postgresql", "NEW")} THEN
        NEW.cell_id := NULL;
    END IF;
    RETURN NEW;
END $$
"""
# what a writer sets for its transaction when it gives every row its own id (cell_ids.OWN_IDS)
OWN_IDS = "ledger.own_cell_ids"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_PG_FUNCTION)
        op.execute(f"CREATE TRIGGER {TRIGGER} BEFORE INSERT ON compile_records FOR EACH ROW"
                   f" WHEN (NEW.cell_id IS NOT NULL AND current_setting('{OWN_IDS}', true) IS DISTINCT FROM 'on')"
                   " EXECUTE FUNCTION cell_ids_checked()")
    else:
        op.execute(f"CREATE TRIGGER {TRIGGER} AFTER INSERT ON compile_records"
                   f" WHEN NEW.cell_id IS NOT NULL AND {_not_its_own('sqlite', 'NEW')}"
                   " BEGIN UPDATE compile_records SET cell_id = NULL WHERE id = NEW.id; END")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER} ON compile_records")
        op.execute("DROP FUNCTION IF EXISTS cell_ids_checked()")
    else:
        op.execute(f"DROP TRIGGER IF EXISTS {TRIGGER}")
