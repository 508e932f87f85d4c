"""An index on the recorded rows' command (and transform), for the newest run of each
recorded program.

The report's programs (ledger/report/recorded.py) start from each recorded command's
newest row. Without an index that was a scan of every row grouped by its command text:
at 250,000 rows a seventh of `ledger report --html` (bench/bench_runs.py). With one, the
distinct commands are a walk from one to the next through the index, and each one's
newest recorded row the first entry of (command, 'recorded') read from the end: a few
lookups, however long the ledger. Partial (`WHERE command IS NOT NULL`): a legacy or
probe row without a command costs no entry.

Schema only: no row changes. Downgrade: no such index.

Revision ID: 0020
Revises: 0019
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

NAME = "ix_compile_records_command"


def upgrade() -> None:
    where = sa.text("command IS NOT NULL")
    op.create_index(NAME, "compile_records", ["command", "transform"], sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    op.drop_index(NAME, "compile_records")
