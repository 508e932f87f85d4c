"""Watch tables: sticky warm-compile pins, their history, and stored check verdicts.

A pin is the expected warm compile of one comparability key (host key + cell). Its
key columns are copied from the source row (not just referenced) so that `pins` reads
on its own in ad-hoc SQL; pin_key is the key's canonical text, unique, because the
key columns may be NULL on legacy rows and NULLs never collide in a UNIQUE index.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import PINS_OF_ROWS, keep_tables, put_back_tables

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# The comparability key as of this revision (frozen: a migration declares its own).
KEY = [
    ("hardware", sa.Text), ("hostname", sa.Text), ("jax_version", sa.Text),
    ("mixed_precision", sa.Boolean), ("cache_state", sa.Text),
    ("dataset_class", sa.Text), ("model_type", sa.Text), ("instrument", sa.Text),
    ("transform", sa.Text),
]

# what a downgrade below this revision keeps aside (migrations/ledger_stash.py)
TABLES = ("pins", "pin_history", "check_runs", "verdicts")


def upgrade() -> None:
    op.create_table(
        "pins",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("pin_key", sa.Text, nullable=False, unique=True),
        *(sa.Column(name, kind) for name, kind in KEY),
        sa.Column("row_id", sa.Integer, nullable=False),  # compile_records.id it was taken from
        sa.Column("compile_s", sa.Float, nullable=False),
        sa.Column("tag", sa.Text),
        sa.Column("timestamp", sa.Text),  # the source row's timestamp
        sa.Column("pinned_at", sa.Text, nullable=False),  # when the pin was set (UTC, ISO)
        sa.Column("loaded_host", sa.Boolean, nullable=False, server_default=sa.false()),
    )
    op.create_table(
        "pin_history",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("pin_key", sa.Text, nullable=False, index=True),
        sa.Column("old_row_id", sa.Integer),
        sa.Column("old_compile_s", sa.Float),
        sa.Column("old_tag", sa.Text),
        sa.Column("old_timestamp", sa.Text),
        sa.Column("new_row_id", sa.Integer, nullable=False),
        sa.Column("new_compile_s", sa.Float, nullable=False),
        sa.Column("new_tag", sa.Text),
        sa.Column("new_timestamp", sa.Text),
        sa.Column("action", sa.Text, nullable=False),  # pin | repin
        sa.Column("changed_at", sa.Text, nullable=False),
    )
    op.create_table(
        "check_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("checked_at", sa.Text, nullable=False),
        sa.Column("tolerance", sa.Float, nullable=False),
        sa.Column("filters", sa.Text),  # JSON of the filters given
        sa.Column("exit_code", sa.Integer, nullable=False),
    )
    op.create_table(
        "verdicts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("check_run_id", sa.Integer, sa.ForeignKey("check_runs.id"), nullable=False, index=True),
        sa.Column("pin_id", sa.Integer),  # NULL for went-cold findings of unpinned keys
        sa.Column("pin_key", sa.Text),
        sa.Column("row_id", sa.Integer),
        sa.Column("n_rows", sa.Integer, nullable=False, server_default="1"),
        sa.Column("compile_s", sa.Float),
        sa.Column("pin_compile_s", sa.Float),
        sa.Column("ratio", sa.Float),
        sa.Column("tolerance", sa.Float),
        sa.Column("verdict", sa.Text, nullable=False),  # ok | regression | inconclusive | went-cold
        sa.Column("cause", sa.Text),
        sa.Column("checked_at", sa.Text, nullable=False),
    )
    put_back_tables(revision, TABLES, {"pins": "pin_key"}, PINS_OF_ROWS)


def downgrade() -> None:
    # pins, their history and the check runs' audit trail are kept aside whole and
    # come back with the upgrade (migrations/ledger_stash.py)
    keep_tables(revision, TABLES)
    op.drop_table("verdicts")
    op.drop_table("check_runs")
    op.drop_table("pin_history")
    op.drop_table("pins")
