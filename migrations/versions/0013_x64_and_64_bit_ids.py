"""Precision, and ids that do not overflow.

- compile_records.x64, predictions.x64: whether JAX ran with 64-bit types enabled
  (jax_enable_x64) when it compiled or predicted. A likelihood written for float64 traced
  under float32 is another program: `explain`, `check` and `predict` name a change of it
  as its own cause. NULL on every existing row (not known).
- PostgreSQL: every id, every column holding a row id and every row count becomes
  64-bit (BIGINT), and the id sequences with them; INTEGER stopped at 2^31 - 1. SQLite's
  INTEGER is 64-bit already: nothing changes there.

Downgrade: x64 is kept aside in _ledger_stash_0013 (compile rows) and the predictions
table whole in _ledger_stash_0013_predictions (migrations/ledger_stash.py). The ids stay
64-bit: narrowing them could fail on a ledger past 2^31 rows, and 0012's code reads
BIGINT as it reads INTEGER.

Revision ID: 0013
Revises: 0012
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import keep_tables, put_back_tables, restore, sqlite_triggers_kept, stash

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

STASH = "_ledger_stash_0013"
# Frozen: the tables' ids, and the columns that hold a row id or a count of rows.
WIDE = {
    "compile_records": ("id",),
    "instrument_records": ("id",),
    "pins": ("id", "row_id", "history_n"),
    "pin_history": ("id", "old_row_id", "new_row_id"),
    "check_runs": ("id",),
    "verdicts": ("id", "check_run_id", "pin_id", "row_id", "n_rows"),
    "cache_cells": ("n_cold",),
    "cache_cells_state": ("id",),
    "predictions": ("id", "expected_n", "after_row_id"),
}


def _widen() -> None:
    for table, columns in WIDE.items():
        for column in columns:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE BIGINT")
        if "id" in columns:
            op.execute(f"ALTER SEQUENCE IF EXISTS {table}_id_seq AS BIGINT")


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _widen()
    with op.batch_alter_table("compile_records") as batch:
        batch.add_column(sa.Column("x64", sa.Boolean))
    with op.batch_alter_table("predictions") as batch:
        batch.add_column(sa.Column("x64", sa.Boolean))
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    restore("compile_records", STASH, ["x64"])
    put_back_tables(revision, ("predictions",))


def downgrade() -> None:
    stash("compile_records", STASH, ["x64"], "x64 IS NOT NULL")
    keep_tables(revision, ("predictions",))
    with op.batch_alter_table("predictions") as batch:
        batch.drop_column("x64")
    # SQLite drops columns by rebuilding the table, and 0009's triggers with it
    with sqlite_triggers_kept("compile_records"), op.batch_alter_table("compile_records") as batch:
        batch.drop_column("x64")
