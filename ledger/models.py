"""The tables at head, as SQLAlchemy Core metadata, for the library's own queries.

Migrations never import this module (they declare what they touch), so it may move
with head; tests/test_migrations.py checks it against the schema the revision chain
actually builds.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_name)s",
        "uq": "uq_%(table_name)s_%(column_0_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# The 18 fields of a legacy JSON compile record, in their legacy order and type.
LEGACY_FIELDS: dict[str, type] = {
    "transform": str,
    "trace_s": float,
    "compile_s": float,
    "first_s": float,
    "steady_s": float,
    "dataset_class": str,
    "model_type": str,
    "instrument": str,
    "ndim": int,
    "n_batch": int,
    "batch_size": int,
    "hardware": str,
    "jax_version": str,
    "cache_dir": str,
    "mixed_precision": bool,
    "tag": str,
    "hostname": str,
    "timestamp": str,
}

# Columns added after 0001, with their Python type (revisions 0002 and 0005).
STATE_FIELDS: dict[str, type] = {
    "record_kind": str,
    "cache_state": str,
    "cache_state_source": str,
    "host_cpu_count": int,
    "host_load_avg_1m": float,
}
PROBE_FIELDS: dict[str, type] = {
    "status": str,
    "run_id": str,
    "phase": str,
    "error": str,
    "objective": str,
    "steady_calls": int,
    "backend_compile_s": float,
    "cache_files_before": int,
    "cache_files_after": int,
    "cache_requests": int,
    "cache_hits": int,
    "cache_misses": int,
    "cache_key": str,
    "cache_key_components": str,
    "cache_min_compile_time_s": float,
    "cache_min_entry_size_bytes": int,
    "host_load_avg_5m": float,
    "host_load_avg_15m": float,
    "host_cpu_affinity": int,
    "host_mem_total_mb": float,
    "host_mem_available_mb": float,
    "host_load_avg_1m_after": float,
    "slurm_job_id": str,
    "slurm_node": str,
    "jaxlib_version": str,
    "backend": str,
    "device_kind": str,
    "xla_flags": str,
    "jax_cache_settings": str,
    "program_fingerprint": str,
    "provenance": str,
}
COMPILE_FIELDS: dict[str, type] = {**LEGACY_FIELDS, **STATE_FIELDS, **PROBE_FIELDS}

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
