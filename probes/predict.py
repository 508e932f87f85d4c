"""The parent's end of a prediction: one fresh child (probes/predict_child.py) computes
the persistent-cache key of each transform without compiling; this hands back what it
found, as plain dicts. probes/ never touches a database: judging a cold prediction
against the ledger's history is ledger/predict's.

A prediction is made for the cache dir the real run will use (on some JAX versions its
path is in the key), on the machine the run will use (the backend and the accelerator
are in the key).
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field

from ledger.probes.errors import ProbeError
from ledger.probes.spec import ProbeSpec

COLD, WARM = "cold", "warm"


class UnpredictableJax(ProbeError):
    """This JAX (named in the one-line message) cannot be predicted on."""


@dataclass
class KeyReport:
    """What the child found: one dict per transform, the context all share, and lines
    about where a present entry is not a promised hit."""

    context: dict
    predictions: list[dict]
    notes: list[str] = field(default_factory=list)


def compute_keys(spec: ProbeSpec, timeout_s: float | None = None) -> KeyReport:
    """Run the child for a validated spec; ProbeError on a failed objective,
    UnpredictableJax when this JAX's internals moved or it computes no key."""
    from ledger.probes.protocol import child_env

    job = {"objective": spec.objective, "transforms": list(spec.transforms),
           "cache_dir": spec.cache_dir, "cell": spec.cell()}
    proc = subprocess.run([sys.executable, "-m", "ledger.probes.predict_child"], input=json.dumps(job),
                          capture_output=True, text=True, env=child_env(), timeout=timeout_s,
                          check=False)
    try:
        answer = json.loads(proc.stdout)
    except ValueError:
        tail = proc.stderr.strip().splitlines()[-1:] or [f"exit code {proc.returncode}"]
        raise ProbeError(f"predict process failed: {tail[0]}") from None
    if "unpredictable" in answer:
        raise UnpredictableJax(answer["unpredictable"])
    if "fatal" in answer:
        raise ProbeError(f"predict process failed: {answer['fatal']}")
    for p in answer["predictions"]:
        p["predicted"] = WARM if p["entry_exists"] else COLD
    return KeyReport(answer["context"], answer["predictions"], answer.get("notes") or [])
