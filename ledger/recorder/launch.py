"""`ledger record -- COMMAND`: the command runs as itself, with the recorder on its path.

The ledger execs the command (same process, argv, stdin, stdout, stderr, working
directory and signals), so its exit code or its death by a signal is the command's own
with nothing in between to get wrong. What it adds to the environment is all the
recording needs, inherited by every process the command starts:

- PYTHONPATH gains, first, the directory of the recorder's sitecustomize
  (ledger/recorder/site), which leaves sys.path again at startup;
- LEDGER_RECORD: the run (ledger/recorder/config.py); LEDGER_RECORD_PATH: where this
  ledger's code is, for a program whose Python lacks it.

Rows are written by the recorded processes themselves, each compile as it finishes,
and a SQLite ledger that does not exist yet is made at the first compile: a command
that never imports jax leaves nothing behind.
"""

from __future__ import annotations

import os
import shlex
import shutil
import uuid
from pathlib import Path

from ledger.errors import LedgerError
from ledger.recorder.config import ENV, ENV_PATH, RecordConfig

SITE_DIR = Path(__file__).resolve().parent / "site"
LEDGER_ROOT = Path(__file__).resolve().parents[2]  # the directory that holds ledger/


def prepare(command: list[str], db: str | None, tag: str | None, cell: dict,
            environ: dict | None = None) -> tuple[str, dict]:
    """(executable, environment) for the recorded command; refuses, in one line, a
    command that is not there and a ledger this one cannot write."""
    from ledger.storage import revisions as rv
    from ledger.storage.url import resolve

    if not command:
        raise LedgerError("no command to record: ledger record [OPTIONS] -- COMMAND [ARGS...]")
    executable = shutil.which(command[0])
    if executable is None:
        raise LedgerError(f"command not found: {command[0]}")
    if not (SITE_DIR / "sitecustomize.py").is_file():
        raise LedgerError(f"this ledger is installed without its recorder ({SITE_DIR} is missing)")
    target = resolve(db)
    if target.value.startswith("sqlite") and target.path is None:
        raise LedgerError("an in-memory SQLite database vanishes with the command: give a file path")
    if target.path is not None:
        # refused now, not at the program's first compile (a newer revision, not a ledger)
        try:
            rv.gate(target.display, *rv.sqlite_status(target.path), "write")
        except LedgerError as err:
            if "locked" not in str(err):
                raise  # a ledger held by another writer is no refusal: the recorder waits for it
    resolved = str(target.path.resolve()) if target.path is not None else target.value
    config = RecordConfig(db=resolved, run_id=uuid.uuid4().hex, tag=tag, command=shlex.join(command), cell=cell)
    env = dict(os.environ if environ is None else environ)
    env[ENV] = config.to_env()
    env[ENV_PATH] = str(LEDGER_ROOT)
    old = env.get("PYTHONPATH")
    env["PYTHONPATH"] = str(SITE_DIR) + (os.pathsep + old if old else "")
    return executable, env


def exec_recorded(command: list[str], db: str | None, tag: str | None, cell: dict) -> None:
    """Become the command, recorded. Does not return."""
    executable, env = prepare(command, db, tag, cell)
    os.execve(executable, command, env)
