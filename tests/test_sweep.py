"""`ledger sweep`: the spec and plan, a sweep run here, and the same sweep as a job
array on a real single-node SLURM (ci/slurm.sh starts one; without it those cases
skip, saying why)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import query, run_cli

LEDGER = Path(sys.executable).with_name("ledger")
GRID = """\
objectives = ["toy"]
transforms = ["jit", "grad"]
steady_calls = 1

[grid]
dataset_class = ["imaging", "interferometer"]
n_batch = [4, 8]
"""
# A user objective that fails for the cell named in $FAIL_CELL, as a real model fails
# on one configuration: the task runs, its transforms fail, the rows say why.
FLAKY = """\
import os
import numpy as np


def build(cell):
    if cell["dataset_class"] == os.environ.get("FAIL_CELL"):
        raise RuntimeError(f"no data for {cell['dataset_class']}")
    import jax.numpy as jnp

    x0 = np.linspace(0.0, 1.0, 4, dtype=np.float32)
    return (lambda x: jnp.sum(x ** 2)), x0
"""
# Under LEDGER_REQUIRE_SLURM (.ci/run) a missing SLURM fails these instead.
_no_slurm = not os.environ.get("LEDGER_TEST_SLURM") and not os.environ.get("LEDGER_REQUIRE_SLURM")
needs_slurm = pytest.mark.skipif(_no_slurm, reason="no SLURM here: "
                                 'eval "$(sudo bash ci/slurm.sh start)" starts a single-node one')


def _spec(tmp_path, text=GRID, name="grid.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _sweep_dir(tmp_path) -> Path:
    (only,) = (tmp_path / "sweeps").iterdir()
    return only


def _states(output: str) -> list[tuple[str, str]]:
    """(task, state) of each line of a status table."""
    states = ("done", "failed", "queued", "running", "missing")
    return [(line.split()[0], next(w for w in line.split() if w in states)) for line in output.splitlines()[3:]]


def test_plan_prints_the_tasks_and_the_size(tmp_path):
    result = run_cli("sweep", "plan", _spec(tmp_path))
    assert result.exit_code == 0
    assert result.output == (
        "task  objective  cell                                    repeat\n"
        "----  ---------  --------------------------------------  ------\n"
        "   0  toy        dataset_class=imaging n_batch=4              0\n"
        "   1  toy        dataset_class=imaging n_batch=8              0\n"
        "   2  toy        dataset_class=interferometer n_batch=4       0\n"
        "   3  toy        dataset_class=interferometer n_batch=8       0\n"
        "4 tasks x 2 rows (jit, grad) = 8 rows\n")


@pytest.mark.parametrize("text, message", [
    ("objectives = ['toy']\ncolour = 'red'\n", "unknown sweep setting 'colour'"),
    ("transforms = ['jitt']\n", "unknown transform 'jitt'"),
    ("objectives = ['nope.module:build']\n", "task 0 (nope.module:build): "),
    ("[grid]\nn_batch = [6]\nbatch_size = [4]\n", "task 0 (toy n_batch=6 batch_size=4): "),
    ("repeats = 0\n", "repeats = 0: a whole number, at least 1"),
    ("cache = 'relative/dir'\n", "cache = 'relative/dir': use one of per-task, shared, none or an absolute path"),
    ("objectives = [\n", "not a sweep spec (TOML)"),
    ("grid = 3\n", "grid = 3: expected a [grid] table"),
    ("[grid]\nmixed_precision = ['yes']\n", "grid.mixed_precision = 'yes': expected bool values"),
    ("[grid]\nn_batch = ['x']\n", "grid.n_batch = 'x': expected int values"),
    ("objectives = [3]\n", "objectives = 3: expected str values"),
    ("cache = ['none']\n", "cache = ['none']: expected one value, not a list"),
])
def test_a_bad_spec_is_one_line_and_makes_nothing(tmp_path, text, message):
    for verb in ("plan", "run", "submit"):
        result = run_cli("sweep", verb, _spec(tmp_path, text))
        assert result.exit_code == 1 and result.output.count("\n") == 1 and message in result.output, result.output
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "ledger.db").exists()


def test_a_sweep_run_here_lands_every_row_and_status_says_complete(tmp_path, any_db):
    db = any_db
    result = run_cli("sweep", "run", _spec(tmp_path), "-j", "2", "--db", db)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith("4 of 4 tasks ok; ")
    sweep = _sweep_dir(tmp_path)
    rows = query(db, "SELECT sweep_id, sweep_task, dataset_class, n_batch, transform, status FROM compile_records"
                     " ORDER BY sweep_task, id")
    assert [(r[1], r[2], r[3], r[4], r[5]) for r in rows] == [
        (0, "imaging", 4, "jit", "ok"), (0, "imaging", 4, "grad", "ok"),
        (1, "imaging", 8, "jit", "ok"), (1, "imaging", 8, "grad", "ok"),
        (2, "interferometer", 4, "jit", "ok"), (2, "interferometer", 4, "grad", "ok"),
        (3, "interferometer", 8, "jit", "ok"), (3, "interferometer", 8, "grad", "ok")]
    assert {r[0] for r in rows} == {sweep.name}
    status = run_cli("sweep", "status", sweep, "--db", db)
    assert status.output.splitlines()[0] == f"sweep {sweep.name} (4 tasks, run here): complete, 4 done"
    assert _states(status.output) == [(str(i), "done") for i in range(4)]


def test_a_failing_cell_is_reported_and_resume_reruns_only_it_here(tmp_path, db, monkeypatch):
    (tmp_path / "flaky.py").write_text(FLAKY)
    spec = _spec(tmp_path, GRID.replace('["toy"]', '["flaky:build"]'))
    monkeypatch.setenv("FAIL_CELL", "interferometer")
    first = run_cli("sweep", "run", spec, "--db", db)
    assert first.exit_code == 1 and first.output.endswith("error: 2 task(s) failed: 2, 3\n")
    sweep = _sweep_dir(tmp_path)
    status = run_cli("sweep", "status", sweep)
    assert status.output.splitlines()[0] == f"sweep {sweep.name} (4 tasks, run here): 2 done, 2 failed"
    failed = [ln for ln in status.output.splitlines() if " failed " in ln]
    assert len(failed) == 2 and all(ln.endswith("jit: RuntimeError: no data for interferometer") for ln in failed)
    monkeypatch.delenv("FAIL_CELL")
    again = run_cli("sweep", "resume", sweep)
    assert again.exit_code == 0 and again.output.startswith(f"sweep {sweep.name}: running tasks 2, 3 again\n")
    assert run_cli("sweep", "status", sweep).output.splitlines()[0].endswith("complete, 4 done")
    # the failed attempt's rows stay (the ledger keeps what happened); tasks 0 and 1 ran once
    assert query(db, "SELECT sweep_task, count(*) FROM compile_records GROUP BY 1 ORDER BY 1") == [
        (0, 2), (1, 2), (2, 4), (3, 4)]


# -- on a real SLURM ----------------------------------------------------------------------

def _wait_for_queue(timeout=300):
    deadline = time.monotonic() + timeout
    while subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline, "the job array did not finish"
        time.sleep(1)


def _submit(spec, *extra) -> subprocess.CompletedProcess:
    partition = os.environ.get("LEDGER_TEST_SLURM_PARTITION", "debug")
    return subprocess.run([LEDGER, "sweep", "submit", spec, "--partition", partition, *extra],
                          capture_output=True, text=True)


@needs_slurm
@pytest.mark.slurm
def test_a_2x2_sweep_as_a_job_array_lands_every_row_like_a_run_here(tmp_path, monkeypatch):
    assert shutil.which("sbatch"), "LEDGER_REQUIRE_SLURM is set but there is no sbatch"
    monkeypatch.delenv("LEDGER_DB", raising=False)
    submitted = _submit(_spec(tmp_path), "--max-parallel", "2")
    assert submitted.returncode == 0, submitted.stderr
    sweep = _sweep_dir(tmp_path)
    job = submitted.stdout.splitlines()[0].rsplit(" ", 1)[1]
    assert (sweep / "sweep.sbatch").read_text().count("#SBATCH --array=0-3%2") == 1
    _wait_for_queue()
    status = subprocess.run([LEDGER, "sweep", "status", sweep], capture_output=True, text=True)
    assert status.stdout.splitlines()[0] == f"sweep {sweep.name} (4 tasks, SLURM job {job}): complete, 4 done"
    merged = tmp_path / "merged.db"
    assert run_cli("merge", *sorted((sweep / "db").glob("task-*.db")), "--db", merged).exit_code == 0
    cells = "SELECT sweep_task, dataset_class, n_batch, transform, status FROM compile_records ORDER BY sweep_task, transform"
    slurm_rows = query(merged, cells)
    assert query(merged, "SELECT DISTINCT slurm_array_job_id FROM compile_records") == [(job,)]
    assert sorted(r[0] for r in query(merged, "SELECT DISTINCT slurm_array_task_id FROM compile_records")) == [0, 1, 2, 3]
    # the same spec run here gives the same cells
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert run_cli("sweep", "run", _spec(here), "--db", here / "here.db").exit_code == 0
    assert query(here / "here.db", cells) == slurm_rows and len(slurm_rows) == 8


@needs_slurm
@pytest.mark.slurm
def test_a_failing_task_in_the_array_is_reported_and_resume_resubmits_only_it(tmp_path, monkeypatch):
    monkeypatch.delenv("LEDGER_DB", raising=False)
    (tmp_path / "flaky.py").write_text(FLAKY)
    spec = _spec(tmp_path, GRID.replace('["toy"]', '["flaky:build"]').replace('n_batch = [4, 8]', 'n_batch = [4]'))
    monkeypatch.setenv("FAIL_CELL", "interferometer")  # sbatch hands the environment on
    assert _submit(spec).returncode == 0
    sweep = _sweep_dir(tmp_path)
    _wait_for_queue()
    status = subprocess.run([LEDGER, "sweep", "status", sweep], capture_output=True, text=True).stdout
    assert status.splitlines()[0].endswith("1 done, 1 failed")
    assert status.splitlines()[-1] == "   1  flaky:build interferometer n_batch=4  failed     2  jit: RuntimeError: no data for interferometer"
    monkeypatch.delenv("FAIL_CELL")
    resumed = subprocess.run([LEDGER, "sweep", "resume", sweep], capture_output=True, text=True)
    assert resumed.returncode == 0 and " tasks 1 resubmitted as SLURM job array " in resumed.stdout
    _wait_for_queue()
    after = subprocess.run([LEDGER, "sweep", "status", sweep], capture_output=True, text=True).stdout
    assert after.splitlines()[0].endswith("complete, 2 done")
    # task 0 ran once: its ledger holds one attempt
    assert query(sweep / "db" / "task-0.db", "SELECT count(DISTINCT run_id) FROM compile_records") == [(1,)]
    assert query(sweep / "db" / "task-1.db", "SELECT count(DISTINCT run_id) FROM compile_records") == [(2,)]


def test_submit_without_slurm_says_so_and_leaves_no_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm-here"))
    result = run_cli("sweep", "submit", _spec(tmp_path))
    assert (result.exit_code, result.output) == (
        1, "error: sbatch not found: this machine has no SLURM client (ledger sweep run runs a sweep here)\n")
    assert not (tmp_path / "sweeps").exists()
    # the tasks' ledger is a server: its URL, password and all, stays in the environment
    monkeypatch.setenv("LEDGER_DB", "postgresql+psycopg://ledger:s3cret-pw@db.example:5432/ledger")
    dry = run_cli("sweep", "submit", _spec(tmp_path), "--dry-run", "--partition", "debug", "--time", "00:10:00")
    assert dry.exit_code == 0 and not (tmp_path / "sweeps").exists()
    lines = dry.output.splitlines()
    assert lines[0] == "#!/bin/bash" and "#SBATCH --array=0-3" in lines and "#SBATCH --time=00:10:00" in lines
    assert re.fullmatch(rf'exec \S+ledger sweep task {re.escape(str(tmp_path))}/sweeps/grid-\d{{8}}-\d{{6}}-[0-9a-f]{{4}}'
                        r' "\$SLURM_ARRAY_TASK_ID"', lines[-1]), lines[-1]
    assert "s3cret" not in dry.output and "db.example" not in dry.output


# -- a task's own ledger file, as `sweep status` reads it ----------------------------------
def _per_task_sweep(tmp_path):
    """A sweep whose tasks write db/task-<i>.db, task 0's file holding its two rows
    (as the nodes leave them, before `ledger merge`)."""
    from ledger.sweep import spec as sweep_spec
    from ledger.sweep import store

    from .conftest import compile_records_of_corpus, write_json

    sweep = store.create(tmp_path / "sweeps", sweep_spec.load(_spec(tmp_path)), "slurm",
                         {"kind": store.PER_TASK, "path": None})
    (rec,) = [r for r in compile_records_of_corpus() if r["tag"] == "cache-warm"]
    rows = [dict(rec, transform=t, sweep_id=sweep.sweep_id, sweep_task=0) for t in ("jit", "grad")]
    assert run_cli("import", write_json(tmp_path / "t0.json", rows), "--db", sweep.task_db(0)).exit_code == 0
    return sweep


def test_status_waits_for_a_task_writing_its_file(tmp_path):
    """The read waits the busy timeout, as every ledger read does, not sqlite3's 5 s:
    a task's write that holds its file longer leaves the task done, not missing."""
    import sqlite3
    import threading

    sweep = _per_task_sweep(tmp_path)
    path = sweep.task_db(0)
    con = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    con.execute("PRAGMA journal_mode = DELETE")  # a reader waits for a writer only outside WAL
    con.execute("BEGIN EXCLUSIVE")
    writer = threading.Timer(6.5, lambda: (con.execute("COMMIT"), con.close()))
    writer.start()
    try:
        status = run_cli("sweep", "status", sweep.dir)
    finally:
        writer.join()
    assert _states(status.output)[0] == ("0", "done"), status.output


def test_status_refuses_a_task_file_at_a_revision_it_does_not_know(tmp_path):
    import sqlite3

    sweep = _per_task_sweep(tmp_path)
    con = sqlite3.connect(sweep.task_db(0))
    with con:
        con.execute("UPDATE alembic_version SET version_num = '0099'")
    con.close()
    status = run_cli("sweep", "status", sweep.dir)
    assert (status.exit_code, status.output) == (1, (
        f"error: {sweep.task_db(0)} is at revision 0099, which this ledger does not know (its newest is 0007): "
        "it was written by a newer ledger; upgrade the ledger\n"))
