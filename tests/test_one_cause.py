"""The right cause, said once: the wrong causes met on the field's programs (PyAutoLens
fits), each rebuilt from a small program that behaves the same way, on SQLite and
PostgreSQL.

- Two programs of one name and signature in one run (two `jax.jit`s of functions called
  `step`, at f32[8]): one is written to the cache, the other never is (JAX's entry-size
  floor). They are two cells (their variant), never each other's warm row: no went-cold
  "computation (program changed)", and a real XLA-flags cause is said alone.
- A run mixing kept and never-written compiles, whose job moved to another cache dir: the
  never-written cells' cause is JAX's threshold, not "each run used a new directory".
- A cell warm in one dir, then compiled in another once: no finding, and explain says it
  is the first compile into that dir; a new dir on each of the next runs is what "each run
  used a new directory" means, and it fails.

Each ledger is recorded (or probed) once into SQLite, for real; the PostgreSQL case gets
the same rows through `ledger merge`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import PgDb, query, run_cli
from .helpers import LEDGER, built_once, program, recorded

PY = sys.executable
TWO = '''
import os, jax, jax.numpy as jnp

def program(n):
    def step(x):  # two programs of one name: 400 ops (a 25 kB entry), and one (2.6 kB)
        for i in range(n):
            x = jnp.sin(x) * 1.0001 + i
        return x
    return jax.jit(step)

x = jnp.ones(8)
print(float(program(400)(x).sum()), float(program(1)(x).sum()))
if os.environ.get("EXTRA"):  # a function of this job's later runs only
    print(float(jnp.cos(x).sum()))
'''
FLOOR = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "10000"}
KEEP_ALL = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
ENTRY_FLOOR = ("the entries were never written, by design: every entry was under"
               " jax_persistent_cache_min_entry_size_bytes 10000, so there is nothing to reuse")


def _record(tmp: Path, db: Path, cache: str, env: dict) -> None:
    out = recorded(tmp, db, PY, tmp / "two.py", env={**env, "JAX_COMPILATION_CACHE_DIR": str(tmp / cache)})
    assert out.returncode == 0, out.stderr


def _snapshot(db: Path, name: str) -> Path:
    return Path(shutil.copy(db, db.with_name(name)))


@pytest.fixture(scope="module")
def recorded_ledgers(tmp_path_factory) -> dict[str, Path]:
    """SQLite ledgers of two.py: 'floor' (two runs under the entry-size floor: the big step
    written, the small never), 'moved' (two more runs in another dir, with a function of
    their own) and 'flags' (everything kept, two runs, then one with XLA_FLAGS changed).
    Recorded once a test run, whichever worker comes first (helpers.built_once)."""
    tmp = built_once(tmp_path_factory, "one-cause", _record_ledgers)
    return {name: tmp / f"{name}.db" for name in ("floor", "moved", "flags")}


def _record_ledgers(tmp: Path) -> None:
    program(tmp, TWO, "two.py")
    db = tmp / "floor-ledger.db"
    for _ in range(2):
        _record(tmp, db, "d1", FLOOR)
    _snapshot(db, "floor.db")
    for _ in range(2):
        _record(tmp, db, "d2", {**FLOOR, "EXTRA": "1"})
    _snapshot(db, "moved.db")
    db = tmp / "flags-ledger.db"
    for flags in ("", "", "--xla_cpu_enable_fast_math=false"):
        _record(tmp, db, "kept", {**KEEP_ALL, "XLA_FLAGS": flags})
    _snapshot(db, "flags.db")


@pytest.fixture(scope="module")
def probed_ledgers(tmp_path_factory) -> dict[str, Path]:
    """SQLite ledgers of the toy objective's jit probed into cache dirs: 'once' (cold in d1
    and d2, cold then warm twice in d3, then once in d4) and 'each' (then d5 and d6)."""
    tmp = built_once(tmp_path_factory, "dirs", _probe_ledgers)
    return {name: tmp / f"{name}.db" for name in ("once", "each")}


def _probe_ledgers(tmp: Path) -> None:
    db = tmp / "probes.db"
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_COMPILATION_CACHE_DIR")}
    for i, d in enumerate(("d1", "d2", "d3", "d3", "d3", "d4", "d5", "d6")):
        run = subprocess.run([str(LEDGER), "probe", "-o", "toy", "-t", "jit", "--cache-dir", str(tmp / d),
                              "--tag", f"p{i}", "--db", str(db)], capture_output=True, text=True, env=env, check=False)
        assert run.returncode == 0, run.stderr
        if i == 5:
            _snapshot(db, "once.db")
    _snapshot(db, "each.db")


def _on(backend: str, source: Path, tmp_path: Path, request) -> Path | PgDb:
    """The ledger on the backend asked for: a copy of the file, or merged into PostgreSQL."""
    if backend == "sqlite":
        return Path(shutil.copy(source, tmp_path / "ledger.db"))
    db = request.getfixturevalue("pg_db")
    merged = run_cli("merge", source, "--db", db)
    assert merged.exit_code == 0, merged.output
    return db


BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)]


def _check(db, *args, ok=(0,), recorded=True) -> tuple[list[str], dict]:
    """check's lines and --json, less the one recompiled finding every recorded ledger here
    has: the two programs of one name and signature are one function compiled twice by the
    process (issue 32), their keys differing; said in one line of its own. A probe compiles
    each transform once: none."""
    text = run_cli("check", *args, "--db", db)
    assert text.exit_code in ok, text.output
    found = json.loads(run_cli("check", "--json", "--db", db).output)
    again = [f for f in found["findings"] if f["verdict"] == "recompiled"]
    assert [f["facts"]["cause"]["function"] for f in again] == (["jit_step"] if recorded else []), again
    if not recorded:
        return text.output.splitlines(), found
    assert (again[0]["facts"]["cause"]["n"], again[0]["facts"]["cause"]["keys"]) == (2, 2), again
    lines = text.output.splitlines()
    said = [line for line in lines if line.startswith("recompiled ")]
    assert len(said) == 1 and " jit_step(f32[8] -> f32[8]) compiled 2 times by process " in said[0], lines
    assert said[0].endswith(": the cache keys differ: another program each time (a static argument or a"
                            " closed-over value that changes between calls) [does not fail]"), said
    found["findings"] = [f for f in found["findings"] if f["verdict"] != "recompiled"]
    return [line for line in lines if line not in said], found


def _rows(db, where: str) -> list[int]:
    return [r[0] for r in query(db, f"SELECT id FROM compile_records WHERE {where} ORDER BY id")]


@pytest.mark.jax
@pytest.mark.parametrize("backend", BACKENDS)
def test_two_programs_of_one_name_are_two_cells_never_each_others_warm_row(backend, recorded_ledgers, tmp_path,
                                                                            request):
    db = _on(backend, recorded_ledgers["floor"], tmp_path, request)
    steps = query(db, "SELECT variant, cache_state, cache_not_persisted FROM compile_records"
                      " WHERE function = 'jit_step' ORDER BY id")
    assert steps == [(0, "cold", None), (1, "cold", "min_entry_size"), (0, "warm", None),
                     (1, "cold", "min_entry_size")]
    lines, found = _check(db)
    # the small step is never written (JAX's floor), like the eager ops: one line for them all
    assert [f["verdict"] for f in found["findings"]] == ["cache-not-reused"] * 4, found["findings"]
    (line, summary) = lines
    assert line.startswith("below-threshold 4 cells of `") and "two.py`: " in line
    assert ": never written: every entry was under jax_persistent_cache_min_entry_size_bytes = 10000 bytes;" in line
    assert line.endswith(" s a run; JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=0 keeps them [does not fail]")
    assert summary.endswith("0 went-cold, 4 cache-not-reused, 1 recompiled")
    small = _rows(db, "function = 'jit_step' AND variant = 1")[-1]
    said = run_cli("explain", small, "--db", db).output.splitlines()
    assert said[-2] == f"cause: cache-not-reused: 2 cold runs in {recorded_ledgers['floor'].parent / 'd1'}, never" \
                       f" warm: {ENTRY_FLOOR}"
    assert said[-1] == "this is reported and does not fail the check"


@pytest.mark.jax
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_changed_flag_is_said_alone_for_each_program(backend, recorded_ledgers, tmp_path, request):
    db = _on(backend, recorded_ledgers["flags"], tmp_path, request)
    lines, found = _check(db, ok=(1,))
    causes = {f["cause"] for f in found["findings"]}
    assert all("program changed" not in c for c in causes), causes
    step_rows = _rows(db, "function = 'jit_step'")[-2:]
    went = {f["row_id"]: f["cause"] for f in found["findings"] if f["verdict"] == "went-cold"}
    assert set(step_rows) <= set(went) and all(went[r].startswith("XLA flags (last warm row ") for r in step_rows)
    for row in step_rows:  # each against its own program's warm row: the flag, nothing else
        said = run_cli("explain", row, "--db", db).output.splitlines()
        assert "cause: XLA flags" in said and "  xla_flags: (none) -> --xla_cpu_enable_fast_math=false" in said
    # one root cause, one line: every cell of the run went cold on the flag
    (line, _) = lines
    assert line.startswith(f"went-cold     {len(went)} cells of `") and ": cold: XLA flags; " in line
    assert line.endswith(" s a run")


@pytest.mark.jax
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_job_that_moved_dirs_is_said_under_the_threshold_not_new_dirs(backend, recorded_ledgers, tmp_path, request):
    db = _on(backend, recorded_ledgers["moved"], tmp_path, request)
    lines, found = _check(db)
    assert found["exit_code"] == 0
    assert all("new directory" not in f["cause"] for f in found["findings"]), found["findings"]
    assert {f["facts"]["cause"]["code"] for f in found["findings"]} == {"under-threshold"}
    # the cells of every run and the one of the later runs alone: all never written, one line
    (line, _) = lines
    assert line.startswith(f"below-threshold {len(found['findings'])} cells of `")
    assert len(found["findings"]) == 5  # convert, broadcast, the small step, reduce_sum, cos


@pytest.mark.jax
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_first_compile_into_another_dir_after_warm_ones_is_no_finding(backend, probed_ledgers, tmp_path, request):
    db = _on(backend, probed_ledgers["once"], tmp_path, request)
    assert query(db, "SELECT cache_state FROM compile_records ORDER BY id") == [
        ("cold",), ("cold",), ("cold",), ("warm",), ("warm",), ("cold",)]
    lines, found = _check(db, recorded=False)
    assert found["findings"] == [] and len(lines) == 1
    moved, warm = _rows(db, "1 = 1")[-1], _rows(db, "1 = 1")[-2]
    said = run_cli("explain", moved, "--db", db).output.splitlines()
    d3, d4 = probed_ledgers["once"].parent / "d3", probed_ledgers["once"].parent / "d4"
    assert said[-2:] == [(f"cause: the first compile of this cell into cache dir {d4}: it was warm under {d3} (last"
                         f" warm row {warm}), and a new dir starts empty"), "check reports no finding for it"]


@pytest.mark.jax
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_new_dir_each_run_after_warm_ones_fails_naming_only_those_dirs(backend, probed_ledgers, tmp_path, request):
    db = _on(backend, probed_ledgers["each"], tmp_path, request)
    _lines, found = _check(db, ok=(1,), recorded=False)
    (f,) = found["findings"]
    base = probed_ledgers["each"].parent
    newest = _rows(db, "1 = 1")[-1]
    assert (f["verdict"], f["row_id"], f["fails"]) == ("cache-not-reused", newest, True)
    assert f["cause"] == (f"each run used a new directory: 3 cold runs in 3 distinct cache dirs ({base / 'd4'},"
                          f" {base / 'd5'}, {base / 'd6'})")
    said = run_cli("explain", newest, "--db", db).output.splitlines()
    assert said[-2:] == [f"cause: cache-not-reused: {f['cause']}", "this fails the check"]
