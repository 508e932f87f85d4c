"""A sweep's directory: everything a sweep needs to be run, followed up and resumed
from any shell, on any node that sees the directory.

    <root>/<sweep_id>/
        sweep.json      the spec, where rows go, the sbatch options, every submission (job id,
                        tasks, options)
        sweep.sbatch    the job array script of the latest submission (SLURM sweeps)
        logs/           one log per task run (SLURM: <job>_<task>.out; local: local_<task>.out),
                        and beside it the run's exit code (<log name>.exit)
        db/             per-task ledgers (task-<i>.db), when tasks do not share one ledger
        cache/          JAX cache dirs (per-task: task-<i>; shared: shared)

sweep.json is read back as carefully as a spec is: a regular file of at most
SWEEP_FILE_MAX_BYTES (asked before it is opened: a FIFO would block), JSON of the shape
save() writes, its spec checked again and held to the task cap's ceiling (a sweep made
under a raised --max-tasks still opens; a hand-edited `repeats` of 10^8 does not).
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from ledger.errors import LedgerError
from ledger.sweep.spec import (
    MAX_TASKS_CEILING,
    SweepSpec,
    Task,
    from_dict,
    read_small_file,
    shown,
)

DEFAULT_ROOT = "sweeps"
# The spec, where rows go and each submission's task list: at the task cap's ceiling
# (10^5 tasks) a submission is about 1 MB of JSON, so this leaves room for resumes.
SWEEP_FILE_MAX_BYTES = 16 * 2**20
# A sweep id as new_id makes it: the spec's name (spec.NAME), a time and a token.
_SWEEP_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
# Where a sweep's tasks write: one ledger file each in db/ (merged afterwards with
# `ledger merge`), or the ledger named by LEDGER_DB in the task's environment (a
# server), or a given ledger file (local runs).
PER_TASK, FROM_ENV, LEDGER_FILE = "per-task", "env", "file"


@dataclass
class Sweep:
    dir: Path
    sweep_id: str
    spec: SweepSpec
    mode: str  # local | slurm
    db: dict  # {"kind": PER_TASK | FROM_ENV | LEDGER_FILE, "path": str | None, "merge_into": str}
    submissions: list[dict] = field(default_factory=list)
    slurm: dict = field(default_factory=dict)  # the sbatch options of the latest submission

    @cached_property
    def tasks(self) -> list[Task]:
        return self.spec.tasks()

    def task_db(self, index: int) -> str | None:
        """The --db of task `index` (None: LEDGER_DB from the environment)."""
        if self.db["kind"] == PER_TASK:
            return str(self.dir / "db" / f"task-{index}.db")
        return self.db.get("path")

    def cache_dir(self, index: int) -> str | None:
        policy = self.spec.cache
        if policy == "none":
            return None
        if policy == "per-task":
            return str(self.dir / "cache" / f"task-{index}")
        if policy == "shared":
            return str(self.dir / "cache" / "shared")
        return policy

    def log(self, index: int, job_id: str | None = None) -> Path:
        return self.dir / "logs" / (f"{job_id}_{index}.out" if job_id else f"local_{index}.out")

    def exit_file(self, index: int, job_id: str | None = None) -> Path:
        """Where a task run's exit code is left (the job script's trap, or run here)."""
        log = self.log(index, job_id)
        return log.with_name(log.name.removesuffix(".out") + ".exit")

    def merge_command(self) -> str | None:
        """The next step of a sweep whose tasks write their own ledger files."""
        if self.db["kind"] != PER_TASK:
            return None
        into = self.db.get("merge_into")
        return (f"ledger merge {shlex.quote(str(self.dir / 'db'))}/task-*.db"
                + (f" --db {shlex.quote(into)}" if into else ""))

    def save(self) -> None:
        data = {"sweep_id": self.sweep_id, "spec": self.spec.as_dict(), "mode": self.mode, "db": self.db,
                "slurm": self.slurm, "submissions": self.submissions}
        from ledger.files import atomic_write

        atomic_write(self.dir / "sweep.json", json.dumps(data, indent=1) + "\n")  # never half a file


def new_id(spec: SweepSpec) -> str:
    return f"{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def new(root: Path, spec: SweepSpec, mode: str, db: dict) -> Sweep:
    """A sweep not yet on disk: what it would be, to check (and show) before making it."""
    sweep_id = new_id(spec)
    return Sweep((root / sweep_id).resolve(), sweep_id, spec, mode, db)


def make(sweep: Sweep) -> Sweep:
    try:
        for sub in ("logs", "db", "cache"):
            (sweep.dir / sub).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise LedgerError(f"cannot make the sweep directory {sweep.dir}: {exc.strerror or exc}") from None
    sweep.save()
    return sweep


def create(root: Path, spec: SweepSpec, mode: str, db: dict) -> Sweep:
    return make(new(root, spec, mode, db))


def open_sweep(value: str, root: Path | None = None) -> Sweep:
    """A sweep by its directory, or by its id under `root` (./sweeps)."""
    candidates = [Path(value), (root or Path(DEFAULT_ROOT)) / value]
    # exists, not is_file: a sweep.json that is a FIFO or a directory is named as such below
    directory = next((c for c in candidates if (c / "sweep.json").exists()), None)
    if directory is None:
        raise LedgerError(f"no sweep {shown(value)}: give its directory, or its id under {root or DEFAULT_ROOT}/")
    path = directory / "sweep.json"
    raw = read_small_file(path, SWEEP_FILE_MAX_BYTES, "a sweep file")
    try:
        data = json.loads(raw.decode("utf-8"))
        sweep_id, spec = _id(data["sweep_id"]), _spec(data["spec"])
        return Sweep(directory.resolve(), sweep_id, spec, _mode(data["mode"]),
                     _where(data["db"]), _submissions(data.get("submissions", []), spec.task_count()),
                     _dict(data.get("slurm", {})))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        # ValueError covers UnicodeDecodeError and JSONDecodeError; RecursionError, JSON
        # nested deeper than the parser goes
        raise LedgerError(f"{path}: not a sweep file ({type(exc).__name__}: {exc})") from None
    except LedgerError as exc:
        raise LedgerError(f"{path}: not a sweep file ({exc})") from None


# sweep.json is read back as carefully as a spec: a field of the wrong shape is a
# TypeError (one line above), never a traceback later on.
def _text(value) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected text, got {type(value).__name__}")
    return value


def _line(value) -> str:
    """One line of text (a path: no line break, no NUL)."""
    if "\x00" in _text(value) or value.splitlines() != [value]:
        raise ValueError(f"{shown(value)}: expected one line of text")
    return value


def _id(value) -> str:
    if not _SWEEP_ID.fullmatch(_text(value)):
        raise ValueError(f"sweep_id {shown(value)}")
    return value


def _dict(value) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _mode(value) -> str:
    if value not in ("local", "slurm"):
        raise ValueError(f"mode {shown(value)}")
    return value


def _where(value) -> dict:
    if _dict(value).get("kind") not in (PER_TASK, FROM_ENV, LEDGER_FILE):
        raise ValueError(f"db kind {shown(value.get('kind'))}")
    for key in ("path", "merge_into"):
        if value.get(key) is not None:
            _line(value[key])
    return value


def _submissions(value, count: int) -> list[dict]:
    """Each a job id (digits) and the indices of the `count` tasks it ran."""
    if not isinstance(value, list):
        raise TypeError("submissions: expected a list")
    for s in value:
        job = _text(_dict(s)["job_id"])
        if not (job.isascii() and job.isdigit() and len(job) <= 20 and isinstance(s["tasks"], list)
                and all(type(t) is int and 0 <= t < count for t in s["tasks"])):
            raise ValueError(f"submission {shown(s)}")
    return value


def _spec(saved) -> SweepSpec:
    # a saved spec was checked when the sweep was made: its values are checked again,
    # its tasks are not (that would import every objective)
    fields = {k: v for k, v in _dict(saved).items() if k != "name" and v is not None}
    return from_dict(fields, _text(saved["name"]), check_tasks=False, cap=MAX_TASKS_CEILING)
