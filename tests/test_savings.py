"""One definition of seconds saved (ledger/savings.py), and every place that says it
agrees: `ledger runs`, `ledger diff`, the report's time-saved table (markdown and HTML),
`ledger cache` and predict's expected cold cost. Imported rows of five functions, one
for each branch of the definition, and a cache dir holding an entry for each warm one."""

from __future__ import annotations

import json
import socket
import zlib

import pytest

from ledger import savings
from ledger.predict.causes import expected_cost
from ledger.storage.open import open_ledger

from .conftest import run_cli
from .ledgers import add

BASE = {"transform": "recorded", "trace_s": 0.1, "first_s": None, "steady_s": None, "dataset_class": None,
        "model_type": None, "instrument": None, "ndim": None, "n_batch": None, "batch_size": None,
        "hardware": "local_cpu", "jax_version": "0.10.2", "mixed_precision": False, "tag": "t",
        # this host: `ledger cache` credits an entry with its own host's rows of its dir
        "hostname": socket.gethostname(), "status": "ok", "objective": "record", "cache_state_source": "measured_events",
        "command": "python fit.py", "input_signature": "f32[8]", "function_kind": "jit",
        "host_cpu_count": 8, "host_load_avg_1m": 0.5}
QUIET, LOADED = 0.5, 16.0  # 1-minute loads on 8 cores
# function: (cold rows as (seconds, load), its warm compile's seconds, JAX's whole seconds in its entry)
FUNCTIONS = {
    "jit_loss": ([(2.0, QUIET), (4.0, QUIET), (40.0, LOADED)], 0.5, 3),  # median of the quiet two: 3.0
    "jit_busy": ([(9.0, LOADED)], 0.1, 9),  # cold only on a loaded host: unknown, JAX's 9 s unused
    "jit_big": ([], 0.2, 7),  # never cold here: JAX's 7 s, said so
    "jit_tiny": ([], 0.05, 0),  # never cold, JAX's 0 s say nothing: unknown
    "jit_fast": ([(0.01, QUIET)], 0.03, 0),  # the read took longer than the compile: -0.02, not 0
}
SAVED = 2.5 + 6.8 - 0.02
RUN = {"seconds": pytest.approx(SAVED), "known": 3, "from_jax": 1, "unknown": 2, "loaded": 1,
       "loaded_s": pytest.approx(8.9)}  # jit_busy by its loaded cold row: said apart, never summed in


def _rows(cache: str) -> list[dict]:
    rows, i = [], 0
    for fn, (colds, warm_s, _) in FUNCTIONS.items():
        for seconds, load in colds:
            i += 1
            rows.append({**BASE, "function": fn, "cache_state": "cold", "compile_s": seconds, "host_load_avg_1m": load,
                         "run_id": "cold", "phase": None, "cache_dir": cache, "cache_key": f"{fn}-k",
                         "timestamp": f"2026-07-01T10:00:{i:02d}+00:00", "pid": 100, "compile_index": i})
        i += 1
        rows.append({**BASE, "function": fn, "cache_state": "warm", "compile_s": warm_s, "run_id": "warm",
                     "phase": None, "cache_dir": cache, "cache_key": f"{fn}-k",
                     "timestamp": f"2026-07-01T11:00:{i:02d}+00:00", "pid": 200, "compile_index": i})
    return rows


