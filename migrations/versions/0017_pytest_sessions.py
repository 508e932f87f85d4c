"""Test sessions: `pytest --ledger` keeps each test's compiles, and pins their counts.

- compile_records.test_id, test_phase, git_commit (ledger/record.py: TEST_FIELDS): the
  pytest node id running when JAX compiled (a module's, for a compile at its import
  during collection), which part of it (collect, setup, call, teardown: a fixture's
  compiles are its setup's or teardown's, never the test's call), and the commit of the
  tree the session ran in. NULL on every existing row, and on rows of `ledger probe`
  and `ledger record`.
- test_pins: the compile counts `pytest --ledger-check` holds each test to, one row per
  test and function (the function '' for a test pinned compiling nothing), taken by
  `pytest --ledger-pin` from a session's rows and moved only by `--ledger-repin`.

Downgrade: the three columns are kept aside in _ledger_stash_0017 and the table whole
in _ledger_stash_0017_test_pins (migrations/ledger_stash.py); the upgrade puts both back.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import any_set, keep_tables, put_back_tables, restore, sqlite_triggers_kept, stash

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

COLUMNS = [("test_id", sa.Text), ("test_phase", sa.Text), ("git_commit", sa.Text)]
NAMES = [name for name, _ in COLUMNS]
STASH = "_ledger_stash_0017"
ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")  # SQLite's INTEGER PRIMARY KEY is 64-bit


def upgrade() -> None:
    with op.batch_alter_table("compile_records") as batch:
        for name, type_ in COLUMNS:
            batch.add_column(sa.Column(name, type_))
    op.create_table(
        "test_pins",
        sa.Column("id", ID, primary_key=True),
        sa.Column("test_id", sa.Text, nullable=False),
        sa.Column("function", sa.Text, nullable=False),  # '' for a test pinned compiling nothing
        sa.Column("compiles", sa.BigInteger, nullable=False),
        sa.Column("run_id", sa.Text),  # the session pinned from
        sa.Column("git_commit", sa.Text),
        sa.Column("pinned_at", sa.Text, nullable=False),  # aware UTC ISO time (ledger/rows.utc_now)
        sa.UniqueConstraint("test_id", "function", name="uq_test_pins_test_id"),
    )
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    restore("compile_records", STASH, NAMES)
    put_back_tables(revision, ("test_pins",))


def downgrade() -> None:
    stash("compile_records", STASH, NAMES, any_set(NAMES))
    keep_tables(revision, ("test_pins",))
    op.drop_table("test_pins")
    # SQLite drops columns by rebuilding the table, and 0009's triggers with it
    with sqlite_triggers_kept("compile_records"), op.batch_alter_table("compile_records") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
