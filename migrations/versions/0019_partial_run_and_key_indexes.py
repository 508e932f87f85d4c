"""The run_id and cache_key indexes hold only the rows that have one.

Legacy rows, the bulk of a ledger that imported a results tree, have neither a run_id
nor a cache_key (only `ledger record` and `ledger probe` write them). Every such row
still cost both full indexes an entry: at each insert (about a sixth of `ledger
import`'s insert, bench/bench_import.py) and on disk. Partial indexes (`WHERE run_id IS
NOT NULL`) hold only the rows a lookup can find: `run_id = :run`, `IN`, `LIKE` and a
join on the column imply the predicate, on SQLite and on PostgreSQL alike, so every
query that used the index uses it still (tests/test_partial_indexes.py holds their plans).

Schema only: no row changes. Downgrade: the full indexes again.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

COLUMNS = ("run_id", "cache_key")


def _index(column: str, partial: bool) -> None:
    name = f"ix_compile_records_{column}"
    op.drop_index(name, "compile_records")
    where = sa.text(f"{column} IS NOT NULL") if partial else None
    op.create_index(name, "compile_records", [column], sqlite_where=where, postgresql_where=where)


def upgrade() -> None:
    for column in COLUMNS:
        _index(column, partial=True)


def downgrade() -> None:
    for column in COLUMNS:
        _index(column, partial=False)