@pytest.fixture
def saved_ledger(any_db, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    for fn, (_, _, jax_s) in FUNCTIONS.items():  # as JAX writes an entry without zstandard
        (cache / f"{fn}-k-cache").write_bytes(zlib.compress(jax_s.to_bytes(4, "big") + b"executable" * 50))
    add(any_db, tmp_path, *_rows(str(cache)))
    return any_db, cache


def test_each_branch_of_the_definition(saved_ledger):
    db, _cache = saved_ledger
    with open_ledger(str(db), "read") as ledger, ledger.engine.connect() as conn:
        rows = [dict(r) for r in conn.exec_driver_sql(
            "SELECT * FROM compile_records WHERE cache_state = 'warm' ORDER BY id").mappings()]
        found = {r["function"]: s for r, s in zip(rows, savings.of_rows(conn, rows))}
        costs = savings.cold_costs(conn, {savings.cell_of(r) for r in rows})
        loss = next(r for r in rows if r["function"] == "jit_loss")
        assert expected_cost(conn, loss) == (3.0, 2)  # predict's expected cold cost: the same median
    assert costs[savings.cell_of(loss)] == savings.Cost(3.0, 2, 1, 40.0)
    assert found["jit_loss"] == savings.Saved(pytest.approx(2.5), known=1)
    assert found["jit_busy"] == savings.Saved(unknown=1, loaded=1, loaded_s=pytest.approx(8.9))
    assert found["jit_big"] == savings.Saved(pytest.approx(6.8), known=1, from_jax=1)
    assert found["jit_tiny"] == savings.Saved(unknown=1)
    assert found["jit_fast"] == savings.Saved(pytest.approx(-0.02), known=1)
    total = savings.total(found.values())
    assert savings.words(total) == f"{SAVED:.2f} s (+2 unknown, 1 by JAX's whole seconds)"
    assert savings.words(savings.Saved(unknown=2, loaded=2, loaded_s=3.5)) == (
        "unknown (cold only on a loaded host: 3.50 s by those rows)")
    assert savings.words(savings.Saved()) == "nothing (no warm compile)"


def test_a_reports_cold_costs_are_cold_costs_read_once_per_cell(saved_ledger, tmp_path):
    db, cache = saved_ledger
    with open_ledger(str(db), "read") as ledger, ledger.engine.connect() as conn:
        rows = [dict(r) for r in conn.exec_driver_sql(
            "SELECT * FROM compile_records WHERE cache_state = 'warm' ORDER BY id").mappings()]
        cells = [savings.cell_of(r) for r in rows]
        first, rest = set(cells[:2]), set(cells)
        costs_of = savings.ColdCosts()
        assert costs_of(conn, first) == savings.cold_costs(conn, first)
        whole = savings.cold_costs(conn, rest)
        assert costs_of(conn, rest) == whole and len(whole) == 3  # jit_loss, jit_busy, jit_fast
    # a cold row written now is not read again by the same report's ColdCosts: a cell is read once
    add(db, tmp_path, {**_rows(str(cache))[0], "compile_s": 100.0, "compile_index": 99, "run_id": "late"})
    with open_ledger(str(db), "read") as ledger, ledger.engine.connect() as conn:
        assert savings.cold_costs(conn, rest) != whole
        assert costs_of(conn, rest) == whole


@pytest.mark.slow  # a ledger built, then four commands read it: over the fast tier's 0.3 s of CPU
def test_runs_diff_the_report_and_the_cache_say_the_same_seconds(saved_ledger, tmp_path):
    db, cache = saved_ledger
    warm, cold = json.loads(run_cli("runs", "--json", "--db", db).output)
    assert (warm["run_id"], cold["run_id"]) == ("warm", "cold")
    assert warm["saved"] == RUN and warm["saved_s"] == pytest.approx(SAVED) and warm["saved_unknown"] == 2
    assert cold["saved_s"] is None and cold["saved"]["known"] == 0  # no warm compile: nothing known saved
    diff = run_cli("diff", "cold", "warm", "--db", db)
    assert diff.output.splitlines()[-1].endswith(
        f"; the cache saved nothing (no warm compile), then {SAVED:.2f} s (+2 unknown, 1 by JAX's whole seconds)")
    assert json.loads(run_cli("diff", "cold", "warm", "--json", "--db", db).output)["saved"]["b"] == RUN
    report = run_cli("report", "--db", db).output
    day = [ln for ln in report.splitlines() if ln.startswith(f"| {socket.gethostname()} | ")]
    assert len(day) == 1 and day[0].endswith(f"| {SAVED:.2f} (+2 unknown) |"), day
    html = tmp_path / "r.html"
    assert run_cli("report", "--db", db, "--html", html).exit_code == 0
    assert f"<td class=num>{SAVED:.2f} s (+2 unknown, 1 by JAX&#x27;s whole seconds)</td>" in html.read_text()
    inv = json.loads(run_cli("cache", cache, "--json", "--db", db).output)
    assert inv["totals"]["saved_s"] == pytest.approx(SAVED) and inv["totals"]["saved_unknown"] == 2
    by_fn = {e["function"]: e for e in inv["entries"]}
    assert by_fn["jit_big"]["saved_s"] == pytest.approx(6.8) and by_fn["jit_busy"]["saved_unknown"] == 1
