"""Indexes: sibling records by kind.

Deliberately small. Every index on compile_records is built over the whole legacy
table during `alembic upgrade head`, and the upgrade has to stay within 1.5x of one
bare UPDATE on a million rows (bench/bench_backfill.py). The per-cell questions
(warm compile per cell, cold/warm ratio) are GROUP BY aggregates that read the whole
table with or without an index, and a five-column cell index cost about as much as
the backfill itself; even a partial run_id index cost 0.12 s of scan for a lookup
that is a 0.1 s scan at a million rows. The unique record_key index (0002) is the
one compile_records needs.

Revision ID: 0005
Revises: 0004
"""

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_instrument_records_kind", "instrument_records", ["record_kind"])


def downgrade() -> None:
    op.drop_index("ix_instrument_records_kind", "instrument_records")
