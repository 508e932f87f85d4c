"""The record a probe hands to its caller: one plain dict per (transform, probe run).

Keys are the database column names, so this list is the contract with the ledger.
Kept free of jax so the ledger can import it cheaply.
"""

from __future__ import annotations

import datetime as _dt

LEGACY_KEYS = (
    "transform", "trace_s", "compile_s", "first_s", "steady_s",
    "dataset_class", "model_type", "instrument", "ndim", "n_batch", "batch_size",
    "hardware", "jax_version", "cache_dir", "mixed_precision", "tag", "hostname",
    "timestamp",
)
STATE_KEYS = ("cache_state", "cache_state_source", "host_cpu_count", "host_load_avg_1m")
PROBE_KEYS = (
    "run_id", "phase", "status", "error", "objective", "steady_calls",
    "backend_compile_s", "cache_files_before", "cache_files_after",
    "cache_requests", "cache_hits", "cache_misses", "cache_key", "cache_key_components",
    "cache_min_compile_time_s", "cache_min_entry_size_bytes",
    "host_load_avg_5m", "host_load_avg_15m", "host_cpu_affinity",
    "host_mem_total_mb", "host_mem_available_mb", "host_load_avg_1m_after",
    "slurm_job_id", "slurm_node", "jaxlib_version", "backend", "device_kind",
    "xla_flags", "jax_cache_settings", "program_fingerprint", "provenance",
)
RECORD_KEYS: tuple[str, ...] = LEGACY_KEYS + STATE_KEYS + PROBE_KEYS

TIMING_KEYS = ("trace_s", "compile_s", "first_s", "steady_s", "backend_compile_s")

CACHE_STATES = ("cold", "warm", "none", "unknown")
CACHE_STATE_SOURCES = ("measured_events", "measured_files", "empty_cache_dir")

# Progress event stages ('phase' key of a progress event), in order; a transform's last
# event is 'done' or 'failed'.
PROGRESS_PHASES = ("tracing", "compiling", "first call", "steady", "done", "failed")

TRANSFORMS: dict[str, str] = {
    "jit": "jit of f",
    "grad": "jit of grad(f)",
    "vag": "jit of value_and_grad(f)",
    "vmap": "jit of vmap(f) over n_batch inputs",
    "vmap_vag": "jit of vmap(value_and_grad(f)) over n_batch inputs",
    "laxmap_vag": "jit of lax.map(value_and_grad(f), batch_size=batch_size) over n_batch inputs",
    "pyloop_vag": ("jit of vmap(value_and_grad(f)) over one batch_size chunk, called "
                   "n_batch/batch_size times from Python (first_s and steady_s are full sweeps)"),
}


def describe_transforms() -> list[tuple[str, str]]:
    return list(TRANSFORMS.items())


def local_timestamp() -> str:
    """Local time, ISO format, seconds precision (as the legacy records have it)."""
    return _dt.datetime.now().replace(microsecond=0).isoformat()


def blank_record() -> dict:
    return {k: None for k in RECORD_KEYS}
