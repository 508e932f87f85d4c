"""The run_id index also holds each row's command, objective, timestamp and status, so
that the first `ledger check` finds each program's newest run from the index alone.

The health findings judge each program's newest run (ledger/watch/health.py:
_run_times): each program's ok rows in each run, with the newest one's time. Where no
check has kept them (the first check, or one after the fold was reset) every row with a
run id is grouped by program and run. SQLite sorted all of them for it: 1.9-2.0 s of a
first check at 1M rows (bench/bench_check.py). With these columns in the index, in this
order, the rows come out of it already grouped and the table is not read: 0.40-0.44 s.

The index still leads with run_id and still holds only the rows that have one (0019):
it serves every lookup by run id it served, under the same name, instead of adding a
second index to every insert of a recorded row. A legacy row has no run id and costs it
nothing, as before.

Schema only: no row changes. Downgrade: the index on run_id alone, as 0019 made it.

Revision ID: 0024
Revises: 0023
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None

NAME = "ix_compile_records_run_id"
WHERE = sa.text("run_id IS NOT NULL")
COVERED = ("run_id", "command", "objective", "timestamp", "status")


def _index(columns) -> None:
    op.drop_index(NAME, "compile_records")
    op.create_index(NAME, "compile_records", list(columns), sqlite_where=WHERE, postgresql_where=WHERE)


def upgrade() -> None:
    _index(COVERED)


def downgrade() -> None:
    _index(COVERED[:1])
