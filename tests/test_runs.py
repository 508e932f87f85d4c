"""`ledger runs` and `ledger diff`: a real program recorded three times (cold, warm, then
cold again under a changed XLA flag), and every change kind on imported rows."""

from __future__ import annotations

import json
import sys

import pytest

from ledger.savings import SAVED_FROM

from .conftest import query, run_cli, write_json
from .helpers import recorded
from .ledgers import made_quiet

PROGRAM = """
import jax, jax.numpy as jnp

@jax.jit
def loss(x):
    return jnp.sum(jnp.sin(x) ** 2)

@jax.jit
def step(x):
    return x - 0.1 * x ** 2

print(float(loss(jnp.arange(8.0))), float(step(jnp.arange(8.0))[1]))
"""
# below JAX's default thresholds nothing tiny is persisted: a program's real cache would be
PERSIST = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0", "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}
FLAG = "--xla_cpu_enable_fast_math=false"


@pytest.mark.jax
@pytest.mark.slow
def test_a_program_recorded_three_times_lists_its_runs_and_the_flag_that_sent_it_cold(tmp_path):
    (tmp_path / "fit.py").write_text(PROGRAM)
    db = tmp_path / "ledger.db"
    for flags in ("", "", FLAG):
        out = recorded(tmp_path, db, sys.executable, "fit.py", env={**PERSIST, "XLA_FLAGS": flags})
        assert out.returncode == 0, out.stderr
    made_quiet(db)
    runs = run_cli("runs", "--json", "--db", db)
    assert runs.exit_code == 0, runs.output
    listed = json.loads(runs.output)
    assert [(r["cold"], r["warm"]) for r in listed] == [(n, 0), (0, n), (n, 0)] if (n := listed[0]["compiles"]) else False
    assert all(r["what"] == f"{sys.executable} fit.py" for r in listed)
    assert listed[1]["saved_s"] > 0 and listed[0]["saved_s"] is None  # a cold run saved nothing known
    # each run's time: its one process, seen to its exit; the compiling in it, traced and XLA's
    for r in listed:
        assert r["time"]["processes"] == 1 and r["time"]["ended_by"] == [] and r["time"]["wall_s"] > 0
        assert r["trace_s"] > 0 and r["compile_s"] > 0 and 0 < r["share"] < 1
        assert r["compiling_s"] == pytest.approx(r["trace_s"] + r["compile_s"])
    text = run_cli("runs", "--db", db).output.splitlines()
    assert text[0].split() == ["run", "started", "host", "what", "compiles", "cold", "warm", "time", "s", "compiling",
                               "trace+lower", "s", "XLA", "s", "saved", "s"]
    assert text[-2:] == [("3 runs; compiling: tracing and lowering (no cache removes them) and XLA's compile or cache"
                         " read, over the run's processes' time"), f"saved s: {SAVED_FROM}"]

    diff = run_cli("diff", "--db", db)  # the last two runs of the same command
    assert diff.exit_code == 1, diff.output
    lines = diff.output.splitlines()
    mine = [ln for ln in lines if ln.startswith(("went-cold jit_loss(", "went-cold jit_step("))]
    assert len(mine) == 2 and all(ln.endswith(": XLA flags") for ln in mine), lines
    assert lines[-1].startswith(f"run {listed[1]['run_id']} -> run {listed[0]['run_id']}: {n} functions: {n} went-cold;"
                                " the cache saved ")
    same = run_cli("diff", listed[2]["run_id"], listed[1]["run_id"], "--json", "--db", db)
    assert same.exit_code == 0
    assert {f["change"] for f in json.loads(same.output)["functions"]} == {"went-warm"}


BASE = {"transform": "jit", "trace_s": 0.1, "first_s": 0.1, "steady_s": 0.01, "dataset_class": "imaging",
        "model_type": "mge", "instrument": "hst", "ndim": 8, "n_batch": 1, "batch_size": 1,
        "hardware": "local_cpu", "jax_version": "0.10.2", "cache_dir": "/c", "mixed_precision": False,
        "tag": "t", "hostname": "node1", "status": "ok", "objective": "mge", "cache_state_source": "measured",
        "host_cpu_count": 8, "host_load_avg_1m": 0.1}


def _run(run_id: str, minute: int, *rows) -> list[dict]:
    return [{**BASE, "run_id": run_id, "phase": "p", "timestamp": f"2026-07-01T10:{minute:02d}:0{i}+00:00",
             "transform": t, "cache_state": s, "compile_s": c} for i, (t, s, c) in enumerate(rows)]


