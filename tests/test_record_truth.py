"""`ledger record` on a real program written for the test, checked against the program's
own jax.monitoring listener: every compile one row, cold then warm, and a compile under
the persistence threshold cold with "not persisted" on both runs. The real entry point
runs as a subprocess (the ledger execs the program: output and exit code are its own).

Also run on the jax legs (ci/jax_legs.sh): it reads JAX's compile path and events."""

from __future__ import annotations

import math
import sys

import pytest

from .conftest import query
from .helpers import FUNCTIONS, OUTPUT, lambda_named, oracle, program, program_stderr, recorded, summary

# every case runs a recorded program that compiles, and reads JAX's compile path (the jax legs)
pytestmark = [pytest.mark.jax, pytest.mark.jax_legs]

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
    rows = [(lambda_named(f), sig, x64) for f, sig, x64 in query(
        db, "SELECT function, input_signature, x64 FROM compile_records WHERE function_kind = 'jit' ORDER BY id")]
    assert rows == [("jit__lambda", "f32[3] -> f32[3]", 0), ("jit__lambda", "f64[3] -> f64[3]", 1)], rows
