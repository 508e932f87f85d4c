"""`ledger sweep`: the spec and plan, a sweep run here, and the same sweep as a job
array on a real single-node SLURM (ci/slurm.sh starts one; without it the `slurm` cases
skip, saying why)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.storage.revisions import HEAD

from .conftest import query, run_cli
from .helpers import GRID, ONE_TASK, made_sweep, rewrite_sweep_file, spec_file

LEDGER = Path(sys.executable).with_name("ledger")
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
def _sweep_dir(tmp_path) -> Path:
    (only,) = (tmp_path / "sweeps").iterdir()
    return only


def _states(output: str) -> list[tuple[str, str]]:
    """(task, state) of each line of a status table."""
    states = ("done", "failed", "queued", "running", "missing")
    return [(line.split()[0], next(w for w in line.split() if w in states)) for line in output.splitlines()[3:]
            if not line.startswith("next: ")]


def test_plan_prints_the_tasks_and_the_size(tmp_path):
    result = run_cli("sweep", "plan", spec_file(tmp_path))
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
    ('setup = ["module load cuda\\ntouch PWNED"]\n',  # a TOML "\n" is a line break
     "setup line 1 'module load cuda\\ntouch PWNED': holds a line break or NUL"),
    ('setup = ["ok", "a\\u0000b"]\n', "setup line 2 'a\\x00b': holds a line break or NUL"),
    ("setup = ['module load \\']\n", "ends in a backslash, which would join it to the next line"),
    (f"setup = ['{'x' * 100_000}']\n", f"setup line 1 '{'x' * 59}...: 100000 characters, at most 4096"),
    ("setup = [3]\n", "setup = 3: expected str values"),
    (f"[grid]\nn_batch = ['{'x' * 100_000}']\n", f"grid.n_batch = '{'x' * 59}...: expected int values"),
])
def test_a_bad_spec_is_one_line_and_makes_nothing(tmp_path, text, message):
    for verb in ("plan", "run", "submit"):
        result = run_cli("sweep", verb, spec_file(tmp_path, text))
        assert result.exit_code == 1 and result.output.count("\n") == 1 and message in result.output, result.output
        assert len(result.output) < 400
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "ledger.db").exists()


@pytest.mark.jax
def test_a_sweep_run_here_lands_every_row_and_status_says_complete(tmp_path, any_db):
    db = any_db
    result = run_cli("sweep", "run", spec_file(tmp_path), "-j", "2", "--db", db)
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
    assert status.exit_code == 0
    assert status.output.splitlines()[0] == f"sweep {sweep.name} (4 tasks, run here): complete, 4 done"
    assert _states(status.output) == [(str(i), "done") for i in range(4)]
    assert "next:" not in status.output  # the rows are in the ledger already


@pytest.mark.jax
def test_a_failing_cell_is_reported_and_resume_reruns_only_it_here(tmp_path, db, monkeypatch):
    (tmp_path / "flaky.py").write_text(FLAKY)
    spec = spec_file(tmp_path, GRID.replace('["toy"]', '["flaky:build"]'))
    monkeypatch.setenv("FAIL_CELL", "interferometer")
    first = run_cli("sweep", "run", spec, "--db", db)
    assert first.exit_code == 1 and first.output.endswith("error: 2 task(s) failed: 2, 3\n")
    sweep = _sweep_dir(tmp_path)
    status = run_cli("sweep", "status", sweep)
    assert status.exit_code == 1  # a failed task fails the status
    assert status.output.splitlines()[0] == f"sweep {sweep.name} (4 tasks, run here): 2 done, 2 failed"
    failed = [ln for ln in status.output.splitlines() if " failed " in ln]
    # the builder raised: its failure, not the first transform's
    assert len(failed) == 2 and all(ln.endswith("  builder: RuntimeError: no data for interferometer") for ln in failed)
    assert status.output.splitlines()[-1] == f"next: ledger sweep resume {sweep}"
    as_json = run_cli("sweep", "status", sweep, "--json")
    assert as_json.exit_code == 1
    report = json.loads(as_json.output)
    assert (report["counts"], report["complete"], report["next"]) == (
        {"done": 2, "failed": 2, "running": 0, "queued": 0, "missing": 0}, False, f"ledger sweep resume {sweep}")
    assert report["tasks"][2] == {"task": 2, "objective": "flaky:build",
                                  "cell": {"dataset_class": "interferometer", "n_batch": 4}, "repeat": 0,
                                  "state": "failed", "reason": None, "rows": 2,
                                  "detail": "builder: RuntimeError: no data for interferometer", "job_id": None,
                                  "exit_code": 1}
    monkeypatch.delenv("FAIL_CELL")
    again = run_cli("sweep", "resume", sweep)
    assert again.exit_code == 0 and again.output.startswith(f"sweep {sweep.name}: running tasks 2, 3 again\n")
    assert run_cli("sweep", "status", sweep).output.splitlines()[0].endswith("complete, 4 done")
    # the failed attempt's rows stay (the ledger keeps what happened); tasks 0 and 1 ran once
    assert query(db, "SELECT sweep_task, count(*) FROM compile_records GROUP BY 1 ORDER BY 1") == [
        (0, 2), (1, 2), (2, 4), (3, 4)]


def test_an_explicit_db_beats_ledger_db_for_a_sweep_run_here(tmp_path, pg_db, monkeypatch):
    """e1e073e's fix, held: --db names where the tasks write, whatever LEDGER_DB says."""
    monkeypatch.setenv("LEDGER_DB", str(pg_db))
    assert run_cli("sweep", "run", spec_file(tmp_path, ONE_TASK), "--db", tmp_path / "here.db").exit_code == 0
    assert query(tmp_path / "here.db", "SELECT sweep_task, transform FROM compile_records ORDER BY id") == [
        (0, "jit"), (0, "grad")]
    assert query(pg_db, "SELECT count(*) FROM pg_tables WHERE tablename = 'compile_records'") == [(0,)]
    # and the other way round: LEDGER_DB a file, --db the server
    monkeypatch.setenv("LEDGER_DB", str(tmp_path / "env.db"))
    assert run_cli("sweep", "run", spec_file(tmp_path, ONE_TASK), "--db", pg_db, "--dir", tmp_path / "s2").exit_code == 0
    assert query(pg_db, "SELECT sweep_task, transform FROM compile_records ORDER BY id") == [(0, "jit"), (0, "grad")]
    assert not (tmp_path / "env.db").exists()


