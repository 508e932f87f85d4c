"""The parent's end of a prediction: one fresh child (probes/predict_child.py) computes
the persistent-cache key of each transform without compiling; this hands back what it
found, as plain dicts. probes/ never touches a database: judging a cold prediction
against the ledger's history is ledger/predict's.

A prediction is made for the cache dir the real run will use (on some JAX versions its
path is in the key), on the machine the run will use (the backend and the accelerator
are in the key).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field

from ledger.probes.errors import ProbeError
from ledger.probes.spec import ProbeSpec

COLD, WARM = "cold", "warm"


class UnpredictableJax(ProbeError):
    """This JAX (named in the one-line message) cannot be predicted on."""


class PredictTimeout(ProbeError):
    """The child ran past its time (a builder that never returns): it and its process
    group were killed."""

    def __init__(self, timeout_s: float):
        super().__init__(f"predict timed out after {timeout_s:g} s")
        self.timeout_s = timeout_s


@dataclass
class KeyReport:
    """What the child found: one dict per transform, the context all share, and lines
    about where a present entry is not a promised hit."""

    context: dict
    predictions: list[dict]
    notes: list[str] = field(default_factory=list)


def compute_keys(spec: ProbeSpec, timeout_s: float | None = None) -> KeyReport:
    """Run the child for a validated spec; ProbeError on a failed objective,
    UnpredictableJax when this JAX's internals moved or it computes no key,
    PredictTimeout past ``timeout_s`` (None: no limit)."""
    from ledger.probes.protocol import child_env

    job = {"objective": spec.objective, "transforms": list(spec.transforms),
           "cache_dir": spec.cache_dir, "cell": spec.cell()}
    returncode, stdout, stderr = _run_child(json.dumps(job), child_env(), timeout_s)
    try:
        answer = json.loads(stdout)
    except ValueError:
        tail = stderr.strip().splitlines()[-1:] or [f"exit code {returncode}"]
        raise ProbeError(f"predict process failed: {tail[0]}") from None
    if "unpredictable" in answer:
        raise UnpredictableJax(answer["unpredictable"])
    if "fatal" in answer:
        raise ProbeError(f"predict process failed: {answer['fatal']}")
    for p in answer["predictions"]:
        p["predicted"] = WARM if p["entry_exists"] else COLD
    return KeyReport(answer["context"], answer["predictions"], answer.get("notes") or [])


def _run_child(job: str, env: dict, timeout_s: float | None) -> tuple[int, str, str]:
    """The child in a process group of its own: past ``timeout_s`` (or on an interrupt)
    the whole group is killed, whatever the builder started, and PredictTimeout raised."""
    proc = subprocess.Popen([sys.executable, "-m", "ledger.probes.predict_child"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(job, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise PredictTimeout(timeout_s) from None
    except BaseException:
        _kill_group(proc)
        raise
    return proc.returncode, stdout, stderr


def _kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        with contextlib.suppress(OSError):  # a broken pipe: nothing left to flush
            pipe.close()
