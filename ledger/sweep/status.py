"""Where each task of a sweep stands, from what it left behind: its rows in the
ledger (or its own ledger file), the queue, and its log.

    done     its latest attempt wrote every row, all ok
    failed   its latest attempt wrote a failed row (the error: the builder's, or the
             transform's), too few rows, or nothing but a log (the log's last error
             line, and the exit code the job script left beside it)
    running  / queued   still in SLURM's queue (squeue; a queued task with its reason)
    missing  no rows, not queued, no log: never ran, was cancelled before it ran, or
             ran nowhere we can see
"""

from __future__ import annotations

import json
import shlex
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ledger.record import STATUS_OK
from ledger.sweep import slurm
from ledger.sweep.store import PER_TASK, Sweep

DONE, FAILED, MISSING = "done", "failed", "missing"
STATES = (DONE, FAILED, slurm.RUNNING, slurm.QUEUED, MISSING)
ROW_COLUMNS = ("sweep_task", "run_id", "id", "status", "error", "transform", "provenance")


@dataclass
class TaskState:
    index: int
    label: str
    state: str
    rows: int = 0
    detail: str = ""
    job_id: str | None = None  # the SLURM job array of its latest submission
    reason: str = ""  # squeue's, for a queued task (Resources, Priority, JobArrayTaskLimit, ...)
    exit_code: int | None = None  # of its latest run, where the run left one

    def shown_state(self) -> str:
        return f"{self.state} ({self.reason})" if self.reason else self.state


# :sweep works for sqlite3 and for SQLAlchemy's text() alike
ROWS_SQL = f"SELECT {', '.join(ROW_COLUMNS)} FROM compile_records WHERE sweep_id = :sweep ORDER BY id"


def _task_file_rows(path: Path, sweep_id: str) -> list[dict]:
    """A task's rows in its own ledger file, read as `ledger` reads any (gated at head)."""
    from ledger.storage import revisions as rv
    from ledger.storage.sqlite_file import read_only

    if not path.is_file():
        return []
    try:
        with read_only(path) as con:
            rev, status = rv.connection_status(con)
            if status == rv.EMPTY:
                return []  # made, nothing written yet
            rv.gate(str(path), rev, status, "read")
            con.row_factory = sqlite3.Row
            return [dict(r) for r in con.execute(ROWS_SQL, {"sweep": sweep_id})]
    except sqlite3.DatabaseError:
        return []  # not written yet (a task that died making it): no rows


def rows_by_task(sweep: Sweep, db: str | None) -> dict[int, list[dict]]:
    """The sweep's rows, by task."""
    if sweep.db["kind"] == PER_TASK:
        return {t.index: _task_file_rows(Path(sweep.task_db(t.index)), sweep.sweep_id) for t in sweep.tasks}
    import sqlalchemy as sa

    from ledger.storage.open import open_ledger

    out: dict[int, list[dict]] = {}
    with open_ledger(db if db is not None else sweep.db.get("path"), "read") as ledger, ledger.engine.connect() as c:
        for row in c.execute(sa.text(ROWS_SQL), {"sweep": sweep.sweep_id}).mappings():
            out.setdefault(row["sweep_task"], []).append(dict(row))
    return out


def _latest_attempt(rows: list[dict]) -> list[dict]:
    latest = max(rows, key=lambda r: r["id"])["run_id"]
    return [r for r in rows if r["run_id"] == latest]


def _last_error(log: Path) -> str | None:
    if not log.is_file():
        return None
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:") or "CANCELLED" in ln or "Error" in ln]
    return (errors or lines or [None])[-1]


