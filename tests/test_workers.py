"""The forked workers (ledger/workers.py): a Ctrl-C in the moment a worker forks."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork and SIGINT are POSIX")

# A SIGINT sent by an at-fork hook lands at the worst moment there is: in the child
# before its initializer ran (after_in_child), or in the command as it forks (after_in_parent).
PROGRAM = """
import multiprocessing, os, signal, sys
from ledger.workers import forked_pool
os.register_at_fork({when}=lambda: os.kill(os.getpid(), signal.SIGINT))
try:
    with forked_pool(1) as pool:
        print(pool.submit(pow, 2, 10).result())
except KeyboardInterrupt:
    print("interrupted", multiprocessing.active_children())
"""


def _run(when: str) -> tuple[int, str, str]:
    run = subprocess.run([sys.executable, "-c", PROGRAM.format(when=when)],
                         capture_output=True, text=True, timeout=60, check=False)
    return run.returncode, run.stdout, run.stderr


def test_a_ctrl_c_in_a_worker_before_its_initializer_is_dropped_silently():
    assert _run("after_in_child") == (0, "1024\n", "")


def test_a_ctrl_c_as_the_workers_fork_is_the_command_s_and_leaves_no_worker():
    assert _run("after_in_parent") == (0, "interrupted []\n", "")
