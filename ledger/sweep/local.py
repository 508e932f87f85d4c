"""A sweep run here: one `ledger sweep task` process per task, one at a time by
default (compiles contend for the same cores; a second at once mostly slows both),
`jobs` at once when asked."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ledger.sweep.slurm import ledger_command
from ledger.sweep.store import Sweep


def run_task(sweep: Sweep, index: int, env: dict | None = None) -> int:
    """Run one task to its log; its exit code. `env`: the task's environment (a
    server's URL in LEDGER_DB travels there, never into a file)."""
    with open(sweep.log(index), "w") as log:
        code = subprocess.run([ledger_command(), "sweep", "task", str(sweep.dir), str(index)],
                              check=False, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    sweep.exit_file(index).write_text(f"{code}\n")  # as a SLURM task's script leaves it
    return code


def run_tasks(sweep: Sweep, indices: list[int], jobs: int = 1,
              on_done: Callable[[int, int], None] | None = None, env: dict | None = None) -> dict[int, int]:
    """{task index: exit code}, calling on_done(index, code) as each finishes."""
    codes: dict[int, int] = {}

    def one(index: int) -> None:
        codes[index] = run_task(sweep, index, env)
        if on_done:
            on_done(index, codes[index])

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, indices))
    return codes
