"""Where a run's time goes: each recorded compile's call site, and each recorded process's wall time.

- compile_records.call_site: the innermost frame of the program, or of a library outside
  JAX, that led to a recorded compile, as ``file:line function`` (the file relative to the
  sys.path entry that holds it, a library's package first); NULL on probe rows and on
  every existing row.
- recorded_processes: one row per process `ledger record` recorded (run_id, hostname,
  pid): when it started and ended (aware UTC, microseconds), its wall seconds, and how
  its end is known (``ended_by``: exit, gone, last seen; ledger/record.py). A run's
  time and the share of it spent compiling are read from here (`ledger runs`).

Downgrade: call_site is kept aside in _ledger_stash_0016 and the table whole in
_ledger_stash_0016_recorded_processes (migrations/ledger_stash.py), both put back by
the next upgrade.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import keep_tables, put_back_tables, restore, sqlite_triggers_kept, stash

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

STASH = "_ledger_stash_0016"
TABLE = "recorded_processes"
ID = sa.BigInteger().with_variant(sa.Integer, "sqlite")  # SQLite's INTEGER PRIMARY KEY is 64-bit


def upgrade() -> None:
    with op.batch_alter_table("compile_records") as batch:
        batch.add_column(sa.Column("call_site", sa.Text))
    op.create_table(
        TABLE,
        sa.Column("id", ID, primary_key=True),
        sa.Column("run_id", sa.Text, nullable=False),
        sa.Column("hostname", sa.Text, nullable=False),
        sa.Column("pid", sa.BigInteger, nullable=False),
        sa.Column("started", sa.Text, nullable=False),
        sa.Column("ended", sa.Text),
        sa.Column("wall_s", sa.Float),
        sa.Column("ended_by", sa.Text, nullable=False),
        sa.UniqueConstraint("run_id", "hostname", "pid", name="uq_recorded_processes_run_id"),
    )
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    restore("compile_records", STASH, ["call_site"])
    put_back_tables(revision, (TABLE,))


def downgrade() -> None:
    stash("compile_records", STASH, ["call_site"], "call_site IS NOT NULL")
    keep_tables(revision, (TABLE,))
    op.drop_table(TABLE)
    # SQLite drops columns by rebuilding the table, and 0009's triggers with it
    with sqlite_triggers_kept("compile_records"), op.batch_alter_table("compile_records") as batch:
        batch.drop_column("call_site")
