"""`ledger record`: the program runs as itself (output, exit code, signals, stdin), keeps
its rows through SIGKILL and a locked ledger, is not broken by the recorder, and a
Python that never imports jax gets nothing at all. Into PostgreSQL, under SLURM, and
in-process with `ledger.recording()`. The truth of the rows: tests/test_record_truth.py."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from .conftest import jax_platform, query, run_cli
from .helpers import OUTPUT, lambda_named, oracle, program, program_stderr, recorded, summary

PY = sys.executable

# Three compiles it names, then it says so and waits to be killed.
WAITS = '''
import sys, time
import jax, jax.numpy as jnp
seen = []
jax.monitoring.register_event_duration_secs_listener(
    lambda ev, d, **kw: seen.append(d) if ev == "/jax/core/compile/backend_compile_duration" else None)
for n in (1, 2, 3):
    jax.jit(lambda v: v * n)(jnp.float32(n)).block_until_ready()
print("compiled", len(seen), flush=True)
time.sleep(600)
'''


def test_a_program_that_never_imports_jax_gets_nothing(tmp_path):
    prog = program(tmp_path, "import sys\nprint('plain', sys.argv[1:], sys.stdin.read())\n", "plain.py")
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, prog, "a b", "--x", input="from stdin")
    assert (out.returncode, out.stdout, out.stderr) == (0, "plain ['a b', '--x'] from stdin\n", "")
    assert not (tmp_path / "ledger.db").exists()


@pytest.mark.jax
def test_exit_codes_and_signal_deaths_are_the_commands_own(tmp_path):
    die = program(tmp_path, "import os, signal, jax\njax.numpy.zeros(2)\nos.kill(os.getpid(), signal.SIGTERM)\n",
                  "die.py")
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, die)
    assert (out.returncode, out.stdout, program_stderr(out)) == (-signal.SIGTERM, "", "")
    assert summary(out)[0] == 2  # said by the ingester, which outlived the program
    fail = program(tmp_path, "import sys, jax\njax.numpy.zeros(2)\nsys.exit('bad input')\n", "fail.py")
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, fail)
    assert (out.returncode, out.stdout, program_stderr(out)) == (1, "", "bad input\n")
    assert summary(out)[0] == 2
    # the compiles before the death and before the failure were kept
    assert query(tmp_path / "ledger.db", "SELECT count(*) FROM compile_records") == [(4,)]


@pytest.mark.jax
def test_sigkill_keeps_every_finished_compile(tmp_path):
    prog, db = program(tmp_path, WAITS, "waits.py"), tmp_path / "ledger.db"
    env = {**os.environ, "JAX_PLATFORMS": jax_platform()}
    from .case_kinds import LEDGER

    proc = subprocess.Popen([str(LEDGER), "record", "--db", str(db), "--", PY, str(prog)], stdout=subprocess.PIPE,
                            text=True, env=env, cwd=tmp_path)
    try:
        line = proc.stdout.readline()
        assert line.startswith("compiled ")
        proc.kill()  # at once: the ledger exec'd the program, this is the program
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    n = int(line.split()[1])
    # a reading command waits for the run's ingester, which outlived the program
    out = run_cli("sql", "--db", db, "--csv", "SELECT function FROM compile_records")
    assert out.exit_code == 0, out.output
    functions = out.output.splitlines()[1:]
    assert len(functions) == n and [lambda_named(f) for f in functions].count("jit__lambda") == 3


@pytest.mark.jax
def test_the_programs_own_sitecustomize_still_runs(tmp_path):
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text("import os\nos.environ['OWN_SITE'] = 'ran'\n")
    prog = program(tmp_path, "import os, jax\njax.numpy.ones(3)\nprint(os.environ.get('OWN_SITE'))\n", "own.py")
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, prog, env={"PYTHONPATH": str(own)})
    assert (out.returncode, out.stdout, program_stderr(out)) == (0, "ran\n", "")
    assert query(tmp_path / "ledger.db", "SELECT count(*) > 0 FROM compile_records") == [(1,)]


@pytest.mark.jax
def test_a_ledger_that_cannot_be_reached_is_refused_before_the_program_runs(tmp_path):
    prog = program(tmp_path)
    out = recorded(tmp_path, "postgresql+psycopg://nobody@127.0.0.1:1/none", PY, prog)
    assert (out.returncode, out.stdout) == (1, "")
    assert len(out.stderr.splitlines()) == 1
    assert out.stderr.startswith("error: cannot open postgresql+psycopg://nobody@127.0.0.1:1/none: ")


def _release_after_goodbye(con, spool: str, limit: float = 120.0) -> None:
    """COMMIT `con` 0.5 s after the first goodbye line appears in a spool file under
    `spool` (or after `limit` seconds, so the test cannot hang)."""
    import glob
    import time

    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if any('"_line":"bye"' in Path(path).read_text(encoding="utf-8", errors="replace")
               for path in glob.glob(os.path.join(spool, "*", "*.jsonl"))):
            time.sleep(0.5)
            break
        time.sleep(0.05)
    con.execute("COMMIT")


@pytest.mark.jax
def test_a_briefly_locked_ledger_loses_no_row(tmp_path):
    db = tmp_path / "ledger.db"
    assert run_cli("db", "upgrade", "--db", db).exit_code == 0
    con = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    con.execute("BEGIN EXCLUSIVE")  # no writer gets in until it is released
    # released once the program has said goodbye (every compile spooled, the ingester
    # waiting on the lock): by the program's progress, not a clock, so a fast or a
    # loaded machine both see the lock outlast the program and end within the grace
    release = threading.Thread(target=_release_after_goodbye, args=(con, f"{db}.spool"))
    release.start()
    try:
        out = recorded(tmp_path, db, PY, program(tmp_path), env={"LEDGER_BUSY_TIMEOUT": "0.5"})
    finally:
        release.join()
        con.close()
    assert (out.returncode, program_stderr(out)) == (0, "")
    n, _ = oracle(out.stdout)
    assert summary(out)[0] == n
    assert query(db, "SELECT count(*) FROM compile_records") == [(n,)]


def test_a_refused_ledger_is_refused_before_the_command_runs(tmp_path):
    (tmp_path / "not-a-ledger.db").write_text("hello")
    out = recorded(tmp_path, tmp_path / "not-a-ledger.db", PY, "-c", "print('ran')")
    assert (out.returncode, out.stdout) == (1, "")
    assert out.stderr.startswith("error: cannot open ")
    out = recorded(tmp_path, tmp_path / "l.db", "no-such-command-here")
    assert (out.returncode, out.stdout, out.stderr) == (127, "", "ledger record: no-such-command-here: command not found\n")


@pytest.mark.jax
def test_recording_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", jax_platform())
    import jax
    import jax.numpy as jnp

    import ledger

    db = tmp_path / "nb.db"
    with ledger.recording(db=str(db), tag="notebook", model_type="nb") as rec:
        jax.jit(lambda v: jnp.tanh(v) * 3.25)(jnp.ones(7))
    jax.jit(lambda v: jnp.tanh(v) * 4.5)(jnp.ones(7))  # after the block: not recorded
    rows = query(db, "SELECT function, input_signature, tag, model_type, run_id, transform FROM compile_records"
                     " WHERE input_signature = 'f32[7] -> f32[7]'")
    assert [(lambda_named(r[0]), *r[1:]) for r in rows] == [
        ("jit__lambda", "f32[7] -> f32[7]", "notebook", "nb", rec.config.run_id, "recorded")]


@pytest.mark.jax
def test_recorded_rows_flow_through_pins_check_explain_and_report(tmp_path):
    prog, db = program(tmp_path), tmp_path / "ledger.db"
    for tag in ("cold", "warm"):
        assert recorded(tmp_path, db, PY, prog, record_args=("--tag", tag, "--model-type", "lens")).returncode == 0
    # pins need an unloaded host; this one's load is whatever the machine has: make it read idle
    with sqlite3.connect(db) as con:
        con.execute("UPDATE compile_records SET host_load_avg_1m = 0")
    con.close()
    pinned = run_cli("pins", "update", "--db", db)
    assert pinned.exit_code == 0 and " recorded jit_caustic(f32[3] -> f32[3])" in pinned.output
    check = run_cli("check", "--db", db)
    assert " recorded jit__lambda" in check.output and "cache-not-reused" in check.output
    cold_id = query(db, "SELECT id FROM compile_records WHERE function = 'jit_caustic' AND cache_state = 'cold'")[0][0]
    explained = run_cli("explain", str(cold_id), "--db", db)
    assert explained.exit_code == 0, explained.output
    report = run_cli("report", "--db", db).output
    assert "| - / lens / - jit_caustic(f32[3] -> f32[3]) | recorded |" in report
    section = report[report.index("### recorded: `"):]
    head = section.splitlines()[0]
    assert head == f"### recorded: `{PY} {prog}`"
    own, _, eager = section.partition("<details><summary>")
    table = [ln.split(" | ") for ln in own.splitlines() if ln.startswith("| jit")]
    assert {lambda_named(t[0][2:]) for t in table} == {"jit_caustic", "jit_chi2", "jit__lambda"}
    seconds = [float(t[3]) for t in table]
    assert seconds == sorted(seconds, reverse=True)  # by total compile time
    # JAX's eager primitives: one line that opens to their list, and never in the key tables
    assert re.match(r"\d+ eager primitive compiles, [0-9.]+ s in all</summary>", eager)
    assert "| - / lens / - jit_broadcast_in_dim" not in report


def test_recorded_into_postgresql(pg_db, tmp_path):
    out = recorded(tmp_path, pg_db.url, PY, program(tmp_path))
    assert (out.returncode, program_stderr(out)) == (0, "")
    n, _ = oracle(out.stdout)
    rows = query(pg_db, "SELECT function, cache_state FROM compile_records")
    assert len(rows) == n and {r[1] for r in rows} == {"cold"}
    assert "jit_caustic" in {r[0] for r in rows}


@pytest.mark.slurm
def test_recorded_under_slurm(tmp_path):
    srun = shutil.which("srun")
    assert srun, "a slurm case ran without srun"
    from .case_kinds import LEDGER

    prog, db = program(tmp_path), tmp_path / "ledger.db"
    partition = os.environ.get("LEDGER_TEST_SLURM_PARTITION", "debug")
    env = {**os.environ, "JAX_PLATFORMS": jax_platform(), "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([srun, "-p", partition, "-N1", "-n1", str(LEDGER), "record", "--db", str(db), "--",
                          PY, str(prog)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:-1] == OUTPUT
    n, _ = oracle(out.stdout)
    rows = query(db, "SELECT slurm_job_id, slurm_node, cache_state FROM compile_records")
    assert len(rows) == n
    assert len({r[0] for r in rows}) == 1 and None not in {r[0] for r in rows} and None not in {r[1] for r in rows}



SPAWNS = '''
import multiprocessing as mp

def work(n):
    import jax, jax.numpy as jnp
    return float(jax.jit(lambda v: v * n + 7)(jnp.float32(n)))

if __name__ == "__main__":
    procs = [mp.get_context("spawn").Process(target=work, args=(n,)) for n in (1, 2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    print("exit codes", [p.exitcode for p in procs])
'''


@pytest.mark.jax
def test_spawned_children_are_recorded_into_the_same_run(tmp_path):
    db = tmp_path / "ledger.db"
    out = recorded(tmp_path, db, PY, program(tmp_path, SPAWNS, "spawns.py"))
    assert (out.returncode, out.stdout, program_stderr(out)) == (0, "exit codes [0, 0]\n", "")
    rows = query(db, "SELECT function, json_extract(provenance, '$.pid'), run_id, process_index FROM compile_records")
    assert len({r[1] for r in rows}) == 2 and len({r[2] for r in rows}) == 1 and {r[3] for r in rows} == {0}
    assert sorted(lambda_named(r[0]) for r in rows if "lambda" in r[0]) == ["jit__lambda", "jit__lambda"]


@pytest.mark.slow
def test_0011_round_trip_sets_recorded_pins_aside_and_puts_them_back(tmp_path):
    """Below 0011 a recorded row's pin has no key (no function column): it is set aside
    (migrations/ledger_stash.py) and comes back with the upgrade, as it was."""
    from ledger.storage.open import open_ledger
    from ledger.storage.writer import add_compile_record

    from .conftest import migrate

    db = tmp_path / "ledger.db"
    base = {"hardware": "local_cpu", "hostname": "node1", "jax_version": "0.10.2", "mixed_precision": False,
            "cache_state": "warm", "cache_state_source": "measured_events", "compile_s": 0.5, "status": "ok",
            "cache_dir": "/c", "timestamp": "2026-12-01T10:00:00", "host_load_avg_1m": 0.0, "host_cpu_count": 4}
    with open_ledger(str(db), "write") as ledger:
        add_compile_record(ledger.engine, {**base, "transform": "jit", "model_type": "mge", "run_id": "p"})
        add_compile_record(ledger.engine, {**base, "transform": "recorded", "function": "jit_caustic",
                                           "input_signature": "f32[3] -> f32[3]", "run_id": "r"})
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    keys = [r[0] for r in query(db, "SELECT pin_key FROM pins ORDER BY id")]
    assert keys == ['["local_cpu","node1","0.10.2",false,"warm",null,"mge",null,"jit",null,null,null,null,null]',
                    ('["local_cpu","node1","0.10.2",false,"warm",null,null,null,"recorded","jit_caustic",'
                    '"f32[3] -> f32[3]",0,null,null]')]
    migrate(db, "downgrade", "0008")
    assert query(db, "SELECT pin_key FROM pins") == [
        ('["local_cpu","node1","0.10.2",false,"warm",null,"mge",null,"jit",null,null]',)]
    assert query(db, "SELECT DISTINCT pin_key FROM pin_history") == query(db, "SELECT pin_key FROM pins")
    migrate(db, "upgrade", "head")
    assert [r[0] for r in query(db, "SELECT pin_key FROM pins ORDER BY id")] == keys
    assert run_cli("pins", "update", "--db", db).output.splitlines()[-1] == "2 pins: 0 new, 0 repinned, 2 unchanged"


def test_recording_in_process_refuses_a_bad_tag_before_the_block(tmp_path, monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", jax_platform())
    import ledger
    from ledger.errors import LedgerError

    ran = []
    with pytest.raises(LedgerError, match="tag holds a control character"), \
            ledger.recording(db=str(tmp_path / "nb.db"), tag="a\nb"):
        ran.append(True)
    assert ran == [] and not (tmp_path / "nb.db").exists()


TINY = """
import jax, jax.numpy as jnp
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
print(float(jax.jit(lambda v: jnp.sum(v * 3.5))(jnp.ones(5))))
"""


@pytest.mark.jax
def test_a_relative_or_linked_cache_dir_is_kept_as_the_real_dir_and_read_the_same_from_anywhere(tmp_path, monkeypatch):
    real = tmp_path / "real-cache"
    real.mkdir()
    (tmp_path / "cache-link").symlink_to(real)
    db, prog = tmp_path / "ledger.db", program(tmp_path, TINY, "tiny.py")
    env = {"JAX_COMPILATION_CACHE_DIR": "cache-link"}  # relative, and through a link
    for _ in range(2):  # cold, then warm
        assert recorded(tmp_path, db, PY, prog, env=env).returncode == 0
    assert {d for d, in query(db, "SELECT DISTINCT cache_dir FROM compile_records")} == {str(real)}
    pruned = run_cli("cache", "prune", "cache-link", "--unused-days", "0", "--db", db)
    assert pruned.exit_code == 0, pruned.output
    assert {d for d, in query(db, "SELECT DISTINCT cache_dir FROM cache_prunes")} == {str(real)}
    assert recorded(tmp_path, db, PY, prog, env=env).returncode == 0
    (cold,), = query(db, "SELECT max(id) FROM compile_records WHERE function LIKE 'jit__lambda%'")
    said = []
    for where in (tmp_path, Path("/")):
        monkeypatch.chdir(where)
        said.append(next(ln for ln in run_cli("explain", cold, "--db", db).output.splitlines() if ln.startswith("cause: ")))
    assert said[0] == said[1] and said[0].startswith("cause: pruned: entry removed by ledger cache prune at "), said


# The spool's disk fills after the first compiles: each later write fails (a file-size
# limit, the program's own, gives the same refusal a full disk gives, in this process only).
FILLS = """
import resource, signal
import jax, jax.numpy as jnp
seen = []
jax.monitoring.register_event_duration_secs_listener(
    lambda ev, d, **kw: seen.append(d) if ev == "/jax/core/compile/backend_compile_duration" else None)