# -- the job script: no value adds a line -------------------------------------------------

def _dry_run(spec, *options):
    return run_cli("sweep", "submit", spec, "--dry-run", *options)


def _script_lines(output: str, sweep_dir: str, extra=(), setup=()) -> list[str]:
    """The lines a dry run must print: the sweep's own, plus `extra` #SBATCH lines."""
    setup_lines = ["# the spec's setup lines, as written; one that fails ends the task with its status"] + [
        x for line in setup
        for x in (line, 'LEDGER_SETUP_STATUS=$?; [ "$LEDGER_SETUP_STATUS" -eq 0 ] || exit "$LEDGER_SETUP_STATUS"')]
    return ["#!/bin/bash",
            f"# ledger sweep {Path(sweep_dir).name}: one array task per task of sweep.json.",
            "# No password here: a task writes to its own file in db/, or to the ledger that",
            "# LEDGER_DB names in the environment sbatch hands on from the submitting shell.",
            *extra,
            "#SBATCH --job-name=ledger-grid",
            "#SBATCH --array=0-3",
            f"#SBATCH --output={sweep_dir}/logs/%A_%a.out",
            "# the task's exit code beside its log, for `ledger sweep status` (no accounting needed)",
            f"LEDGER_SWEEP_LOGS={sweep_dir}/logs",
            """trap 'echo "$?" >"$LEDGER_SWEEP_LOGS/${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}.exit"' EXIT""",
            *(setup_lines if setup else []),
            f'{LEDGER} sweep task {sweep_dir} "$SLURM_ARRAY_TASK_ID"']


def _bash_n(script: str) -> None:
    checked = subprocess.run(["bash", "-n"], input=script, check=False, capture_output=True, text=True)
    assert (checked.returncode, checked.stderr) == (0, ""), checked.stderr


def _sweep_dir_of(script: str) -> str:
    return re.search(r"^#SBATCH --output=(\S+)/logs/%A_%a\.out$", script, re.MULTILINE).group(1)


