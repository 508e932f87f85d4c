"""The index on each row's cell id (revision 0018) extended by its timestamp, so that a
cell's rows from a time on are a range of it, not every row of the cell.

The daily `ledger check` reads each lineage that may hold a cache finding from its last
warm row on (ledger/watch/findings.py: _start). Through an index on cell_id alone each of
the cell's rows was fetched only to compare its time: a third of the daily check on a
1M-row ledger (bench/bench_check.py). (cell_id, timestamp) still serves every lookup by
cell id alone, so it replaces the old index rather than adding a second one to every
insert. On PostgreSQL the timestamp is indexed in the "C" collation, the byte order the
check compares times in (rows.py); the database's own collation may order them otherwise.

Schema only: no row changes. Downgrade: the index on cell_id alone, as 0018 made it.

Revision ID: 0021
Revises: 0020
"""

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

OLD, NEW = "ix_compile_records_cell_id", "ix_compile_records_cell_time"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f'CREATE INDEX {NEW} ON compile_records (cell_id, timestamp COLLATE "C")')
    else:
        op.create_index(NEW, "compile_records", ["cell_id", "timestamp"])
    op.drop_index(OLD, "compile_records")


def downgrade() -> None:
    op.create_index(OLD, "compile_records", ["cell_id"])
    op.drop_index(NEW, "compile_records")
