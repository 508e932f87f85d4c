"""`ledger record` on a real program written for the test, checked against the program's
own jax.monitoring listener: every compile one row, cold then warm, and a compile under
the persistence threshold cold with "not persisted" on both runs. The real entry point
runs as a subprocess (the ledger execs the program: output and exit code are its own).

Also run on the jax legs (ci/jax_legs.sh): it reads JAX's compile path and events."""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .case_kinds import LEDGER
from .conftest import jax_platform, query

pytestmark = pytest.mark.jax  # every case runs a recorded program that compiles

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


SUMMARY = re.compile(r"^ledger record: (\d+) compiles recorded into (.+) \(([^)]*)\), run ([0-9a-f]{12})$")


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


ROWS = ("SELECT function, input_signature, cache_state, cache_state_source, cache_not_persisted, backend_compile_s,"
        " compile_s, trace_s, cache_key, cache_key_components, tag, run_id FROM compile_records ORDER BY id")


def test_every_compile_is_one_row_cold_then_warm_as_the_program_saw_it(tmp_path):
    prog, db = program(tmp_path), tmp_path / "ledger.db"
    first = recorded(tmp_path, db, sys.executable, prog, record_args=("--tag", "run1"))
    assert (first.returncode, program_stderr(first)) == (0, "")
    assert first.stdout.splitlines()[:-1] == OUTPUT
    n, total = oracle(first.stdout)
    assert summary(first) == (n, f"{n} cold")
    rows = query(db, ROWS)
    assert len(rows) == n > len(FUNCTIONS)  # JAX's own compiles are rows too
    assert math.isclose(sum(r[5] for r in rows), total, abs_tol=1e-6)
    assert {lambda_named(r[0]) for r in rows} >= FUNCTIONS
    # one function, two shapes: two cells
    assert sorted(r[1] for r in rows if r[0] == "jit_caustic") == ["f32[2,2] -> f32[2,2]", "f32[3] -> f32[3]"]
    assert [r[1] for r in rows if r[0] == "jit_chi2"] == ["f32[2], f32[3,2] -> f32[2]"]
    assert {(r[2], r[3]) for r in rows} == {("cold", "measured_events")}
    assert [(lambda_named(r[0]), r[4]) for r in rows if r[4] is not None] == [("jit__lambda", "min_compile_time")]
    for r in rows:
        assert r[6] == r[5] and r[7] > 0 and r[8].startswith(f"{r[0]}-") and "computation" in r[9]
    assert {(r[10], len(r[11])) for r in rows} == {("run1", 32)}

    second = recorded(tmp_path, db, sys.executable, prog, record_args=("--tag", "run2"),
                      env={"PROGRAM_EXIT": "3"})
    assert (second.returncode, program_stderr(second)) == (3, "")
    assert second.stdout.splitlines()[:-1] == OUTPUT
    n2, total2 = oracle(second.stdout)
    assert summary(second) == (n2, f"1 cold, {n2 - 1} warm")
    rows2 = query(db, ROWS)[len(rows):]
    assert len(rows2) == n2 == n
    assert math.isclose(sum(r[5] for r in rows2), total2, abs_tol=1e-6)
    states = {(lambda_named(r[0]), r[1]): (r[2], r[4]) for r in rows2}
    assert states.pop(("jit__lambda", "f32[3] -> f32[3]")) == ("cold", "min_compile_time")
    assert set(states.values()) == {("warm", None)}
    # run 2 found each entry run 1 wrote: the same keys
    assert {r[8] for r in rows2} == {r[8] for r in rows}


@pytest.mark.jax
def test_each_recorded_compile_says_whether_x64_was_on(tmp_path):
    """A program that turns x64 on itself (as field scripts do, after importing jax):
    its compiles before say off, after say on."""
    prog = program(tmp_path, "import jax, jax.numpy as jnp\n"
                             "jax.jit(lambda x: x * 2)(jnp.ones(3))\n"
                             "jax.config.update('jax_enable_x64', True)\n"
                             "jax.jit(lambda x: x + 1)(jnp.ones(3))\n", name="x64.py")
    db = tmp_path / "ledger.db"
    out = recorded(tmp_path, db, sys.executable, prog, env={"JAX_ENABLE_X64": "0"})
    assert out.returncode == 0, out.stderr
    rows = query(db, "SELECT function, input_signature, x64 FROM compile_records WHERE function_kind = 'jit'"
                     " ORDER BY id")
    assert rows == [("jit__lambda", "f32[3] -> f32[3]", 0), ("jit__lambda", "f64[3] -> f64[3]", 1)], rows
