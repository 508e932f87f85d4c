"""Both ends of the child-process protocol, in one place.

The parent writes one JSON payload (``payload``) on the child's stdin; the child
(``python -m ledger.probes.child``, i.e. ``child_main``) streams JSON lines back on its
original stdout, one message each: CONTEXT (the fields a parent needs to write a
failed record if the child dies), START (a transform began), PROGRESS, RECORD, FATAL
(setup failed) and END. Anything else the objective or JAX prints goes to stderr: the
protocol fd is private, so a stray print cannot corrupt it.

``run_child`` is the parent's end: it starts one child, hands each record over as it
arrives, and writes a failed record for each transform the child could not account for.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ledger.probes.spec import ProbeSpec

from ledger.record import PROBE_RECORD_FIELDS

CONTEXT, START, PROGRESS, RECORD, FATAL, END = (
    "context", "start", "progress", "record", "fatal", "end")
STDERR_TAIL_LINES = 40


def payload(spec: ProbeSpec, run_id: str, phase: str | None, cache_dir: str | None,
            transforms) -> dict:
    """What one child measures: a validated spec's objective and cell, these transforms."""
    return {
        "objective": spec.objective, "transforms": list(transforms), "cache_dir": cache_dir,
        "tag": spec.tag, "run_id": run_id, "phase": phase,
        "steady_calls": spec.steady_calls, "cell": spec.cell(),
    }


def encode(kind: str, **fields) -> str:
    return json.dumps(dict(fields, type=kind), default=str) + "\n"


def decode(line: str) -> dict | None:
    """One message, or None for a line that is not one."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) and "type" in msg else None


# ---------------------------------------------------------------------------
# the child's end

def child_main(stdin=None) -> int:
    """Read a payload on stdin, measure its transforms, stream messages; exit status."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # fd 1 (and so print()) now goes to stderr

    def send(kind: str, **fields) -> None:
        proto.write(encode(kind, **fields))
        proto.flush()

    job = json.loads((stdin or sys.stdin).read())
    try:
        session = _session(job, lambda ev: send(PROGRESS, event=ev))
        send(CONTEXT, fields=session.static_fields(job["transforms"][0]))
    except Exception as err:  # setup failed: the parent records each transform as failed  # noqa: BLE001
        send(FATAL, error=f"{type(err).__name__}: {err}")
        return 3
    for t in job["transforms"]:
        send(START, transform=t)
        send(RECORD, record=session.measure(t))
    send(END)
    return 0


def _session(job: dict, emit_progress):
    from ledger.probes.measure import Session
    from ledger.probes.objectives import resolve_objective

    return Session(objective=resolve_objective(job["objective"]), cell=job["cell"],
                   cache_dir=job["cache_dir"], tag=job["tag"], run_id=job["run_id"],
                   phase=job["phase"], steady_calls=job["steady_calls"],
                   emit_progress=emit_progress)


# ---------------------------------------------------------------------------
# the parent's end

def child_env() -> dict:
    """The child sees what this process imports: the probes package and any user
    objective module reachable on this process's sys.path (the working dir included)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    paths = [root] + [p if p else os.getcwd() for p in sys.path]
    keep = list(dict.fromkeys(p for p in paths if os.path.isdir(p)))
    return dict(os.environ, PYTHONPATH=os.pathsep.join(keep))


@dataclass
class ChildRun:
    """What the parent learned from one child's messages."""

    job: dict
    done: set = field(default_factory=set)   # transforms with a record
    context: dict = field(default_factory=dict)
    current: str | None = None               # the transform in flight
    stage: str | None = None                 # its last reported stage
    fatal: str | None = None
    returncode: int | None = None
    stderr_tail: str = ""


def run_child(job: dict, emit: Callable[[dict], None],
              on_progress: Callable[[dict], None] | None = None) -> set[str]:
    """Run one child over ``job`` (a ``payload``); returns the transforms it accounted
    for, by a record or by a failed record written here."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ledger.probes.child"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=child_env(), text=True,
        bufsize=1,
    )
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
    drain = threading.Thread(target=lambda: tail.extend(proc.stderr), daemon=True)
    drain.start()
    run = ChildRun(job)
    try:
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        read_messages(run, proc.stdout, emit, on_progress)
        run.returncode = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    drain.join(timeout=5)
    run.stderr_tail = "".join(tail).strip()
    record_failures(run, emit)
    return run.done


def read_messages(run: ChildRun, lines, emit, on_progress) -> None:
    """Hand over records and progress as they arrive; note what a failure needs."""
    for line in lines:
        msg = decode(line)
        kind = msg and msg["type"]
        if kind == CONTEXT:
            run.context = msg["fields"]
        elif kind == START:
            run.current, run.stage = msg["transform"], "build"
        elif kind == PROGRESS:
            run.stage = msg["event"].get("phase", run.stage)
            if on_progress is not None:
                on_progress(msg["event"])
        elif kind == RECORD:
            rec = {k: msg["record"].get(k) for k in PROBE_RECORD_FIELDS}
            run.done.add(rec["transform"])
            run.current = None
            emit(rec)
        elif kind == FATAL:
            run.fatal = msg["error"]


def record_failures(run: ChildRun, emit) -> None:
    """A failed record for each transform the child left unaccounted: all of them
    after a setup failure, else the one it died in (the rest get a new child)."""
    from ledger.probes.failure import parent_failed

    if run.fatal is not None:
        victims = [t for t in run.job["transforms"] if t not in run.done]
        error = f"probe process setup failed: {run.fatal}"
    elif run.returncode != 0 or run.current is not None:
        victim = run.current or next(
            (t for t in run.job["transforms"] if t not in run.done), None)
        victims = [victim] if victim is not None else []
        last = run.stderr_tail.splitlines()[-1] if run.stderr_tail else ""
        error = (f"probe process exited with code {run.returncode} during "
                 f"{run.stage or 'startup'} of {victim}" + (f": {last}" if last else ""))
    else:
        return
    for t in victims:
        emit(parent_failed(run.job, run.context, t, error, run.stderr_tail))
        run.done.add(t)
