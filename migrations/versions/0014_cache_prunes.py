"""Cache prunes: what `ledger cache prune` removed from a JAX cache dir, and when.

One row per entry removed: the dir, the entry's cache key and file name, its size,
the compile seconds JAX recorded inside it, what the ledger said it had saved (hits,
seconds), when it was last used, why it was chosen, the host and the time. A later
cold compile of the same key in the same dir is then explained as pruned (`explain`,
`check`, `predict`: ledger/watch/causes.py), not as an entry that vanished.

Two indexes on compile_records: by run_id and by cache_key. The cache-health findings
of `ledger check` read a run's rows and an entry's rows (ledger/watch/health.py), and
`ledger cache` a dir's keys; without them each was a scan of every row.

Downgrade: the indexes go; the table is kept whole in _ledger_stash_0014_cache_prunes
(migrations/ledger_stash.py) and put back by the next upgrade.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import keep_tables, put_back_tables

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

INDEXED = ("run_id", "cache_key")  # frozen: the compile_records columns indexed here
ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")  # SQLite's INTEGER PRIMARY KEY is 64-bit


def upgrade() -> None:
    op.create_table(
        "cache_prunes",
        sa.Column("id", ID, primary_key=True),
        sa.Column("cache_dir", sa.Text, nullable=False),
        sa.Column("cache_key", sa.Text, nullable=False),
        sa.Column("entry", sa.Text, nullable=False),  # the file name removed
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("jax_compile_s", sa.Float),  # as JAX recorded it inside the entry
        sa.Column("hits", sa.BigInteger),  # the ledger's warm rows of the key
        sa.Column("saved_s", sa.Float),
        sa.Column("last_used", sa.Text),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("hostname", sa.Text),
        sa.Column("pruned_at", sa.Text, nullable=False),  # aware UTC ISO time (ledger/rows.utc_now)
    )
    op.create_index("ix_cache_prunes_cache_key", "cache_prunes", ["cache_key"])
    for column in INDEXED:
        op.create_index(f"ix_compile_records_{column}", "compile_records", [column])
    put_back_tables(revision, ("cache_prunes",))  # kept by a downgrade (migrations/ledger_stash.py)


def downgrade() -> None:
    keep_tables(revision, ("cache_prunes",))
    op.drop_index("ix_cache_prunes_cache_key", "cache_prunes")
    op.drop_table("cache_prunes")
    for column in INDEXED:
        op.drop_index(f"ix_compile_records_{column}", "compile_records")
