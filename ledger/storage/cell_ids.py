"""Each compile row's cell, as a stored and indexed id (revision 0018).

A cell is the comparability key without cache_state (record.STATELESS_KEY): what "the
same cell" means in check, explain and the report. `cells` holds one row per cell seen
in this ledger: its id, its values and `key`, a text made from them in SQL (below);
compile_records.cell_id points at it. So the check finds a cell's or a lineage's rows
through the index on cell_id, and groups a million rows by one integer instead of
sorting them by thirteen columns; the reports and savings group by it too, where every
row has its id (all_assigned), and by the columns where one does not yet.

Ids belong to one ledger: `merge` and `import` do not carry them. Every writer writes
its rows with their cell ids, found by ids_of() before the insert: a batch (import, merge,
what `ledger record` spooled: ledger/storage/bulk.py) for its few distinct cells, a
probe's row for its one. `ledger check` calls assign() before it folds, so a row a person
INSERTed by hand gets its cell too. A row's cell never changes but with its
values: an UPDATE of a key column (ad-hoc SQL) sets the row's cell_id to NULL, by a
trigger (revision 0018), and the next assign() gives it its new one; so does a row
INSERTed with another row's id (revision 0025).
"""

from __future__ import annotations

from contextlib import contextmanager
from operator import itemgetter

from ledger.record import STATELESS_KEY

# No SQLAlchemy at import: an import's readers use cell_slots() and start before SQLAlchemy
# has loaded (ledger/command.py: import_json), so what needs it is imported where used.

CELL_COLUMNS = STATELESS_KEY
# revision 0025's: a row INSERTed with a cell id that is not its own (a person's copy of a
# row with a key column changed) has it cleared, and assign() gives it its own
INSERT_TRIGGER = "cell_ids_on_insert"
OWN_IDS = "ledger.own_cell_ids"  # what its condition reads on PostgreSQL (0025 holds the same)


@contextmanager
def own_ids(conn):
    """A batch whose every row has its own cell id (ids_of), in the caller's write
    transaction: revision 0025's look at each inserted row's id, which costs an insert
    12-17 us a row on SQLite and 25-50 us on PostgreSQL, is not made for it. On SQLite
    the trigger is set aside and made again from its own text after the batch (a batch
    that fails rolls back to the trigger it found: SQLite's DDL is transactional); on
    PostgreSQL the transaction says so in the setting the trigger's condition reads, and
    says again what it said before after the batch (batches may nest)."""
    if conn.dialect.name == "postgresql":
        before = conn.exec_driver_sql(f"SELECT current_setting('{OWN_IDS}', true)").scalar()
        conn.exec_driver_sql(f"SELECT set_config('{OWN_IDS}', 'on', true)")
        yield
        conn.exec_driver_sql(f"SELECT set_config('{OWN_IDS}', %(v)s, true)", {"v": before or ""})
        return
    from ledger.storage.batch import set_aside  # here: the import's readers load this module, and no SQLAlchemy

    with set_aside(conn, "trigger", (INSERT_TRIGGER,)):
        yield


def key_sql(dialect: str, table: str = "") -> str:
    """A cell's key text from a row's key columns (of `table`, if given): each value as
    its length, ':' and its text, or '-' for NULL, so no two cells share a key. On
    PostgreSQL its md5: a signature of any length stays under a btree entry's limit."""
    prefix = f"{table}." if table else ""
    parts = []
    for name in CELL_COLUMNS:
        value = f"CAST({prefix}{name} AS TEXT)"
        parts.append(f"COALESCE(CAST(LENGTH({value}) AS TEXT) || ':' || {value}, '-')")
    text = " || ".join(parts)
    return f"md5({text})" if dialect == "postgresql" else text


def new_cells_sql(dialect: str, where: str = "") -> str:
    """INSERT of the cells of the rows `where` selects, numbered in the order of their
    first rows. SQLite's DISTINCT keeps each value as its scan first meets it, in rowid
    order, without sorting every row (a GROUP BY ... ORDER BY MIN(id) cost revision 0018
    a quarter more at 1M rows); PostgreSQL's may hash, so it is ordered there."""
    key, cols = key_sql(dialect), ", ".join(CELL_COLUMNS)
    if dialect == "postgresql":
        return (f"INSERT INTO cells (key, {cols}) SELECT {key}, {cols} FROM compile_records{where}"
                f" GROUP BY {key}, {cols} ORDER BY MIN(id)")
    return f"INSERT INTO cells (key, {cols}) SELECT DISTINCT {key}, {cols} FROM compile_records{where}"


def assign(conn) -> int:
    """Give every row without a cell its cell, adding the cells not yet seen; returns how
    many rows it gave one: `ledger check`'s, for rows written by hand. Two statements,
    the rows found through the index on cell_id, so it pays for those rows only. Cells
    are numbered in the order of their first rows, as ids_of() and revision 0018 number
    them: a downgrade below 0018 and back gives every row the id it had
    (tests/test_downgrade_lossless.py)."""
    d = conn.dialect.name
    conn.exec_driver_sql(f"{new_cells_sql(d, ' WHERE cell_id IS NULL')} ON CONFLICT (key) DO NOTHING")
    if d == "postgresql":
        sql = ("UPDATE compile_records SET cell_id = c.id FROM cells c WHERE compile_records.cell_id IS NULL"
               f" AND c.key = {key_sql(d, 'compile_records')}")
    else:  # the correlated form: UPDATE ... FROM needs SQLite 3.33, and a node may have less
        sql = (f"UPDATE compile_records SET cell_id = (SELECT c.id FROM cells c"
               f" WHERE c.key = {key_sql(d, 'compile_records')}) WHERE cell_id IS NULL")
    return conn.exec_driver_sql(sql).rowcount


