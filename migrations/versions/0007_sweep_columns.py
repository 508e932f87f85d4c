"""Sweep linkage: which `ledger sweep` task a row was measured for, and the SLURM job
array task that ran it.

All nullable: rows from `ledger probe` and legacy rows have none. A partial index on
sweep_id serves `ledger sweep status`, and costs the rows outside sweeps nothing.

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
INDEX = "ix_compile_records_sweep"


def upgrade() -> None:
    with op.batch_alter_table("compile_records") as batch:
        for name, type_ in COLUMNS:
            batch.add_column(sa.Column(name, type_))
    op.create_index(INDEX, "compile_records", ["sweep_id", "sweep_task"],
                    sqlite_where=sa.text("sweep_id IS NOT NULL"), postgresql_where=sa.text("sweep_id IS NOT NULL"))
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    restore("compile_records", STASH, NAMES)


def downgrade() -> None:
    stash("compile_records", STASH, NAMES, any_set(NAMES))
    op.drop_index(INDEX, table_name="compile_records")
    with op.batch_alter_table("compile_records") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
