"""Helpers that test modules share and that build no ledger (tests/ledgers.py builds
those): a test module imports these, never another test module (tests/test_words.py
holds the tree to that)."""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

from hypothesis import HealthCheck

from .case_kinds import LEDGER
from .conftest import jax_platform

# -- CLI results and property tests ---------------------------------------------------------

# What a property test over ledgers adds to the profile (tests/conftest.py: budgets,
# derandomize, no deadline): its examples share the module's fixtures, and some are slow.
SETTINGS = {"suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}


def no_exception(result) -> None:
    # CliRunner keeps an uncaught exception (a traceback for the user) in .exception;
    # SystemExit is the normal way out, with the exit code.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)


# The validator's line for a timestamp that is not ISO 8601 (ledger/record_validation.py).
STAMP = "timestamp is not an ISO 8601 time YYYY-MM-DDTHH:MM:SS[.ffffff][+HH:MM]"


# -- a recorded program: `ledger record` run as a user runs it ------------------------------

# Several functions, one at two shapes, a grad, compiles JAX makes itself (array
# creation outside jit), and one compile the program keeps out of the cache (its
# threshold raised around it). The oracle: JAX's backend_compile_duration events.
PROGRAM = '''
import os, sys
import jax
import jax.numpy as jnp
import numpy as np

def show(a):
    return np.asarray(a, dtype=float).round(3).tolist()

seen = []
def on_duration(event, duration, **kw):
    if event == "/jax/core/compile/backend_compile_duration":
        seen.append(duration)
jax.monitoring.register_event_duration_secs_listener(on_duration)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)

@jax.jit
def caustic(x):
    return jnp.sin(x) * jnp.cos(x).sum()

def chi2(w, x):
    return jnp.sum((x @ w - 1.0) ** 2)

x3 = jnp.arange(3.0)                      # JAX's own compiles, outside any jit
print("caustic", show(caustic(x3)))
print("caustic", show(caustic(jnp.ones((2, 2)))))   # a second shape
print("grad", show(jax.jit(jax.grad(chi2))(jnp.ones((2,)), jnp.ones((3, 2)))))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1000.0)
print("small", show(jax.jit(lambda v: v * 2 + 1)(x3)))   # never persisted
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
print(f"oracle {len(seen)} {sum(seen):.9f}")
sys.stdout.flush()
sys.exit(int(os.environ.get("PROGRAM_EXIT", "0")))
'''
OUTPUT = ["caustic [0.0, 0.946, 1.022]", "caustic [[1.819, 1.819], [1.819, 1.819]]",
          "grad [6.0, 6.0]", "small [1.0, 3.0, 5.0]"]
FUNCTIONS = {"jit_caustic", "jit_chi2", "jit__lambda"}


def lambda_named(name: str) -> str:
    return "jit__lambda" if name.startswith("jit__lambda") else name  # jit__lambda_ on jax 0.4.30


def program(tmp_path: Path, text: str = PROGRAM, name: str = "prog.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def recorded(tmp_path: Path, db, *command, env=None, record_args=(), **kw) -> subprocess.CompletedProcess:
    """`ledger record --db DB -- COMMAND` as a user runs it, JAX on CPU, a cache dir set."""
    environ = {**os.environ, "JAX_PLATFORMS": jax_platform(), "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache"),
               **(env or {})}
    at = ["--db", str(db)] if db is not None else []  # None: the ledger from LEDGER_DB
    return subprocess.run([str(LEDGER), "record", *at, *record_args, "--", *map(str, command)],
                          check=False, capture_output=True, text=True, cwd=tmp_path, env=environ, timeout=240, **kw)


# the run's line, then what the cache did where that matters (ledger/recorder/tally.py), and more
SUMMARY = re.compile(r"^ledger record: (\d+) compiles recorded into (.+?) \(([^)]*)\), run ([0-9a-f]{12})(?:; .*)?$")


def program_stderr(out: subprocess.CompletedProcess) -> str:
    """What the program itself wrote on stderr: the ledger's own lines taken out."""
    return "".join(ln for ln in out.stderr.splitlines(keepends=True) if not ln.startswith("ledger record: "))


def summary(out: subprocess.CompletedProcess) -> tuple[int, str]:
    """(compiles recorded, their states) from the one line the run ends with."""
    said = [ln for ln in out.stderr.splitlines() if ln.startswith("ledger record: ")]
    assert len(said) == 1, out.stderr
    match = SUMMARY.match(said[0])
    assert match, said[0]
    return int(match.group(1)), match.group(3)


def oracle(stdout: str) -> tuple[int, float]:
    _, n, total = stdout.splitlines()[-1].split()
    return int(n), float(total)


# A program that spools N compile records as the recorder would, without JAX: for the
# spool's own tests (ownership, kept runs, bad lines), a second where a JAX program takes
# several. It writes through the recorder's own config and spool writer, so it is a run of
# `ledger record` as far as the ingester and every other command can tell. Its args: N,
# then "bad" to add a line the recorder never writes, and "wait" to sleep until killed.
SPOOLS = """
import os, socket, sys, time
from ledger.record import blank_record, now_timestamp
from ledger.recorder.config import RecordConfig
from ledger.recorder.spool import SpoolWriter

config = RecordConfig.from_env()
writer = SpoolWriter(config.run_dir)
for i in range(int(sys.argv[1])):
    rec = blank_record()
    rec.update(transform="recorded", status="ok", hardware="local_cpu", hostname=socket.gethostname(),
               jax_version="0.10.2", mixed_precision=False, run_id=config.run_id, command=config.command,
               pid=os.getpid(), compile_index=i, function=f"jit_f{i}", input_signature="f32[3] -> f32[3]",
               timestamp=now_timestamp(), compile_s=0.01, cache_state="cold", cache_state_source="measured_events")
    writer.write(rec)
    if i == 0 and "bad" in sys.argv:
        writer.write({"compile_index": [1]})
print("spooled", sys.argv[1], flush=True)
if "wait" in sys.argv:
    time.sleep(600)
"""


# -- sweeps --------------------------------------------------------------------------------

GRID = """\
objectives = ["toy"]
transforms = ["jit", "grad"]
steady_calls = 1

[grid]
dataset_class = ["imaging", "interferometer"]
n_batch = [4, 8]
"""
ONE_TASK = GRID.replace('"interferometer"]', ']').replace("[4, 8]", "[4]")


def spec_file(tmp_path, text=GRID, name="grid.toml") -> Path:
    """A sweep spec (TOML) written into tmp_path."""
    path = tmp_path / name
    path.write_text(text)
    return path


def made_sweep(tmp_path) -> Path:
    """A SLURM sweep's directory as submit leaves it (without queueing anything)."""
    from ledger.sweep import spec, store

    sweep = store.create(tmp_path / "sweeps", spec.load(spec_file(tmp_path, ONE_TASK)), "slurm",
                         {"kind": store.PER_TASK, "path": None, "merge_into": str(tmp_path / "ledger.db")})
    sweep.slurm = {"partition": "debug"}
    sweep.submissions.append({"job_id": "99999", "tasks": [0], "options": sweep.slurm})
    sweep.save()
    return sweep.dir


def rewrite_sweep_file(sweep_dir: Path, change) -> None:
    data = json.loads((sweep_dir / "sweep.json").read_text())
    change(data)
    (sweep_dir / "sweep.json").write_text(json.dumps(data))


def built_once(tmp_path_factory, name: str, build) -> Path:
    """A folder `build(folder)` fills once a test run, however many xdist workers ask: the
    first to come builds it under a lock while the others wait, then all read it (what
    pytest-xdist's docs advise for a costly fixture). For module fixtures that record real
    programs: their seconds were paid once per worker. A build that fails leaves no mark,
    so the next worker to ask tries again, and fails for itself."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    shared = tmp_path_factory.getbasetemp().parent  # the run's, above each worker's own
    folder, done = shared / name, shared / f"{name}.built"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


# -- a check's findings, facts and all ------------------------------------------------------

def said_with_facts(found: list[dict]) -> list[tuple]:
    """A check's stored findings as it says them, with their facts (a carried state too)."""
    return [(f["verdict"], f["row_id"], f["cause"], f["fails"], f["compile_s"], json.dumps(f["facts"], sort_keys=True))
            for f in found]


def said_from_nothing(engine) -> list[tuple]:
    """said_with_facts of the same check with nothing taken from an earlier run (the cells
    folded anew, every row judged), rolled back."""
    import sqlalchemy as sa

    from ledger.watch.check import judge, stored_findings

    with engine.connect() as conn, conn.begin() as txn:
        conn.execute(sa.text("UPDATE cache_cells_state SET upto = 0"))
        said = said_with_facts(stored_findings(conn, judge(conn, rejudge=True).run_id))
        txn.rollback()
    return said


def checked_counting(engine, monkeypatch, module, name: str, count) -> tuple[list[tuple], int]:
    """A check's findings (said_with_facts), and the rows `module.name` read in it, as
    `count(args, what it returned)` counts them."""
    from ledger.watch.check import run_check, stored_findings

    read, real = [], getattr(module, name)

    def counted(*args, **kw):
        out = real(*args, **kw)
        read.append(count(args, out))
        return out

    with monkeypatch.context() as m:
        m.setattr(module, name, counted)
        result = run_check(engine)
    with engine.connect() as conn:
        return said_with_facts(stored_findings(conn, result.run_id)), sum(read)