jax.jit(lambda v: v + 1.0)(jnp.ones(2))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
for n in range(6):
    jax.jit(lambda v: v * n + 2.0)(jnp.ones(3))
print("seen", len(seen), flush=True)
"""


@pytest.mark.jax
def test_compiles_lost_to_a_full_disk_are_counted(tmp_path):
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, program(tmp_path, FILLS, "fills.py"))
    assert out.returncode == 0, out.stderr
    seen = int(out.stdout.split()[1])
    (rows,), = query(tmp_path / "ledger.db", "SELECT count(*) FROM compile_records")
    lost = [ln for ln in out.stderr.splitlines() if " were not recorded (" in ln]
    assert len(lost) == 1 and rows < seen, out.stderr
    assert re.fullmatch(rf"ledger record: {seen - rows} compiles of process \d+ were not recorded \(OSError: .*\)", lost[0])


STARTS = """
import os, subprocess, sys
import jax, jax.numpy as jnp
jax.jit(lambda v: v + 1.0)(jnp.ones(2))
child = "import jax, jax.numpy as jnp; jax.jit(lambda v: v * 5.0)(jnp.ones(2))"
clean = {"PATH": os.environ["PATH"], "JAX_PLATFORMS": os.environ["JAX_PLATFORMS"]}
subprocess.run([sys.executable, "-c", child], env=clean, check=True)
own = dict(os.environ, PYTHONPATH="/nowhere")
subprocess.run([sys.executable, "-c", child], env=own, check=True)
subprocess.run([sys.executable, "-c", child], check=True)  # inherits the recording: heard
"""


@pytest.mark.jax
def test_a_python_started_without_the_recording_is_named_in_the_closing_line(tmp_path):
    out = recorded(tmp_path, tmp_path / "ledger.db", PY, program(tmp_path, STARTS, "starts.py"))
    assert out.returncode == 0, out.stderr
    said = [ln for ln in out.stderr.splitlines() if ln.startswith("ledger record: ")]
    assert len(said) == 1, out.stderr
    assert (f"; not recorded: it started a Python without the recording (its environment or PYTHONPATH replaced):"
            f" {PY} (pid ") in said[0] and "(and 1 more)" in said[0], said[0]


# A library outside JAX (a package on the path, as autogalaxy is) that runs an eager op and
# calls a jitted function of its own; the program calls it, and compiles once itself.
LENSLIB = '''
import jax, jax.numpy as jnp

@jax.jit
def deflect(x):
    return jnp.cos(x) * 2.0

def image(x):
    y = x * 3.5 + 1.25
    return deflect(y)
'''
USES_LIB = '''
import contextlib
import jax, jax.numpy as jnp
from lenslib.light import image

def fit(x):
    with contextlib.nullcontext():  # a frame of Python's own library: never the call site
        return image(x)

fit(jnp.arange(5.0))
print(float(jax.jit(lambda v: v.sum() * 0.5)(jnp.ones(4))))
'''


@pytest.mark.jax
def test_each_compile_keeps_its_call_site_and_sql_and_explain_show_it(tmp_path):
    (tmp_path / "lenslib").mkdir()
    (tmp_path / "lenslib" / "__init__.py").write_text("")
    (tmp_path / "lenslib" / "light.py").write_text(LENSLIB)
    db, prog = tmp_path / "ledger.db", program(tmp_path, USES_LIB, "uses_lib.py")
    for flags in ("", "--xla_cpu_enable_fast_math=false"):  # the second run cold again: one for explain
        out = recorded(tmp_path, db, PY, prog, env={"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
                                                    "XLA_FLAGS": flags})
        assert out.returncode == 0, out.stderr
    sites = dict(query(db, "SELECT function, call_site FROM compile_records WHERE run_id ="
                           " (SELECT run_id FROM compile_records ORDER BY id LIMIT 1)"))
    # the library's own lines, relative to the path entry that holds it; the program's line
    assert sites["jit_deflect"] == "lenslib/light.py:10 image"
    assert sites["jit_multiply"] == "lenslib/light.py:9 image"  # the eager x * 3.5
    assert sites[next(f for f in sites if "lambda" in f)] == "uses_lib.py:11 <module>"
    assert sites["jit_iota"] == "uses_lib.py:10 <module>"  # jnp.arange, the program's own eager op
    grouped = run_cli("sql", "--db", db, "--csv",
                      "SELECT call_site, count(*) FROM compile_records GROUP BY call_site ORDER BY call_site")
    assert grouped.exit_code == 0 and "lenslib/light.py:10 image,2\n" in grouped.output, grouped.output
    (cold,), = query(db, "SELECT max(id) FROM compile_records WHERE function = 'jit_deflect'")
    explained = run_cli("explain", cold, "--db", db)
    assert explained.exit_code == 0 and "call site: lenslib/light.py:10 image" in explained.output.splitlines()
