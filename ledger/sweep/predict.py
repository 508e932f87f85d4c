"""`ledger sweep plan --predict`: which tasks will compile cold on this node, and their
expected cost, before an array is submitted (so the cold ones can be warmed first).

Each task is predicted as `ledger predict` would predict its probe (ledger/predict),
in the cache dir the task will use. A sweep's own cache dirs (per-task, shared) do not
exist before it runs: their tasks are predicted in a fresh empty dir and are cold by
construction, with the cost the ledger expects. Nothing is stored: a plan runs nothing.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass

from ledger.sweep.spec import CACHE_POLICIES, SweepSpec, Task, probe_options

FRESH = "the sweep's fresh cache dir"


@dataclass
class TaskPrediction:
    task: Task
    results: list[dict]  # one per transform, as ledger.predict.run.judge makes them

    @property
    def cold(self) -> list[dict]:
        return [r for r in self.results if r["predicted"] == "cold"]


def predict_tasks(spec: SweepSpec, db: str | None, timeout_s: float | None = None) -> list[TaskPrediction]:
    """Each task's prediction; a task whose keys take over ``timeout_s`` (None: predict's
    default) stops the plan with one line, its key process killed."""
    from ledger.predict import run
    from ledger.probes import ProbeSpec

    if spec.cache == "none":
        raise run.UsageError("cache = \"none\": nothing is cached, so there is nothing to predict")
    out = []
    with ExitStack() as stack:
        conn = _history(stack, db)
        for task in spec.tasks():
            cache_dir = spec.cache if spec.cache not in CACHE_POLICIES else stack.enter_context(
                tempfile.TemporaryDirectory(prefix="sweep-predict-"))
            options = probe_options(spec, task, cache_dir)
            options.pop("cold_warm")
            options.pop("steady_calls", None)
            probe = ProbeSpec.make(**options)
            results = run.judge(conn, probe, run.compute(probe, timeout_s or run.DEFAULT_TIMEOUT_S))
            if spec.cache in CACHE_POLICIES:
                for r in results:
                    r["cause"] = FRESH
            out.append(TaskPrediction(task, results))
    return out


def _history(stack: ExitStack, db: str | None):
    """A read connection to the ledger, or None when there is no ledger yet."""
    from ledger.storage.open import open_ledger
    from ledger.storage.url import resolve

    target = resolve(db)
    if target.path is not None and not os.path.exists(target.path):
        return None
    ledger = stack.enter_context(open_ledger(db, "read"))
    return stack.enter_context(ledger.engine.connect())
