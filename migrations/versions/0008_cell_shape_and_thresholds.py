"""The cell holds the batch shape; pins carry their key's history; check runs and
verdicts say which rule judged.

- pins.n_batch, pins.batch_size: the comparability key's cell now holds the batch
  shape (ledger/record.py: CELL_FIELDS), so a sweep over n_batch 4 and 8 gets a pin
  for each. Existing pins are split, not refused: each is re-keyed to the shape of
  its own source row (pins.row_id), its pin_history with it, and the other shapes of
  its old key get their own pins at the next `ledger pins update`. A pin whose source
  row is gone cannot be placed; it is removed, with a pin_history line (action
  'unpinned-0008') that keeps what it was.
- pins.history_n, history_median_s, history_mad_s, threshold_s: the key's own warm
  history at the time it was pinned (NULL until `ledger pins update` computes it).
- check_runs.min_diff_s: the absolute floor a run used.
- verdicts.rule, verdicts.threshold_s: which rule judged a row (history or tolerance)
  and the limit it drew.

Downgrade: pins are re-keyed to the old key; where two shapes of one old key were
pinned, the oldest pin stays and the others are removed. The watch tables are kept aside whole first and put back by the upgrade
(migrations/ledger_stash.py).

Revision ID: 0008
Revises: 0007
"""

import json
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op
from ledger_stash import PINS_OF_ROWS, keep_tables, put_back_tables

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

# The comparability key before and after this revision (frozen: a migration declares its own).
OLD_KEY = ("hardware", "hostname", "jax_version", "mixed_precision", "cache_state",
           "dataset_class", "model_type", "instrument", "transform")
NEW_KEY = (*OLD_KEY, "n_batch", "batch_size")
SHAPE = ("n_batch", "batch_size")
PIN_COLUMNS = [("n_batch", sa.Integer), ("batch_size", sa.Integer), ("history_n", sa.Integer),
               ("history_median_s", sa.Float), ("history_mad_s", sa.Float), ("threshold_s", sa.Float)]

TABLES = ("pins", "pin_history", "check_runs", "verdicts")

pins = sa.table("pins", sa.column("id", sa.Integer), sa.column("pin_key", sa.Text), sa.column("row_id", sa.Integer),
                sa.column("compile_s", sa.Float), sa.column("tag", sa.Text), sa.column("timestamp", sa.Text),
                *(sa.column(name) for name in NEW_KEY if name not in ("n_batch", "batch_size")),
                sa.column("n_batch", sa.Integer), sa.column("batch_size", sa.Integer))
pin_history = sa.table("pin_history", sa.column("pin_key", sa.Text), sa.column("old_row_id", sa.Integer),
                       sa.column("old_compile_s", sa.Float), sa.column("old_tag", sa.Text),
                       sa.column("old_timestamp", sa.Text), sa.column("new_row_id", sa.Integer),
                       sa.column("new_compile_s", sa.Float), sa.column("action", sa.Text),
                       sa.column("changed_at", sa.Text))


def key_text(values: dict, key: tuple) -> str:
    """A pin_key as ledger/watch/keys.py writes it: JSON of the key's values in order,
    mixed_precision as true/false whatever the backend returned."""
    out = []
    for name in key:
        v = values[name]
        out.append(bool(v) if name == "mixed_precision" and v is not None else v)
    return json.dumps(out, separators=(",", ":"))


def _same(a: str, b: str) -> str:
    return f"{a} IS {b}" if op.get_bind().dialect.name == "sqlite" else f"{a} IS NOT DISTINCT FROM {b}"


def _rekey_history(conn, moves: dict) -> None:
    for old, new in moves.items():
        if old != new:
            conn.execute(sa.update(pin_history).where(pin_history.c.pin_key == old).values(pin_key=new))