def test_the_script_of_every_option_is_its_lines_exactly(tmp_path):
    setup = ["module load cuda/12.4 # the node's", "source ~/venv/bin/activate", "export XLA_FLAGS='--a=1 --b'"]
    spec = spec_file(tmp_path, GRID.replace("[grid]", f"setup = {json.dumps(setup)}\n\n[grid]"))
    dry = _dry_run(spec, "--partition", "gpu-a100", "--time", "1-00:30:00", "--cpus-per-task", "8", "--mem", "16G",
                   "--gpus", "a100:1", "--account", "proj_42", "--qos", "high", "--constraint", "a100&(ib|roce)",
                   "--max-parallel", "2", "--sbatch-arg=--exclusive", "--sbatch-arg", "--nodelist=node[01-04]")
    assert dry.exit_code == 0, dry.output
    _bash_n(dry.output)
    sweep_dir = _sweep_dir_of(dry.output)
    assert re.fullmatch(rf"{re.escape(str(tmp_path))}/sweeps/grid-\d{{8}}-\d{{6}}-[0-9a-f]{{4}}", sweep_dir)
    expected = _script_lines(dry.output, sweep_dir, setup=setup, extra=[
        "#SBATCH --partition=gpu-a100", "#SBATCH --time=1-00:30:00", "#SBATCH --cpus-per-task=8",
        "#SBATCH --mem=16G", "#SBATCH --gpus=a100:1", "#SBATCH --account=proj_42", "#SBATCH --qos=high",
        "#SBATCH --constraint=a100&(ib|roce)", "#SBATCH --exclusive", "#SBATCH --nodelist=node[01-04]"])
    assert dry.output.splitlines() == [ln.replace("--array=0-3", "--array=0-3%2") for ln in expected]
    assert not (tmp_path / "sweeps").exists()


HOSTILE = ["evil\ntouch PWNED\n#", "it's", 'a"b', "a b", "a\\b", "a\rb", "a#b", "$(touch PWNED)", "x" * 100_000]


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--partition", "--time", "--mem", "--gpus", "--account", "--qos", "--constraint",
                                    "--sbatch-arg"])
def test_a_hostile_option_value_is_refused_in_one_line(tmp_path, option):
    spec = spec_file(tmp_path)
    for value in HOSTILE:
        dry = _dry_run(spec, option, value)
        assert dry.exit_code == 1 and dry.output.count("\n") == 1 and len(dry.output) < 400, dry.output
        assert dry.output.startswith(f"error: {option} ")
    for value in ("--array=7", "--arr=7", "-a7", "--output=/tmp/x", "--error=x", "--wrap=id", "-J", "exclusive"):
        dry = _dry_run(spec, "--sbatch-arg", value)
        assert dry.exit_code == 1 and dry.output.startswith(f"error: --sbatch-arg {value!r}: "), dry.output
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("option", ["--cpus-per-task", "--max-parallel"])
def test_a_whole_number_option_takes_only_a_sane_whole_number(tmp_path, option):
    for value in ("9" * 100_000, "100001", "1\n2", "0"):
        dry = _dry_run(spec_file(tmp_path), option, value)
        assert dry.exit_code == 2 and "#!/bin/bash" not in dry.output
    assert not (tmp_path / "sweeps").exists()


@pytest.mark.parametrize("name", ["evil\ntouch PWNED\n#", "it's", "a b", "-rf", ".hidden", "x" * 200, "caf\u00e9"])
def test_a_spec_whose_file_name_could_not_be_a_job_name_is_refused(tmp_path, name):
    spec = spec_file(tmp_path, name=f"{name}.toml")
    for verb in ("plan", "run", "submit"):
        result = run_cli("sweep", verb, spec, *(["--dry-run"] if verb == "submit" else []))
        assert result.exit_code == 1 and result.output.count("\n") == 1 and len(result.output) < 400, result.output
        assert result.output.startswith("error: sweep name ") and result.output.endswith("; rename the file\n")
    assert not (tmp_path / "sweeps").exists() and not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("where", ["new\nline", "it's", "a b", "per%cent", "x" * 100_000])
def test_a_sweep_directory_that_cannot_go_into_the_script_is_refused(tmp_path, where):
    dry = _dry_run(spec_file(tmp_path), "--dir", tmp_path / where)
    assert dry.exit_code == 1 and dry.output.startswith("error: sweep directory ") and len(dry.output) < 400
    assert dry.output.count("\n") == 1


@pytest.mark.parametrize("line, problem", [
    ("echo 'open quote", "unexpected EOF"), ("module load cuda &&", "syntax error"),
    ("if true; then", "syntax error"), ("cat <<EOF", "here-document"), ("echo )", "syntax error")])
