"""The watch end to end, on real compiles: the toy objective cold, then warm, pinned,
then probed again with XLA_FLAGS changed. The installed `ledger` entry point in
subprocesses, a real JAX cache dir, a real SQLite ledger."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import query

pytestmark = pytest.mark.jax_legs  # it reads JAX internals: run on the jax legs too (ci/jax_legs.sh)

LEDGER = shutil.which("ledger", path=str(Path(sys.executable).parent)) or "ledger"
# A harmless CPU flag jax 0.10.2 accepts; it is hashed into the cache key's "XLA flags".
FLAG = "--xla_cpu_enable_fast_math=false"


def _ledger(*args, env, cwd=None):
    return subprocess.run([LEDGER, *map(str, args)], capture_output=True, text=True, env=env, check=False, cwd=cwd)


@pytest.mark.jax
def test_changed_xla_flags_send_the_cell_cold_and_check_names_them(tmp_path, db):
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    probe = ("probe", "--objective", "toy", "--transforms", "jit", "--cache-dir", tmp_path / "jax-cache", "--db", db)
    for tag in ("first", "second"):
        run = _ledger(*probe, "--tag", tag, env=env)
        assert run.returncode == 0, run.stderr
    assert query(db, "SELECT tag, cache_state FROM compile_records ORDER BY id") == [("first", "cold"), ("second", "warm")]
    (warm,) = query(db, "SELECT id FROM compile_records WHERE tag = 'second'")[0]

    # --allow-loaded: a 2-core CI box running the suite is often "loaded" by the rule,
    # and the pin is not what this test is about
    pins = _ledger("pins", "update", "--allow-loaded", "--db", db, env=env)
    assert (pins.returncode, pins.stdout.splitlines()[-1]) == (0, "1 pins: 1 new, 0 repinned, 0 unchanged")
    clean = _ledger("check", "--db", db, env=env)
    assert (clean.returncode, clean.stdout) == (0, "check run 1 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 0 went-cold\n")

    flagged = _ledger(*probe, "--tag", "flagged", env={**env, "XLA_FLAGS": FLAG})
    assert flagged.returncode == 0, flagged.stderr
    (cold,) = query(db, "SELECT id FROM compile_records WHERE tag = 'flagged' AND cache_state = 'cold'")[0]

    check = _ledger("check", "--db", db, env=env)
    assert check.returncode == 1, check.stderr
    finding, summary = check.stdout.splitlines()
    assert finding.startswith("went-cold ") and " jit (n_batch 8, batch_size 4), cache dir " in finding
    assert finding.endswith(f"row {cold} is cold: XLA flags (last warm row {warm})")
    assert summary == "check run 2 (tolerance 1.5x): 0 ok, 0 regression, 0 inconclusive, 1 went-cold"
    assert query(db, "SELECT verdict, row_id, pin_id FROM verdicts WHERE check_run_id = 2") == [("went-cold", cold, 1)]

    explain = _ledger("explain", cold, "--db", db, env=env)
    assert explain.returncode == 0, explain.stderr
    assert "cause: XLA flags" in explain.stdout.splitlines()
    assert f"  xla_flags: (none) -> {FLAG}" in explain.stdout.splitlines()


# A builder in the field's way: its arrays take JAX's default float type (float64 under x64).
X64_OBJECTIVE = """
import jax.numpy as jnp


def build(cell):
    def fn(x):
        return jnp.sum(jnp.sin(x) ** 2)
    return fn, jnp.linspace(0.0, 1.0, 8)
"""


@pytest.mark.jax
@pytest.mark.slow
def test_x64_turned_on_is_recorded_and_named_as_its_own_cause(tmp_path, db):
    """A likelihood that expects float64 ran in float32 until JAX_ENABLE_X64 was exported:
    each row says which, and the cold compile after the switch is named for it."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_ENABLE_X64")}
    (tmp_path / "lens64.py").write_text(X64_OBJECTIVE)
    probe = ("probe", "--objective", "lens64:build", "--transforms", "jit", "--cache-dir", tmp_path / "jax-cache",
             "--db", db)
    for tag, x64 in (("f32", "0"), ("f32-again", "0"), ("f64", "1")):
        run = _ledger(*probe, "--tag", tag, env={**env, "JAX_ENABLE_X64": x64}, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
    assert query(db, "SELECT tag, cache_state, x64 FROM compile_records ORDER BY id") == [
        ("f32", "cold", 0), ("f32-again", "warm", 0), ("f64", "cold", 1)]
    (cold,) = query(db, "SELECT id FROM compile_records WHERE tag = 'f64'")[0]
    explain = _ledger("explain", cold, "--db", db, env=env)
    assert explain.returncode == 0, explain.stderr
    cause = next(line for line in explain.stdout.splitlines() if line.startswith("cause: "))
    assert cause.startswith("cause: precision: jax_enable_x64 changed (off in the warm row, on now)"), cause
    check = _ledger("check", "--db", db, env=env)
    assert check.returncode == 1 and "is cold: precision: jax_enable_x64 changed" in check.stdout, check.stdout


@pytest.mark.jax
@pytest.mark.slow
def test_predict_names_x64_turned_on_before_the_compile(tmp_path, db):
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_ENABLE_X64")}
    (tmp_path / "lens64.py").write_text(X64_OBJECTIVE)
    cell = ("--objective", "lens64:build", "--transforms", "jit", "--cache-dir", tmp_path / "jax-cache", "--db", db)
    for _ in range(2):
        run = _ledger("probe", *cell, env={**env, "JAX_ENABLE_X64": "0"}, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
    same = _ledger("predict", *cell, env={**env, "JAX_ENABLE_X64": "0"}, cwd=tmp_path)
    assert (same.returncode, same.stdout.splitlines()[-1]) == (0, "jit: warm"), same.stderr
    on = _ledger("predict", *cell, env={**env, "JAX_ENABLE_X64": "1"}, cwd=tmp_path)
    assert on.returncode == 1, on.stderr
    assert on.stdout.splitlines()[1].startswith(
        "jit: cold (precision: jax_enable_x64 changed (off in the warm row, on now)"), on.stdout
    assert query(db, "SELECT predicted, x64 FROM predictions ORDER BY id") == [("warm", 0), ("cold", 1)]
