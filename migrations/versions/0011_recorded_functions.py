"""Recorded compiles: `ledger record` keeps each compile of a program nobody changed.

- compile_records.function, input_signature, cache_not_persisted, process_index,
  command (ledger/record.py: RECORDED_FIELDS): NULL on every existing row.
- pins.function, pins.input_signature: the comparability key's cell now holds the
  function and its input signature (CELL_FIELDS), before the batch shape. Every
  existing pin is a probe's or an import's (both NULL), so no pin moves or splits:
  each pin_key only gains the two nulls, in pins, pin_history and verdicts alike.

Downgrade: a pin of a recorded row (function set) has no key without the function,
and is removed with its history and verdicts' pin_key cleared; the rest lose the two
nulls again. The five columns (in _ledger_stash_0011) and the watch tables whole (in
_ledger_stash_0011_<table>) are kept aside first, and the upgrade puts them back
(migrations/ledger_stash.py).

Revision ID: 0011
Revises: 0010
"""

import json

import sqlalchemy as sa
from alembic import op
from ledger_stash import PINS_OF_ROWS, any_set, keep_tables, put_back_tables, restore, sqlite_triggers_kept, stash

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

RECORD_COLUMNS = [("function", sa.Text), ("input_signature", sa.Text), ("cache_not_persisted", sa.Text),
                  ("process_index", sa.Integer), ("command", sa.Text)]
PIN_COLUMNS = [("function", sa.Text), ("input_signature", sa.Text)]
# Where the two new cell fields sit in a pin_key's JSON list: before the batch shape,
# which is the key's last two values (frozen: a migration declares its own).
SHAPE_LEN = 2

pins = sa.table("pins", sa.column("id", sa.Integer), sa.column("pin_key", sa.Text),
                sa.column("function", sa.Text))
KEYED = ("pins", "pin_history", "verdicts")
TABLES = ("pins", "pin_history", "check_runs", "verdicts")
STASH = "_ledger_stash_0011"
NAMES = [name for name, _ in RECORD_COLUMNS]


def _with_cell(old: str) -> str:
    values = json.loads(old)
    return json.dumps([*values[:-SHAPE_LEN], None, None, *values[-SHAPE_LEN:]], separators=(",", ":"))


def _without_cell(new: str) -> str:
    values = json.loads(new)
    return json.dumps([*values[: -SHAPE_LEN - 2], *values[-SHAPE_LEN:]], separators=(",", ":"))


def _rekey(conn, move) -> None:
    """Every pin_key in the keyed tables (a history may outlive its pin) through `move`."""
    for table in KEYED:
        t = sa.table(table, sa.column("pin_key", sa.Text))
        for (old,) in conn.execute(sa.select(t.c.pin_key).where(t.c.pin_key.is_not(None)).distinct()).all():
            conn.execute(sa.update(t).where(t.c.pin_key == old).values(pin_key=move(old)))


def upgrade() -> None:
    with op.batch_alter_table("compile_records") as batch:
        for name, type_ in RECORD_COLUMNS:
            batch.add_column(sa.Column(name, type_))
    with op.batch_alter_table("pins") as batch:
        for name, type_ in PIN_COLUMNS:
            batch.add_column(sa.Column(name, type_))
    _rekey(op.get_bind(), _with_cell)
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    restore("compile_records", STASH, NAMES)
    put_back_tables(revision, TABLES, {"pins": "pin_key"}, PINS_OF_ROWS)


def downgrade() -> None:
    stash("compile_records", STASH, NAMES, any_set(NAMES))
    keep_tables(revision, TABLES)
    conn = op.get_bind()
    recorded = [r[0] for r in conn.execute(sa.select(pins.c.pin_key).where(pins.c.function.is_not(None)))]
    for key in recorded:
        conn.execute(sa.delete(pins).where(pins.c.pin_key == key))
        conn.execute(sa.text("DELETE FROM pin_history WHERE pin_key = :k"), {"k": key})
        conn.execute(sa.text("UPDATE verdicts SET pin_key = NULL WHERE pin_key = :k"), {"k": key})
    _rekey(conn, _without_cell)
    with op.batch_alter_table("pins") as batch:
        for name, _ in reversed(PIN_COLUMNS):
            batch.drop_column(name)
    # SQLite drops columns by rebuilding the table, and 0009's triggers with it
    with sqlite_triggers_kept("compile_records"), op.batch_alter_table("compile_records") as batch:
        for name, _ in reversed(RECORD_COLUMNS):
            batch.drop_column(name)
