"""Sweep linkage: which `ledger sweep` task a row was measured for, and the SLURM job
array task that ran it.

All nullable: rows from `ledger probe` and legacy rows have none. No index: `ledger
sweep status` reads a sweep's rows in one scan (a tenth of a second at a million
rows), and building even a partial index scans the whole table on upgrade, a cost
the backfill benchmark counts (see the README's notes on 0005).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import any_set, restore, stash

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

COLUMNS = [
    ("sweep_id", sa.Text),
    ("sweep_task", sa.Integer),
    ("slurm_array_job_id", sa.Text),
    ("slurm_array_task_id", sa.Integer),
]
NAMES = [name for name, _ in COLUMNS]
STASH = "_ledger_stash_0007"


def upgrade() -> None:
    with op.batch_alter_table("compile_records") as batch:
        for name, type_ in COLUMNS:
            batch.add_column(sa.Column(name, type_))
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    restore("compile_records", STASH, NAMES)


def downgrade() -> None:
    stash("compile_records", STASH, NAMES, any_set(NAMES))
    with op.batch_alter_table("compile_records") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
