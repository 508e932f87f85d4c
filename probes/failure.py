"""The failed record a parent writes for a child that could not write its own."""

from __future__ import annotations

import importlib.metadata
import os

from ledger.probes import host
from ledger.probes import jax_internals as ji
from ledger.probes.measure import record_fields

from ledger.record import STATUS_FAILED, blank_record


def parent_failed(job: dict, context: dict, transform: str, error: str,
                  stderr_tail: str) -> dict:
    """``job`` is the child's payload, ``context`` the fields it sent before dying
    (empty if it died before that); the cell (model_type included) comes with the job."""
    rec = blank_record()
    rec.update(record_fields(context))
    rec.update(record_fields(host.host_state()))
    rec.update(record_fields(job["cell"]))
    rec.update({
        "transform": transform, "status": STATUS_FAILED, "error": error,
        "timestamp": host.timestamp(), "run_id": job["run_id"], "phase": job["phase"],
        "objective": job["objective"], "tag": job["tag"],
        "steady_calls": job["steady_calls"],
        "cache_dir": context.get("cache_dir") if context else job["cache_dir"],
        "xla_flags": os.environ.get("XLA_FLAGS"), "x64": ji.x64_enabled(),
    })
    if rec["jax_version"] is None:
        rec["jax_version"] = _dist_version("jax")
        rec["jaxlib_version"] = _dist_version("jaxlib")
    rec["provenance"] = host.dumps({"written_by": "parent", "stderr_tail": stderr_tail[-2000:]})
    return rec


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
