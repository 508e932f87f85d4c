"""What a sweep costs per task beyond the probe itself: from submission to the task's
committed rows, less the probe's own measured time (trace + compile + first call +
steady calls of its rows).

N one-transform `toy` tasks, one at a time (--max-parallel 1, -j 1), so the time
between submission and the last commit is N tasks' work end to end:
  SLURM:  `ledger sweep submit` -> sbatch -> slurmd -> `ledger sweep task` -> rows
  here:   `ledger sweep run` -> one `ledger sweep task` process per task -> rows (the floor)
The per-task overhead of each is (last commit - start - sum of probe times) / N; the
ratio is SLURM's over here's. Needs a SLURM (ci/slurm.sh start); without it only the
local side runs.
Run: .venv/bin/python bench/bench_sweep.py [N]
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import BIN

SPEC = """\
objectives = ["toy"]
transforms = ["jit"]
steady_calls = 1
cache = "none"
repeats = {n}
"""
PROBE_TIME = "SELECT coalesce(sum(trace_s + compile_s + first_s + steady_s), 0) FROM compile_records"


def _probe_seconds(dbs: list[Path]) -> float:
    total = 0.0
    for db in dbs:
        con = sqlite3.connect(db)
        total += con.execute(PROBE_TIME).fetchone()[0]
        con.close()
    return total


def _last_commit(dbs: list[Path]) -> float:
    return max(max(p.stat().st_mtime for p in db.parent.glob(db.name + "*")) for db in dbs)


def local(work: Path, n: int) -> tuple[float, float]:
    """(wall from start to last commit, probe seconds) for `ledger sweep run`."""
    db = work / "here.db"
    start = time.time()
    subprocess.run([BIN / "ledger", "sweep", "run", work / "spec.toml", "--db", db, "--dir", work / "sweeps"],
                   check=True, stdout=subprocess.DEVNULL, cwd=work)
    return _last_commit([db]) - start, _probe_seconds([db])


def on_slurm(work: Path, n: int) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if k != "LEDGER_DB"}
    start = time.time()
    subprocess.run([BIN / "ledger", "sweep", "submit", work / "spec.toml", "--max-parallel", "1",
                    "--dir", work / "slurm"], check=True, stdout=subprocess.DEVNULL, cwd=work, env=env)
    while subprocess.run(["squeue", "-h"], capture_output=True, text=True, check=False).stdout.strip():
        time.sleep(0.2)
    (sweep,) = (work / "slurm").iterdir()
    dbs = sorted((sweep / "db").glob("task-*.db"))
    assert len(dbs) == n, f"{len(dbs)} of {n} tasks wrote a ledger"
    return _last_commit(dbs) - start, _probe_seconds(dbs)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 8
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "spec.toml").write_text(SPEC.format(n=n))
        wall, probe = local(work, n)
        floor = (wall - probe) / n
        print(f"{n} one-transform toy tasks, one at a time")
        print(f"here (ledger sweep run): {wall:.2f}s to the last commit, probes {probe:.2f}s;"
              f" overhead {floor:.2f}s per task (floor)")
        if shutil.which("sbatch") is None:
            print("SLURM: no sbatch here (ci/slurm.sh start), skipped")
            return
        wall, probe = on_slurm(work, n)
        per_task = (wall - probe) / n
        print(f"SLURM (ledger sweep submit): {wall:.2f}s from submission to the last commit, probes {probe:.2f}s;"
              f" overhead {per_task:.2f}s per task; ratio {per_task / floor:.2f}x the local run")


if __name__ == "__main__":
    main()
