"""Probe provenance: run linkage, status, cache evidence, host and environment.

What `ledger probe` measures beyond the legacy fields: the evidence behind a measured
cache_state and what a reader needs to judge a number later. All nullable (status
defaults to ok): legacy rows have none of it.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op
from ledger_stash import any_set, restore, stash

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

COLUMNS = [
    # one `ledger probe` command; cold and warm rows of --cold-warm share it
    ("run_id", sa.Text),
    ("phase", sa.Text),
    ("error", sa.Text),
    ("objective", sa.Text),
    ("steady_calls", sa.Integer),
    ("backend_compile_s", sa.Float),
    # cache evidence: file count either side of compile(), and JAX's cache events
    ("cache_files_before", sa.Integer),
    ("cache_files_after", sa.Integer),
    ("cache_requests", sa.Integer),
    ("cache_hits", sa.Integer),
    ("cache_misses", sa.Integer),
    ("cache_key", sa.Text),
    ("cache_key_components", sa.Text),
    ("cache_min_compile_time_s", sa.Float),
    ("cache_min_entry_size_bytes", sa.Integer),
    # host state beyond 0002's cpu count and 1 minute load
    ("host_load_avg_5m", sa.Float),
    ("host_load_avg_15m", sa.Float),
    ("host_cpu_affinity", sa.Integer),
    ("host_mem_total_mb", sa.Float),
    ("host_mem_available_mb", sa.Float),
    ("host_load_avg_1m_after", sa.Float),
    ("slurm_job_id", sa.Text),
    ("slurm_node", sa.Text),
    # environment
    ("jaxlib_version", sa.Text),
    ("backend", sa.Text),
    ("device_kind", sa.Text),
    ("xla_flags", sa.Text),
    ("jax_cache_settings", sa.Text),
    ("program_fingerprint", sa.Text),
    ("provenance", sa.Text),
]


def upgrade() -> None:
    with op.batch_alter_table("compile_records") as batch:
        # After the 0003 backfill on purpose: a defaulted column is free until a row is
        # rewritten, and the backfill rewrites every row (this one cost it 25% more).
        batch.add_column(sa.Column("record_kind", sa.Text, nullable=False, server_default="compile"))
        # legacy rows were successful measurements; a probe's failed transform says so
        batch.add_column(sa.Column("status", sa.Text, nullable=False, server_default="ok"))
        for name, type_ in COLUMNS:
            batch.add_column(sa.Column(name, type_))
    # what a downgrade below this revision kept aside (migrations/ledger_stash.py)
    restore("compile_records", STASH, ["record_kind", "status", *NAMES])


STASH = "_ledger_stash_0004"
NAMES = [name for name, _ in COLUMNS]


def downgrade() -> None:
    stash(
        "compile_records", STASH, ["record_kind", "status", *NAMES],
        f"record_kind <> 'compile' OR status <> 'ok' OR {any_set(NAMES)}",
    )
    with op.batch_alter_table("compile_records") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
        batch.drop_column("status")
        batch.drop_column("record_kind")
