"""Data migration: give legacy rows a cache_state from what is recoverable.

One set-based UPDATE (no Python loop over rows): the statement `ledger import` runs
(ledger/legacy/cache_rule.py), so a row gets the same state whichever path brought it
in. Rows that already have a cache_state are never touched; instrument_records
(sibling records) have no cache_state column at all.

The rule is frozen here as this revision wrote it, not imported: a revision must do
tomorrow what it did the day it ran, whatever the application's code becomes.
tests/test_cache_rule.py holds the application's rule to this copy, so a change to the
rule is a decision (a new revision), not a drift.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# The tag with one trailing "-retry" removed, then trailing digits stripped: what is left
# ends in "warm" exactly when the tag matches warm[0-9]*(-retry)?\Z. LIKE is ASCII
# case-insensitive on SQLite; PostgreSQL needs ILIKE for it.
_STATE = (
    "CASE WHEN cache_dir IS NULL OR cache_dir = '' THEN 'none' WHEN tag {like} '%cold' THEN 'cold'"
    " WHEN tag {like} '%warm%' AND rtrim(CASE WHEN tag {like} '%-retry' THEN substr(tag, 1, length(tag) - 6)"
    " ELSE tag END, '0123456789') {like} '%warm' THEN 'warm' ELSE 'unknown' END"
)
_BACKFILL = (
    "UPDATE compile_records SET (cache_state, cache_state_source) = (SELECT s, CASE s"
    " WHEN 'none' THEN 'empty_cache_dir' WHEN 'unknown' THEN 'unknown' ELSE 'tag' END"
    " FROM (SELECT {state} AS s) AS rule) WHERE cache_state IS NULL"
)


def state_sql(dialect: str) -> str:
    return _STATE.format(like="ILIKE" if dialect == "postgresql" else "LIKE")


def backfill_sql(dialect: str) -> str:
    return _BACKFILL.format(state=state_sql(dialect))


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
