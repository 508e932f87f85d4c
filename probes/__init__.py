"""Compile probes: measure one objective under several JAX transforms.

Nothing here imports jax at package import time (``ledger --help`` must stay fast);
jax is imported inside the functions that measure. Probes hand plain dict records
(the fields of ledger.record.PROBE_RECORD_FIELDS) to a callback and never touch a
database.

The names below are loaded on first use: a process `ledger record` records imports
probes.evidence and probes.jax_internals at its `import jax`, and must not pay for
the objectives and the orchestration it never uses.
"""

import importlib

_WHERE = {
    "ProbeError": "probes.errors",
    "BUILTINS": "probes.objectives", "Objective": "probes.objectives",
    "describe_builtins": "probes.objectives", "resolve_objective": "probes.objectives",
    "run_probe": "probes.orchestrate",
    "PROGRESS_PHASES": "probes.progress", "Progress": "probes.progress",
    "ProbeOutcome": "probes.spec", "ProbeSpec": "probes.spec",
    "TRANSFORMS": "probes.transforms", "describe_transforms": "probes.transforms",
    "parse_transforms": "probes.transforms",
}
__all__ = list(_WHERE)  # the names above, loaded on first use


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
