"""Orchestration: in-process, one process per transform (``isolate``), or a cold/warm
pair of processes on a fresh cache dir (``cold_warm``).

Records go to ``on_record`` the moment a transform is measured, so a caller that
commits each one keeps rows 1-3 when transform 4 takes the process down. A transform
that raises, or whose process dies, becomes a ``status='failed'`` record with the
error and no timings; the remaining transforms still run.

This module does not import jax; the in-process path imports it when it runs.
"""

from __future__ import annotations

import shutil
import tempfile
import uuid
from collections.abc import Callable

from ledger.probes import protocol
from ledger.probes.spec import ProbeOutcome, ProbeSpec

from ledger.record import COLD, STATUS_OK, WARM

# The run phases of a cold_warm pair: the first process fills a fresh cache dir, the
# second reads it. They share the cache-state names because that is what they test.
COLD_WARM_PHASES = (COLD, WARM)


def run_probe(spec: ProbeSpec, *, on_record: Callable[[dict], None],
              on_progress: Callable[[dict], None] | None = None) -> ProbeOutcome:
    """Measure ``spec.objective`` under each of ``spec.transforms``; see module doc.
    ``spec`` must come from ``ProbeSpec.make`` (or ``.validated()``)."""
    if not spec.is_valid:
        raise TypeError("run_probe needs a validated spec: ProbeSpec.make(...) or spec.validated()")
    run_id = spec.run_id or uuid.uuid4().hex
    outcome = ProbeOutcome(run_id=run_id, cache_dir=spec.cache_dir)

    def emit(rec: dict) -> None:
        outcome.records.append(rec)
        if rec.get("status") != STATUS_OK:
            outcome.failures.append(rec)
        on_record(rec)

    if spec.cold_warm:
        fresh = tempfile.mkdtemp(prefix="cold-warm-", dir=spec.cache_dir)
        outcome.cache_dir = fresh
        try:
            for phase in COLD_WARM_PHASES:
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


def _run_in_process(spec: ProbeSpec, run_id, emit, on_progress) -> None:
    from ledger.probes.measure import Session

    session = Session(objective=spec.resolved, cell=spec.cell(), cache_dir=spec.cache_dir,
                      tag=spec.tag, run_id=run_id, phase=None,
                      steady_calls=spec.steady_calls, emit_progress=on_progress)
    for t in spec.transforms:
        emit(session.measure(t))


def _run_in_children(spec: ProbeSpec, run_id, phase, cache_dir, emit, on_progress) -> None:
    """Each group of transforms runs in one fresh child; isolate makes each group one
    transform. A child that dies takes down only the transform it was measuring: the
    ones after it get a new child."""
    groups = [[t] for t in spec.transforms] if spec.isolate else [list(spec.transforms)]
    for group in groups:
        remaining = group
        while remaining:
            job = protocol.payload(spec, run_id, phase, cache_dir, remaining)
            done = protocol.run_child(job, emit, on_progress)
            remaining = [t for t in remaining if t not in done]
