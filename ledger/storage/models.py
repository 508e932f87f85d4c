"""The tables at head, as SQLAlchemy Core metadata, for the library's own queries.

Migrations never import this module (they declare what they touch), so it may move
with head; tests/test_migrations.py checks it against the schema the revision chain
actually builds.
"""

from __future__ import annotations

import sqlalchemy as sa

from ledger.record import (
    BUILDER_INPUTS,
    COMPARABILITY_KEY,
    COMPILE_FIELDS,
    INSTRUMENT_COLUMNS,
    PROCESS_FIELDS,
    STATELESS_KEY,
)

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)


_SA_TYPES = {str: sa.Text, float: sa.Float, int: sa.Integer, bool: sa.Boolean}
# Ids, row references and row counts: 64-bit on PostgreSQL (0013), where INTEGER stops at
# 2^31 - 1; SQLite's INTEGER is 64-bit, and only "INTEGER PRIMARY KEY" is its rowid.
ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _partial(name: str, *columns: str, where: str, unique: bool = False) -> sa.Index:
    """A partial index, as the migrations make it on both backends. Its predicate is
    declared for SQLite only, what tests/test_migrations.py compares: a `postgresql_where`
    loads SQLAlchemy's PostgreSQL dialect (20 ms) into every command, on SQLite too."""
    return sa.Index(name, *columns, unique=unique, sqlite_where=sa.text(where))


def _keyed(table: str) -> sa.Index:
    """A record lands once (0002); a row written by hand has no key and no entry."""
    return _partial(f"ux_{table}_record_key", "record_key", where="record_key IS NOT NULL", unique=True)


compile_records = sa.Table(
    "compile_records",
    metadata,
    sa.Column("id", ID, primary_key=True),
    *(sa.Column(name, _SA_TYPES[t]) for name, t in COMPILE_FIELDS.items()),
    sa.Column("record_key", sa.BigInteger),
    _keyed("compile_records"),
    # the row's cell (revision 0018: ledger/storage/cell_ids.py), given by whatever writes it
    sa.Column("cell_id", sa.BigInteger),
    # a run's rows and an entry's rows (revision 0014: the cache-health findings), only the
    # rows that have one (0019: a legacy row has neither, and cost both an entry); a run's
    # also with what health._run_times reads of them, so that it reads them from the index (0024)
    _partial("ix_compile_records_run_id", "run_id", "command", "objective", "timestamp", "status",
             where="run_id IS NOT NULL"),
    _partial("ix_compile_records_cache_key", "cache_key", where="cache_key IS NOT NULL"),
    # a cell's rows from a time on, as a range (0021: ledger/watch/findings.py; "C" collation on PostgreSQL)
    sa.Index("ix_compile_records_cell_time", "cell_id", "timestamp"),
    # each recorded program's newest row (0020: ledger/report/recorded.py), rows with a command only
    _partial("ix_compile_records_command", "command", "transform", where="command IS NOT NULL"),
)

# One row per cell of this ledger (revision 0018): its values, and the key text
# ledger/storage/cell_ids.py makes from them.
cells = sa.Table(
    "cells",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("key", sa.Text, nullable=False),
    *(sa.Column(name, _SA_TYPES[COMPILE_FIELDS[name]]) for name in STATELESS_KEY),
    sa.UniqueConstraint("key", name="uq_cells_key"),
)

instrument_records = sa.Table(
    "instrument_records",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("record_kind", sa.Text, nullable=False),
    sa.Column("record_json", sa.Text, nullable=False),
    *(sa.Column(name, sa.Text) for name in INSTRUMENT_COLUMNS),
    sa.Column("record_key", sa.BigInteger),
    _keyed("instrument_records"),
    sa.Index("ix_instrument_records_kind", "record_kind"),
)

# -- the watch tables (revision 0006) ---------------------------------------------------
# A pin's key columns are the comparability key, copied from its source row.
_KEY_TYPES = {name: _SA_TYPES[COMPILE_FIELDS[name]] for name in COMPARABILITY_KEY}

pins = sa.Table(
    "pins",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("pin_key", sa.Text, nullable=False, unique=True),
    *(sa.Column(name, kind) for name, kind in _KEY_TYPES.items()),
    sa.Column("row_id", ID, nullable=False),
    sa.Column("compile_s", sa.Float, nullable=False),
    sa.Column("tag", sa.Text),
    sa.Column("timestamp", sa.Text),
    sa.Column("pinned_at", sa.Text, nullable=False),
    sa.Column("loaded_host", sa.Boolean, nullable=False, server_default=sa.false()),
    # the key's own warm history when it was pinned (revision 0008; NULL until
    # `ledger pins update` computes it): n rows, median, MAD, and the threshold drawn
    # from them where n is enough
    sa.Column("history_n", ID),
    sa.Column("history_median_s", sa.Float),
    sa.Column("history_mad_s", sa.Float),
    sa.Column("threshold_s", sa.Float),
)

pin_history = sa.Table(
    "pin_history",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("pin_key", sa.Text, nullable=False, index=True),
    sa.Column("old_row_id", ID),
    sa.Column("old_compile_s", sa.Float),
    sa.Column("old_tag", sa.Text),
    sa.Column("old_timestamp", sa.Text),
    sa.Column("new_row_id", ID, nullable=False),
    sa.Column("new_compile_s", sa.Float, nullable=False),
    sa.Column("new_tag", sa.Text),
    sa.Column("new_timestamp", sa.Text),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("changed_at", sa.Text, nullable=False),
)

