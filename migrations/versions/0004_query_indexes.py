"""Indexes for the questions people ask: per cell and transform, by cache_state, by time.

Built after the backfill (0003) so the million-row UPDATE does not maintain them.

Revision ID: 0004
Revises: 0003
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_compile_records_cell",
        "compile_records",
        ["dataset_class", "model_type", "instrument", "transform", "cache_state"],
    )
    op.create_index("ix_compile_records_timestamp", "compile_records", ["timestamp"])
    op.create_index("ix_instrument_records_kind", "instrument_records", ["record_kind"])


def downgrade() -> None:
    op.drop_index("ix_instrument_records_kind", "instrument_records")
    op.drop_index("ix_compile_records_timestamp", "compile_records")
    op.drop_index("ix_compile_records_cell", "compile_records")
