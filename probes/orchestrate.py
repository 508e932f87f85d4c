"""Orchestration: in-process, one process per transform (``isolate``), or a cold/warm
pair of processes on a fresh cache dir (``cold_warm``).

Records go to ``on_record`` the moment a transform is measured, so a caller that
commits each one keeps rows 1-3 when transform 4 takes the process down. A transform
that raises, or whose process dies, becomes a ``status='failed'`` record with the
error and no timings; the remaining transforms still run.

This module does not import jax; the in-process path imports it when it runs.
"""

from __future__ import annotations

import collections
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterable

from probes.errors import ProbeError
from probes.objectives import resolve_objective
from probes.records import TRANSFORMS, blank_record, local_timestamp, RECORD_KEYS

DEFAULT_TRANSFORMS = list(TRANSFORMS)


@dataclass
class ProbeSpec:
    objective: str = "toy"
    transforms: list[str] = field(default_factory=lambda: list(DEFAULT_TRANSFORMS))
    cache_dir: str | None = None
    tag: str | None = None
    n_batch: int = 8
    batch_size: int = 4
    steady_calls: int = 3
    mixed_precision: bool = False
    isolate: bool = False
    cold_warm: bool = False
    dataset_class: str = "imaging"
    instrument: str = "synthetic"
    run_id: str | None = None


@dataclass
class ProbeOutcome:
    run_id: str
    records: list[dict] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)  # the failed records, also in records
    cache_dir: str | None = None  # the effective dir (the fresh one for cold_warm)

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    @property
    def ok(self) -> bool:
        return not self.failures


def parse_transforms(value: str | Iterable[str]) -> list[str]:
    """'jit,vag' or ['jit', 'vag'] or 'all' -> validated list, in the given order."""
    items = value.split(",") if isinstance(value, str) else list(value)
    names = [s.strip() for s in items if s and s.strip()]
    if names == ["all"]:
        return list(DEFAULT_TRANSFORMS)
    if not names:
        raise ProbeError("no transforms given: choose from " + ", ".join(TRANSFORMS))
    bad = [n for n in names if n not in TRANSFORMS]
    if bad:
        raise ProbeError(f"unknown transform {bad[0]!r}: choose from {', '.join(TRANSFORMS)}")
    dup = [n for n in names if names.count(n) > 1]
    if dup:
        raise ProbeError(f"transform {dup[0]!r} given twice")
    return names


def validate(spec: ProbeSpec) -> ProbeSpec:
    from probes.transforms import validate_batching

    spec.transforms = parse_transforms(spec.transforms)
    if int(spec.steady_calls) < 1:
        raise ProbeError(f"steady_calls must be >= 1, got {spec.steady_calls}")
    validate_batching(spec.transforms, int(spec.n_batch), int(spec.batch_size))
    resolve_objective(spec.objective)  # imports a user module: fail here, not per transform
    if spec.cache_dir:
        path = os.path.abspath(os.path.expanduser(spec.cache_dir))
        if os.path.exists(path) and not os.path.isdir(path):
            raise ProbeError(f"cache dir {spec.cache_dir!r} exists and is not a directory")
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as err:
            raise ProbeError(f"cannot create cache dir {spec.cache_dir!r}: {err.strerror}") from None
        spec.cache_dir = path
    return spec


def cell_of(spec: ProbeSpec) -> dict:
    return {
        "dataset_class": spec.dataset_class,
        "model_type": None,  # filled per objective by the measuring session
        "instrument": spec.instrument,
        "n_batch": int(spec.n_batch),
        "batch_size": int(spec.batch_size),
        "mixed_precision": bool(spec.mixed_precision),
    }


def run_probe(spec: ProbeSpec, *, on_record: Callable[[dict], None],
              on_progress: Callable[[dict], None] | None = None) -> ProbeOutcome:
    """Measure ``spec.objective`` under each of ``spec.transforms``; see module doc."""
    spec = validate(ProbeSpec(**asdict(spec)))
    run_id = spec.run_id or uuid.uuid4().hex
    outcome = ProbeOutcome(run_id=run_id, cache_dir=spec.cache_dir)

    def emit(rec: dict) -> None:
        outcome.records.append(rec)
        if rec.get("status") != "ok":
            outcome.failures.append(rec)
        on_record(rec)

    if spec.cold_warm:
        fresh = tempfile.mkdtemp(prefix="cold-warm-", dir=spec.cache_dir)
        outcome.cache_dir = fresh
        try:
            for phase in ("cold", "warm"):
                _run_in_children(spec, run_id, phase, fresh, emit, on_progress)
        finally:
            if spec.cache_dir is None:
                # A temp dir of our own: the rows keep its path, the disk does not.
                shutil.rmtree(fresh, ignore_errors=True)
    elif spec.isolate:
        _run_in_children(spec, run_id, None, spec.cache_dir, emit, on_progress)
    else:
        _run_in_process(spec, run_id, emit, on_progress)
    return outcome


# ---------------------------------------------------------------------------
# in-process

