"""recompiled (issue 32): a function compiled again at one signature by one process is a
finding of `ledger check`, with its count, seconds and call site, and a line of `ledger
diff`; a program that compiles each function once has none."""

from __future__ import annotations

import json
import sys

import pytest

from .conftest import run_cli
from .helpers import program, recorded

PY = sys.executable

AGAIN = '''
import os, jax, jax.numpy as jnp
x = jnp.ones(3)
for _ in range(int(os.environ.get("TIMES", "{n}"))):
    def step(v):  # a new function, and so a new jax.jit wrapper, each time round
        return jnp.sin(v).sum() * 2.0
    jax.jit(step)(x).block_until_ready()
'''


def _recompiled(db) -> list[dict]:
    out = run_cli("check", "--json", "--db", db)
    return [f for f in json.loads(out.output)["findings"] if f["verdict"] == "recompiled"]


@pytest.mark.jax
def test_one_function_compiled_three_times_is_recompiled_with_its_count_seconds_and_call_site(tmp_path):
    db = tmp_path / "ledger.db"
    out = recorded(tmp_path, db, PY, program(tmp_path, AGAIN.format(n=3), "again.py"))
    assert out.returncode == 0, out.stderr
    line = [ln for ln in run_cli("check", "--db", db).output.splitlines() if ln.startswith("recompiled")]
    assert len(line) == 1 and "jit_step(f32[3] -> f32[]) compiled 3 times by process " in line[0], line
    assert "at again.py:7 <module>" in line[0] and "the same cache key each time" in line[0], line
    found = _recompiled(db)  # the same finding, its facts
    assert len(found) == 1, found
    cause = found[0]["facts"]["cause"]
    assert (cause["function"], cause["n"], cause["keys"], cause["signature"]) == ("jit_step", 3, 1, "f32[3] -> f32[]")
    assert cause["call_sites"] == ["again.py:7 <module>"] and cause["seconds"] > cause["again_s"] > 0
    assert cause["eager"] is False
    assert found[0]["fails"] is False and found[0]["facts"]["program"].endswith("again.py")


@pytest.mark.jax
def test_a_function_compiled_once_is_not_recompiled(tmp_path):
    db = tmp_path / "ledger.db"
    out = recorded(tmp_path, db, PY, program(tmp_path, AGAIN.format(n=1), "once.py"))
    assert out.returncode == 0, out.stderr
    assert _recompiled(db) == []


@pytest.mark.jax
def test_diff_says_a_function_one_process_compiled_again_with_its_counts(tmp_path):
    db, prog = tmp_path / "ledger.db", program(tmp_path, AGAIN.format(n=1), "loop.py")
    for times in ("1", "3"):
        out = recorded(tmp_path, db, PY, prog, env={"TIMES": times})
        assert out.returncode == 0, out.stderr
    said = run_cli("diff", "--db", db)
    step = [line for line in said.output.splitlines() if " jit_step(" in line]
    assert len(step) == 1 and step[0].endswith("; recompiled: 3 compiles in one process (run a: 1)"), said.output
    doc = json.loads(run_cli("diff", "--json", "--db", db).output)
    (f,) = [f for f in doc["functions"] if f["function"] == "jit_step"]
    assert (f["a"]["times"], f["b"]["times"]) == (1, 3)


WEAK = '''
import jax.numpy as jnp
x = jnp.ones(3)
a = x * 2.0               # a Python scalar: weakly typed
b = x * jnp.float32(2.0)  # an array: the same signature, another program
'''


@pytest.mark.jax
def test_an_op_outside_jit_under_two_keys_at_one_signature_is_said_as_such(tmp_path):
    db = tmp_path / "ledger.db"
    out = recorded(tmp_path, db, PY, program(tmp_path, WEAK, "weak.py"))
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in run_cli("check", "--db", db).output.splitlines() if ln.startswith("recompiled")]
    assert " jit_multiply(f32[3], f32[] -> f32[3]) compiled 2 times by process " in line, line
    assert " at weak.py:4 <module>, weak.py:5 <module> (" in line, line
    assert line.endswith(": an op run outside jit, under other cache keys at one signature: what the signature does"
                         " not show differs (a Python scalar, weakly typed, in one call and an array in another, or"
                         " the op's parameters); inside a jitted function it compiles once [does not fail]"), line


def _row(i: int, test: str | None, phase: str | None = "call", key: str = "k1") -> dict:
    from ledger.record import STATELESS_KEY

    return {**dict.fromkeys(STATELESS_KEY), "id": i, "run_id": "r", "pid": 7, "function": "jit_f",
            "input_signature": "f32[3] -> f32[3]", "test_id": test, "test_phase": phase, "cache_key": key,
            "variant": 0, "compile_s": 0.1, "cache_state": "cold", "call_site": "t.py:3 f", "command": "pytest"}


def test_under_pytest_each_test_and_phase_is_apart():
    """compile_budget clears JAX's caches before each test's call: a function every test
    uses compiles in each, and that is not a recompile; twice within one test's call is."""
    from ledger.watch.recompiled import recompiled

    assert recompiled([_row(1, "t.py::a"), _row(2, "t.py::b"), _row(3, "t.py::b", "setup")]) == []
    (found,) = recompiled([_row(1, "t.py::a"), _row(2, "t.py::b"), _row(3, "t.py::b")])
    assert (found.row_id, found.cause.facts["n"], found.cause.facts["rows"]) == (3, 2, [2, 3])
    (plain,) = recompiled([_row(1, None, None), _row(2, None, None, key="k2")])  # not under pytest
    assert (plain.cause.facts["keys"], plain.cost_s) == (2, 0.1)