def upgrade() -> None:
    with op.batch_alter_table("pins") as batch:
        for name, type_ in PIN_COLUMNS:
            batch.add_column(sa.Column(name, type_))
    with op.batch_alter_table("check_runs") as batch:
        batch.add_column(sa.Column("min_diff_s", sa.Float))
    with op.batch_alter_table("verdicts") as batch:
        batch.add_column(sa.Column("rule", sa.Text))
        batch.add_column(sa.Column("threshold_s", sa.Float))
    conn = op.get_bind()
    # each pin takes the shape of its own source row, if that row is still its key's
    match = " AND ".join(_same(f"r.{f}", f"p.{f}") for f in OLD_KEY)
    found = conn.execute(sa.text(
        f"SELECT p.id, p.pin_key, r.n_batch, r.batch_size, {', '.join('p.' + f for f in OLD_KEY)} FROM pins p"
        f" LEFT JOIN compile_records r ON r.id = p.row_id AND {match}")).mappings().all()
    moves, gone = {}, []
    for p in found:
        if p["n_batch"] is None and p["batch_size"] is None and not _row_exists(conn, p["id"]):
            gone.append(p["id"])
            continue
        new = key_text(dict(p), NEW_KEY)
        moves[p["pin_key"]] = new
        conn.execute(sa.update(pins).where(pins.c.id == p["id"]).values(
            pin_key=new, n_batch=p["n_batch"], batch_size=p["batch_size"]))
    _rekey_history(conn, moves)
    for pin_id in gone:
        _unpin(conn, pin_id)
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    put_back_tables(revision, TABLES, {"pins": "pin_key"}, PINS_OF_ROWS)


def _row_exists(conn, pin_id: int) -> bool:
    """Whether the pin's source row is there (a row may have NULL n_batch and batch_size)."""
    match = " AND ".join(_same(f"r.{f}", f"p.{f}") for f in OLD_KEY)
    return conn.execute(sa.text(f"SELECT count(*) FROM pins p JOIN compile_records r ON r.id = p.row_id AND {match}"
                                " WHERE p.id = :id"), {"id": pin_id}).scalar() > 0


def _unpin(conn, pin_id: int) -> None:
    p = conn.execute(sa.select(pins).where(pins.c.id == pin_id)).mappings().one()
    conn.execute(sa.insert(pin_history).values(
        pin_key=p["pin_key"], old_row_id=p["row_id"], old_compile_s=p["compile_s"], old_tag=p["tag"],
        old_timestamp=p["timestamp"], new_row_id=p["row_id"], new_compile_s=p["compile_s"],
        action="unpinned-0008", changed_at=datetime.now(timezone.utc).isoformat(timespec="seconds")))
    conn.execute(sa.delete(pins).where(pins.c.id == pin_id))


def downgrade() -> None:
    keep_tables(revision, TABLES)  # the shapes merged and the columns dropped below
    conn = op.get_bind()
    rows = conn.execute(sa.text(f"SELECT id, pin_key, {', '.join(OLD_KEY)} FROM pins ORDER BY id")).mappings().all()
    kept, moves = set(), {}
    for p in rows:
        old = key_text(dict(p), OLD_KEY)
        if old in kept:  # another shape of the same old key: the oldest pin stays
            conn.execute(sa.delete(pins).where(pins.c.id == p["id"]))
            conn.execute(sa.delete(pin_history).where(pin_history.c.pin_key == p["pin_key"]))
            continue
        kept.add(old)
        moves[p["pin_key"]] = old
        conn.execute(sa.update(pins).where(pins.c.id == p["id"]).values(pin_key=old))
    _rekey_history(conn, moves)
    with op.batch_alter_table("verdicts") as batch:
        batch.drop_column("threshold_s")
        batch.drop_column("rule")
    with op.batch_alter_table("check_runs") as batch:
        batch.drop_column("min_diff_s")
    with op.batch_alter_table("pins") as batch:
        for name, _ in reversed(PIN_COLUMNS):
            batch.drop_column(name)
