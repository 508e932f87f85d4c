"""Compile probes: measure one objective under several JAX transforms.

Nothing here imports jax at package import time (``ledger --help`` must stay fast);
jax is imported inside the functions that measure. Probes hand plain dict records
(the fields of ledger.record.PROBE_RECORD_FIELDS) to a callback and never touch a
database.
"""

from probes.errors import ProbeError
from probes.objectives import BUILTINS, Objective, describe_builtins, resolve_objective
from probes.orchestrate import run_probe
from probes.progress import PROGRESS_PHASES, Progress
from probes.spec import ProbeOutcome, ProbeSpec
from probes.transforms import TRANSFORMS, describe_transforms, parse_transforms

__all__ = [
    "BUILTINS",
    "PROGRESS_PHASES",
    "TRANSFORMS",
    "Objective",
    "ProbeError",
    "ProbeOutcome",
    "ProbeSpec",
    "Progress",
    "describe_builtins",
    "describe_transforms",
    "parse_transforms",
    "resolve_objective",
    "run_probe",
]
