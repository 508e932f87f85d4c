"""The tables at head, as SQLAlchemy Core metadata, for the library's own queries.

Migrations never import this module (they declare what they touch), so it may move
with head; tests/test_migrations.py checks it against the schema the revision chain
actually builds.
"""

from __future__ import annotations

import sqlalchemy as sa

from ledger.record import COMPILE_FIELDS

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

compile_records = sa.Table(
    "compile_records",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    *(sa.Column(name, _SA_TYPES[t]) for name, t in COMPILE_FIELDS.items()),
    sa.Column("record_key", sa.BigInteger, unique=True),
)

# Common fields of a sibling record that are also kept as columns, where present.
INSTRUMENT_COLUMNS = ("model_type", "transform", "jax_version", "tag", "timestamp", "hardware")

instrument_records = sa.Table(
    "instrument_records",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("record_kind", sa.Text, nullable=False),
    sa.Column("record_json", sa.Text, nullable=False),
    *(sa.Column(name, sa.Text) for name in INSTRUMENT_COLUMNS),
    sa.Column("record_key", sa.BigInteger, unique=True),
)