def test_a_setup_line_that_would_run_into_the_next_is_refused(tmp_path, line, problem):
    spec = spec_file(tmp_path, GRID.replace("[grid]", f"setup = {json.dumps([line])}\n\n[grid]"))
    dry = _dry_run(spec)
    assert dry.exit_code == 1 and dry.output.count("\n") == 1, dry.output
    assert dry.output.startswith(f"error: setup line 1 {line!r}: not one complete shell line (") and problem in dry.output


def test_spec_values_never_reach_the_script(tmp_path):
    """Cells and objectives travel in sweep.json, not the script: a hostile one is a
    value like any other, and the script's lines are the same. (A line break or a value
    over 200 characters is no cell value: refused when the spec is read,
    tests/test_sweep_hostile.py.)"""
    hostile = GRID.replace('"imaging"', json.dumps("img; touch PWNED $(id) `id` #'\"\\")).replace(
        '"interferometer"', json.dumps("x" * 200))
    dry = _dry_run(spec_file(tmp_path, hostile), "--partition", "debug")
    assert dry.exit_code == 0, dry.output[:300]
    _bash_n(dry.output)
    assert dry.output.splitlines() == _script_lines(dry.output, _sweep_dir_of(dry.output),
                                                    extra=["#SBATCH --partition=debug"])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(option=st.sampled_from(["partition", "time", "mem", "gpus", "account", "qos", "constraint", "sbatch_args",
                               "setup"]),
       value=st.one_of(st.text(max_size=40), st.text(alphabet="-=&|\n\r\\'\" $`;#%ab0", max_size=20)))
@pytest.mark.slow
def test_no_value_adds_a_line_to_the_script(tmp_path, option, value):
    """Whatever the value, slurm.script either refuses it in one line, or writes a
    script bash parses whose lines are its own plus exactly one for the value."""
    from ledger.errors import LedgerError
    from ledger.sweep import slurm, spec, store

    base = spec.from_dict({"transforms": ["jit"]}, "grid")
    where = {"kind": store.PER_TASK, "path": None}
    options = {} if option == "setup" else {option: [value] if option == "sbatch_args" else value}
    try:
        setup = spec.check_setup([value]) if option == "setup" else ()
        text = slurm.script(store.new(tmp_path, dataclasses.replace(base, setup=setup), "slurm", where), options)
    except LedgerError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
        return
    _bash_n(text)
    lines, plain = text.splitlines(), slurm.script(store.new(tmp_path, base, "slurm", where), {}).splitlines()
    if option == "setup":  # the line, its status check, and a comment above them
        assert len(lines) == len(plain) + 3 and lines[-3] == value
    else:
        assert len(lines) == len(plain) + 1
        assert (f"#SBATCH {value}" if option == "sbatch_args" else f"#SBATCH --{option}={value}") in lines


# -- on a real SLURM ----------------------------------------------------------------------

