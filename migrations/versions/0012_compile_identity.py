"""Which compile a recorded row is, and whose function it compiled.

- compile_records.function_kind: ``eager`` (JAX compiling an op run outside jit) or
  ``jit`` (a jitted function of the program or its libraries); NULL on probe rows.
- compile_records.pid, compile_index: the OS process that compiled and the nth
  compile of that process in the recording (from 0). They join a recorded row's
  identity (ledger/record.py: RECORDED_KEY_FIELDS): two multiprocessing workers, both
  process_index 0, compiling the same function at the same signature in the same
  second had one record_key, and the UNIQUE index kept only one of the two rows.

Every existing row has NULL in all three and keeps its record_key: the key gains
pid and compile_index only where they are set (ledger/record_validation.compile_key).

Downgrade: the three values are kept aside in _ledger_stash_0012 (migrations/ledger_stash.py)
and put back by the upgrade, as 0007 does for the sweep columns. Rows keep their
record_key either way, so two rows told apart only by pid stay two rows below 0012.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import any_set, restore, sqlite_triggers_kept, stash

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

COLUMNS = [
    ("function_kind", sa.Text),
    ("pid", sa.Integer),
    ("compile_index", sa.Integer),
]
NAMES = [name for name, _ in COLUMNS]
STASH = "_ledger_stash_0012"


def upgrade() -> None:
    with op.batch_alter_table("compile_records") as batch:
        for name, type_ in COLUMNS:
            batch.add_column(sa.Column(name, type_))
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    restore("compile_records", STASH, NAMES)


def downgrade() -> None:
    stash("compile_records", STASH, NAMES, any_set(NAMES))
    # SQLite drops columns by rebuilding the table, and 0009's triggers with it
    with sqlite_triggers_kept("compile_records"), op.batch_alter_table("compile_records") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
