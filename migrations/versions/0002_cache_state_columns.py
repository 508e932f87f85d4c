"""cache_state, its source, host state and the content key.

All added columns are nullable or carry a server default, so SQLite adds them with
a plain ALTER TABLE ADD COLUMN (no table copy, fast on a million rows). No CHECK on
cache_state for the same reason: the write paths validate it. cache_state and its
source come first: the 0003 backfill rewrites every row, and columns after the last
non-NULL one cost a row next to nothing.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import any_set, restore, stash

# Kept aside by a downgrade below this revision: states the 0003 backfill could not
# recompute (measured, recorded), host state, and record_key (a recorded row's key holds
# its pid and compile index, which no import could recompute from the legacy fields).
STASH = "_ledger_stash_0002"
KEPT = ["cache_state", "cache_state_source", "host_cpu_count", "host_load_avg_1m", "record_key"]
INSTRUMENT_STASH = "_ledger_stash_0002_instrument"
INSTRUMENT_IDENTITY = ("record_kind", "record_json")

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _unique_key_index(name: str, table: str) -> None:
    # Partial: legacy rows inserted by hand have no key, and an index over a million
    # NULLs is build time for nothing. `ledger import` names the same WHERE in its
    # ON CONFLICT target.
    where = sa.text("record_key IS NOT NULL")
    op.create_index(name, table, ["record_key"], unique=True, sqlite_where=where, postgresql_where=where)


def upgrade() -> None:
    with op.batch_alter_table("compile_records") as batch:
        batch.add_column(sa.Column("cache_state", sa.Text))
        batch.add_column(sa.Column("cache_state_source", sa.Text))
        batch.add_column(sa.Column("host_cpu_count", sa.Integer))
        batch.add_column(sa.Column("host_load_avg_1m", sa.Float))
        # A 64-bit digest of the record's content: makes `ledger import` idempotent.
        # An integer, not hex text: the unique index takes half the insert time.
        batch.add_column(sa.Column("record_key", sa.BigInteger))
    _unique_key_index("ux_compile_records_record_key", "compile_records")
    with op.batch_alter_table("instrument_records") as batch:
        batch.add_column(sa.Column("record_key", sa.BigInteger))
    _unique_key_index("ux_instrument_records_record_key", "instrument_records")
    restore("compile_records", STASH, KEPT)
    restore("instrument_records", INSTRUMENT_STASH, ["record_key"], INSTRUMENT_IDENTITY)


def downgrade() -> None:
    stash("compile_records", STASH, KEPT, any_set(KEPT))
    stash("instrument_records", INSTRUMENT_STASH, ["record_key"], "record_key IS NOT NULL", INSTRUMENT_IDENTITY)
    op.drop_index("ux_instrument_records_record_key", "instrument_records")
    with op.batch_alter_table("instrument_records") as batch:
        batch.drop_column("record_key")
    op.drop_index("ux_compile_records_record_key", "compile_records")
    with op.batch_alter_table("compile_records") as batch:
        for name in ("record_key", "host_load_avg_1m", "host_cpu_count", "cache_state_source", "cache_state"):
            batch.drop_column(name)
