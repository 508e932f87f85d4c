"""check_runs.newest_run_time: the newest time of any successful row with a run id that
a check run judged (up to its `upto`, under its filters).

The health passes find each program's newest run (ledger/watch/health.py). A daily check
looks only at the runs of the new rows, but a run that began before the last check had
to be read whole to find its newest row: 49,600 rows, a tenth of a daily check on a
1M-row ledger whose runs are a day long (bench/bench_check.py). With the previous run's
bound, a program whose new rows are all newer than it needs none of its old rows: its
newest run is among the new rows. NULL (every run before this revision, or a check with
nothing in a run) reads the runs whole, as before.

Schema only: no row changes. Downgrade: the column is dropped; check_runs is kept aside
first and put back by the upgrade (migrations/ledger_stash.py), as 0009 keeps its columns.

Revision ID: 0022
Revises: 0021
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import keep_tables, put_back_tables

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("check_runs") as batch:
        batch.add_column(sa.Column("newest_run_time", sa.Text))
    put_back_tables(revision, ("check_runs",))


def downgrade() -> None:
    keep_tables(revision, ("check_runs",))
    with op.batch_alter_table("check_runs") as batch:
        batch.drop_column("newest_run_time")