@pytest.fixture
def two_runs(tmp_path):
    db = tmp_path / "ledger.db"
    records = [*_run("a", 1, ("jit", "cold", 2.0), ("vag", "warm", 1.0), ("grad", "warm", 1.0), ("vmap", "warm", 0.5),
                     ("gone", "warm", 0.5)),
               *_run("b", 2, ("jit", "warm", 0.1), ("vag", "warm", 3.0), ("grad", "warm", 0.2), ("vmap", "warm", 0.52),
                     ("new", "cold", 1.0))]
    assert run_cli("import", write_json(tmp_path / "rows.json", records), "--db", db).exit_code == 0
    return db


def test_diff_names_each_change_kind_and_fails_on_slower(two_runs):
    result = run_cli("diff", "a", "b", "--db", two_runs)
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "slower    vag: warm 1.000 s -> warm 3.000 s",
        "new       new: - -> cold 1.000 s",
        "gone      gone: warm 0.500 s -> -",
        "went-warm jit: cold 2.000 s -> warm 0.100 s",
        "faster    grad: warm 1.000 s -> warm 0.200 s",
        ("run a -> run b: 6 functions: 1 slower, 1 new, 1 gone, 1 went-warm, 1 faster, 1 same;"
        " the cache saved unknown, then 1.90 s (+3 unknown)")]
    out = json.loads(run_cli("diff", "a", "b", "--json", "--db", two_runs).output)
    vmap = next(f for f in out["functions"] if f["transform"] == "vmap")
    assert vmap == {"transform": "vmap", "function": None, "input_signature": None, "variant": None, "change": "same",
                    "note": None, "cause": None,
                    "a": {"cache_state": "warm", "compile_s": 0.5, "row_id": 4, "saved_s": None, "times": 1},
                    "b": {"cache_state": "warm", "compile_s": 0.52, "row_id": 9, "saved_s": None, "times": 1}}
    jit = next(f for f in out["functions"] if f["transform"] == "jit")  # jit's median cold (2.0) less 0.1
    assert jit["b"]["saved_s"] == pytest.approx(1.9) and jit["a"]["saved_s"] is None  # a's is the cold row
    assert out["saved"]["b"] == {"seconds": 1.9, "known": 1, "from_jax": 0, "unknown": 3, "loaded": 0, "loaded_s": 0.0}
    assert run_cli("diff", "--all", "a", "b", "--db", two_runs).output.count("\n") == 7


def test_diff_alone_is_the_last_two_runs_of_the_same_objective(two_runs):
    assert run_cli("diff", "--db", two_runs).output.splitlines()[-1].startswith("run a -> run b: ")


@pytest.mark.slow
def test_runs_lists_newest_first_with_saved_seconds(two_runs):
    listed = json.loads(run_cli("runs", "--json", "--db", two_runs).output)
    assert [(r["run_id"], r["compiles"], r["cold"], r["warm"]) for r in listed] == [("b", 5, 1, 4), ("a", 5, 1, 4)]
    # b's warm jit against jit's median cold (2.0): 1.9; the other warm cells were never cold
    assert (listed[0]["saved_s"], listed[0]["saved_unknown"]) == (pytest.approx(1.9), 3)
    assert listed[0]["what"] == "mge (grad, jit, new, vag, vmap)"
    assert json.loads(run_cli("runs", "--json", "--limit", "1", "--db", two_runs).output)[0]["run_id"] == "b"


@pytest.mark.parametrize("args, message", [
    (("diff", "a", "nope"), "error: no run 'nope' in this ledger (`ledger runs` lists them)"),
    (("diff", "a"), "error: give two run ids, or none for the last two runs of the same command or objective"),
    (("runs", "--transform", "bogus"), "error: no compile row matches --transform bogus: no runs to list"),
])
def test_bad_input_is_one_line_and_exit_2(two_runs, args, message):
    result = run_cli(*args, "--db", two_runs)
    assert (result.exit_code, result.output.strip()) == (2, message)


def test_diff_without_a_second_run_says_so(tmp_path):
    db = tmp_path / "ledger.db"
    assert run_cli("import", write_json(tmp_path / "r.json", _run("only", 1, ("jit", "cold", 1.0))),
                   "--db", db).exit_code == 0
    result = run_cli("diff", "--db", db)
    assert (result.exit_code, result.output.strip()) == (
        2, "error: run only is the only run of objective mge: give two run ids (`ledger runs`)")
    assert query(db, "SELECT count(*) FROM compile_records") == [(1,)]


