"""Predictions: what `ledger predict` said of a compile before it was paid.

One row per transform predicted: the persistent-cache key JAX will look up, the
predicted state (warm or cold), the cause of a cold one and its expected cost, with
the cell, host, jax version and cache dir it was made for. A later compile row with
the same cache_key scores it (ledger/predict/store.py); no foreign key, because the
row comes later and may come from another database merged in.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import keep_tables, put_back_tables

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "predictions",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("cache_key", sa.Text, nullable=False),
        sa.Column("predicted", sa.Text, nullable=False),  # warm | cold
        sa.Column("cause", sa.Text),
        sa.Column("expected_compile_s", sa.Float),
        sa.Column("expected_n", sa.Integer),
        sa.Column("transform", sa.Text, nullable=False),
        sa.Column("objective", sa.Text),
        sa.Column("dataset_class", sa.Text),
        sa.Column("model_type", sa.Text),
        sa.Column("instrument", sa.Text),
        sa.Column("n_batch", sa.Integer),
        sa.Column("batch_size", sa.Integer),
        sa.Column("mixed_precision", sa.Boolean),
        sa.Column("hardware", sa.Text),
        sa.Column("hostname", sa.Text),
        sa.Column("jax_version", sa.Text),
        sa.Column("cache_dir", sa.Text),
        sa.Column("program_fingerprint", sa.Text),
        # the newest compile row when predicted: only rows after it score the prediction
        sa.Column("after_row_id", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.Text, nullable=False),  # local ISO time, as row timestamps
    )
    op.create_index("ix_predictions_cache_key", "predictions", ["cache_key"])
    put_back_tables(revision, ("predictions",))  # kept by a downgrade (migrations/ledger_stash.py)


def downgrade() -> None:
    keep_tables(revision, ("predictions",))
    op.drop_index("ix_predictions_cache_key", "predictions")
    op.drop_table("predictions")