def _ledger(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([LEDGER, *map(str, args)], check=False, capture_output=True, text=True, **kw)


def _submit(spec, *extra) -> subprocess.CompletedProcess:
    partition = os.environ.get("LEDGER_TEST_SLURM_PARTITION", "debug")
    return _ledger("sweep", "submit", spec, "--partition", partition, *extra)


def _wait(sweep, *extra) -> subprocess.CompletedProcess:
    """`sweep status --wait`: until this sweep's tasks leave the queue (others' jobs may stay)."""
    return _ledger("sweep", "status", sweep, "--wait", "--timeout", "300", "--interval", "0.5", *extra)


@pytest.mark.slurm
def test_a_2x2_sweep_as_a_job_array_lands_every_row_like_a_run_here(tmp_path, monkeypatch):
    assert shutil.which("sbatch"), "a slurm case ran without sbatch"
    submitted = _submit(spec_file(tmp_path), "--max-parallel", "2", "--time", "00:10:00", "--mem", "1M",
                        "--sbatch-arg=--comment=ledger-test")
    assert submitted.returncode == 0, submitted.stderr
    sweep = _sweep_dir(tmp_path)
    job = submitted.stdout.splitlines()[0].rsplit(" ", 1)[1]
    merge = f"ledger merge {sweep}/db/task-*.db --db {tmp_path}/ledger.db"
    assert submitted.stdout.splitlines() == [
        f"sweep {sweep.name}: 4 tasks submitted as SLURM job array {job}",
        (f"each task writes its own ledger file in {sweep}/db: SLURM tasks do not share a SQLite ledger "
         f"({tmp_path}/ledger.db)"),
        f"follow it: ledger sweep status {sweep} --wait",
        f"then: {merge}"]
    assert (sweep / "sweep.sbatch").read_text().count("#SBATCH --array=0-3%2") == 1
    status = _wait(sweep)
    assert status.returncode == 0, status.stdout + status.stderr
    assert status.stdout.splitlines()[0] == f"sweep {sweep.name} (4 tasks, SLURM job {job}): complete, 4 done"
    assert status.stdout.splitlines()[-1] == f"next: {merge}"
    assert [(sweep / "logs" / f"{job}_{i}.exit").read_text() for i in range(4)] == ["0\n"] * 4
    # the next step, as printed, run by a shell
    path = f"{LEDGER.parent}{os.pathsep}{os.environ['PATH']}"
    merged = subprocess.run(merge, shell=True, check=False, capture_output=True, text=True, env=dict(os.environ, PATH=path))
    assert merged.returncode == 0 and merged.stdout.endswith(": 8 compile rows added\n"), merged.stdout
    cells = "SELECT sweep_task, dataset_class, n_batch, transform, status FROM compile_records ORDER BY sweep_task, transform"
    slurm_rows = query(tmp_path / "ledger.db", cells)
    assert query(tmp_path / "ledger.db", "SELECT DISTINCT slurm_array_job_id FROM compile_records") == [(job,)]
    assert sorted(r[0] for r in query(tmp_path / "ledger.db", "SELECT DISTINCT slurm_array_task_id FROM compile_records")) == [0, 1, 2, 3]
    # the same spec run here gives the same cells
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    assert run_cli("sweep", "run", spec_file(here), "--db", here / "here.db").exit_code == 0
    assert query(here / "here.db", cells) == slurm_rows and len(slurm_rows) == 8


@pytest.mark.slurm
def test_a_failing_task_in_the_array_is_reported_and_resume_resubmits_only_it(tmp_path, monkeypatch):
    (tmp_path / "flaky.py").write_text(FLAKY)
    text = GRID.replace('["toy"]', '["flaky:build"]').replace('n_batch = [4, 8]', 'n_batch = [4]')
    setup = ['echo "setup ran on $SLURMD_NODENAME"', "export LEDGER_SETUP_SAYS=hello"]
    spec = spec_file(tmp_path, text.replace("[grid]", f"setup = {json.dumps(setup)}\n\n[grid]"))
    monkeypatch.setenv("FAIL_CELL", "interferometer")  # sbatch hands the environment on
    submitted = _submit(spec)
    assert submitted.returncode == 0, submitted.stderr
    sweep = _sweep_dir(tmp_path)
    job = submitted.stdout.splitlines()[0].rsplit(" ", 1)[1]
    status = _wait(sweep)
    assert status.returncode == 1
    assert status.stdout.splitlines()[0].endswith("1 done, 1 failed")
    assert status.stdout.splitlines()[-2:] == [
        "   1  flaky:build interferometer n_batch=4  failed     2  builder: RuntimeError: no data for interferometer",
        f"next: ledger sweep resume {sweep}"]
    node = os.uname().nodename.split(".")[0]  # ci/slurm.sh names the node `hostname -s`
    assert (sweep / "logs" / f"{job}_0.out").read_text().startswith(f"setup ran on {node}\n")
    monkeypatch.delenv("FAIL_CELL")
    resumed = _ledger("sweep", "resume", sweep)
    assert resumed.returncode == 0 and " tasks 1 resubmitted as SLURM job array " in resumed.stdout
    after = _wait(sweep)
    assert after.returncode == 0 and after.stdout.splitlines()[0].endswith("complete, 2 done")
    assert after.stdout.splitlines()[-1] == f"next: ledger merge {sweep}/db/task-*.db --db {tmp_path}/ledger.db"
    # task 0 ran once: its ledger holds one attempt
    assert query(sweep / "db" / "task-0.db", "SELECT count(DISTINCT run_id) FROM compile_records") == [(1,)]
    assert query(sweep / "db" / "task-1.db", "SELECT count(DISTINCT run_id) FROM compile_records") == [(2,)]


@pytest.mark.slurm
def test_a_task_that_exits_before_its_first_log_line_shows_its_exit_code(tmp_path):
    spec = spec_file(tmp_path, ONE_TASK.replace("[grid]", 'setup = ["exit 7"]\n\n[grid]'))
    submitted = _submit(spec)
    assert submitted.returncode == 0, submitted.stderr
    sweep = _sweep_dir(tmp_path)
    status = _wait(sweep)
    assert status.returncode == 1
    assert status.stdout.splitlines()[3] == "   0  toy imaging n_batch=4  failed     0  exit code 7: empty log"
    report = json.loads(_ledger("sweep", "status", sweep, "--json").stdout)
    assert (report["tasks"][0]["state"], report["tasks"][0]["exit_code"]) == ("failed", 7)


@pytest.mark.slurm
def test_a_task_that_cannot_start_shows_why_is_cancelled_and_resumed_with_other_resources(tmp_path):
    spec = spec_file(tmp_path, ONE_TASK)
    cpus = os.cpu_count() * 4  # more than the node has: queued for ever
    submitted = _submit(spec, "--cpus-per-task", str(cpus))
    assert submitted.returncode == 0, submitted.stderr
    sweep = _sweep_dir(tmp_path)
    job = submitted.stdout.splitlines()[0].rsplit(" ", 1)[1]
    try:
        deadline, reason = time.monotonic() + 60, "None"
        while reason in ("", "None"):  # the scheduler gives its reason on its next pass
            assert time.monotonic() < deadline, "squeue gave no reason"
            time.sleep(0.5)
            reason = subprocess.run(["squeue", "-h", "-j", job, "-o", "%r"], check=False, capture_output=True,
                                    text=True).stdout.strip()
        waited = _ledger("sweep", "status", sweep, "--wait", "--timeout", "1", "--interval", "0.2")
        assert waited.returncode == 124
        assert waited.stdout.splitlines()[3] == f"   0  toy imaging n_batch=4  queued ({reason})     0"
        assert waited.stdout.splitlines()[-1] == f"next: ledger sweep status {sweep} --wait"
        assert waited.stderr.splitlines()[-1] == "error: still 1 task(s) queued or running after 1 s"
        report = json.loads(_ledger("sweep", "status", sweep, "--json").stdout)
        assert (report["tasks"][0]["state"], report["tasks"][0]["reason"], report["tasks"][0]["job_id"]) == (
            "queued", reason, job)
        cancelled = _ledger("sweep", "cancel", sweep)
        assert cancelled.stdout.splitlines() == [
            f"sweep {sweep.name}: cancelled SLURM job array {job} (1 task(s) queued or running)",
            f"run them again: ledger sweep resume {sweep}"]
    finally:
        subprocess.run(["scancel", job], check=False)
    assert subprocess.run(["squeue", "-h", "-j", job], check=False, capture_output=True, text=True).stdout.strip() == ""
    status = _ledger("sweep", "status", sweep)
    assert status.returncode == 1
    assert status.stdout.splitlines()[3] == "   0  toy imaging n_batch=4  missing     0  cancelled before it ran"
    assert _ledger("sweep", "cancel", sweep).stdout == f"sweep {sweep.name}: no task queued or running, nothing to cancel\n"
    resumed = _ledger("sweep", "resume", sweep, "--cpus-per-task", "1", "--time", "00:05:00")
    assert resumed.returncode == 0, resumed.stderr
    script = (sweep / "sweep.sbatch").read_text()
    assert "#SBATCH --cpus-per-task=1\n" in script and "#SBATCH --time=00:05:00\n" in script
    assert json.loads((sweep / "sweep.json").read_text())["slurm"] == {
        "partition": os.environ.get("LEDGER_TEST_SLURM_PARTITION", "debug"), "cpus_per_task": 1, "time": "00:05:00"}
    assert _wait(sweep).stdout.splitlines()[0].endswith("complete, 1 done")


@pytest.mark.slurm
def test_a_sweep_on_slurm_writes_to_postgresql_and_an_explicit_db_beats_ledger_db(tmp_path, pg_db, monkeypatch):
    monkeypatch.setenv("LEDGER_DB", str(tmp_path / "env.db"))  # a SQLite LEDGER_DB, which --db overrides
    submitted = _submit(spec_file(tmp_path, ONE_TASK), "--db", pg_db)
    assert submitted.returncode == 0, submitted.stderr
    sweep = _sweep_dir(tmp_path)
    redacted = str(pg_db)  # no password in it: that is in PGPASSFILE
    assert submitted.stdout.splitlines()[1:] == [f"every task writes to {redacted}",
                                                 f"follow it: ledger sweep status {sweep} --wait --db {redacted}"]
    status = _wait(sweep, "--db", pg_db)
    assert status.returncode == 0 and status.stdout.splitlines()[0].endswith("complete, 1 done"), status.stdout
    assert "next:" not in status.stdout
    assert query(pg_db, "SELECT sweep_id, sweep_task, transform FROM compile_records ORDER BY id") == [
        (sweep.name, 0, "jit"), (sweep.name, 0, "grad")]
    assert not (tmp_path / "env.db").exists() and list((sweep / "db").iterdir()) == []
    assert str(pg_db) not in (sweep / "sweep.sbatch").read_text() + (sweep / "sweep.json").read_text()
    # LEDGER_DB a server, its password in the URL: the tasks get it in their environment only
    password = Path(os.environ["PGPASSFILE"]).read_text().split(":")[-1].strip()
    secret = str(pg_db).replace("ledger_test@", f"ledger_test:{password}@")
    monkeypatch.setenv("LEDGER_DB", secret)
    env_sweep = _submit(spec_file(tmp_path, ONE_TASK), "--dir", tmp_path / "s2")
    # and --db a file beats that LEDGER_DB: the tasks write their own files
    file_sweep = _submit(spec_file(tmp_path, ONE_TASK), "--db", tmp_path / "mine.db", "--dir", tmp_path / "s3")
    assert env_sweep.returncode == 0 and file_sweep.returncode == 0, env_sweep.stderr + file_sweep.stderr
    (second,), (third,) = (tmp_path / "s2").iterdir(), (tmp_path / "s3").iterdir()
    assert env_sweep.stdout.splitlines()[1] == f"every task writes to {str(pg_db).replace('ledger_test@', 'ledger_test:***@')}"
    assert file_sweep.stdout.splitlines()[-1] == f"then: ledger merge {third}/db/task-*.db --db {tmp_path}/mine.db"
    assert _wait(second).returncode == 0 and _wait(third).returncode == 0
    assert password not in env_sweep.stdout + (second / "sweep.sbatch").read_text() + (second / "sweep.json").read_text()
    assert query(pg_db, "SELECT sweep_id, count(*) FROM compile_records GROUP BY 1 ORDER BY 1") == sorted(
        [(sweep.name, 2), (second.name, 2)])
    assert query(third / "db" / "task-0.db", "SELECT transform FROM compile_records ORDER BY id") == [("jit",), ("grad",)]
    assert not (tmp_path / "mine.db").exists()  # until `ledger merge` brings the tasks' rows in


def test_submit_without_slurm_says_so_and_leaves_no_sweep(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "no-slurm-here"))
    result = run_cli("sweep", "submit", spec_file(tmp_path))
    assert (result.exit_code, result.output) == (
        1, "error: sbatch not found: this machine has no SLURM client (ledger sweep run runs a sweep here)\n")
    assert not (tmp_path / "sweeps").exists()
    # the tasks' ledger is a server: its URL, password and all, stays in the environment
    monkeypatch.setenv("LEDGER_DB", "postgresql+psycopg://ledger:s3cret-pw@db.example:5432/ledger")
    dry = run_cli("sweep", "submit", spec_file(tmp_path), "--dry-run", "--partition", "debug", "--time", "00:10:00")
    assert dry.exit_code == 0 and not (tmp_path / "sweeps").exists()
    assert dry.output.splitlines() == _script_lines(dry.output, _sweep_dir_of(dry.output), extra=[
        "#SBATCH --partition=debug", "#SBATCH --time=00:10:00"])
    assert "s3cret" not in dry.output and "db.example" not in dry.output


