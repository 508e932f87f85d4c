"""A cell holds one program; a finding keeps its facts.

- compile_records.variant, pins.variant: which program of its process a recorded
  compile is among those sharing its function name and input signature (0 for the first
  cache key the process compiled under them, 1 for the next, ...). Two `jax.jit`s of
  functions named alike, compiled at one signature in one run, were one cell, and each
  was read against the other's warm row ("program changed"). The variant is in the
  cell (record.CELL_FIELDS), so in the comparability key: each pin_key gains it before
  the batch shape. Every existing recorded row gets its variant from its process's
  compiles in order (pid and compile_index, 0012); a recorded row without them (before
  0012) gets 0; probe and legacy rows stay NULL, as their function does.
- verdicts.facts: what a finding found, as JSON (its cause's code and values, the program,
  what it costs a run), so that the next check carries it and the words are made from it,
  never parsed back from them. NULL on every existing verdict.

Downgrade: a pin of variant 1 or more has no key without its variant and is removed (its
history with it, verdicts' pin_key cleared); the rest lose the value again. The column's
values (in _ledger_stash_0015) and the watch tables whole (in _ledger_stash_0015_<table>)
are kept aside first, and the upgrade puts them back (migrations/ledger_stash.py).

Revision ID: 0015
Revises: 0014
"""

import json

import sqlalchemy as sa
from alembic import op
from ledger_stash import PINS_OF_ROWS, keep_tables, put_back_tables, restore, sqlite_triggers_kept, stash

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# Where the variant sits in a pin_key's JSON list: just before the batch shape, the key's
# last two values (frozen: a migration declares its own).
SHAPE_LEN = 2
# The position of `function` in a pin_key without the variant (host key 5, then the
# cell's labels 3 and transform): a pin of a recorded row has it set.
FUNCTION_AT = 8
KEYED = ("pins", "pin_history", "verdicts")
TABLES = ("pins", "pin_history", "check_runs", "verdicts")
STASH = "_ledger_stash_0015"

records = sa.table("compile_records", sa.column("id", sa.Integer), sa.column("run_id", sa.Text),
                   sa.column("phase", sa.Text), sa.column("hostname", sa.Text), sa.column("pid", sa.Integer),
                   sa.column("compile_index", sa.Integer), sa.column("function", sa.Text),
                   sa.column("input_signature", sa.Text), sa.column("cache_key", sa.Text),
                   sa.column("variant", sa.Integer))
pins = sa.table("pins", sa.column("id", sa.Integer), sa.column("pin_key", sa.Text), sa.column("row_id", sa.Integer),
                sa.column("variant", sa.Integer))


def _variants(conn) -> None:
    """Each recorded row's variant, from its process's compiles in order: the nth distinct
    cache key under one function name and input signature is variant n."""
    conn.execute(sa.update(records).where(records.c.function.is_not(None)).values(variant=0))
    cols = (records.c.id, records.c.run_id, records.c.phase, records.c.hostname, records.c.pid, records.c.function,
            records.c.input_signature, records.c.cache_key)
    order = (records.c.run_id, records.c.phase, records.c.hostname, records.c.pid, records.c.compile_index,
             records.c.id)
    seen: dict[tuple, list] = {}
    later = []
    process = None
    for r in conn.execute(sa.select(*cols).where(records.c.function.is_not(None), records.c.pid.is_not(None))
                          .order_by(*order)):
        if (r.run_id, r.phase, r.hostname, r.pid) != process:
            process, seen = (r.run_id, r.phase, r.hostname, r.pid), {}
        keys = seen.setdefault((r.function, r.input_signature), [])
        if r.cache_key not in keys:
            keys.append(r.cache_key)
        if keys.index(r.cache_key):
            later.append({"row": r.id, "v": keys.index(r.cache_key)})
    if later:
        conn.execute(sa.update(records).where(records.c.id == sa.bindparam("row")).values(variant=sa.bindparam("v")),
                     later)


