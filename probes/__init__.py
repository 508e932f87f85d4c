"""Compile probes: measure one objective under several JAX transforms.

Nothing here imports jax at package import time (``ledger --help`` must stay fast);
jax is imported inside the functions that measure. Probes hand plain dict records to
a callback and never touch a database.
"""

from probes.errors import ProbeError
from probes.records import RECORD_KEYS, CACHE_STATES, PROGRESS_PHASES
from probes.records import TRANSFORMS, describe_transforms
from probes.objectives import BUILTINS, describe_builtins, resolve_objective
from probes.orchestrate import ProbeSpec, ProbeOutcome, run_probe  # noqa: E402

__all__ = [
    "ProbeError",
    "RECORD_KEYS",
    "CACHE_STATES",
    "PROGRESS_PHASES",
    "TRANSFORMS",
    "describe_transforms",
    "BUILTINS",
    "describe_builtins",
    "resolve_objective",
    "ProbeSpec",
    "ProbeOutcome",
    "run_probe",
]