def test_cancel_and_slurm_options_are_for_slurm_sweeps(tmp_path):
    from ledger.sweep import spec, store

    sweep = store.create(tmp_path / "sweeps", spec.load(spec_file(tmp_path, ONE_TASK)), "local",
                         {"kind": store.LEDGER_FILE, "path": str(tmp_path / "l.db")}).dir
    cancel = run_cli("sweep", "cancel", sweep)
    assert (cancel.exit_code, cancel.output) == (
        1, f"error: sweep {sweep.name} runs here, not on SLURM: stop its `ledger sweep run` (Ctrl-C)\n")
    resume = run_cli("sweep", "resume", sweep, "--cpus-per-task", "2")
    assert (resume.exit_code, resume.output) == (
        1, f"error: sweep {sweep.name} runs here: --cpus-per-task is for SLURM sweeps\n")


# -- a task's own ledger file, as `sweep status` reads it ----------------------------------
def _per_task_sweep(tmp_path):
    """A sweep whose tasks write db/task-<i>.db, task 0's file holding its two rows
    (as the nodes leave them, before `ledger merge`)."""
    from ledger.sweep import spec as sweep_spec
    from ledger.sweep import store

    from .conftest import compile_records_of_corpus, write_json

    sweep = store.create(tmp_path / "sweeps", sweep_spec.load(spec_file(tmp_path)), "slurm",
                         {"kind": store.PER_TASK, "path": None})
    (rec,) = [r for r in compile_records_of_corpus() if r["tag"] == "cache-warm"]
    rows = [dict(rec, transform=t, sweep_id=sweep.sweep_id, sweep_task=0) for t in ("jit", "grad")]
    assert run_cli("import", write_json(tmp_path / "t0.json", rows), "--db", sweep.task_db(0)).exit_code == 0
    return sweep


