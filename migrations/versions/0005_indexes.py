"""Indexes: probe runs by run_id, sibling records by kind.

Deliberately small. The per-cell questions (warm compile per cell, cold/warm ratio)
are GROUP BY aggregates that read the whole table with or without an index, and a
five-column cell index costs about as much as the whole backfill to build on a
million legacy rows (bench/bench_backfill.py). run_id is indexed only where it is
set (probe rows), so legacy rows cost the build nothing.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_compile_records_run_id",
        "compile_records",
        ["run_id"],
        sqlite_where=sa.text("run_id IS NOT NULL"),
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )
    op.create_index("ix_instrument_records_kind", "instrument_records", ["record_kind"])


def downgrade() -> None:
    op.drop_index("ix_instrument_records_kind", "instrument_records")
    op.drop_index("ix_compile_records_run_id", "compile_records")
