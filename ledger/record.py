"""The record contract: a compile record's fields, the cache-state vocabulary and the
comparability key, defined once.

Everything that writes, reads or moves a compile record takes its names from here:
the ORM table (ledger/storage/models.py), the probe's record (probes/), the importer
and the export. Dependency-free on purpose (no SQLAlchemy, no jax): probes/ imports
it in child processes, and `ledger --help` may import it for free.

A field added here is a column (with a migration), a key the probe hands over and a
field the export writes; tests/test_record_contract.py holds all three to this list.
"""

from __future__ import annotations

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

# Columns added after 0001 (revisions 0002 and 0004).
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
    # a `ledger sweep` task (ledger/sweep): which sweep, which of its tasks, and the
    # SLURM job array task that ran it
    "sweep_id": str,
    "sweep_task": int,
    "slurm_array_job_id": str,
    "slurm_array_task_id": int,
    "jaxlib_version": str,
    "backend": str,
    "device_kind": str,
    "xla_flags": str,
    "jax_cache_settings": str,
    "program_fingerprint": str,
    "provenance": str,
}
# Columns of a compile that `ledger record` saw in a program nobody changed (revision
# 0011): NULL on probe rows. `function` is the computation's name as JAX gives it
# (jit_caustic, jit__lambda); `input_signature` the argument types of its main function
# (f32[3,4], ...), so two shapes of one function are two cells; `cache_not_persisted`
# why a cold compile wrote no entry (NOT_PERSISTED_CAUSES); `command` the command line.
# Revision 0012: `function_kind` whose function it compiled (FUNCTION_KINDS); `pid` the
# OS process that compiled and `compile_index` the nth compile of that process in the
# recording, from 0 (ledger/compile_counter.py). Revision 0015: `variant` which program
# of its process this is among those sharing its function name and input signature
# (0 for the first cache key the process compiled under that name and signature, 1 for
# the next, ...): two programs of one name and signature (two `jax.jit`s of functions
# named alike, two eager primitives of one shape) are two cells, never each other's.
RECORDED_FIELDS: dict[str, type] = {
    "function": str,
    "input_signature": str,
    "cache_not_persisted": str,
    "process_index": int,
    "command": str,
    "function_kind": str,
    "pid": int,
    "compile_index": int,
    "variant": int,
}
# Revision 0013: whether jax_enable_x64 was on when JAX compiled (probe and recorded
# rows alike): a float64 program traced under float32 is another program.
PRECISION_FIELDS: dict[str, type] = {"x64": bool}
# Revision 0016: where a recorded compile came from, `file:line function`: the innermost
# frame of the program, or of a library outside JAX, on the compile's stack (the file
# relative to the sys.path entry holding it). What a lens modeller fixes is that line.
SITE_FIELDS: dict[str, type] = {"call_site": str}
# Revision 0017: a compile of a pytest session (`pytest --ledger`, ledger/pytest_plugin/):
# `test_id` the node id running when JAX compiled (a test's, or a module's at its import),
# `test_phase` which part of it (TEST_PHASES: a fixture's compiles are its setup's or
# teardown's, not the test's call), `git_commit` the commit of the tree the session ran in
# (GIT_DIRTY after it when the tree had changes). NULL on probe and `ledger record` rows.
TEST_FIELDS: dict[str, type] = {"test_id": str, "test_phase": str, "git_commit": str}
# The durations of the contract, in seconds: each is a measured time, never negative
# (record_validation refuses one, as it refuses NaN and infinity in any float). Not
# durations: the load averages, and cache_min_compile_time_s, a setting of JAX's.
DURATION_FIELDS = ("trace_s", "compile_s", "first_s", "steady_s", "backend_compile_s")
# Every column of compile_records besides id and record_key, in column order.
COMPILE_FIELDS: dict[str, type] = {**LEGACY_FIELDS, **STATE_FIELDS, **PROBE_FIELDS, **RECORDED_FIELDS,
                                   **PRECISION_FIELDS, **SITE_FIELDS, **TEST_FIELDS}

# The fields a probe hands over: all of them but record_kind, which the table sets
# ('compile'); a probe never writes a sibling record.
PROBE_RECORD_FIELDS: tuple[str, ...] = tuple(f for f in COMPILE_FIELDS if f != "record_kind")