def test_the_report_shows_a_programs_top_functions_and_folds_its_eager_primitives(tmp_path):
    """12 functions and 3 eager primitives, every one warm and never cold: the top 10,
    one line for the other 2, the primitives folded, and 'unknown' for what the cache
    removed (no cold row to compare with), never 0."""
    rows = [{**BASE, "transform": "recorded", "run_id": "r", "phase": None, "command": "python fit.py",
             "timestamp": f"2026-07-01T10:00:{i:02d}+00:00", "cache_state": "warm", "compile_s": 0.1 * (i + 1),
             "function": f"jit_f{i:02d}" if i < 12 else f"jit_prim{i}", "input_signature": "f32[3] -> f32[3]",
             "function_kind": "jit" if i < 12 else "eager"} for i in range(15)]
    db = tmp_path / "ledger.db"
    assert run_cli("import", write_json(tmp_path / "r.json", rows), "--db", db).exit_code == 0
    report = run_cli("report", "--db", db).output
    section = report[report.index("### recorded: `python fit.py`"):].splitlines()
    assert section[2] == ("Run r on node1, 2026-07-01 10:00: 15 compiles (0 cold or uncached, 15 warm), 12.00 s of"
                          " compiles; what the cache removed is unknown (no cold compile of these functions to"
                          " compare with).")
    own = [ln.split(" | ")[0][2:] for ln in section if ln.startswith("| jit_f")]
    assert own == [f"jit_f{i:02d}" for i in range(11, 1, -1)]
    assert "| 2 more functions | 2 | | 0.300 | | | | |" in section
    assert "<details><summary>3 eager primitive compiles, 4.20 s in all</summary>" in section
    assert "| jit_f11 | 1 | 1 | 1.20 | 10% | 1 | unknown | - |" in section
    assert not any("jit_prim" in ln for ln in report[:report.index("### recorded")].splitlines())


def test_the_report_says_what_the_cache_saved_per_host_dir_and_day(two_runs):
    report = run_cli("report", "--db", two_runs).output
    section = report[report.index("### time saved"):].splitlines()
    assert section[4:7] == ["| host | cache dir | day | compiles | hit rate | saved s |",
                            "|---|---|---|---:|---:|---:|",
                            "| node1 | /c | 2026-07-01 | 10 | 80% | 1.90 (+7 unknown) |"]


def test_a_long_signature_reads_folded_and_a_long_list_counted():
    from ledger.rows import fold_signature

    assert fold_signature(", ".join(["f64[3]"] * 60) + ", i32[] -> f64[]") == "60x f64[3], i32[] -> f64[]"
    assert fold_signature("f64[], f64[] -> f64[10]") == "f64[], f64[] -> f64[10]"  # two in a row stay spelled
    many = fold_signature(", ".join(f"f32[{i}]" for i in range(60)))
    assert len(many) <= 140 and many.endswith(", ... 46 more") and many.startswith("f32[0], f32[1], ")
    assert fold_signature(None) is None and fold_signature("") == ""


def test_runs_wraps_a_long_command_in_its_column_and_keeps_it_whole_in_json(tmp_path, monkeypatch):
    command = "python fit.py " + " ".join(f"--option-{i}=value-{i}" for i in range(16))
    db = tmp_path / "ledger.db"
    rows = [{**BASE, "transform": "recorded", "function": "jit_f", "command": command, "run_id": "r1", "phase": None,
             "timestamp": "2026-07-01T10:00:00+00:00", "cache_state": "cold", "compile_s": 1.0}]
    assert run_cli("import", write_json(tmp_path / "r.json", rows), "--db", db).exit_code == 0
    monkeypatch.setenv("COLUMNS", "160")
    out = run_cli("runs", "--db", db).output.splitlines()
    table = out[:out.index(next(ln for ln in out if ln.startswith("1 runs;")))]
    assert max(map(len, table)) <= 160 and len(table) > 3  # the command went on over lines of its own
    at = table[0].index("what")
    assert " ".join(ln[at:].split("  ")[0] for ln in table[2:]).split() == command.split()  # every word, in order
    assert json.loads(run_cli("runs", "--json", "--db", db).output)[0]["what"] == command
