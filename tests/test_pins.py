"""`ledger pins`: sticky warm-compile pins on real temp databases."""

from __future__ import annotations

import json

import pytest

from ledger.record import COMPARABILITY_KEY

from .conftest import CORPUS, CORPUS_STATES, query, run_cli
from .ledgers import add, rec


def pins_of(db):
    return query(db, "SELECT model_type, row_id, compile_s FROM pins ORDER BY model_type")


def test_corpus_gives_25_pins_from_its_34_warm_rows(db):
    assert run_cli("import", CORPUS, "--db", db).exit_code == 0
    result = run_cli("pins", "update", "--db", db)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1] == "25 pins: 25 new, 0 repinned, 0 unchanged"
    assert len(lines) == 26 and all(line.startswith("new     local_") for line in lines[:-1])
    assert query(db, "SELECT count(*), count(DISTINCT pin_key) FROM pins") == [(25, 25)]
    assert query(db, "SELECT action, count(*) FROM pin_history GROUP BY action") == [("pin", 25)]
    # every pin comes from a warm ok row of its own key
    assert query(db, "SELECT count(*) FROM pins p JOIN compile_records r ON r.id = p.row_id"
                     " WHERE r.cache_state = 'warm' AND r.compile_s = p.compile_s AND r.hostname = p.hostname"
                     " AND r.transform = p.transform AND r.model_type = p.model_type") == [(25,)]
    # the 34 warm rows of the imported corpus, in as many keys as there are pins
    warm_keys = ("SELECT count(*), sum(n) FROM (SELECT count(*) AS n FROM compile_records"
                 f" WHERE cache_state = 'warm' AND status = 'ok' GROUP BY {', '.join(COMPARABILITY_KEY)})")
    assert query(db, warm_keys) == [(25, 34)]
    assert query(db, "SELECT count(*) FROM compile_records WHERE cache_state = 'warm'") == [(CORPUS_STATES["warm"],)]
    again = run_cli("pins", "update", "--db", db)
    assert (again.exit_code, again.output) == (0, "25 pins: 0 new, 0 repinned, 25 unchanged\n")


def test_new_key_is_pinned_from_its_newest_warm_row(db, tmp_path):
    _old, new = add(db, tmp_path, rec(compile_s=2.0, timestamp="2026-07-01T10:00:00"),
                   rec(compile_s=2.2, timestamp="2026-07-02T10:00:00", tag="newer"))
    result = run_cli("pins", "update", "--db", db)
    assert result.output == (
        f"new     local_cpu/node1 jax 0.10.2 imaging/mge/hst jit (n_batch 1, batch_size 1): row {new} 2.2s (newer, 2026-07-02T10:00:00)\n"
        "1 pins: 1 new, 0 repinned, 0 unchanged\n"
    )
    assert pins_of(db) == [("mge", new, 2.2)]


@pytest.mark.slow
def test_same_timestamp_ties_go_to_the_higher_id(db, tmp_path):
    ids = add(db, tmp_path, rec(compile_s=2.0), rec(compile_s=2.1))
    run_cli("pins", "update", "--db", db)
    assert pins_of(db) == [("mge", max(ids), 2.1)]


def test_pins_are_sticky(db, tmp_path):
    (first,) = add(db, tmp_path, rec(compile_s=2.0))
    run_cli("pins", "update", "--db", db)
    add(db, tmp_path, rec(compile_s=20.0, timestamp="2026-07-05T10:00:00"))
    result = run_cli("pins", "update", "--db", db)
    assert (result.exit_code, result.output) == (0, "1 pins: 0 new, 0 repinned, 1 unchanged\n")
    assert pins_of(db) == [("mge", first, 2.0)]
    assert query(db, "SELECT count(*) FROM pin_history") == [(1,)]


