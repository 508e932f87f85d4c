"""cache_cells keeps room on each page on PostgreSQL (fillfactor 60), so that a check's
update of a cell writes its new version beside the old one (a HOT update) instead of
on another page with a new entry in the primary key's index.

Every daily check updates the cells its new rows touched: about 8,000 of 16,674 at 1M
rows (bench/bench_check.py). In full pages most updates moved their row and indexed the
move: on the bench's third day, 2,708 of 8,288 were in place and the UPDATE took
0.058-0.087 s; with room, 8,212 of 8,288 and 0.047-0.053 s. The gap grows with the dead
rows a table holds between vacuums: on a ledger checked again and again without one,
0.10-0.23 s against 0.03-0.05 s. Every update moved is also a new entry in the primary
key's index, which grows until VACUUM.

Pages written from now on keep the room; those a ledger already has get it as VACUUM
frees their dead rows. SQLite stores no such setting: nothing changes there. Schema only,
no row changes. Downgrade: the setting is reset to PostgreSQL's default.

Revision ID: 0023
Revises: 0022
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

FILLFACTOR = 60  # per cent of each page filled by inserts; a day touches about half the cells


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE cache_cells SET (fillfactor = {FILLFACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE cache_cells RESET (fillfactor)")