def _exit_code(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None  # no run got that far (or killed outright): the log says what it can


def _ran_and_failed(state: TaskState, log: Path) -> None:
    """A run that left no rows: its log's last error line, and its exit code."""
    state.state = FAILED
    error = _last_error(log) or ("empty log" if log.is_file() else "no log")
    state.detail = error if state.exit_code is None else f"exit code {state.exit_code}: {error}"


def _latest_submissions(sweep: Sweep) -> dict[int, dict]:
    """{task index: the latest submission that ran it}, made once (a lookup per task
    of every submission's list was quadratic: 100 s at the task cap's ceiling)."""
    return {index: s for s in sweep.submissions for index in s["tasks"]}


def _failure(row: dict) -> str:
    """What failed, in a few words: the builder (every transform fails with it), the
    probe process's setup, or one transform."""
    error = ((row["error"] or "failed").strip().splitlines() or ["failed"])[0]
    if error.startswith("probe process setup failed"):
        return error
    try:
        provenance = json.loads(row.get("provenance") or "{}")
    except (TypeError, ValueError):
        provenance = {}
    builder = isinstance(provenance, dict) and "builder_traceback_tail" in provenance
    return f"{'builder' if builder else row['transform']}: {error}"


def _judge_attempt(state: TaskState, attempt: list[dict], expected: int) -> None:
    failed = [r for r in attempt if r["status"] != STATUS_OK]
    state.rows = len(attempt)
    if failed:
        state.state, state.detail = FAILED, _failure(failed[0])
    elif len(attempt) < expected:
        state.state, state.detail = FAILED, f"{len(attempt)} of {expected} rows"
    else:
        state.state = DONE


def task_states(sweep: Sweep, db: str | None = None) -> list[TaskState]:
    rows = rows_by_task(sweep, db)
    queued = slurm.queue([s["job_id"] for s in sweep.submissions])
    expected = sweep.spec.rows_per_task()
    out, latest = [], _latest_submissions(sweep)
    for task in sweep.tasks:
        state = TaskState(task.index, task.label(), MISSING)
        submission = latest.get(task.index)
        state.job_id = job = submission["job_id"] if submission else None
        run_job = job if sweep.mode == "slurm" else None
        log, exit_file = sweep.log(task.index, run_job), sweep.exit_file(task.index, run_job)
        if (job, task.index) in queued:
            state.state, state.reason = queued[(job, task.index)]
            out.append(state)
            continue
        state.exit_code = _exit_code(exit_file)
        if rows.get(task.index):
            _judge_attempt(state, _latest_attempt(rows[task.index]), expected)
        elif log.is_file() or state.exit_code is not None:
            _ran_and_failed(state, log)
        elif submission and submission.get("cancelled"):
            state.detail = "cancelled before it ran"
        out.append(state)
    return out


def summary(sweep: Sweep, states: list[TaskState]) -> str:
    counts = {s: sum(t.state == s for t in states) for s in STATES}
    where = f"SLURM job{'s' if len(sweep.submissions) > 1 else ''} " + ", ".join(
        s["job_id"] for s in sweep.submissions) if sweep.mode == "slurm" else "run here"
    head = f"sweep {sweep.sweep_id} ({len(states)} tasks, {where}): "
    if counts[DONE] == len(states):
        return head + f"complete, {len(states)} done"
    return head + ", ".join(f"{n} {s}" for s, n in counts.items() if n)


def pending(states: list[TaskState]) -> int:
    """Tasks still in SLURM's queue."""
    return sum(s.state in (slurm.QUEUED, slurm.RUNNING) for s in states)


def unfinished(states: list[TaskState]) -> int:
    """Tasks that will not finish by themselves: failed, or missing."""
    return sum(s.state in (FAILED, MISSING) for s in states)


def next_step(sweep: Sweep, states: list[TaskState], db_option: str = "") -> str | None:
    """The command to run next: wait for the queue, resume what failed, or merge the
    tasks' own ledger files once all is done. `db_option`: ' --db ...' as given."""
    where = shlex.quote(str(sweep.dir))
    if pending(states):
        return f"ledger sweep status {where} --wait{db_option}"
    if unfinished(states):
        return f"ledger sweep resume {where}{db_option}"
    return sweep.merge_command()


def as_json(sweep: Sweep, states: list[TaskState], next_command: str | None, timed_out: bool = False) -> dict:
    by_index = {t.index: t for t in sweep.tasks}
    return {"sweep_id": sweep.sweep_id, "dir": str(sweep.dir), "mode": sweep.mode,
            "jobs": [s["job_id"] for s in sweep.submissions],
            "counts": {s: sum(t.state == s for t in states) for s in STATES},
            "complete": all(t.state == DONE for t in states), "timed_out": timed_out, "next": next_command,
            "tasks": [{"task": t.index, "objective": by_index[t.index].objective, "cell": by_index[t.index].cell,
                       "repeat": by_index[t.index].repeat, "state": t.state, "reason": t.reason or None,
                       "rows": t.rows, "detail": t.detail or None, "job_id": t.job_id, "exit_code": t.exit_code}
                      for t in states]}
