"""The ledger as it stood before cache_state: the legacy JSON fields as columns.

Every column but the id is nullable, so a plain INSERT of the 18 legacy fields works.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import drop_all

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "compile_records",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("transform", sa.Text),
        sa.Column("trace_s", sa.Float),
        sa.Column("compile_s", sa.Float),
        sa.Column("first_s", sa.Float),
        sa.Column("steady_s", sa.Float),
        sa.Column("dataset_class", sa.Text),
        sa.Column("model_type", sa.Text),
        sa.Column("instrument", sa.Text),
        sa.Column("ndim", sa.Integer),
        sa.Column("n_batch", sa.Integer),
        sa.Column("batch_size", sa.Integer),
        sa.Column("hardware", sa.Text),
        sa.Column("jax_version", sa.Text),
        sa.Column("cache_dir", sa.Text),
        sa.Column("mixed_precision", sa.Boolean(create_constraint=False)),
        sa.Column("tag", sa.Text),
        sa.Column("hostname", sa.Text),
        sa.Column("timestamp", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_compile_records"),
    )
    # Sibling records (export probes, trace profiles: no compile_s) kept whole.
    op.create_table(
        "instrument_records",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("record_kind", sa.Text, nullable=False),
        sa.Column("record_json", sa.Text, nullable=False),
        sa.Column("model_type", sa.Text),
        sa.Column("transform", sa.Text),
        sa.Column("jax_version", sa.Text),
        sa.Column("tag", sa.Text),
        sa.Column("timestamp", sa.Text),
        sa.Column("hardware", sa.Text),
        sa.PrimaryKeyConstraint("id", name="pk_instrument_records"),
    )


def downgrade() -> None:
    # base is an empty database: nothing kept aside for upgrades outlives it
    drop_all()
    op.drop_table("instrument_records")
    op.drop_table("compile_records")