def _with_variant(old: str, variant) -> str:
    values = json.loads(old)
    return json.dumps([*values[:-SHAPE_LEN], variant, *values[-SHAPE_LEN:]], separators=(",", ":"))


def _without_variant(new: str) -> str:
    values = json.loads(new)
    return json.dumps([*values[: -SHAPE_LEN - 1], *values[-SHAPE_LEN:]], separators=(",", ":"))


def _rekey(conn, move) -> None:
    """Every pin_key in the keyed tables (a history may outlive its pin) through `move`."""
    for table in KEYED:
        t = sa.table(table, sa.column("pin_key", sa.Text))
        for (old,) in conn.execute(sa.select(t.c.pin_key).where(t.c.pin_key.is_not(None)).distinct()).all():
            conn.execute(sa.update(t).where(t.c.pin_key == old).values(pin_key=move(old)))


def upgrade() -> None:
    with op.batch_alter_table("compile_records") as batch:
        batch.add_column(sa.Column("variant", sa.Integer))
    with op.batch_alter_table("pins") as batch:
        batch.add_column(sa.Column("variant", sa.Integer))
    with op.batch_alter_table("verdicts") as batch:
        batch.add_column(sa.Column("facts", sa.Text))
    conn = op.get_bind()
    _variants(conn)
    # a pin takes its row's variant; a key without a pin (history, verdicts) is a recorded
    # one's (variant 0: one program per name then) or a probe's (NULL)
    conn.execute(sa.update(pins).values(variant=sa.select(records.c.variant).where(records.c.id == pins.c.row_id)
                                        .scalar_subquery()))
    pinned = {r.pin_key: r.variant for r in conn.execute(sa.select(pins.c.pin_key, pins.c.variant))}

    def move(old: str) -> str:
        if old in pinned:
            return _with_variant(old, pinned[old])
        return _with_variant(old, None if json.loads(old)[FUNCTION_AT] is None else 0)

    _rekey(conn, move)
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    restore("compile_records", STASH, ["variant"])
    put_back_tables(revision, TABLES, {"pins": "pin_key"}, PINS_OF_ROWS)


def downgrade() -> None:
    # a recorded row's NULL too: the upgrade would make it 0
    stash("compile_records", STASH, ["variant"], "variant IS NOT NULL OR function IS NOT NULL")
    keep_tables(revision, TABLES)
    conn = op.get_bind()
    split = [r[0] for r in conn.execute(sa.select(pins.c.pin_key).where(pins.c.variant > 0))]
    for key in split:
        conn.execute(sa.delete(pins).where(pins.c.pin_key == key))
        conn.execute(sa.text("DELETE FROM pin_history WHERE pin_key = :k"), {"k": key})
        conn.execute(sa.text("UPDATE verdicts SET pin_key = NULL WHERE pin_key = :k"), {"k": key})
    # history and verdicts of a variant's key whose pin had gone already
    for table in ("pin_history", "verdicts"):
        t = sa.table(table, sa.column("pin_key", sa.Text))
        for (key,) in conn.execute(sa.select(t.c.pin_key).where(t.c.pin_key.is_not(None)).distinct()).all():
            variant = json.loads(key)[-SHAPE_LEN - 1]
            if variant:
                if table == "pin_history":
                    conn.execute(sa.delete(t).where(t.c.pin_key == key))
                else:
                    conn.execute(sa.update(t).where(t.c.pin_key == key).values(pin_key=None))
    _rekey(conn, _without_variant)
    with op.batch_alter_table("verdicts") as batch:
        batch.drop_column("facts")
    with op.batch_alter_table("pins") as batch:
        batch.drop_column("variant")
    # SQLite drops columns by rebuilding the table, and 0009's triggers with it
    with sqlite_triggers_kept("compile_records"), op.batch_alter_table("compile_records") as batch:
        batch.drop_column("variant")