def test_repin_moves_every_pin_and_keeps_history(db, tmp_path):
    a1, b1 = add(db, tmp_path, rec(model_type="a"), rec(model_type="b"))
    run_cli("pins", "update", "--db", db)
    a2, b2 = add(db, tmp_path, rec(model_type="a", compile_s=3.0, timestamp="2026-07-09T00:00:00"),
                 rec(model_type="b", compile_s=4.0, timestamp="2026-07-09T00:00:00"))
    result = run_cli("pins", "update", "--repin", "--db", db)
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        f"repin   local_cpu/node1 jax 0.10.2 imaging/a/hst jit (n_batch 1, batch_size 1): row {a1} 2s -> row {a2} 3s (t, 2026-07-09T00:00:00)",
        f"repin   local_cpu/node1 jax 0.10.2 imaging/b/hst jit (n_batch 1, batch_size 1): row {b1} 2s -> row {b2} 4s (t, 2026-07-09T00:00:00)",
        "2 pins: 0 new, 2 repinned, 0 unchanged",
    ]
    assert pins_of(db) == [("a", a2, 3.0), ("b", b2, 4.0)]
    assert query(db, "SELECT action, old_row_id, old_compile_s, new_row_id, new_compile_s FROM pin_history"
                     " WHERE action = 'repin' ORDER BY new_row_id") == [("repin", a1, 2.0, a2, 3.0), ("repin", b1, 2.0, b2, 4.0)]


def test_repin_narrowed_by_a_filter_moves_only_those_pins(db, tmp_path):
    _a1, b1 = add(db, tmp_path, rec(model_type="a"), rec(model_type="b"))
    run_cli("pins", "update", "--db", db)
    a2, _ = add(db, tmp_path, rec(model_type="a", compile_s=3.0, timestamp="2026-07-09T00:00:00"),
                rec(model_type="b", compile_s=4.0, timestamp="2026-07-09T00:00:00"))
    result = run_cli("pins", "update", "--repin", "--model-type", "a", "--db", db)
    assert result.output.splitlines()[-1] == "1 pins: 0 new, 1 repinned, 0 unchanged"
    assert pins_of(db) == [("a", a2, 3.0), ("b", b1, 2.0)]
    assert query(db, "SELECT count(*) FROM pin_history WHERE action = 'repin'") == [(1,)]


@pytest.mark.slow
def test_check_writes_nothing_and_exits_1_when_pins_would_change(db, tmp_path):
    (first,) = add(db, tmp_path, rec())
    before = db.read_bytes()
    result = run_cli("pins", "update", "--check", "--db", db)
    assert result.exit_code == 1
    assert result.output.splitlines()[-1] == "1 pins: 1 new, 0 repinned, 0 unchanged (--check: nothing written)"
    assert db.read_bytes() == before and query(db, "SELECT count(*) FROM pins") == [(0,)]
    run_cli("pins", "update", "--db", db)
    clean = run_cli("pins", "update", "--check", "--db", db)
    assert (clean.exit_code, clean.output) == (0, "1 pins: 0 new, 0 repinned, 1 unchanged (--check: nothing written)\n")
    add(db, tmp_path, rec(compile_s=9.0, timestamp="2026-08-01T00:00:00"))
    before = db.read_bytes()
    assert run_cli("pins", "update", "--check", "--db", db).exit_code == 0  # sticky: nothing would move
    repin = run_cli("pins", "update", "--check", "--repin", "--db", db)
    assert repin.exit_code == 1 and repin.output.startswith("repin ")
    assert db.read_bytes() == before and pins_of(db) == [("mge", first, 2.0)]


def test_check_on_a_missing_database_creates_nothing(tmp_path):
    missing = tmp_path / "nope.db"
    result = run_cli("pins", "update", "--check", "--db", missing)
    assert (result.exit_code, result.output) == (1, f"error: no ledger database at {missing}\n")
    assert not missing.exists()


def test_cold_none_unknown_and_failed_rows_are_never_pinned(db, tmp_path):
    add(db, tmp_path, rec(cache_state="cold", compile_s=50.0), rec(cache_state="none", cache_dir="", compile_s=51.0),
        rec(cache_state="unknown", compile_s=52.0), rec(status="failed", compile_s=None, timestamp="2026-07-03T00:00:00"),
        rec(status="failed", compile_s=1.0, timestamp="2026-07-04T00:00:00"))
    result = run_cli("pins", "update", "--db", db)
    assert (result.exit_code, result.output) == (0, "0 pins: 0 new, 0 repinned, 0 unchanged\n")
    (warm,) = add(db, tmp_path, rec(compile_s=2.5, timestamp="2026-07-02T00:00:00"))
    run_cli("pins", "update", "--db", db)
    assert pins_of(db) == [("mge", warm, 2.5)]  # not the newer failed warm row


