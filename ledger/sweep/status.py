"""Where each task of a sweep stands, from what it left behind: its rows in the
ledger (or its own ledger file), the queue, and its log.

    done     its latest attempt wrote every row, all ok
    failed   its latest attempt wrote a failed row (the error), too few rows, or
             nothing but a log (the log's last error line)
    running  / queued   still in SLURM's queue (squeue)
    missing  no rows, not queued, no log: never ran, or ran nowhere we can see
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ledger.record import STATUS_OK
from ledger.sweep import slurm
from ledger.sweep.store import PER_TASK, Sweep

DONE, FAILED, MISSING = "done", "failed", "missing"
STATES = (DONE, FAILED, slurm.RUNNING, slurm.QUEUED, MISSING)
ROW_COLUMNS = ("sweep_task", "run_id", "id", "status", "error", "transform")


@dataclass
class TaskState:
    index: int
    label: str
    state: str
    rows: int = 0
    detail: str = ""


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


def _last_error(log: Path) -> str:
    lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error:") or "CANCELLED" in ln or "Error" in ln]
    return (errors or lines or ["(empty log)"])[-1]


def _submission_of(sweep: Sweep, index: int) -> str | None:
    jobs = [s["job_id"] for s in sweep.submissions if index in s["tasks"]]
    return jobs[-1] if jobs else None


def _judge_attempt(state: TaskState, attempt: list[dict], expected: int) -> None:
    failed = [r for r in attempt if r["status"] != STATUS_OK]
    state.rows = len(attempt)
    if failed:
        error = (failed[0]["error"] or "failed").strip().splitlines() or ["failed"]
        state.state, state.detail = FAILED, f"{failed[0]['transform']}: {error[0]}"
    elif len(attempt) < expected:
        state.state, state.detail = FAILED, f"{len(attempt)} of {expected} rows"
    else:
        state.state = DONE


def task_states(sweep: Sweep, db: str | None = None) -> list[TaskState]:
    rows = rows_by_task(sweep, db)
    queued = slurm.queue([s["job_id"] for s in sweep.submissions])
    expected = sweep.spec.rows_per_task()
    out = []
    for task in sweep.tasks:
        state = TaskState(task.index, task.label(), MISSING)
        job = _submission_of(sweep, task.index)
        log = sweep.log(task.index, job if sweep.mode == "slurm" else None)
        if (job, task.index) in queued:
            state.state = queued[(job, task.index)]
        elif rows.get(task.index):
            _judge_attempt(state, _latest_attempt(rows[task.index]), expected)
        elif log.is_file():
            state.state, state.detail = FAILED, _last_error(log)
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
