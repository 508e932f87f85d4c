"""Data migration: give legacy rows a cache_state from what is recoverable.

One set-based UPDATE (no Python loop over rows) built by ledger.legacy.cache_rule, the same
statement `ledger import` runs, so a row gets the same state whichever path brought
it in. Rows that already have a cache_state are never touched; instrument_records
(sibling records) have no cache_state column at all.

ledger.legacy.cache_rule is imported rather than copied: it holds only SQL text and is
pinned by the tag edge-case tests, so this revision's behaviour cannot drift
unnoticed.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

from ledger.legacy.cache_rule import backfill_sql, state_sql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None



def upgrade() -> None:
    op.execute(backfill_sql(op.get_bind().dialect.name))


def downgrade() -> None:
    # Clear exactly the states the upgrade would write back the same: a backfill
    # source and the state the rule gives. Anything else (measured, recorded, or a
    # probe's unknown on a tag that reads "warm") stays, so down-and-up is lossless.
    dialect = op.get_bind().dialect.name
    op.execute(
        "UPDATE compile_records SET cache_state = NULL, cache_state_source = NULL "
        "WHERE cache_state_source IN ('empty_cache_dir', 'tag', 'unknown') "
        f"AND cache_state = {state_sql(dialect)}"
    )