# Common fields of a sibling record (an export probe, a trace profile: no compile_s)
# that are also kept as columns of instrument_records, where present.
INSTRUMENT_COLUMNS = ("model_type", "transform", "jax_version", "tag", "timestamp", "hardware")

# What identifies a compile measurement: its legacy content plus, for probe rows,
# the run and phase (a failed transform has no timings to tell it apart).
KEY_FIELDS = (*LEGACY_FIELDS, "run_id", "phase")
# ... and, for a recorded row only (a probe row's key is unchanged, so ledgers merge
# across the revision), which compile of which process it was. pid and compile_index
# (0012) tell apart two workers of one program, both process_index 0, compiling the
# same function at the same signature in the same second: without them the two rows
# had one key and the second was dropped as already there. A row where both are NULL
# (every row before 0012) keys without them, as it did (record_validation.compile_key).
PROCESS_KEY_FIELDS = ("pid", "compile_index")
RECORDED_KEY_FIELDS = ("function", "input_signature", "process_index", "cache_key", *PROCESS_KEY_FIELDS)

# -- the cache-state vocabulary ----------------------------------------------------

COLD, WARM, NONE, UNKNOWN = "cold", "warm", "none", "unknown"
CACHE_STATES = (COLD, WARM, NONE, UNKNOWN)

# How a row's cache_state was decided. Part of the SQL surface: see README.
SOURCE_MEASURED_EVENTS = "measured_events"  # probe: JAX's own cache events
SOURCE_MEASURED_FILES = "measured_files"  # probe: cache entries counted around compile()
SOURCE_RECORDED = "recorded"  # the source data carried a cache_state
SOURCE_EMPTY_CACHE_DIR = "empty_cache_dir"  # exact: no cache dir, so no cache in play
SOURCE_TAG = "tag"  # inferred from the end of a free-text tag
SOURCE_UNKNOWN = "unknown"  # nothing recoverable proves warm or cold
CACHE_STATE_SOURCES = (
    SOURCE_MEASURED_EVENTS,
    SOURCE_MEASURED_FILES,
    SOURCE_RECORDED,
    SOURCE_EMPTY_CACHE_DIR,
    SOURCE_TAG,
    SOURCE_UNKNOWN,
)

STATUS_OK, STATUS_FAILED = "ok", "failed"

# Why a cold compile wrote no cache entry (compile_records.cache_not_persisted): under
# jax_persistent_cache_min_compile_time_secs, under jax_persistent_cache_min_entry_size_bytes,
# or a process other than index 0 (only process 0 writes); unknown when JAX did not say.
NOT_PERSISTED_COMPILE_TIME = "min_compile_time"
NOT_PERSISTED_ENTRY_SIZE = "min_entry_size"
NOT_PERSISTED_PROCESS_INDEX = "process_index"
NOT_PERSISTED_UNKNOWN = "unknown"
NOT_PERSISTED_CAUSES = (NOT_PERSISTED_COMPILE_TIME, NOT_PERSISTED_ENTRY_SIZE,
                        NOT_PERSISTED_PROCESS_INDEX, NOT_PERSISTED_UNKNOWN)
# The transform of a recorded row: the program compiled it, no probe transform did.
RECORDED_TRANSFORM = "recorded"
# compile_records.function_kind: JAX compiling an op run outside jit (jnp.zeros ->
# jit_broadcast_in_dim, an eager jnp.sum -> JAX's own @jit helper jit__reduce_sum), or a
# jitted function of the program or of its libraries (probes/jax_internals.function_kind).
FUNCTION_KIND_EAGER, FUNCTION_KIND_JIT = "eager", "jit"
FUNCTION_KINDS = (FUNCTION_KIND_EAGER, FUNCTION_KIND_JIT)
# compile_records.test_phase: a module's import while pytest collects it, a test's
# fixtures being set up, the test itself, its fixtures torn down.
PHASE_COLLECT, PHASE_SETUP, PHASE_CALL, PHASE_TEARDOWN = "collect", "setup", "call", "teardown"
TEST_PHASES = (PHASE_COLLECT, PHASE_SETUP, PHASE_CALL, PHASE_TEARDOWN)
GIT_DIRTY = "-dirty"  # after git_commit: the tree had uncommitted changes to tracked files