def test_loaded_host_rows_are_pinned_only_when_allowed(db, tmp_path):
    (loaded,) = add(db, tmp_path, rec(host_load_avg_1m=12.0, host_cpu_count=8))
    assert run_cli("pins", "update", "--db", db).output == f"0 pins: 1 warm row {SKIPPED_LOADED}\n"
    (within,) = add(db, tmp_path, rec(host_load_avg_1m=12.0, host_cpu_count=16, host_cpu_affinity=16,
                                      timestamp="2026-06-01T00:00:00"))
    run_cli("pins", "update", "--check", "--db", db)
    assert run_cli("pins", "update", "--db", db).exit_code == 0
    assert query(db, "SELECT row_id, loaded_host FROM pins") == [(within, 0)]
    result = run_cli("pins", "update", "--repin", "--allow-loaded", "--db", db)
    assert result.output.endswith("[loaded host]\n1 pins: 0 new, 1 repinned, 0 unchanged\n")
    assert query(db, "SELECT row_id, loaded_host FROM pins") == [(loaded, 1)]


SKIPPED_LOADED = ("skipped as taken on a loaded host (1-minute load above the usable cores);"
                  " --allow-loaded pins them anyway")


def test_pins_update_says_when_every_warm_row_was_on_a_loaded_host(any_db, tmp_path):
    """It said "0 pins: 0 new, 0 repinned, 0 unchanged", as if there were no warm rows:
    every one had been left out by the loaded-host rule, and nothing said so."""
    add(any_db, tmp_path, rec(host_load_avg_1m=12.0, host_cpu_count=8),
        rec(host_load_avg_1m=9.5, host_cpu_count=8, timestamp="2026-07-02T10:00:00"),
        rec(model_type="knn", host_load_avg_1m=3.0, host_cpu_count=16, host_cpu_affinity=2),
        rec(model_type="knn", cache_state="cold", host_load_avg_1m=1.0))  # cold: not pinnable, not counted
    result = run_cli("pins", "update", "--db", any_db)
    assert (result.exit_code, result.output) == (0, f"0 pins: 3 warm rows {SKIPPED_LOADED}\n")
    check = run_cli("pins", "update", "--check", "--db", any_db)
    assert (check.exit_code, check.output) == (0, f"0 pins: 3 warm rows {SKIPPED_LOADED} (--check: nothing written)\n")
    knn = run_cli("pins", "update", "--model-type", "knn", "--db", any_db)
    assert (knn.exit_code, knn.output) == (0, f"0 pins: 1 warm row {SKIPPED_LOADED}\n")
    assert pins_of(any_db) == []
    allowed = run_cli("pins", "update", "--allow-loaded", "--db", any_db)
    assert (allowed.exit_code, allowed.output.splitlines()[-1]) == (0, "2 pins: 2 new, 0 repinned, 0 unchanged")
    again = run_cli("pins", "update", "--db", any_db)  # pinned keys: the usual summary
    assert again.output == "2 pins: 0 new, 0 repinned, 2 unchanged\n"


def test_affinity_decides_loaded_before_cpu_count(db, tmp_path):
    add(db, tmp_path, rec(host_load_avg_1m=3.0, host_cpu_count=8, host_cpu_affinity=2))
    assert run_cli("pins", "update", "--db", db).output.startswith("0 pins")


def test_pins_list(db, tmp_path):
    (row,) = add(db, tmp_path, rec(compile_s=2.5))
    run_cli("pins", "update", "--db", db)
    table = run_cli("pins", "list", "--db", db)
    assert table.exit_code == 0
    header, _, line = table.output.splitlines()
    assert header.split() == ["id", "hardware", "hostname", "jax_version", "mixed_precision", "dataset_class", "model_type",
                              "instrument", "transform", "function", "input_signature", "variant", "n_batch", "batch_size",
                              "compile_s", "row_id", "tag", "timestamp", "pinned_at",
                              "loaded_host"]
    # a probe row's function and input_signature are NULL: blank
    assert line.split()[:14] == ["1", "local_cpu", "node1", "0.10.2", "False", "imaging", "mge", "hst", "jit", "1", "1",
                                 "2.5", str(row), "t"]
    (doc,) = json.loads(run_cli("pins", "list", "--json", "--db", db).output)
    assert {k: doc[k] for k in ("row_id", "compile_s", "mixed_precision", "loaded_host")} == {
        "row_id": row, "compile_s": 2.5, "mixed_precision": False, "loaded_host": False}
    other = run_cli("pins", "list", "--hostname", "other", "--json", "--db", db)  # no such host: a typo
    assert (other.exit_code, other.stdout, other.stderr) == (
        2, "", "error: no compile row matches --hostname other: no pins to list\n")