@pytest.mark.slow
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
        f"error: {sweep.task_db(0)} is at revision 0099, which this ledger does not know (its newest is {HEAD}): "
        "it was written by a newer ledger; upgrade the ledger\n"))


# -- sweep.json read back ----------------------------------------------------------------

@pytest.mark.parametrize("content, why", [
    (b"", "JSONDecodeError: Expecting value"), (b'{"sweep_id": "x", "spec": {', "JSONDecodeError"),
    (b"\xff\xfe{}", "UnicodeDecodeError"), (b"[1, 2]", "TypeError"), (b"{}", "KeyError: 'sweep_id'"),
])
def test_a_broken_sweep_file_is_one_line(tmp_path, content, why):
    sweep = made_sweep(tmp_path)
    (sweep / "sweep.json").write_bytes(content)
    for verb in ("status", "resume", "cancel"):
        result = run_cli("sweep", verb, sweep)
        assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(f"error: {sweep}/sweep.json: not a sweep file (") and why in result.output


@pytest.mark.parametrize("change, why", [
    (lambda d: d["spec"].update(name="evil\ntouch PWNED\n#"), "sweep name 'evil\\ntouch PWNED\\n#'"),
    (lambda d: d["spec"].update(setup=["echo ok\ntouch PWNED"]), "holds a line break or NUL"),
    (lambda d: d["spec"].update(repeats="many"), "repeats = 'many': expected int values"),
    (lambda d: d.update(mode="cloud"), "ValueError: mode 'cloud'"),
    (lambda d: d["db"].update(kind="ftp"), "ValueError: db kind 'ftp'"),
    (lambda d: d["submissions"][0].update(job_id="1;touch PWNED"), "ValueError: submission"),
    (lambda d: d["submissions"][0].update(tasks="0"), "ValueError: submission"),
])
def test_a_sweep_file_of_the_wrong_shape_is_one_line(tmp_path, change, why):
    sweep = made_sweep(tmp_path)
    rewrite_sweep_file(sweep, change)
    result = run_cli("sweep", "status", sweep)
    assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"error: {sweep}/sweep.json: not a sweep file (") and why in result.output