# -- a recorded process (table recorded_processes, revision 0016) -------------------
# Each process `ledger record` recorded: its run, host and pid (its identity), when it
# started (the program's own start: its interpreter's, or its fork) and ended, aware UTC
# with microseconds, and its wall seconds. A run's time is read from these.
PROCESS_FIELDS: dict[str, type] = {
    "run_id": str, "hostname": str, "pid": int, "started": str, "ended": str, "wall_s": float, "ended_by": str,
}
PROCESS_IDENTITY = ("run_id", "hostname", "pid")
# How a process's end is known (recorded_processes.ended_by): it said so at exit (exact);
# it was seen gone without saying so (killed, or os._exit: within a second); or its end was
# never seen (the ingester went first, another host): its last spooled line, a lower bound.
ENDED_EXIT, ENDED_GONE, ENDED_LAST_SEEN = "exit", "gone", "last seen"
PROCESS_ENDS = (ENDED_EXIT, ENDED_GONE, ENDED_LAST_SEEN)

# -- the named keys ------------------------------------------------------------------
# What a probe's row is *of*, named by who sets it. Everything below derives from these:
# ProbeSpec.cell() and a sweep's grid (BUILDER_INPUTS), the options `ledger record`
# labels a program's rows with (CELL_LABELS), a prediction's columns, the filters.
#
# The labels of a cell: what was modelled, as the user names it.
CELL_LABELS = ("dataset_class", "model_type", "instrument")
# The builder's inputs: what an objective's builder receives, what a sweep's grid varies
# and what a probe or prediction is made for (the labels, the batch shape, precision).
BUILDER_INPUTS = (*CELL_LABELS, "n_batch", "batch_size", "mixed_precision")

# -- the comparability key -----------------------------------------------------------
# A compile time compares only within one host key and one cell. hostname is in the
# key because hardware alone ('local_cpu') pools a laptop with a 32-core node, and
# host load alone has moved one compile 7x. Nothing compares across keys.
HOST_KEY_FIELDS = ("hardware", "hostname", "jax_version", "mixed_precision", "cache_state")
# The cell holds everything that changes the compiled program: what was probed, the
# transform, and the batch shape the probe and a sweep's grid vary (n_batch and
# batch_size; mixed_precision, the grid's other builder input, is in the host key).
# Without the shape, a sweep over n_batch 4 and 8 pinned one of them and hid the other.
# A recorded row's cell also holds its function and input signature (NULL on probe rows,
# and NULL equals NULL in every key comparison: ledger/watch/keys.same_sql), so each
# function of a program at each signature is its own cell, and each program of a process
# sharing that name and signature (variant) too: a cell holds one program. The shape
# stays last.
# The cell's columns that are its batch shape, as people read them.
SHAPE_FIELDS = ("n_batch", "batch_size")
CELL_FIELDS = (*CELL_LABELS, "transform", "function", "input_signature", "variant", *SHAPE_FIELDS)
COMPARABILITY_KEY = (*HOST_KEY_FIELDS, *CELL_FIELDS)
# What a cold row and a warm row of the same key share: the report shows them side by
# side, and a cache cell (this plus cache_dir) is where a cache went cold.
STATELESS_KEY = tuple(f for f in COMPARABILITY_KEY if f != "cache_state")
CACHE_CELL = (*STATELESS_KEY, "cache_dir")


def now_timestamp() -> str:
    """The one clock of what is written now (a probe's row, a recorded compile, a pin, a
    check run, a prediction): UTC, aware, seconds, e.g. 2026-12-04T13:55:00+00:00.

    Rows are ordered by the text of their timestamp (ledger/rows.py), so every writer
    on every node must write the same zone and the same width: local time made a node
    at UTC+13 look 13 hours newer than its peers once their ledgers were merged. Legacy
    rows keep their naive local times; read against new rows they count as UTC."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def stored_cache_dir(path: str | None) -> str | None:
    """A cache dir as a row keeps it: absolute, its links resolved, so that every command
    reads the same dir from any working directory (a relative JAX_COMPILATION_CACHE_DIR
    once meant "pruned" from one directory and "same cache key" from another); a URL
    (gs://...) as given. Resolved where the compile ran, against its working directory."""
    import os

    if not path or "://" in str(path):
        return path or None
    return os.path.realpath(os.path.expanduser(str(path)))


def blank_record() -> dict:
    """A probe record with every field present and unset."""
    return dict.fromkeys(PROBE_RECORD_FIELDS)
