"""A sweep as one SLURM job array: the script, `sbatch`, and `squeue`.

We write the script and let the scheduler schedule; nothing here waits on jobs.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ledger.errors import LedgerError
from ledger.sweep.store import Sweep

SCRIPT = "sweep.sbatch"
# squeue's states of an array task that has not finished
QUEUED, RUNNING = "queued", "running"
_QUEUE_STATES = {"PENDING": QUEUED, "CONFIGURING": RUNNING, "RUNNING": RUNNING, "COMPLETING": RUNNING,
                 "SUSPENDED": RUNNING, "REQUEUED": QUEUED, "RESIZING": RUNNING}


def array_spec(indices: list[int], max_parallel: int | None) -> str:
    """'0-3' for a run, '1,3' otherwise; '%K' caps how many run at once."""
    if not indices:
        raise ValueError("no tasks")
    runs, start = [], indices[0]
    for prev, cur in zip(indices, [*indices[1:], None]):
        if cur is not None and cur == prev + 1:
            continue  # the run goes on
        runs.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = cur
    return ",".join(runs) + (f"%{max_parallel}" if max_parallel else "")


def ledger_command() -> str:
    """The `ledger` a task runs: the one beside this Python (the job sees the same
    filesystem), else the one on PATH."""
    beside = Path(sys.executable).with_name("ledger")
    return str(beside) if beside.exists() else (shutil.which("ledger") or "ledger")


def script(sweep: Sweep, *, partition: str | None, time: str | None, cpus_per_task: int | None,
           gpus: str | None, max_parallel: int | None) -> str:
    options = [("job-name", f"ledger-{sweep.spec.name}"),
               ("array", array_spec([t.index for t in sweep.tasks], max_parallel)),
               ("output", str(sweep.dir / "logs" / "%A_%a.out")),
               ("partition", partition), ("time", time), ("cpus-per-task", cpus_per_task), ("gpus", gpus)]
    lines = ["#!/bin/bash",
             f"# ledger sweep {sweep.sweep_id}: one array task per task of sweep.json.",
             "# No password here: a task writes to its own file in db/, or to the ledger that",
             "# LEDGER_DB names in the environment sbatch hands on from the submitting shell.",
             *(f"#SBATCH --{k}={v}" for k, v in options if v is not None),
             f"exec {shlex.quote(ledger_command())} sweep task {shlex.quote(str(sweep.dir))} \"$SLURM_ARRAY_TASK_ID\"",
             ""]
    return "\n".join(lines)


def require_sbatch() -> None:
    if shutil.which("sbatch") is None:
        raise LedgerError("sbatch not found: this machine has no SLURM client (ledger sweep run runs a sweep here)")


def sbatch(script_path: Path, array: str | None = None) -> str:
    """Submit; the array's job id."""
    require_sbatch()
    cmd = ["sbatch", "--parsable", *([f"--array={array}"] if array else []), str(script_path)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise LedgerError(f"sbatch failed: {(done.stderr or done.stdout).strip().splitlines()[-1]}")
    return done.stdout.strip().split(";")[0]


def queue(job_ids: list[str]) -> dict[tuple[str, int], str]:
    """{(job id, task index): queued | running} for the array tasks still in the
    queue; empty where there is no squeue (a finished task leaves the queue)."""
    if not job_ids or shutil.which("squeue") is None:
        return {}
    done = subprocess.run(["squeue", "-h", "-r", "-j", ",".join(job_ids), "-o", "%i|%T"],
                          capture_output=True, text=True)
    out = {}
    for line in done.stdout.splitlines():
        ident, _, state = line.partition("|")
        job, _, task = ident.partition("_")
        if task.isdigit() and state in _QUEUE_STATES:
            out[(job, int(task))] = _QUEUE_STATES[state]
    return out