def all_assigned(conn) -> bool:
    """Whether every compile row has its cell id, so a read may group rows by cell_id (one
    integer) where it would sort them by the cell's thirteen columns: each writer gives
    its rows their ids, but a row INSERTed by hand has none until the next `ledger check`
    assigns it one, and a read-only command may not. One look through the index on
    cell_id (its NULLs are in it)."""
    import sqlalchemy as sa

    return not conn.execute(sa.text("SELECT 1 FROM compile_records WHERE cell_id IS NULL LIMIT 1")).first()


# Bound parameters per statement stay far under any backend's limit (SQLite's 32,766).
_CELLS_PER_QUERY = 100


def ids_of(conn, cells: list[tuple]) -> dict[tuple, int]:
    """Each cell's id (a tuple of CELL_COLUMNS values, as validated rows hold them), the
    cells not yet seen added: what a batch writes into its rows' cell_id, so that no
    UPDATE after it computes a key per row (for 100,000 imported rows that UPDATE cost
    1.5 s, the insert itself 0.7 s). The key text is key_sql's, made in SQL from the
    values as bound, as a row's own are made from them as stored: a validated value is
    stored as it is bound (text as text, an integer as an integer, a bool as SQLite's
    integer or PostgreSQL's boolean), so both give one text (tests/test_cell_ids.py
    holds every written row's cell key to its own). New cells are numbered in the order
    of `cells`: a batch gives them in the order of their first rows (new_cells_sql)."""
    from ledger.storage.engine import param_marker

    d, mark = conn.dialect.name, param_marker(conn)
    cols = ", ".join(CELL_COLUMNS)
    one = f"({mark}, {', '.join(_typed(conn, mark))})"
    out: dict[tuple, int] = {}
    for start in range(0, len(cells), _CELLS_PER_QUERY):
        chunk = cells[start:start + _CELLS_PER_QUERY]
        params = tuple(v for i, cell in enumerate(chunk) for v in (i, *cell))
        given = f"WITH v (i, {cols}) AS (VALUES {', '.join([one] * len(chunk))})"
        conn.exec_driver_sql(f"{given} INSERT INTO cells (key, {cols}) SELECT {key_sql(d, 'v')}, {cols} FROM v"
                             " WHERE true ON CONFLICT (key) DO NOTHING", params)
        found = conn.exec_driver_sql(f"{given} SELECT v.i, c.id FROM v JOIN cells c ON c.key = {key_sql(d, 'v')}",
                                     params).all()
        out.update((chunk[i], cell_id) for i, cell_id in found)
    return out


def _typed(conn, mark: str) -> list[str]:
    """Each cell column's placeholder: on PostgreSQL cast to the column's type (a VALUES
    column of NULLs alone is text there, which an integer column refuses); on SQLite
    bare, as a row's own value is bound (its CAST would change what a value is)."""
    if conn.dialect.name != "postgresql":
        return [mark] * len(CELL_COLUMNS)
    from ledger.storage import models

    return [f"CAST({mark} AS {models.cells.c[c].type.compile(dialect=conn.dialect)})" for c in CELL_COLUMNS]


def cell_id_of(conn, row: dict) -> int:
    """One row's cell id (ids_of), its cell added if new: a key column it lacks is NULL."""
    cell = tuple(row.get(c) for c in CELL_COLUMNS)
    return ids_of(conn, [cell])[cell]


def cell_slots(columns, rows: list[tuple]) -> tuple[list[tuple], list[int]]:
    """A batch's distinct cells, in the order of their first rows, and each row's slot: the
    index of its cell among them, which ids() makes the row's cell id. The half of
    with_cell_ids() that needs no database, so an import's readers do it beside the insert
    (ledger/legacy/reading.py): in the inserting process it was a sixth of an import's
    insert. `rows`: tuples in `columns` order; a cell column the batch lacks is NULL in its
    cells."""
    at = [columns.index(c) if c in columns else None for c in CELL_COLUMNS]
    present = [i for i in at if i is not None]
    # a row's values keyed by the columns it has; few distinct, however many rows
    get = itemgetter(*present) if len(present) > 1 else lambda row: tuple(row[i] for i in present)
    positions = {i: n for n, i in enumerate(present)}
    index: dict[tuple, int] = {}
    slots = [index.setdefault(key, len(index)) for key in map(get, rows)]
    cells = [tuple(None if i is None else m[positions[i]] for i in at) for m in index]
    return cells, slots


def ids(conn, cells: list[tuple], rows: list[tuple], slots: list[int], known: dict | None = None) -> list[tuple]:
    """`rows` each with its cell's id added as a last item, from cell_slots()'s `cells` and
    `slots` (ids_of). `known`: the cells found by earlier batches of one transaction, kept
    and added to."""
    known = {} if known is None else known
    known.update(ids_of(conn, [cell for cell in cells if cell not in known]))
    of = [known[cell] for cell in cells]
    return [(*row, of[slot]) for row, slot in zip(rows, slots, strict=True)]


def with_cell_ids(conn, columns, rows: list[tuple], known: dict | None = None) -> tuple[tuple, list[tuple]]:
    """A batch's columns and rows (tuples in `columns` order) with each row's cell id
    added as a last column: cell_slots(), then ids()."""
    cells, slots = cell_slots(columns, rows)
    return (*columns, "cell_id"), ids(conn, cells, rows, slots, known)