def _run_in_process(spec, run_id, emit, on_progress) -> None:
    from probes.measure import Session

    session = Session(objective=spec.objective, cell=cell_of(spec), cache_dir=spec.cache_dir,
                      tag=spec.tag, run_id=run_id, phase=None,
                      steady_calls=spec.steady_calls, emit_progress=on_progress)
    for t in spec.transforms:
        emit(session.measure(t))


# ---------------------------------------------------------------------------
# child processes

def _payload(spec: ProbeSpec, run_id: str, phase: str | None, cache_dir: str | None,
             transforms: list[str]) -> dict:
    return {
        "objective": spec.objective, "transforms": transforms, "cache_dir": cache_dir,
        "tag": spec.tag, "run_id": run_id, "phase": phase,
        "steady_calls": int(spec.steady_calls), "cell": cell_of(spec),
    }


def _child_env() -> dict:
    """The child sees what this process imports: the probes package and any user
    objective module reachable on this process's sys.path."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [root] + [p if p else os.getcwd() for p in sys.path]
    seen, keep = set(), []
    for p in paths:
        if p not in seen and os.path.isdir(p):
            seen.add(p)
            keep.append(p)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(keep)
    return env


def _run_in_children(spec, run_id, phase, cache_dir, emit, on_progress) -> None:
    """Each group of transforms runs in one fresh child; isolate makes each group one
    transform. A child that dies takes down only the transform it was measuring: the
    ones after it get a new child."""
    groups = [[t] for t in spec.transforms] if spec.isolate else [list(spec.transforms)]
    for group in groups:
        remaining = list(group)
        while remaining:
            done = _run_child(_payload(spec, run_id, phase, cache_dir, remaining),
                              emit, on_progress)
            remaining = [t for t in remaining if t not in done]


def _run_child(payload: dict, emit, on_progress) -> set[str]:
    """Run one child; returns the transforms it accounted for (record or failure)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "probes.child"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_child_env(), text=True,
        bufsize=1,
    )
    tail: collections.deque[str] = collections.deque(maxlen=40)
    drain = threading.Thread(target=lambda: [tail.append(line) for line in proc.stderr],
                             daemon=True)
    drain.start()
    done: set[str] = set()
    context: dict = {}
    current = None
    stage = None
    fatal = None
    try:
        proc.stdin.write(json.dumps(payload))
        proc.stdin.close()
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            kind = msg.get("type")
            if kind == "context":
                context = msg["fields"]
            elif kind == "start":
                current, stage = msg["transform"], "build"
            elif kind == "progress":
                stage = msg["event"].get("phase", stage)
                if on_progress is not None:
                    on_progress(msg["event"])
            elif kind == "record":
                rec = {k: msg["record"].get(k) for k in RECORD_KEYS}
                done.add(rec["transform"])
                current = None
                emit(rec)
            elif kind == "fatal":
                fatal = msg["error"]
        rc = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    drain.join(timeout=5)
    err_tail = "".join(tail).strip()
    if fatal is not None:
        # Setup failed before any transform: every remaining transform fails with it.
        for t in payload["transforms"]:
            if t not in done:
                emit(_parent_failed(payload, context, t, f"probe process setup failed: {fatal}",
                                    err_tail))
                done.add(t)
        return done
    if rc != 0 or current is not None:
        victim = current or next((t for t in payload["transforms"] if t not in done), None)
        if victim is not None:
            last = err_tail.splitlines()[-1] if err_tail else ""
            msg = (f"probe process exited with code {rc} during {stage or 'startup'} "
                   f"of {victim}" + (f": {last}" if last else ""))
            emit(_parent_failed(payload, context, victim, msg, err_tail))
            done.add(victim)
    return done


def _parent_failed(payload: dict, context: dict, transform: str, error: str,
                   stderr_tail: str) -> dict:
    """A failed record written by the parent for a child that could not write its own."""
    from probes import host

    rec = blank_record()
    rec.update({k: v for k, v in context.items() if k in RECORD_KEYS})
    cell = payload["cell"]
    hs = host.host_state()
    rec.update({k: v for k, v in hs.items() if k in RECORD_KEYS})
    rec.update({
        "transform": transform, "status": "failed", "error": error,
        "timestamp": local_timestamp(), "run_id": payload["run_id"], "phase": payload["phase"],
        "objective": payload["objective"], "tag": payload["tag"],
        "steady_calls": payload["steady_calls"], "cache_dir": payload["cache_dir"]
        if not context else context.get("cache_dir"),
        "dataset_class": cell["dataset_class"], "instrument": cell["instrument"],
        "n_batch": cell["n_batch"], "batch_size": cell["batch_size"],
        "mixed_precision": cell["mixed_precision"],
        "xla_flags": os.environ.get("XLA_FLAGS"),
    })
    if rec["model_type"] is None:
        try:
            rec["model_type"] = resolve_objective(payload["objective"]).model_type
        except ProbeError:
            rec["model_type"] = payload["objective"]
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