@pytest.mark.parametrize("slurm, why", [
    ({"partition": "debug\ntouch PWNED"}, "--partition 'debug\\ntouch PWNED': not a safe #SBATCH value"),
    ({"sbatch_args": ["--x\n#"]}, "--sbatch-arg '--x\\n#': one sbatch option token"),
    ({"sbatch_args": "--exclusive"}, "--sbatch-arg '--exclusive': expected a list of tokens"),
    ({"sbatch_args": [7]}, "--sbatch-arg 7: one sbatch option token"),
    ({"max_parallel": "2\n#"}, "--max-parallel '2\\n#': a whole number from 1 to 100000"),
    ({"cpus_per_task": True}, "--cpus-per-task True: a whole number from 1 to 100000"),
])
def test_sbatch_options_read_back_from_the_sweep_file_are_checked_again(tmp_path, slurm, why):
    """resume writes the script again from sweep.json: a hand-edited value there is
    refused as it would be on the command line, before anything is submitted."""
    sweep = made_sweep(tmp_path)
    rewrite_sweep_file(sweep, lambda d: d.update(slurm=slurm))
    result = run_cli("sweep", "resume", sweep)  # its one task is missing: resumed
    assert result.exit_code == 1 and result.output.startswith(f"error: {why}"), result.output
    assert result.output.count("\n") == 1 and not (sweep / "sweep.sbatch").exists()