check_runs = sa.Table(
    "check_runs",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("checked_at", sa.Text, nullable=False),
    sa.Column("tolerance", sa.Float, nullable=False),
    sa.Column("filters", sa.Text),
    sa.Column("exit_code", sa.Integer, nullable=False),
    sa.Column("min_diff_s", sa.Float),  # the absolute floor the run used (0008)
    # the highest row id the run judged and the pins it judged against (0009): what
    # lets the next check take its verdicts and judge only newer rows
    sa.Column("upto", sa.BigInteger),
    sa.Column("pins_digest", sa.Text),
    # the newest time of a successful row with a run id that it judged (0022): what lets the
    # next check's health passes leave a run's old rows unread (ledger/watch/health.py)
    sa.Column("newest_run_time", sa.Text),
)

verdicts = sa.Table(
    "verdicts",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("check_run_id", ID, sa.ForeignKey("check_runs.id"), nullable=False, index=True),
    sa.Column("pin_id", ID),
    sa.Column("pin_key", sa.Text),
    sa.Column("row_id", ID),
    # ok rows are one verdict per pin and run: n_rows of them, row_id the newest,
    # compile_s and ratio the slowest. Every other verdict is one row.
    sa.Column("n_rows", ID, nullable=False, server_default="1"),
    sa.Column("compile_s", sa.Float),
    sa.Column("pin_compile_s", sa.Float),
    sa.Column("ratio", sa.Float),
    sa.Column("tolerance", sa.Float),
    sa.Column("verdict", sa.Text, nullable=False),
    sa.Column("cause", sa.Text),
    sa.Column("checked_at", sa.Text, nullable=False),
    # which rule judged a pinned row (history | tolerance) and the limit it drew (0008)
    sa.Column("rule", sa.Text),
    sa.Column("threshold_s", sa.Float),
    # what the finding found, as JSON (0015): its cause's code and values, its program, what
    # it costs a run; the words in `cause` are made from these (ledger/watch/causes.py)
    sa.Column("facts", sa.Text),
)

# -- the cache cells (revision 0009): each cache cell's summary, folded by `ledger check`
# (ledger/watch/cells.py); triggers on compile_records reset `upto` when a folded row changes
# on PostgreSQL its pages are filled to 60% (revision 0023): room for a check's updates
cache_cells = sa.Table(
    "cache_cells",
    metadata,
    sa.Column("cell_key", sa.Text, primary_key=True),
    sa.Column("newest", sa.Text, nullable=False),
    sa.Column("last_warm", sa.Text),
    sa.Column("first_cold", sa.Text),
    sa.Column("n_cold", ID, nullable=False),
)

cache_cells_state = sa.Table(
    "cache_cells_state",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("upto", sa.BigInteger, nullable=False),
    sa.Column("cell_fields", sa.Text),
)

# -- what `ledger predict` said before a compile (revision 0010) ------------------------
predictions = sa.Table(
    "predictions",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("cache_key", sa.Text, nullable=False, index=True),
    sa.Column("predicted", sa.Text, nullable=False),
    sa.Column("cause", sa.Text),
    sa.Column("expected_compile_s", sa.Float),
    sa.Column("expected_n", ID),
    sa.Column("transform", sa.Text, nullable=False),
    sa.Column("objective", sa.Text),
    *(sa.Column(name, _SA_TYPES[COMPILE_FIELDS[name]]) for name in (
        *BUILDER_INPUTS,
        "hardware", "hostname", "jax_version", "cache_dir", "program_fingerprint", "x64")),
    sa.Column("after_row_id", ID, nullable=False, server_default="0"),
    sa.Column("created_at", sa.Text, nullable=False),
)

# -- what `ledger cache prune` removed from a cache dir (revision 0014) -----------------
cache_prunes = sa.Table(
    "cache_prunes",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("cache_dir", sa.Text, nullable=False),
    sa.Column("cache_key", sa.Text, nullable=False, index=True),
    sa.Column("entry", sa.Text, nullable=False),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("jax_compile_s", sa.Float),
    sa.Column("hits", sa.BigInteger),
    sa.Column("saved_s", sa.Float),
    sa.Column("last_used", sa.Text),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("hostname", sa.Text),
    sa.Column("pruned_at", sa.Text, nullable=False),
)

# -- each process `ledger record` recorded, and its wall time (revision 0016) ------------
_PROCESS_REQUIRED = ("run_id", "hostname", "pid", "started", "ended_by")
recorded_processes = sa.Table(
    "recorded_processes",
    metadata,
    sa.Column("id", ID, primary_key=True),
    *(sa.Column(name, sa.BigInteger if t is int else _SA_TYPES[t], nullable=name not in _PROCESS_REQUIRED)
      for name, t in PROCESS_FIELDS.items()),
    sa.UniqueConstraint("run_id", "hostname", "pid", name="uq_recorded_processes_run_id"),
)

# -- the compile counts `pytest --ledger-check` holds each test to (revision 0017) --------
test_pins = sa.Table(
    "test_pins",
    metadata,
    sa.Column("id", ID, primary_key=True),
    sa.Column("test_id", sa.Text, nullable=False),
    sa.Column("function", sa.Text, nullable=False),  # '' for a test pinned compiling nothing
    sa.Column("compiles", sa.BigInteger, nullable=False),
    sa.Column("run_id", sa.Text),
    sa.Column("git_commit", sa.Text),
    sa.Column("pinned_at", sa.Text, nullable=False),
    sa.UniqueConstraint("test_id", "function", name="uq_test_pins_test_id"),
)
