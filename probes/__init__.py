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
    "ProbeError": "ledger.probes.errors",
    "BUILTINS": "ledger.probes.objectives", "Objective": "ledger.probes.objectives",
    "describe_builtins": "ledger.probes.objectives", "resolve_objective": "ledger.probes.objectives",
    "run_probe": "ledger.probes.orchestrate",
    "PROGRESS_PHASES": "ledger.probes.progress", "Progress": "ledger.probes.progress",
    "ProbeOutcome": "ledger.probes.spec", "ProbeSpec": "ledger.probes.spec",
    "TRANSFORMS": "ledger.probes.transforms", "describe_transforms": "ledger.probes.transforms",
    "parse_transforms": "ledger.probes.transforms",
}
__all__ = list(_WHERE)  # the names above, loaded on first use


def __getattr__(name: str):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
