"""A Ctrl-C in the moment the ledger forks: its forked workers (ledger/workers.py) and
the recorder's ingester (ledger/recorder/ingester.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import query, run_cli

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork and SIGINT are POSIX")

# A SIGINT sent by an at-fork hook lands at the worst moment there is: in the child
# before it handles SIGINT itself (after_in_child), or in the command as it forks (after_in_parent).
HOOK = "import os, signal\nos.register_at_fork({when}=lambda: os.kill(os.getpid(), signal.SIGINT))\n"
POOL = HOOK + """
import multiprocessing
from ledger.workers import forked_pool
try:
    with forked_pool(1) as pool:
        print(pool.submit(pow, 2, 10).result())
except KeyboardInterrupt:
    print("interrupted", multiprocessing.active_children())
"""
RECORD = HOOK + """
import sys
from ledger.recorder.argv import run
run(["--db", sys.argv[1], "--", sys.executable, "-c", "print('ran')"])
"""


def _run(program: str, when: str, *args) -> tuple[int, str, str]:
    run = subprocess.run([sys.executable, "-c", program.format(when=when), *map(str, args)],
                         capture_output=True, text=True, timeout=60, check=False)
    return run.returncode, run.stdout, run.stderr


def test_a_ctrl_c_in_a_worker_before_its_initializer_is_dropped_silently():
    assert _run(POOL, "after_in_child") == (0, "1024\n", "")


def test_a_ctrl_c_as_the_workers_fork_is_the_command_s_and_leaves_no_worker():
    assert _run(POOL, "after_in_parent") == (0, "interrupted []\n", "")


def _spool_emptied(db: Path) -> bool:
    """Whether the run's spool dir is gone within 10 s: its ingester drained it and ended."""
    deadline = time.monotonic() + 10
    while any(Path(f"{db}.spool").glob("*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(Path(f"{db}.spool").glob("*"))


@pytest.mark.slow  # the ingester opens the ledger; the program runs in a process of its own
def test_a_ctrl_c_in_the_ingester_s_forks_is_dropped_and_the_command_runs_recorded(tmp_path):
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    # "ran": the ingester answered (else record says it cannot start); no traceback from either fork
    assert _run(RECORD, "after_in_child", db) == (0, "ran\n", "")
    assert _spool_emptied(db)


@pytest.mark.slow
def test_a_ctrl_c_as_record_forks_its_ingester_ends_it_at_once_recording_nothing(tmp_path):
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    assert _run(RECORD, "after_in_parent", db) == (130, "", "")  # the command never ran
    assert _spool_emptied(db)
    assert query(db, "SELECT count(*) FROM compile_records") == [(0,)]
